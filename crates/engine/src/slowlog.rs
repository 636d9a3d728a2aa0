//! What the slow log records of a command that ran for at least
//! `slowlog-log-slower-than` microseconds (Redis's `slowlog.c`): its
//! arguments (at most 32, each cut at 128 bytes, passwords redacted), when
//! it ran and for how long, and which client ran it.
//!
//! A shard records the commands it runs ([`SlowEntry`] in its state's
//! `slow` outbox); the server sends each entry to the client's home core,
//! which keeps the log because it knows the client's address and name.
//! Commands a script calls are not logged (the script is), nor are
//! commands flagged `skip_slowlog` (EXEC: its commands are logged one by
//! one), as in Redis. Nor are the parts of a command split over shards
//! (MSET, DEL, …): the client's core logs the whole command, with the time
//! it took there.

use crate::command::spec::flags;
use crate::shard::{ShardCommand, ShardState};
use bytes::Bytes;
use std::sync::atomic::Ordering;

/// Arguments kept per entry; past it the last one says how many more.
pub const MAX_ARGS: usize = 32;
/// Bytes kept per argument.
pub const MAX_ARG_BYTES: usize = 128;

/// One slow command, as its shard saw it.
#[derive(Clone, Debug, PartialEq)]
pub struct SlowEntry {
    /// Its place in the log: ids come from one counter for the process, so
    /// they order the entries of all shards by when they were recorded.
    pub id: u64,
    /// Unix time, seconds, at which it ended.
    pub unix_secs: u64,
    /// How long it ran.
    pub usec: u64,
    /// Its arguments as the log shows them ([`logged_args`]).
    pub args: Vec<Bytes>,
    /// The client's id and home core.
    pub client: u64,
    pub home: u16,
}

/// `slowlog-log-slower-than` and `slowlog-max-len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlowLogSettings {
    /// Microseconds; negative turns the log off.
    pub slower_than: i64,
    pub max_len: usize,
}

impl Default for SlowLogSettings {
    fn default() -> Self {
        SlowLogSettings { slower_than: 10_000, max_len: 128 }
    }
}

impl SlowLogSettings {
    /// Whether a run of `usec` microseconds is slow (Redis's
    /// `duration >= slowlog_log_slower_than`).
    pub fn is_slow(&self, usec: u64) -> bool {
        self.slower_than >= 0 && usec >= self.slower_than as u64
    }
}

/// Records `cmd` in a shard's outbox if it was slow. The outbox keeps the
/// newest `max_len` entries: older ones could not survive in the log
/// anyway, so a long pipeline of slow commands holds no more than that
/// until the server takes them.
pub fn record(state: &mut ShardState, cmd: &ShardCommand, usec: u64, now_ms: u64) {
    let settings = state.settings.slowlog;
    if !settings.is_slow(usec)
        || cmd.client.script
        || cmd.client.part
        || cmd.spec.has(flags::SKIP_SLOWLOG)
        || settings.max_len == 0
    {
        return;
    }
    let slow = &mut state.funnel.out.slow;
    if slow.len() >= settings.max_len {
        slow.pop_front();
    }
    slow.push_back(SlowEntry {
        id: state.slowlog_ids.fetch_add(1, Ordering::Relaxed),
        unix_secs: now_ms / 1000,
        usec,
        args: logged_args(&cmd.args),
        client: cmd.client.id,
        home: cmd.client.home,
    });
}

/// The arguments as Redis's `slowlogCreateEntry` keeps them: at most
/// [`MAX_ARGS`] (the last one then reads `... (N more arguments)`), each cut
/// at [`MAX_ARG_BYTES`] bytes followed by `... (N more bytes)`, and secrets
/// replaced by `(redacted)`.
pub fn logged_args(args: &[Bytes]) -> Vec<Bytes> {
    let redacted = redacted_positions(args);
    let kept = args.len().min(MAX_ARGS);
    let mut out = Vec::with_capacity(kept);
    for (i, arg) in args.iter().enumerate().take(kept) {
        if kept != args.len() && i == kept - 1 {
            out.push(Bytes::from(format!("... ({} more arguments)", args.len() - kept + 1)));
        } else if redacted.contains(&i) {
            out.push(Bytes::from_static(b"(redacted)"));
        } else if arg.len() > MAX_ARG_BYTES {
            let mut cut = arg[..MAX_ARG_BYTES].to_vec();
            cut.extend_from_slice(
                format!("... ({} more bytes)", arg.len() - MAX_ARG_BYTES).as_bytes(),
            );
            out.push(Bytes::from(cut));
        } else {
            // A copy: the argument is a slice of the client's input buffer,
            // which a clone would keep alive whole (megabytes under a
            // pipeline) for as long as the entry stays in the log.
            out.push(Bytes::copy_from_slice(arg));
        }
    }
    out
}

