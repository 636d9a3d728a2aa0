//! Commands that run on the connection's core (`Exec::Node` rows): connection
//! state, administration, and commands that visit every shard. One module per
//! family, mirroring the engine's families.

pub mod acl;
pub mod admin;
pub mod blocking;
pub mod client;
pub mod command;
pub mod config;
pub mod connection;
pub mod hotkeys;
pub mod info;
pub mod keyspace;
pub mod latency;
pub mod memory;
pub mod migrate;
pub mod monitor;
pub mod pubsub;
pub mod scripting;
pub mod slowlog;
pub mod transactions;
pub mod watch;

use crate::net::connection::Connection;
use bytes::Bytes;
use ringdb_engine::command::spec::flags;
use ringdb_engine::command::{CmdError, CmdResult, NodeCommand, Registered};
use std::time::Instant;

/// Runs a node command, writing its reply to `conn.out`, and counts it in
/// this core's command statistics.
pub async fn run(
    conn: &mut Connection,
    cmd: NodeCommand,
    reg: &Registered,
    args: &[Bytes],
) -> CmdResult {
    let started = Instant::now();
    let result = dispatch(conn, cmd, args).await;
    let usec = started.elapsed().as_micros() as u64;
    if !reg.spec.has(flags::SKIP_SLOWLOG) {
        slowlog::record_here(conn, args, usec);
    }
    conn.core.shard.borrow_mut().state.count_call(reg.id, reg.spec, usec, result.is_err());
    result
}

