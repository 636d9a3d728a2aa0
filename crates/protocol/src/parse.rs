//! The request parser: RESP multibulk and inline commands, bounded and
//! incremental.
//!
//! Redis's rules, byte for byte (`processMultibulkBuffer` and
//! `processInlineBuffer` in `networking.c`): the same limits, the same error
//! texts, the same treatment of `*0` and `*-1` (ignored). A claimed length is
//! checked against its limit *before* anything is reserved for it, and the
//! parser never reserves memory for data that has not arrived, so a client
//! that claims `$500000000` and sends nothing costs nothing.
//!
//! Parsing is incremental: a multibulk command whose arguments arrive over
//! several reads keeps its progress (argument offsets, the pending bulk length)
//! in the parser, and the next call resumes where the last one stopped.
//! Complete commands are cut out of the buffer in one piece per call and their
//! arguments are zero-copy slices ([`Bytes`]) of that piece, which can travel to
//! another shard as they are.

use bytes::{Bytes, BytesMut};
use memchr::memchr;
use std::fmt;

/// Longest inline command, and longest `*<n>` / `$<n>` header line (Redis's
/// `PROTO_INLINE_MAX_SIZE`).
pub const INLINE_MAX_SIZE: usize = 64 * 1024;

/// Limits a client's requests are held to.
#[derive(Clone, Copy, Debug)]
pub struct ParseLimits {
    /// `proto-max-bulk-len`: the longest single argument.
    pub max_bulk_len: u64,
    /// The most arguments one command may claim (Redis: `INT_MAX`).
    pub max_multibulk_len: u64,
    /// Whether the client has authenticated. Before it has (when a password
    /// is required), Redis allows at most 10 arguments of at most 16 KiB.
    pub authenticated: bool,
}

impl Default for ParseLimits {
    fn default() -> Self {
        ParseLimits {
            max_bulk_len: 512 * 1024 * 1024,
            max_multibulk_len: i32::MAX as u64,
            authenticated: true,
        }
    }
}

/// One command as received: `args[0]` is the command name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub args: Vec<Bytes>,
    /// Bytes of the query buffer the command took as the client sent it
    /// (CLIENT LIST's `qbuf` while it runs).
    pub wire_len: usize,
}

/// A protocol error. The connection replies with its text and closes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParseError {
    InvalidMultibulkLength,
    UnauthenticatedMultibulkLength,
    InvalidBulkLength,
    UnauthenticatedBulkLength,
    ExpectedDollar(u8),
    TooBigMultibulkCount,
    TooBigBulkCount,
    TooBigInline,
    UnbalancedQuotes,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ERR Protocol error: ")?;
        match self {
            ParseError::InvalidMultibulkLength => f.write_str("invalid multibulk length"),
            ParseError::UnauthenticatedMultibulkLength => {
                f.write_str("unauthenticated multibulk length")
            }
            ParseError::InvalidBulkLength => f.write_str("invalid bulk length"),
            ParseError::UnauthenticatedBulkLength => f.write_str("unauthenticated bulk length"),
            ParseError::ExpectedDollar(c) => write!(f, "expected '$', got '{}'", *c as char),
            ParseError::TooBigMultibulkCount => f.write_str("too big mbulk count string"),
            ParseError::TooBigBulkCount => f.write_str("too big bulk count string"),
            ParseError::TooBigInline => f.write_str("too big inline request"),
            ParseError::UnbalancedQuotes => f.write_str("unbalanced quotes in request"),
        }
    }
}

impl std::error::Error for ParseError {}

/// Progress through a multibulk command that has not fully arrived. Offsets
/// are relative to the start of the command in the buffer.
#[derive(Debug)]
struct Multibulk {
    remaining: usize,
    args: Vec<(usize, usize)>,
    /// Length of the bulk whose header has been read but whose data has not.
    bulk_len: Option<usize>,
    /// Where parsing resumes.
    pos: usize,
}

/// A command cut out of the buffer but not yet turned into [`Bytes`] slices.
#[derive(Debug)]
enum Parsed {
    /// Argument offsets `offsets[first..first + argc]`, relative to the batch.
    Resp {
        first: usize,
        argc: usize,
        wire_len: usize,
    },
    Inline(Vec<Bytes>, usize),
}

