//! RESP for the load generator: commands encoded as multibulks, and a reply
//! parser for RESP2 and RESP3 that owns what it parses.
//!
//! The generator has its own parser, not ringdb-protocol's, so that a bug in
//! the server's parser cannot hide in the tool that measures the server.
//! A reply is parsed only once it is complete in the buffer; an incomplete
//! one is parsed again from its start when more bytes arrive (replies here
//! are small, so that costs little).

use std::fmt;

/// One reply, RESP2 or RESP3. Types the generator never looks into (maps,
/// sets, doubles, big numbers, verbatim strings, attributes) are kept only
/// as far as they matter: maps and sets as flat arrays, the rest as text.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Status(Vec<u8>),
    Error(Vec<u8>),
    Int(i64),
    Bulk(Vec<u8>),
    Null,
    Array(Vec<Reply>),
    /// A RESP3 push frame (`>`): Pub/Sub messages and watch pushes.
    Push(Vec<Reply>),
    /// Any other RESP3 scalar (double, boolean, big number), as its text.
    Other(Vec<u8>),
}

/// A byte stream that is not RESP: the connection cannot be read further.
#[derive(Debug, Clone, PartialEq)]
pub struct ProtocolError(pub String);

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "protocol error: {}", self.0)
    }
}

/// Deeper nesting than this is refused: no reply the generator asks for
/// nests more than four levels, and a bound keeps a bad stream from
/// overflowing the stack.
const MAX_DEPTH: usize = 32;

/// Aggregates announcing more elements than this are refused, so that a
/// corrupt length cannot make the parser reserve unbounded memory.
const MAX_ELEMENTS: usize = 1 << 24;

/// Redis's proto-max-bulk-len default: no longer string can be a reply.
const MAX_BULK: i64 = 512 << 20;

impl Reply {
    /// The error text if this is an error reply.
    pub fn error_text(&self) -> Option<String> {
        match self {
            Reply::Error(e) => Some(String::from_utf8_lossy(e).into_owned()),
            _ => None,
        }
    }

    /// Whether the server refused the command as one it does not know.
    pub fn is_unknown_command(&self) -> bool {
        matches!(self, Reply::Error(e) if e.starts_with(b"ERR unknown command"))
    }

    /// The elements of an array or push frame.
    pub fn items(&self) -> Option<&[Reply]> {
        match self {
            Reply::Array(items) | Reply::Push(items) => Some(items),
            _ => None,
        }
    }

    pub fn bulk(&self) -> Option<&[u8]> {
        match self {
            Reply::Bulk(b) => Some(b),
            _ => None,
        }
    }

    /// A short description for error messages (at most about 120 bytes).
    pub fn describe(&self) -> String {
        let text = format!("{self:?}");
        match text.char_indices().nth(120) {
            Some((cut, _)) => format!("{}…", &text[..cut]),
            None => text,
        }
    }
}

