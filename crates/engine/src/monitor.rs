//! MONITOR lines (Redis's `replicationFeedMonitors`): each command a client
//! runs, as `+<unix seconds>.<micros> [<db> <ip:port>] "arg" "arg"…`, the
//! arguments quoted as Redis's `sdscatrepr` quotes them and secrets
//! redacted as the slow log redacts them. Commands a script calls read
//! `[<db> lua]`.
//!
//! The connection's core writes the lines of the commands its clients send;
//! a shard writes those its scripts call (into its state's `monitor_out`,
//! only while someone monitors), and the server delivers both to the cores
//! with monitors.

use crate::slowlog::redacted_positions;
use bytes::Bytes;
use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

/// The line for a command run by `source` (a client's `ip:port`, or `lua`)
/// in database `db`, in RESP (a status reply) with its CRLF.
pub fn line(db: usize, source: &str, args: &[Bytes]) -> Bytes {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let mut out = Vec::with_capacity(48 + args.iter().map(|a| a.len() + 3).sum::<usize>());
    let _ = write!(out, "+{}.{:06} [{db} {source}] ", now.as_secs(), now.subsec_micros());
    let redacted = redacted_positions(args);
    for (i, arg) in args.iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        if redacted.contains(&i) {
            out.extend_from_slice(b"\"(redacted)\"");
        } else {
            repr(&mut out, arg);
        }
    }
    out.extend_from_slice(b"\r\n");
    out.into()
}

/// Redis's `sdscatrepr`: a double-quoted string with `\\`, `\"`, `\n`,
/// `\r`, `\t`, `\a`, `\b` escaped and other unprintable bytes as `\xNN`.
pub fn repr(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &c in s {
        match c {
            b'\\' | b'"' => out.extend_from_slice(&[b'\\', c]),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x07 => out.extend_from_slice(b"\\a"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(c),
            _ => {
                let _ = write!(out, "\\x{c:02x}");
            }
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&[u8]]) -> Vec<Bytes> {
        list.iter().map(|a| Bytes::copy_from_slice(a)).collect()
    }

    #[test]
    fn lines_quote_and_redact_as_redis_does() {
        let l = line(3, "127.0.0.1:5000", &args(&[b"set", b"k\"ey", b"a\r\n\x01\xff b"]));
        let text = String::from_utf8(l.to_vec()).unwrap();
        let (stamp, rest) = text.split_once(' ').unwrap();
        let (secs, micros) = stamp.trim_start_matches('+').split_once('.').unwrap();
        assert!(secs.parse::<u64>().unwrap() > 1_700_000_000 && micros.len() == 6);
        assert_eq!(rest, "[3 127.0.0.1:5000] \"set\" \"k\\\"ey\" \"a\\r\\n\\x01\\xff b\"\r\n");
        let l = line(0, "lua", &args(&[b"auth", b"user", b"pass"]));
        assert!(l.ends_with(b"[0 lua] \"auth\" \"(redacted)\" \"(redacted)\"\r\n"));
    }
}