/// Writes a command as a RESP multibulk of bulk strings: the form requests
/// arrive in, for whatever must be read again as requests (the append-only
/// log's records, commands put back in front of a connection's input).
pub fn encode_command<A: AsRef<[u8]>>(out: &mut impl bytes::BufMut, args: &[A]) {
    out.put_slice(format!("*{}\r\n", args.len()).as_bytes());
    for arg in args {
        let arg = arg.as_ref();
        out.put_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.put_slice(arg);
        out.put_slice(b"\r\n");
    }
}

/// Incremental request parser; one per connection.
#[derive(Debug, Default)]
pub struct RequestParser {
    partial: Option<Multibulk>,
    /// Scratch kept from one read to the next, so that parsing a read
    /// allocates only the arguments it returns (at most [`KEEP_SCRATCH`]
    /// entries each: one huge pipeline does not pin memory for good).
    offsets: Vec<(usize, usize)>,
    parsed: Vec<Parsed>,
    spare_args: Vec<(usize, usize)>,
}

const KEEP_SCRATCH: usize = 1024;

enum Step {
    /// A whole command (or an ignorable empty one) was consumed.
    Progress,
    /// More bytes are needed.
    NeedMore,
}

impl RequestParser {
    pub fn new() -> Self {
        RequestParser::default()
    }

    /// How many more bytes the command in progress needs at least, when known
    /// (the rest of a bulk whose length has been read). Used to size reads.
    pub fn pending_bulk(&self, buffered: usize) -> Option<usize> {
        let mb = self.partial.as_ref()?;
        let len = mb.bulk_len?;
        Some((mb.pos + len + 2).saturating_sub(buffered))
    }

