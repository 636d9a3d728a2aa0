//! Server commands: INFO, ACL, CONFIG, SLOWLOG, LATENCY, MONITOR, TIME, LASTSAVE, SAVE, BGSAVE, SHUTDOWN and DEBUG. They
//! run on the connection's core and visit shards as needed (`Exec::Node`); the server crate implements them. Only their rows
//! live here, and TIME, which needs nothing but the clock: written once for
//! the server and for scripts.

use crate::command::spec::{acl, flags::*, CommandSpec, Exec, NodeCommand as N};
use ringdb_protocol::ReplyWriter;

/// TIME: seconds and microseconds, as two bulk strings.
pub fn time(out: &mut ReplyWriter) {
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    out.array(2);
    out.bulk_int(now.as_secs() as i64);
    out.bulk_int(now.subsec_micros() as i64);
}

const fn node(name: &'static str, arity: i32, flags: u32, cmd: N) -> CommandSpec {
    CommandSpec::new(name, arity, flags, Exec::Node(cmd))
}

/// Flags of ACL's subcommands that read or change users.
const ACL_ADMIN: u32 = ADMIN | NOSCRIPT | LOADING | STALE | SENTINEL;
/// Flags of those every user may need (CAT, GENPASS, WHOAMI).
const ACL_OPEN: u32 = NOSCRIPT | LOADING | STALE | SENTINEL;

static ACL: &[CommandSpec] = &[
    node("cat", -2, ACL_OPEN, N::AclCat).doc(
        "server",
        "6.0.0",
        "Lists the ACL categories, or the commands inside a category.",
        "O(1) since the categories and commands are a fixed set.",
        "[category]",
    ),
    node("deluser", -3, ACL_ADMIN, N::AclDelUser).doc(
        "server",
        "6.0.0",
        "Deletes ACL users, and terminates their connections.",
        "O(1) amortized time considering the typical user.",
        "username [username ...]",
    ),
    node("dryrun", -4, ACL_ADMIN, N::AclDryRun).doc(
        "server",
        "7.0.0",
        "Simulates the execution of a command by a user, without executing the command.",
        "O(1).",
        "username command [arg [arg ...]]",
    ),
    node("genpass", -2, ACL_OPEN, N::AclGenPass).doc(
        "server",
        "6.0.0",
        "Generates a pseudorandom, secure password that can be used to identify ACL users.",
        "O(1)",
        "[bits:integer]",
    ),
    node("getuser", 3, ACL_ADMIN, N::AclGetUser)
        .doc(
            "server",
            "6.0.0",
            "Lists the ACL rules of a user.",
            "O(N). Where N is the number of password, command and pattern rules that the user has.",
            "username",
        )
        .history(&[
            ("6.2.0", "Added Pub/Sub channel patterns."),
            (
                "7.0.0",
                "Added selectors and changed the format of key and channel patterns from a list to their rule representation.",
            ),
        ]),
    node("help", 2, LOADING | STALE | SENTINEL, N::AclHelp).doc(
        "server",
        "6.0.0",
        "Returns helpful text about the different subcommands.",
        "O(1)",
        "",
    ),
    node("list", 2, ACL_ADMIN, N::AclList).doc(
        "server",
        "6.0.0",
        "Dumps the effective rules in ACL file format.",
        "O(N). Where N is the number of configured users.",
        "",
    ),
    node("load", 2, ACL_ADMIN, N::AclLoad).doc(
        "server",
        "6.0.0",
        "Reloads the rules from the configured ACL file.",
        "O(N). Where N is the number of configured users.",
        "",
    ),
    node("log", -2, ACL_ADMIN, N::AclLog).doc(
        "server",
        "6.0.0",
        "Lists recent security events generated due to ACL rules.",
        "O(N) with N being the number of entries shown.",
        "[count:integer | RESET]",
    ),
    node("save", 2, ACL_ADMIN, N::AclSave).doc(
        "server",
        "6.0.0",
        "Saves the effective ACL rules in the configured ACL file.",
        "O(N). Where N is the number of configured users.",
        "",
    ),
    node("setuser", -3, ACL_ADMIN, N::AclSetUser)
        .doc(
            "server",
            "6.0.0",
            "Creates and modifies an ACL user and its rules.",
            "O(N). Where N is the number of rules provided.",
            "username [rule [rule ...]]",
        )
        .history(&[
            ("6.2.0", "Added Pub/Sub channel patterns."),
            ("7.0.0", "Added selectors and key based permissions."),
        ]),
    node("users", 2, ACL_ADMIN, N::AclUsers).doc(
        "server",
        "6.0.0",
        "Lists all ACL users.",
        "O(N). Where N is the number of configured users.",
        "",
    ),
    node("whoami", 2, ACL_OPEN, N::AclWhoAmI).doc(
        "server",
        "6.0.0",
        "Returns the authenticated username of the current connection.",
        "O(1)",
        "",
    ),
];