/// Appends `args` as one RESP multibulk command.
pub fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.push(b'*');
    out.extend_from_slice(args.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
    for arg in args {
        out.push(b'$');
        out.extend_from_slice(arg.len().to_string().as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

/// Parses one reply from the start of `buf`: the reply and the bytes it
/// took, or `None` when it is not complete yet.
pub fn parse(buf: &[u8]) -> Result<Option<(Reply, usize)>, ProtocolError> {
    let mut cursor = Cursor { buf, pos: 0 };
    match cursor.reply(0)? {
        Some(reply) => Ok(Some((reply, cursor.pos))),
        None => Ok(None),
    }
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// The next CRLF-terminated line, without the CRLF.
    fn line(&mut self) -> Option<&'a [u8]> {
        let buf: &'a [u8] = self.buf;
        let rest = &buf[self.pos..];
        let end = rest.windows(2).position(|w| w == b"\r\n")?;
        self.pos += end + 2;
        Some(&rest[..end])
    }

    fn reply(&mut self, depth: usize) -> Result<Option<Reply>, ProtocolError> {
        if depth > MAX_DEPTH {
            return Err(ProtocolError("replies nested too deep".into()));
        }
        let Some(&kind) = self.buf.get(self.pos) else { return Ok(None) };
        self.pos += 1;
        let Some(line) = self.line() else { return Ok(None) };
        Ok(match kind {
            b'+' => Some(Reply::Status(line.to_vec())),
            b'-' => Some(Reply::Error(line.to_vec())),
            b':' => Some(Reply::Int(number(line)?)),
            b'_' => Some(Reply::Null),
            b',' | b'#' | b'(' => Some(Reply::Other(line.to_vec())),
            b'$' | b'=' => self.blob(line)?.map(|b| b.map_or(Reply::Null, Reply::Bulk)),
            b'!' => self.blob(line)?.map(|b| Reply::Error(b.unwrap_or_default())),
            b'*' | b'~' | b'%' => {
                let per = if kind == b'%' { 2 } else { 1 };
                self.aggregate(line, per, depth)?.map(|v| v.map_or(Reply::Null, Reply::Array))
            }
            b'>' => self.aggregate(line, 1, depth)?.map(|v| Reply::Push(v.unwrap_or_default())),
            b'|' => {
                // An attribute describes the reply that follows it: skip it.
                if self.aggregate(line, 2, depth)?.is_none() {
                    return Ok(None);
                }
                return self.reply(depth);
            }
            other => {
                return Err(ProtocolError(format!("unexpected type byte {:?}", other as char)))
            }
        })
    }

    /// A length-prefixed string whose header line was `len`: `Some(None)`
    /// for the null string (`$-1`), `None` while incomplete.
    fn blob(&mut self, len: &[u8]) -> Result<Option<Option<Vec<u8>>>, ProtocolError> {
        let n = number(len)?;
        if n < 0 {
            return Ok(Some(None));
        }
        if n > MAX_BULK {
            return Err(ProtocolError(format!("string of {n} bytes")));
        }
        let n = n as usize;
        if self.buf.len() < self.pos + n + 2 {
            return Ok(None);
        }
        let body = self.buf[self.pos..self.pos + n].to_vec();
        if &self.buf[self.pos + n..self.pos + n + 2] != b"\r\n" {
            return Err(ProtocolError("string not followed by CRLF".into()));
        }
        self.pos += n + 2;
        Ok(Some(Some(body)))
    }

    /// `count * per` replies (maps have two per entry); `Some(None)` is a
    /// null aggregate (`*-1`).
    fn aggregate(
        &mut self,
        count: &[u8],
        per: usize,
        depth: usize,
    ) -> Result<Option<Option<Vec<Reply>>>, ProtocolError> {
        let n = number(count)?;
        if n < 0 {
            return Ok(Some(None));
        }
        let n = (n as usize).saturating_mul(per);
        if n > MAX_ELEMENTS {
            return Err(ProtocolError(format!("aggregate of {n} elements")));
        }
        // Every element takes at least 3 bytes, so this reserves no more
        // than the buffer could hold.
        let mut items = Vec::with_capacity(n.min(self.buf.len() / 3));
        for _ in 0..n {
            match self.reply(depth + 1)? {
                Some(item) => items.push(item),
                None => return Ok(None),
            }
        }
        Ok(Some(Some(items)))
    }
}

fn number(text: &[u8]) -> Result<i64, ProtocolError> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| ProtocolError(format!("bad number {:?}", String::from_utf8_lossy(text))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(bytes: &[u8]) -> Reply {
        let (reply, used) = parse(bytes).unwrap().unwrap();
        assert_eq!(used, bytes.len());
        reply
    }

    #[test]
    fn encodes_a_multibulk() {
        let mut out = Vec::new();
        encode(&mut out, &[b"SET", b"k", b""]);
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
    }

    #[test]
    fn parses_resp2_replies() {
        assert_eq!(one(b"+OK\r\n"), Reply::Status(b"OK".to_vec()));
        assert_eq!(one(b"-ERR x\r\n"), Reply::Error(b"ERR x".to_vec()));
        assert_eq!(one(b":-12\r\n"), Reply::Int(-12));
        assert_eq!(one(b"$-1\r\n"), Reply::Null);
        assert_eq!(one(b"$0\r\n\r\n"), Reply::Bulk(Vec::new()));
        assert_eq!(one(b"*-1\r\n"), Reply::Null);
        assert_eq!(
            one(b"*2\r\n$3\r\na\r\n\r\n*0\r\n"),
            Reply::Array(vec![Reply::Bulk(b"a\r\n".to_vec()), Reply::Array(vec![])])
        );
    }

    #[test]
    fn parses_resp3_replies() {
        assert_eq!(
            one(b">3\r\n$3\r\nGET\r\n$2\r\n42\r\n_\r\n"),
            Reply::Push(vec![
                Reply::Bulk(b"GET".to_vec()),
                Reply::Bulk(b"42".to_vec()),
                Reply::Null
            ])
        );
        assert_eq!(
            one(b"%1\r\n+a\r\n:1\r\n"),
            Reply::Array(vec![Reply::Status(b"a".to_vec()), Reply::Int(1)])
        );
        assert_eq!(one(b"|1\r\n+k\r\n+v\r\n:5\r\n"), Reply::Int(5));
        assert_eq!(one(b",1.5\r\n"), Reply::Other(b"1.5".to_vec()));
        assert_eq!(one(b"!3\r\nERR\r\n"), Reply::Error(b"ERR".to_vec()));
    }

    #[test]
    fn waits_for_a_complete_reply() {
        let full = b"*2\r\n$5\r\nhello\r\n:7\r\n";
        for cut in 0..full.len() {
            assert_eq!(parse(&full[..cut]).unwrap(), None, "cut at {cut}");
        }
        let mut two = full.to_vec();
        two.extend_from_slice(b"+OK\r\n");
        assert_eq!(parse(&two).unwrap().unwrap().1, full.len());
    }

    #[test]
    fn refuses_garbage() {
        assert!(parse(b"?\r\n").is_err());
        assert!(parse(b":abc\r\n").is_err());
        assert!(parse(b"$3\r\nabcd\r\n").is_err());
        assert!(parse(b"*99999999999\r\n").is_err());
        assert!(parse(b"$9223372036854775807\r\n").is_err());
        let deep = b"*1\r\n".repeat(MAX_DEPTH + 2);
        assert!(parse(&deep).is_err());
    }

    #[test]
    fn knows_unknown_commands() {
        let reply = one(b"-ERR unknown command 'GET.WATCH', with args beginning with: 'k' \r\n");
        assert!(reply.is_unknown_command());
        assert!(!one(b"-ERR syntax error\r\n").is_unknown_command());
    }
}