/// The configuration parameters whose values are secrets: Redis 7.0's
/// sensitive ones, and the TLS key passwords (7.0 logs those as given).
const SENSITIVE_CONFIGS: &[&str] =
    &["requirepass", "masterauth", "masteruser", "tls-key-file-pass", "tls-client-key-file-pass"];

/// Arguments Redis redacts before logging a command: AUTH's, HELLO's
/// `AUTH username password`, the values of CONFIG SET's sensitive
/// parameters, MIGRATE's `AUTH password` and `AUTH2 username password`,
/// ACL SETUSER's.
pub fn redacted_positions(args: &[Bytes]) -> Vec<usize> {
    let is =
        |i: usize, word: &str| args.get(i).is_some_and(|a| a.eq_ignore_ascii_case(word.as_bytes()));
    let mut out = Vec::new();
    if is(0, "auth") || (is(0, "acl") && is(1, "setuser")) {
        out.extend((if is(0, "auth") { 1 } else { 2 })..args.len());
    } else if is(0, "hello") {
        if let Some(i) = (2..args.len()).find(|&i| is(i, "auth")) {
            out.extend([i + 1, i + 2]);
        }
    } else if is(0, "config") && is(1, "set") {
        let mut i = 2;
        while i + 1 < args.len() {
            if SENSITIVE_CONFIGS.iter().any(|name| args[i].eq_ignore_ascii_case(name.as_bytes())) {
                out.push(i + 1);
            }
            i += 2;
        }
    } else if is(0, "migrate") {
        for i in 6..args.len() {
            if is(i, "auth") {
                out.push(i + 1);
            } else if is(i, "auth2") {
                out.extend([i + 1, i + 2]);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<Bytes> {
        line.split(' ').map(|a| Bytes::from(a.to_string())).collect()
    }

    fn text(args: &[Bytes]) -> String {
        args.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn long_commands_are_trimmed_as_redis_trims_them() {
        let many: Vec<String> = (3..=33).map(|n| n.to_string()).collect();
        let line = format!("sadd set {}", many.join(" "));
        let kept = logged_args(&args(&line));
        assert_eq!(kept.len(), 32);
        assert_eq!(&kept[31][..], b"... (2 more arguments)");
        assert_eq!(&kept[30][..], b"31");
        let long = format!("sadd set foo {}", "A".repeat(129));
        let kept = logged_args(&args(&long));
        assert_eq!(kept[3], Bytes::from(format!("{}... (1 more bytes)", "A".repeat(128))));
        let exact = format!("set k {}", "B".repeat(128));
        assert_eq!(logged_args(&args(&exact))[2].len(), 128);
    }

    #[test]
    fn secrets_are_redacted() {
        assert_eq!(text(&logged_args(&args("AUTH user pass"))), "AUTH (redacted) (redacted)");
        assert_eq!(
            text(&logged_args(&args("hello 3 AUTH u p SETNAME n"))),
            "hello 3 AUTH (redacted) (redacted) SETNAME n"
        );
        assert_eq!(
            text(&logged_args(&args("config set maxmemory 1 requirepass x"))),
            "config set maxmemory 1 requirepass (redacted)"
        );
        assert_eq!(
            text(&logged_args(&args("migrate h 1 key 9 5000 AUTH2 user password"))),
            "migrate h 1 key 9 5000 AUTH2 (redacted) (redacted)"
        );
        assert_eq!(
            text(&logged_args(&args("acl setuser u +get"))),
            "acl setuser (redacted) (redacted)"
        );
        assert_eq!(text(&logged_args(&args("get auth"))), "get auth");
    }
}