/// Flags CONFIG GET/SET/RESETSTAT/REWRITE share.
const CONFIG_FLAGS: u32 = ADMIN | NOSCRIPT | LOADING | STALE;

static CONFIG: &[CommandSpec] = &[
    node("get", -3, CONFIG_FLAGS, N::ConfigGet).doc(
        "server",
        "2.0.0",
        "Returns the effective values of configuration parameters.",
        "O(N) when N is the number of configuration parameters provided",
        "parameter [parameter ...]",
    ),
    node("set", -4, CONFIG_FLAGS, N::ConfigSet)
        .tips(&["request_policy:all_nodes", "response_policy:all_succeeded"])
        .doc(
            "server",
            "2.0.0",
            "Sets configuration parameters in-flight.",
            "O(N) when N is the number of configuration parameters provided",
            "parameter value [parameter value ...]",
        ),
    node("resetstat", 2, CONFIG_FLAGS, N::ConfigResetStat)
        .tips(&["request_policy:all_nodes", "response_policy:all_succeeded"])
        .doc("server", "2.0.0", "Resets the server's statistics.", "O(1)", ""),
    node("rewrite", 2, CONFIG_FLAGS, N::ConfigRewrite)
        .tips(&["request_policy:all_nodes", "response_policy:all_succeeded"])
        .doc("server", "2.8.0", "Persists the effective configuration to file.", "O(1)", ""),
    node("help", 2, LOADING | STALE, N::ConfigHelp).doc(
        "server",
        "5.0.0",
        "Returns helpful text about the different subcommands.",
        "O(1)",
        "",
    ),
];

static SLOWLOG: &[CommandSpec] = &[
    node("get", -2, ADMIN | LOADING | STALE, N::SlowlogGet)
        .tips(&["request_policy:all_nodes", "nondeterministic_output"])
        .doc(
            "server",
            "2.2.12",
            "Returns the slow log's entries.",
            "O(N) where N is the number of entries returned",
            "[count]",
        )
        .history(&[("4.0.0", "Added client IP address, port and name to the reply.")]),
    node("len", 2, ADMIN | LOADING | STALE, N::SlowlogLen)
        .tips(&["request_policy:all_nodes", "response_policy:agg_sum", "nondeterministic_output"])
        .doc("server", "2.2.12", "Returns the number of entries in the slow log.", "O(1)", ""),
    node("reset", 2, ADMIN | LOADING | STALE, N::SlowlogReset)
        .tips(&["request_policy:all_nodes", "response_policy:all_succeeded"])
        .doc(
            "server",
            "2.2.12",
            "Clears all entries from the slow log.",
            "O(N) where N is the number of entries in the slowlog",
            "",
        ),
    node("help", 2, LOADING | STALE, N::SlowlogHelp).doc(
        "server",
        "6.2.0",
        "Show helpful text about the different subcommands",
        "O(1)",
        "",
    ),
];

/// Flags of LATENCY's subcommands but HELP.
const LATENCY_FLAGS: u32 = ADMIN | NOSCRIPT | LOADING | STALE;
/// Their tips: every node answers, each in its own way.
const LATENCY_TIPS: &[&str] =
    &["nondeterministic_output", "request_policy:all_nodes", "response_policy:special"];

static LATENCY: &[CommandSpec] = &[
    node("doctor", 2, LATENCY_FLAGS, N::LatencyDoctor).tips(LATENCY_TIPS).doc(
        "server",
        "2.8.13",
        "Returns a human-readable latency analysis report.",
        "O(1)",
        "",
    ),
    node("graph", 3, LATENCY_FLAGS, N::LatencyGraph).tips(LATENCY_TIPS).doc(
        "server",
        "2.8.13",
        "Returns a latency graph for an event.",
        "O(1)",
        "event",
    ),
    node("help", 2, LOADING | STALE, N::LatencyHelp).doc(
        "server",
        "2.8.13",
        "Returns helpful text about the different subcommands.",
        "O(1)",
        "",
    ),
    node("histogram", -2, LATENCY_FLAGS, N::LatencyHistogram).tips(LATENCY_TIPS).doc(
        "server",
        "7.0.0",
        "Returns the cumulative distribution of latencies of a subset or all commands.",
        "O(N) where N is the number of commands with latency information being retrieved.",
        "[COMMAND [COMMAND ...]]",
    ),
    node("history", 3, LATENCY_FLAGS, N::LatencyHistory).tips(LATENCY_TIPS).doc(
        "server",
        "2.8.13",
        "Returns timestamp-latency samples for an event.",
        "O(1)",
        "event",
    ),
    node("latest", 2, LATENCY_FLAGS, N::LatencyLatest).tips(LATENCY_TIPS).doc(
        "server",
        "2.8.13",
        "Returns the latest latency samples for all events.",
        "O(1)",
        "",
    ),
    node("reset", -2, LATENCY_FLAGS, N::LatencyReset)
        .tips(&["request_policy:all_nodes", "response_policy:agg_sum"])
        .doc(
            "server",
            "2.8.13",
            "Resets the latency data for one or more events.",
            "O(1)",
            "[event [event ...]]",
        ),
];