    /// Parses every complete command in `buf` into `out` and removes them from
    /// `buf`. Commands parsed before a protocol error are still delivered in
    /// `out` (Redis runs them, then replies with the error and closes).
    pub fn parse(
        &mut self,
        buf: &mut BytesMut,
        limits: &ParseLimits,
        out: &mut Vec<Request>,
    ) -> Result<(), ParseError> {
        let mut base = 0usize;
        let mut offsets = std::mem::take(&mut self.offsets);
        let mut parsed = std::mem::take(&mut self.parsed);
        let result = loop {
            match self.step(buf, &mut base, limits, &mut offsets, &mut parsed) {
                Ok(Step::Progress) => continue,
                Ok(Step::NeedMore) => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        if base > 0 {
            let chunk = buf.split_to(base).freeze();
            out.reserve(parsed.len());
            for p in parsed.drain(..) {
                let (args, wire_len) = match p {
                    Parsed::Resp { first, argc, wire_len } => (
                        offsets[first..first + argc]
                            .iter()
                            .map(|&(s, e)| chunk.slice(s..e))
                            .collect(),
                        wire_len,
                    ),
                    Parsed::Inline(args, wire_len) => (args, wire_len),
                };
                out.push(Request { args, wire_len });
            }
        }
        offsets.clear();
        parsed.clear();
        if offsets.capacity() <= KEEP_SCRATCH {
            self.offsets = offsets;
        }
        if parsed.capacity() <= KEEP_SCRATCH {
            self.parsed = parsed;
        }
        result
    }

    fn step(
        &mut self,
        buf: &BytesMut,
        base: &mut usize,
        limits: &ParseLimits,
        offsets: &mut Vec<(usize, usize)>,
        parsed: &mut Vec<Parsed>,
    ) -> Result<Step, ParseError> {
        if self.partial.is_none() {
            let Some(&first) = buf.get(*base) else { return Ok(Step::NeedMore) };
            if first != b'*' {
                return parse_inline(buf, base, parsed);
            }
            let rest = &buf[*base..];
            let Some(cr) = memchr(b'\r', rest) else {
                if rest.len() > INLINE_MAX_SIZE {
                    return Err(ParseError::TooBigMultibulkCount);
                }
                return Ok(Step::NeedMore);
            };
            if cr + 1 >= rest.len() {
                return Ok(Step::NeedMore);
            }
            let count = match parse_len(&rest[1..cr]) {
                Some(n) if n <= limits.max_multibulk_len as i64 => n,
                _ => return Err(ParseError::InvalidMultibulkLength),
            };
            if count > 10 && !limits.authenticated {
                return Err(ParseError::UnauthenticatedMultibulkLength);
            }
            if count <= 0 {
                *base += cr + 2;
                return Ok(Step::Progress);
            }
            let count = count as usize;
            let mut args = std::mem::take(&mut self.spare_args);
            args.reserve(count.min(KEEP_SCRATCH));
            self.partial = Some(Multibulk { remaining: count, args, bulk_len: None, pos: cr + 2 });
        }
        let Some(mb) = self.partial.as_mut() else { return Ok(Step::NeedMore) };
        while mb.remaining > 0 {
            if mb.bulk_len.is_none() {
                let rest = &buf[*base + mb.pos..];
                let Some(cr) = memchr(b'\r', rest) else {
                    if rest.len() > INLINE_MAX_SIZE {
                        return Err(ParseError::TooBigBulkCount);
                    }
                    return Ok(Step::NeedMore);
                };
                if cr + 1 >= rest.len() {
                    return Ok(Step::NeedMore);
                }
                if rest[0] != b'$' {
                    return Err(ParseError::ExpectedDollar(rest[0]));
                }
                let len = match parse_len(&rest[1..cr]) {
                    Some(n) if n >= 0 && n as u64 <= limits.max_bulk_len => n as usize,
                    _ => return Err(ParseError::InvalidBulkLength),
                };
                if len > 16384 && !limits.authenticated {
                    return Err(ParseError::UnauthenticatedBulkLength);
                }
                mb.pos += cr + 2;
                mb.bulk_len = Some(len);
            }
            let len = mb.bulk_len.unwrap_or(0);
            if buf.len() - (*base + mb.pos) < len + 2 {
                return Ok(Step::NeedMore);
            }
            mb.args.push((mb.pos, mb.pos + len));
            mb.pos += len + 2;
            mb.bulk_len = None;
            mb.remaining -= 1;
        }
        let first = offsets.len();
        offsets.extend(mb.args.iter().map(|&(s, e)| (*base + s, *base + e)));
        parsed.push(Parsed::Resp { first, argc: mb.args.len(), wire_len: mb.pos });
        *base += mb.pos;
        if let Some(Multibulk { mut args, .. }) = self.partial.take() {
            if args.capacity() <= KEEP_SCRATCH {
                args.clear();
                self.spare_args = args;
            }
        }
        Ok(Step::Progress)
    }
}

fn parse_inline(
    buf: &BytesMut,
    base: &mut usize,
    parsed: &mut Vec<Parsed>,
) -> Result<Step, ParseError> {
    let rest = &buf[*base..];
    let Some(nl) = memchr(b'\n', rest) else {
        if rest.len() > INLINE_MAX_SIZE {
            return Err(ParseError::TooBigInline);
        }
        return Ok(Step::NeedMore);
    };
    let line = if nl > 0 && rest[nl - 1] == b'\r' { &rest[..nl - 1] } else { &rest[..nl] };
    let args = split_args(line).ok_or(ParseError::UnbalancedQuotes)?;
    *base += nl + 1;
    if !args.is_empty() {
        parsed.push(Parsed::Inline(args.into_iter().map(Bytes::from).collect(), nl + 1));
    }
    Ok(Step::Progress)
}

/// A length in a `*` or `$` header: an optional `-` and decimal digits, as
/// Redis's `string2ll` accepts them (no `+`, no leading zeros, no spaces).
fn parse_len(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.split_first() {
        Some((b'-', d)) => (true, d),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 19 || (digits[0] == b'0' && digits.len() > 1) {
        return None;
    }
    let mut n: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add((c - b'0') as i64)?;
    }
    if neg {
        if n == 0 {
            return None;
        }
        n = -n;
    }
    Some(n)
}

/// Splits an inline command line into arguments with `redis-cli`'s quoting
/// rules (Redis's `sdssplitargs`): `"..."` with `\n \r \t \b \a \\ \"` and
/// `\xHH` escapes, `'...'` with `\'`, and a closing quote must be followed by
/// a space or the end of the line. Returns `None` for unbalanced quotes.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut args = Vec::new();
    let mut i = 0;
    let n = line.len();
    loop {
        while i < n && is_space(line[i]) {
            i += 1;
        }
        if i >= n {
            return Some(args);
        }
        let mut current = Vec::new();
        let mut in_double = false;
        let mut in_single = false;
        loop {
            if in_double {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\'
                    && i + 3 < n
                    && line[i + 1] == b'x'
                    && line[i + 2].is_ascii_hexdigit()
                    && line[i + 3].is_ascii_hexdigit()
                {
                    current.push(hex(line[i + 2]) * 16 + hex(line[i + 3]));
                    i += 3;
                } else if c == b'\\' && i + 1 < n {
                    i += 1;
                    current.push(match line[i] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                } else if c == b'"' {
                    // A closing quote must be followed by a space or the end.
                    if i + 1 < n && !is_space(line[i + 1]) {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    current.push(c);
                }
            } else if in_single {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\' && i + 1 < n && line[i + 1] == b'\'' {
                    i += 1;
                    current.push(b'\'');
                } else if c == b'\'' {
                    if i + 1 < n && !is_space(line[i + 1]) {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    current.push(c);
                }
            } else {
                if i >= n {
                    break;
                }
                match line[i] {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => {
                        i += 1;
                        break;
                    }
                    b'"' => in_double = true,
                    b'\'' => in_single = true,
                    c => current.push(c),
                }
            }
            i += 1;
        }
        args.push(current);
    }
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

fn hex(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        _ => c - b'A' + 10,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(input: &[u8]) -> (Vec<Vec<Vec<u8>>>, Result<(), ParseError>, usize) {
        let mut p = RequestParser::new();
        let mut buf = BytesMut::from(input);
        let mut out = Vec::new();
        let r = p.parse(&mut buf, &ParseLimits::default(), &mut out);
        let cmds = out.into_iter().map(|r| r.args.iter().map(|a| a.to_vec()).collect()).collect();
        (cmds, r, buf.len())
    }

    fn cmd(args: &[&str]) -> Vec<Vec<u8>> {
        args.iter().map(|a| a.as_bytes().to_vec()).collect()
    }

    #[test]
    fn encoded_commands_parse_back() {
        let args = [&b"SET"[..], b"k", b"", b"a\r\nb"];
        let mut buf = BytesMut::new();
        encode_command(&mut buf, &args);
        let mut out = Vec::new();
        RequestParser::new().parse(&mut buf, &ParseLimits::default(), &mut out).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].args, args.map(Bytes::copy_from_slice));
        assert!(buf.is_empty());
    }

    #[test]
    fn multibulk_and_pipeline() {
        let (cmds, r, left) = parse_all(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPING\r\n");
        assert_eq!(r, Ok(()));
        assert_eq!(left, 0);
        assert_eq!(cmds, vec![cmd(&["GET", "k"]), cmd(&["PING"])]);
    }

    #[test]
    fn resumes_across_reads_byte_by_byte() {
        let input = b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n*1\r\n$4\r\nPING\r\n";
        let mut p = RequestParser::new();
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for &b in input.iter() {
            buf.extend_from_slice(&[b]);
            p.parse(&mut buf, &ParseLimits::default(), &mut out).unwrap();
        }
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].args, vec!["SET", "key", "value"]);
        assert_eq!(out[1].args, vec!["PING"]);
        assert!(buf.is_empty());
    }

    #[test]
    fn empty_multibulk_is_ignored() {
        let (cmds, r, _) = parse_all(b"*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n");
        assert_eq!(r, Ok(()));
        assert_eq!(cmds, vec![cmd(&["PING"])]);
    }

    #[test]
    fn huge_claims_are_refused_without_allocating() {
        let (_, r, _) = parse_all(b"*2147483648\r\n");
        assert_eq!(r, Err(ParseError::InvalidMultibulkLength));
        let (_, r, _) = parse_all(b"*1\r\n$4294967296\r\n");
        assert_eq!(r, Err(ParseError::InvalidBulkLength));
        let (_, r, _) = parse_all(b"*1\r\n$-1\r\n");
        assert_eq!(r, Err(ParseError::InvalidBulkLength));
        let (_, r, _) = parse_all(b"*1\r\n$abc\r\n");
        assert_eq!(r, Err(ParseError::InvalidBulkLength));
        let (_, r, _) = parse_all(b"*a\r\n");
        assert_eq!(r, Err(ParseError::InvalidMultibulkLength));
        // A claimed 2^31-1 arguments is accepted as a header but reserves little.
        let mut p = RequestParser::new();
        let mut buf = BytesMut::from(&b"*2147483647\r\n"[..]);
        let mut out = Vec::new();
        assert_eq!(p.parse(&mut buf, &ParseLimits::default(), &mut out), Ok(()));
        assert!(p.partial.as_ref().unwrap().args.capacity() <= 1024);
    }

    #[test]
    fn commands_before_an_error_are_delivered() {
        let (cmds, r, _) = parse_all(b"*1\r\n$4\r\nPING\r\n*1\r\nfoo\r\n");
        assert_eq!(cmds, vec![cmd(&["PING"])]);
        assert_eq!(r, Err(ParseError::ExpectedDollar(b'f')));
        assert_eq!(
            ParseError::ExpectedDollar(b'f').to_string(),
            "ERR Protocol error: expected '$', got 'f'"
        );
    }

    #[test]
    fn overlong_headers_and_inline() {
        let mut long = b"*".to_vec();
        long.extend(std::iter::repeat_n(b'1', INLINE_MAX_SIZE + 1));
        assert_eq!(parse_all(&long).1, Err(ParseError::TooBigMultibulkCount));
        let long = vec![b'a'; INLINE_MAX_SIZE + 1];
        assert_eq!(parse_all(&long).1, Err(ParseError::TooBigInline));
        let mut bulk = b"*1\r\n$".to_vec();
        bulk.extend(std::iter::repeat_n(b'1', INLINE_MAX_SIZE + 1));
        assert_eq!(parse_all(&bulk).1, Err(ParseError::TooBigBulkCount));
    }

    #[test]
    fn unauthenticated_limits() {
        let limits = ParseLimits { authenticated: false, ..Default::default() };
        let mut p = RequestParser::new();
        let mut out = Vec::new();
        let mut buf = BytesMut::from(&b"*11\r\n"[..]);
        assert_eq!(
            p.parse(&mut buf, &limits, &mut out),
            Err(ParseError::UnauthenticatedMultibulkLength)
        );
        let mut p = RequestParser::new();
        let mut buf = BytesMut::from(&b"*1\r\n$16385\r\n"[..]);
        assert_eq!(
            p.parse(&mut buf, &limits, &mut out),
            Err(ParseError::UnauthenticatedBulkLength)
        );
    }

    #[test]
    fn inline_commands() {
        let (cmds, r, _) = parse_all(b"SET k \"a b\\x41\\n\" 'it\\'s'\r\nPING\n\r\n   \n");
        assert_eq!(r, Ok(()));
        assert_eq!(
            cmds,
            vec![
                vec![b"SET".to_vec(), b"k".to_vec(), b"a bA\n".to_vec(), b"it's".to_vec()],
                cmd(&["PING"])
            ]
        );
        assert_eq!(parse_all(b"SET \"k\r\n").1, Err(ParseError::UnbalancedQuotes));
        assert_eq!(parse_all(b"SET \"k\"x\r\n").1, Err(ParseError::UnbalancedQuotes));
        assert_eq!(parse_all(b"SET 'k\r\n").1, Err(ParseError::UnbalancedQuotes));
    }

    #[test]
    fn binary_values_with_crlf_inside() {
        let (cmds, r, _) = parse_all(b"*2\r\n$4\r\nECHO\r\n$4\r\na\r\nb\r\n");
        assert_eq!(r, Ok(()));
        assert_eq!(cmds[0][1], b"a\r\nb".to_vec());
    }

    #[test]
    fn pending_bulk_reports_missing_bytes() {
        let mut p = RequestParser::new();
        let mut buf = BytesMut::from(&b"*2\r\n$3\r\nSET\r\n$100\r\nabc"[..]);
        let mut out = Vec::new();
        p.parse(&mut buf, &ParseLimits::default(), &mut out).unwrap();
        assert_eq!(p.pending_bulk(buf.len()), Some(99));
    }
}
