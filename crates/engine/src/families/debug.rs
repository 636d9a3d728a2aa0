//! The DEBUG subcommands a script may call too (with
//! `DEBUG SET-DISABLE-DENY-SCRIPTS 1`, as Redis's tests do): PROTOCOL's
//! sample replies and SLEEP's time. The server runs DEBUG itself
//! (`cmd::admin`); these are the parts that need nothing but a reply.

use crate::command::args::is;
use crate::command::error::{CmdError, CmdResult};
use ringdb_protocol::ReplyWriter;
use std::time::Duration;

/// DEBUG PROTOCOL type: a sample reply of each RESP type (the values are
/// Redis's, 3.141 included).
#[allow(clippy::approx_constant)]
pub fn protocol(out: &mut ReplyWriter, kind: &[u8]) -> CmdResult {
    if is(kind, "string") {
        out.bulk(b"Hello World");
    } else if is(kind, "integer") {
        out.int(12345);
    } else if is(kind, "double") {
        out.double(3.141);
    } else if is(kind, "bignum") {
        const BIG: &[u8] = b"1234567999999999999999999999999999999";
        if out.is_resp3() {
            out.raw(b"(");
            out.raw(BIG);
            out.raw(b"\r\n");
        } else {
            out.bulk(BIG);
        }
    } else if is(kind, "null") {
        out.null();
    } else if is(kind, "array") || is(kind, "set") {
        if is(kind, "set") {
            out.set(3);
        } else {
            out.array(3);
        }
        (0..3).for_each(|j| out.int(j));
    } else if is(kind, "map") {
        out.map(3);
        for j in 0..3 {
            out.int(j);
            out.bool(j == 1);
        }
    } else if is(kind, "attrib") {
        if out.is_resp3() {
            out.raw(b"|1\r\n");
            out.bulk(b"key-popularity");
            out.array(2);
            out.bulk(b"key:123");
            out.int(90);
        }
        out.bulk(b"Some real reply following the attribute");
    } else if is(kind, "push") {
        if !out.is_resp3() {
            return Err(CmdError::new("ERR RESP2 is not supported by this command"));
        }
        out.push(2);
        out.bulk(b"server-cpu-usage");
        out.int(42);
        out.bulk(b"Some real reply following the push reply");
    } else if is(kind, "true") {
        out.bool(true);
    } else if is(kind, "false") {
        out.bool(false);
    } else if is(kind, "verbatim") {
        out.verbatim("txt", b"This is a verbatim\nstring");
    } else {
        return Err(CmdError::new(
            "ERR Wrong protocol type name. Please use one of the following: \
             string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false",
        ));
    }
    Ok(())
}

/// How long DEBUG SLEEP `seconds` sleeps: the leading number of its
/// argument as C's `strtod` reads it, 0 when none.
pub fn sleep_time(seconds: &[u8]) -> Duration {
    let seconds = leading_f64(seconds);
    if seconds > 0.0 {
        Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX)
    } else {
        Duration::ZERO
    }
}

/// C's `strtod` as DEBUG SLEEP uses it: the leading number, 0 when none.
pub(crate) fn leading_f64(arg: &[u8]) -> f64 {
    let s = String::from_utf8_lossy(arg);
    let s = s.trim_start();
    (1..=s.len())
        .rev()
        .filter(|&n| s.is_char_boundary(n))
        .find_map(|n| s[..n].parse::<f64>().ok())
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleep_reads_a_leading_number() {
        assert_eq!(leading_f64(b"0.05"), 0.05);
        assert_eq!(leading_f64(b" 2abc"), 2.0);
        assert_eq!(leading_f64(b"x"), 0.0);
        assert_eq!(sleep_time(b"-1"), Duration::ZERO);
    }
}