pub static COMMANDS: &[CommandSpec] = &[
    node("info", -1, LOADING | STALE | SENTINEL, N::Info)
        .acl(acl::DANGEROUS)
        .tips(&["nondeterministic_output", "request_policy:all_shards", "response_policy:special"])
        .doc("server", "1.0.0", "Returns information and statistics about the server.", "O(1)", "[section [section ...]]"),
    CommandSpec::container("acl", ACL).flag(SENTINEL).doc(
        "server",
        "6.0.0",
        "A container for Access List Control commands.",
        "Depends on subcommand.",
        "",
    ),
    CommandSpec::container("config", CONFIG).doc(
        "server",
        "2.0.0",
        "A container for server configuration commands.",
        "Depends on subcommand.",
        "",
    ),
    CommandSpec::container("slowlog", SLOWLOG).doc(
        "server",
        "2.2.12",
        "A container for slow log commands.",
        "Depends on subcommand.",
        "",
    ),
    CommandSpec::container("latency", LATENCY).doc(
        "server",
        "2.8.13",
        "A container for latency diagnostics commands.",
        "Depends on subcommand.",
        "",
    ),
    node("monitor", 1, ADMIN | NOSCRIPT | LOADING | STALE, N::Monitor).doc(
        "server",
        "1.0.0",
        "Listens for all requests received by the server in real-time.",
        "",
        "",
    ),
    node("time", 1, LOADING | STALE | FAST, N::Time)
        .tips(&["nondeterministic_output"])
        .doc("server", "2.6.0", "Returns the server time.", "O(1)", ""),
    node("lastsave", 1, LOADING | STALE | FAST, N::LastSave)
        .acl(acl::ADMIN | acl::DANGEROUS)
        .tips(&["nondeterministic_output"])
        .doc("server", "1.0.0", "Returns the Unix timestamp of the last successful save to disk.", "O(1)", ""),
    node("save", 1, NO_ASYNC_LOADING | ADMIN | NOSCRIPT | NO_MULTI, N::Save)
        .doc("server", "1.0.0", "Synchronously saves the database(s) to disk.", "O(N) where N is the total number of keys in all databases", ""),
    node("bgsave", -1, NO_ASYNC_LOADING | ADMIN | NOSCRIPT, N::BgSave)
        .doc("server", "1.0.0", "Asynchronously saves the database(s) to disk.", "O(1)", "[SCHEDULE]"),
    node("bgrewriteaof", 1, NO_ASYNC_LOADING | ADMIN | NOSCRIPT, N::BgRewriteAof)
        .doc("server", "1.0.0", "Asynchronously rewrites the append-only file to disk.", "O(1)", ""),
    node("shutdown", -1, ADMIN | NOSCRIPT | LOADING | STALE | NO_MULTI | SENTINEL | ALLOW_BUSY, N::Shutdown).doc(
        "server",
        "1.0.0",
        "Synchronously saves the database(s) to disk and shuts down the Redis server.",
        "O(N) when saving, where N is the total number of keys in all databases when saving data, otherwise O(1)",
        "[NOSAVE | SAVE] [NOW] [FORCE] [ABORT]",
    ),
    node("debug", -2, ADMIN | NOSCRIPT | LOADING | STALE | PROTECTED, N::Debug).doc(
        "server",
        "1.0.0",
        "A container for debugging commands.",
        "Depends on subcommand.",
        "",
    ),
];

#[cfg(test)]
mod tests {
    use crate::command::spec::{acl, flags};
    use crate::command::table;

    #[test]
    fn implied_acl_categories_match_redis() {
        let t = table();
        let get = t.get_full(b"config|get").map(|r| r.spec.acl_categories());
        assert_eq!(get, Some(acl::ADMIN | acl::DANGEROUS | acl::SLOW));
        let info = t.get(b"info").map(|r| r.spec.acl_categories());
        assert_eq!(info, Some(acl::DANGEROUS | acl::SLOW));
        let flush = t.get_full(b"function|flush").map(|r| r.spec.acl_categories());
        assert_eq!(flush, Some(acl::SCRIPTING | acl::WRITE | acl::SLOW));
        let time = t.get(b"time").map(|r| r.spec.acl_categories());
        assert_eq!(time, Some(acl::FAST));
        assert!(t.get(b"debug").is_some_and(|r| r.spec.has(flags::PROTECTED)));
    }
}