async fn dispatch(conn: &mut Connection, cmd: NodeCommand, args: &[Bytes]) -> CmdResult {
    use NodeCommand as N;
    match cmd {
        N::QueryWatch => watch::query_watch(conn, args).await,
        N::QueryUnwatch => watch::query_unwatch(conn, args).await,
        N::HotkeysRules => hotkeys::rules(conn, args).await,
        N::HotkeysList => hotkeys::list(conn, args).await,
        N::HotkeysTop => hotkeys::top(conn, args).await,
        N::HotkeysHelp => hotkeys::help(conn, args),
        N::HotkeysWatch => hotkeys::watch(conn, args).await,
        N::HotkeysUnwatch => hotkeys::unwatch_command(conn).await,
        N::Subscribe => pubsub::subscribe(conn, args).await,
        N::Unsubscribe => pubsub::unsubscribe(conn, args).await,
        N::PSubscribe => pubsub::psubscribe(conn, args).await,
        N::PUnsubscribe => pubsub::punsubscribe(conn, args).await,
        N::SSubscribe => pubsub::ssubscribe(conn, args).await,
        N::SUnsubscribe => pubsub::sunsubscribe(conn, args).await,
        N::Publish => pubsub::publish(conn, args).await,
        N::SPublish => pubsub::spublish(conn, args).await,
        N::PubSubChannels => pubsub::pubsub_channels(conn, args).await,
        N::PubSubNumSub => pubsub::pubsub_numsub(conn, args).await,
        N::PubSubNumPat => pubsub::pubsub_numpat(conn, args).await,
        N::PubSubShardChannels => pubsub::pubsub_shardchannels(conn, args).await,
        N::PubSubShardNumSub => pubsub::pubsub_shardnumsub(conn, args).await,
        N::PubSubHelp => pubsub::pubsub_help(conn, args).await,
        N::Multi => transactions::multi(conn),
        N::Exec => transactions::exec(conn).await,
        N::Discard => transactions::discard(conn).await,
        N::Watch => transactions::watch(conn, args).await,
        N::Unwatch => transactions::unwatch(conn).await,
        N::Ping => connection::ping(conn, args),
        N::Echo => connection::echo(conn, args),
        N::Select => connection::select(conn, args),
        N::Quit => connection::quit(conn),
        N::Hello => connection::hello(conn, args),
        N::Auth => connection::auth(conn, args),
        N::Reset => connection::reset(conn).await,
        N::SwapDb => keyspace::swapdb(conn, args).await,
        N::DbSize => keyspace::dbsize(conn, args).await,
        N::FlushDb => keyspace::flushdb(conn, args).await,
        N::FlushAll => keyspace::flushall(conn, args).await,
        N::Keys => keyspace::keys(conn, args).await,
        N::Scan => keyspace::scan(conn, args).await,
        N::RandomKey => keyspace::randomkey(conn, args).await,
        N::Info => info::info(conn, args).await,
        N::Time => admin::time(conn, args).await,
        N::LastSave => admin::lastsave(conn, args).await,
        N::Save => admin::save(conn, args).await,
        N::BgSave => admin::bgsave(conn, args).await,
        N::BgRewriteAof => admin::bgrewriteaof(conn, args).await,
        N::Shutdown => admin::shutdown(conn, args).await,
        N::Debug => admin::debug(conn, args).await,
        N::ScriptLoad => scripting::script_load(conn, args).await,
        N::ScriptExists => scripting::script_exists(conn, args),
        N::ScriptFlush => scripting::script_flush(conn, args).await,
        N::ScriptKill => scripting::kill(conn, true),
        N::ScriptHelp => scripting::script_help(conn, args),
        N::ScriptDebug => scripting::script_debug(conn, args),
        N::FunctionLoad => scripting::function_load(conn, args).await,
        N::FunctionDelete => scripting::function_delete(conn, args).await,
        N::FunctionFlush => scripting::function_flush(conn, args).await,
        N::FunctionList => scripting::function_list(conn, args),
        N::FunctionDump => scripting::function_dump(conn, args),
        N::FunctionRestore => scripting::function_restore(conn, args).await,
        N::FunctionStats => scripting::function_stats(conn, args),
        N::FunctionKill => scripting::kill(conn, false),
        N::FunctionHelp => scripting::function_help(conn, args),
        N::ClientId => client::id(conn, args).await,
        N::ClientSetName => client::setname(conn, args).await,
        N::ClientGetName => client::getname(conn, args).await,
        N::ClientSetInfo => client::setinfo(conn, args).await,
        N::ClientList => client::list(conn, args).await,
        N::ClientInfo => client::info(conn, args).await,
        N::ClientKill => client::kill(conn, args).await,
        N::ClientReply => client::reply(conn, args).await,
        N::ClientNoEvict => client::no_evict(conn, args).await,
        N::ClientNoTouch => client::no_touch(conn, args).await,
        N::ClientTracking => client::tracking(conn, args).await,
        N::ClientCaching => client::caching(conn, args).await,
        N::ClientGetRedir => client::getredir(conn, args).await,
        N::ClientTrackingInfo => client::trackinginfo(conn, args).await,
        N::ClientHelp => client::help(conn, args).await,
        N::ClientUnblock => blocking::client_unblock(conn, args).await,
        N::ClientPause => client::pause(conn, args).await,
        N::ClientUnpause => client::unpause(conn).await,
        N::Command => command::command(conn, args).await,
        N::CommandCount => command::count(conn, args).await,
        N::CommandInfo => command::info(conn, args).await,
        N::CommandDocs => command::docs(conn, args).await,
        N::CommandList => command::list(conn, args).await,
        N::CommandGetKeys => command::getkeys(conn, args).await,
        N::CommandGetKeysAndFlags => command::getkeysandflags(conn, args).await,
        N::CommandHelp => command::help(conn, args).await,
        N::ConfigGet => config::get(conn, args).await,
        N::ConfigSet => config::set(conn, args).await,
        N::ConfigResetStat => config::resetstat(conn, args).await,
        N::ConfigRewrite => config::rewrite(conn, args).await,
        N::ConfigHelp => config::help(conn, args).await,
        N::Monitor => monitor::monitor(conn, args).await,
        N::Role => admin::role(conn),
        N::Wait => blocking::wait(conn, args).await,
        N::Replconf => crate::repl::primary::replconf(conn, args).await,
        N::Sync => crate::repl::primary::sync(conn, args).await,
        N::Replicaof => crate::repl::replica::replicaof(conn, args).await,
        N::ClusterDisabled => Err(CmdError::new("ERR This instance has cluster support disabled")),
        N::SlowlogGet => slowlog::get(conn, args).await,
        N::SlowlogLen => slowlog::len(conn, args).await,
        N::SlowlogReset => slowlog::reset(conn, args).await,
        N::SlowlogHelp => slowlog::slowlog_help(conn, args),
        N::LatencyDoctor => latency::doctor(conn).await,
        N::LatencyGraph => latency::graph(conn, args).await,
        N::LatencyHistogram => latency::histogram(conn, args).await,
        N::LatencyHistory => latency::history(conn, args).await,
        N::LatencyLatest => latency::latest(conn).await,
        N::LatencyReset => latency::reset(conn, args).await,
        N::LatencyHelp => latency::latency_help(conn, args),
        N::MemoryStats => memory::stats(conn, args).await,
        N::MemoryDoctor => memory::doctor(conn, args).await,
        N::MemoryMallocStats => memory::malloc_stats(conn, args).await,
        N::MemoryPurge => memory::purge(conn, args).await,
        N::Migrate => migrate::migrate(conn, args).await,
        N::AclCat => acl::cat(conn, args),
        N::AclDelUser => acl::deluser(conn, args).await,
        N::AclDryRun => acl::dryrun(conn, args),
        N::AclGenPass => acl::genpass(conn, args),
        N::AclGetUser => acl::getuser(conn, args),
        N::AclHelp => acl::help(conn, args),
        N::AclList => acl::list(conn, false),
        N::AclLoad => acl::load(conn).await,
        N::AclLog => acl::log(conn, args),
        N::AclSave => acl::save(conn),
        N::AclSetUser => acl::setuser(conn, args).await,
        N::AclUsers => acl::list(conn, true),
        N::AclWhoAmI => acl::whoami(conn),
    }
}

/// A HELP reply as Redis's `addReplyHelp` writes it: a header naming the
/// command as the client typed it (upper case), `lines`, then HELP itself.
pub fn help(conn: &mut Connection, args: &[Bytes], lines: &[&str]) {
    let command = String::from_utf8_lossy(&args[0]).to_ascii_uppercase();
    let mut out = conn.reply();
    out.array(lines.len() + 3);
    out.simple(&format!("{command} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"));
    for line in lines {
        out.simple(line);
    }
    out.simple("HELP");
    out.simple("    Print this help.");
}

/// Redis's `addReplySubcommandSyntaxError`: a subcommand that exists only
/// with other arguments, or not at all.
pub fn subcommand_syntax_error(args: &[Bytes]) -> CmdError {
    let command = String::from_utf8_lossy(&args[0]).to_ascii_uppercase();
    let sub = args
        .get(1)
        .map(|s| String::from_utf8_lossy(&s[..s.len().min(128)]).into_owned())
        .unwrap_or_default();
    CmdError::owned(format!(
        "ERR unknown subcommand or wrong number of arguments for '{sub}'. Try {command} HELP."
    ))
}

/// `ERR syntax error`.
pub fn syntax() -> CmdError {
    ringdb_engine::command::error::SYNTAX
}
