//! Differential test: the same corpus of commands (tests/data/reply_corpus.txt)
//! goes to ringdb (2 shards) and to a real redis-server, over raw sockets, in
//! RESP2 and then in RESP3 (HELLO 3 on a connection of its own). Replies are
//! compared byte for byte (`exact`), or where values legitimately differ
//! (ids, times, memory numbers, INFO text) by their *shape* (`shape`): the
//! tree of RESP type markers and aggregate lengths, plus the keys of RESP3
//! maps, so that a missing or renamed field still shows.
//!
//! Every difference is printed; the test fails if any is not on the corpus
//! file's allow-list, or if an allow-list entry no longer matches anything
//! (so that the list only shrinks). See the corpus file for its format.

mod common;
use common::{Raw, RedisServer, Server};
use std::io::Read;

const CORPUS: &str = include_str!("data/reply_corpus.txt");

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Reply ignored, unless one side errs and the other does not.
    Setup,
    Exact,
    Shape,
    /// Opens a side connection (kept for the pass) that sends the command
    /// and reads one confirmation per channel argument.
    Sub,
}

struct Line {
    lineno: usize,
    mode: Mode,
    /// `Some(2)` / `Some(3)`: only in that protocol.
    proto: Option<u8>,
    args: Vec<Vec<u8>>,
    text: String,
}

struct Allow {
    lineno: usize,
    proto: Option<u8>,
    text: String,
    used: bool,
}

/// Splits off a ` # comment` that is outside quotes.
fn split_comment(s: &str) -> (&str, Option<&str>) {
    let bytes = s.as_bytes();
    let (mut quote, mut i) = (None, 0);
    while i < bytes.len() {
        let c = bytes[i];
        match quote {
            Some(q) if c == b'\\' && q == b'"' => i += 1,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == b'"' || c == b'\'' => quote = Some(c),
            None if c == b'#'
                && (i == 0 || bytes[i - 1] == b' ')
                && bytes.get(i + 1).is_none_or(|&n| n == b' ') =>
            {
                return (s[..i].trim_end(), Some(s[i + 1..].trim()));
            }
            None => {}
        }
        i += 1;
    }
    (s.trim_end(), None)
}

/// Words as redis-cli splits them: blanks separate, "double quotes" take
/// `\n \r \t \" \\ \xHH`, 'single quotes' take everything literally.
fn split_words(s: &str, lineno: usize) -> Vec<Vec<u8>> {
    let b = s.as_bytes();
    let mut words = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b' ' || b[i] == b'\t' {
            i += 1;
            continue;
        }
        let mut w = Vec::new();
        if b[i] == b'"' {
            i += 1;
            loop {
                assert!(i < b.len(), "line {lineno}: unterminated quote");
                match b[i] {
                    b'"' => break,
                    b'\\' => {
                        i += 1;
                        match b[i] {
                            b'n' => w.push(b'\n'),
                            b'r' => w.push(b'\r'),
                            b't' => w.push(b'\t'),
                            b'x' => {
                                let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap();
                                w.push(u8::from_str_radix(hex, 16).expect("\\xHH"));
                                i += 2;
                            }
                            c => w.push(c),
                        }
                    }
                    c => w.push(c),
                }
                i += 1;
            }
            i += 1;
        } else if b[i] == b'\'' {
            i += 1;
            while i < b.len() && b[i] != b'\'' {
                w.push(b[i]);
                i += 1;
            }
            assert!(i < b.len(), "line {lineno}: unterminated quote");
            i += 1;
        } else {
            while i < b.len() && b[i] != b' ' && b[i] != b'\t' {
                w.push(b[i]);
                i += 1;
            }
        }
        words.push(w);
    }
    words
}

/// `mode` or `mode@2` / `mode@3`.
fn parse_mode(word: &str, lineno: usize) -> (String, Option<u8>) {
    match word.split_once('@') {
        Some((m, p)) => {
            let p: u8 = p.parse().unwrap_or_else(|_| panic!("line {lineno}: bad protocol {p}"));
            assert!(p == 2 || p == 3, "line {lineno}: protocol 2 or 3");
            (m.to_string(), Some(p))
        }
        None => (word.to_string(), None),
    }
}

fn parse_corpus(text: &str) -> (Vec<Line>, Vec<Allow>) {
    let (mut lines, mut allows) = (Vec::new(), Vec::new());
    for (n, raw) in text.lines().enumerate() {
        let lineno = n + 1;
        let (body, comment) = split_comment(raw);
        if body.trim().is_empty() {
            continue;
        }
        let (mode_word, rest) = body.trim().split_once(' ').unwrap_or((body.trim(), ""));
        let (mode, proto) = parse_mode(mode_word, lineno);
        let rest = rest.trim().to_string();
        if mode == "allow" {
            let reason = comment.unwrap_or("");
            assert!(reason.len() > 10, "line {lineno}: an allow entry needs its reason (# ...)");
            allows.push(Allow { lineno, proto, text: rest, used: false });
            continue;
        }
        let mode = match mode.as_str() {
            "setup" => Mode::Setup,
            "exact" => Mode::Exact,
            "shape" => Mode::Shape,
            "sub" => Mode::Sub,
            other => panic!("line {lineno}: unknown mode {other:?}"),
        };
        let args = split_words(&rest, lineno);
        assert!(!args.is_empty(), "line {lineno}: no command");
        lines.push(Line { lineno, mode, proto, args, text: rest });
    }
    (lines, allows)
}

/// A RESP value's shape: its type marker, and for aggregates their children
/// (map keys kept whole, as field names are part of a reply's shape).
#[derive(Debug, PartialEq, Eq)]
enum Shape {
    Scalar(u8),
    /// A verbatim string keeps its format (`txt`).
    Verbatim(Vec<u8>),
    /// A string that is a RESP3 map key.
    Key(Vec<u8>),
    Aggregate(u8, Vec<Shape>),
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Shape::Scalar(m) => write!(f, "{}", *m as char),
            Shape::Verbatim(fmt) => write!(f, "={}", String::from_utf8_lossy(fmt)),
            Shape::Key(k) => write!(f, "{:?}", String::from_utf8_lossy(k)),
            Shape::Aggregate(m, items) => {
                // The count as RESP writes it: pairs for maps and attributes.
                let count = if *m == b'%' || *m == b'|' { items.len() / 2 } else { items.len() };
                write!(f, "{}{count}[", *m as char)?;
                for (i, s) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{s}")?;
                }
                f.write_str("]")
            }
        }
    }
}

/// Parses one frame at the start of `buf`: its shape and length, or `None`
/// when incomplete. Panics on bytes that are not RESP (a bug either side).
fn parse(buf: &[u8]) -> Option<(Shape, usize)> {
    parse_at(buf, 0, false)
}

fn line_end(buf: &[u8], from: usize) -> Option<usize> {
    (from..buf.len().saturating_sub(1)).find(|&i| buf[i] == b'\r' && buf[i + 1] == b'\n')
}

fn parse_at(buf: &[u8], at: usize, is_key: bool) -> Option<(Shape, usize)> {
    let marker = *buf.get(at)?;
    let end = line_end(buf, at + 1)?;
    let head = std::str::from_utf8(&buf[at + 1..end]).expect("a UTF-8 header");
    let after = end + 2;
    match marker {
        b'+' | b'-' | b':' | b',' | b'#' | b'_' | b'(' => {
            let shape = if is_key && marker == b'+' {
                Shape::Key(head.as_bytes().to_vec())
            } else {
                Shape::Scalar(marker)
            };
            Some((shape, after))
        }
        b'$' | b'=' | b'!' => {
            let len: i64 = head.parse().expect("a length");
            if len < 0 {
                return Some((Shape::Scalar(b'_'), after)); // $-1: RESP2's null
            }
            let stop = after + len as usize;
            if buf.len() < stop + 2 {
                return None;
            }
            let body = &buf[after..stop];
            let shape = match marker {
                b'=' => Shape::Verbatim(body[..3.min(body.len())].to_vec()),
                b'$' if is_key => Shape::Key(body.to_vec()),
                m => Shape::Scalar(m),
            };
            Some((shape, stop + 2))
        }
        b'*' | b'%' | b'~' | b'>' | b'|' => {
            let n: i64 = head.parse().expect("a count");
            if n < 0 {
                return Some((Shape::Scalar(b'_'), after)); // *-1
            }
            let per = if marker == b'%' || marker == b'|' { 2 } else { 1 };
            let mut items = Vec::new();
            let mut pos = after;
            for i in 0..n as usize * per {
                let key = per == 2 && i % 2 == 0;
                let (s, next) = parse_at(buf, pos, key)?;
                items.push(s);
                pos = next;
            }
            Some((Shape::Aggregate(marker, items), pos))
        }
        m => panic!("not RESP: marker {:?} in {:?}", m as char, String::from_utf8_lossy(buf)),
    }
}

/// A connection that reads whole frames with this file's parser.
struct Conn {
    raw: Raw,
    buf: Vec<u8>,
}

impl Conn {
    fn new(raw: Raw) -> Conn {
        Conn { raw, buf: Vec::new() }
    }

    fn send(&mut self, args: &[Vec<u8>]) {
        let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        self.raw.cmd(&args);
    }

    fn read(&mut self) -> Vec<u8> {
        loop {
            if let Some((_, n)) = parse(&self.buf) {
                return self.buf.drain(..n).collect();
            }
            let mut chunk = [0u8; 65536];
            let n = self.raw.stream.read(&mut chunk).expect("a reply in time");
            assert!(n > 0, "connection closed; so far: {:?}", String::from_utf8_lossy(&self.buf));
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    fn call(&mut self, args: &[Vec<u8>]) -> Vec<u8> {
        self.send(args);
        self.read()
    }
}

fn words(s: &str) -> Vec<Vec<u8>> {
    s.split(' ').map(|w| w.as_bytes().to_vec()).collect()
}

fn show(reply: &[u8]) -> String {
    let text: String = reply.escape_ascii().to_string();
    if text.len() > 800 {
        format!("{}… ({} bytes)", &text[..800], reply.len())
    } else {
        text
    }
}

/// The server's version, from INFO server.
fn version_of(raw: Raw) -> String {
    let mut c = Conn::new(raw);
    let info = c.call(&words("INFO server"));
    let text = String::from_utf8_lossy(&info);
    let line = text.lines().find_map(|l| l.strip_prefix("redis_version:"));
    line.expect("INFO server has redis_version").trim().to_string()
}

/// A single string reply (bulk or verbatim) with `Redis ver. <version>` made
/// `Redis ver. VERSION` and its length fixed: the version is the one thing
/// LOLWUT may say differently. Other replies are left as they are.
fn without_version(reply: &[u8], version: &str) -> Vec<u8> {
    let Some(header) = line_end(reply, 0) else { return reply.to_vec() };
    if !matches!(reply[0], b'$' | b'=') {
        return reply.to_vec();
    }
    let body = &reply[header + 2..reply.len() - 2];
    let needle = format!("Redis ver. {version}");
    let Some(at) = body.windows(needle.len()).position(|w| w == needle.as_bytes()) else {
        return reply.to_vec();
    };
    let mut new_body = body[..at].to_vec();
    new_body.extend_from_slice(b"Redis ver. VERSION");
    new_body.extend_from_slice(&body[at + needle.len()..]);
    let mut out = format!("{}{}\r\n", reply[0] as char, new_body.len()).into_bytes();
    out.extend_from_slice(&new_body);
    out.extend_from_slice(b"\r\n");
    out
}

struct Diff {
    lineno: usize,
    proto: u8,
    text: String,
    ours: Vec<u8>,
    theirs: Vec<u8>,
    how: &'static str,
}

/// Runs the corpus in protocol `proto` against both servers.
fn run_pass(
    proto: u8,
    lines: &[Line],
    ringdb: &Server,
    redis: &RedisServer,
    versions: &(String, String),
) -> Vec<Diff> {
    // A clean slate on both.
    for raw in [ringdb.raw(), redis.raw()] {
        let mut c = Conn::new(raw);
        for cmd in [
            "FLUSHALL",
            "SCRIPT FLUSH",
            "FUNCTION FLUSH",
            "CONFIG RESETSTAT",
            "SLOWLOG RESET",
            "LATENCY RESET",
        ] {
            let reply = c.call(&words(cmd));
            assert!(!reply.starts_with(b"-"), "{cmd}: {}", show(&reply));
        }
    }
    let mut ours = Conn::new(ringdb.raw());
    let mut theirs = Conn::new(redis.raw());
    let mut diffs = Vec::new();
    let mut compare = |lineno, text: &str, mode: Mode, a: Vec<u8>, b: Vec<u8>| {
        let (sa, sb) = (parse(&a).unwrap().0, parse(&b).unwrap().0);
        let how = match mode {
            Mode::Exact
                if a != b
                    && without_version(&a, &versions.0) != without_version(&b, &versions.1) =>
            {
                "bytes"
            }
            Mode::Shape if sa != sb => "shape",
            Mode::Setup if a.starts_with(b"-") != b.starts_with(b"-") => "error on one side",
            _ => return,
        };
        diffs.push(Diff { lineno, proto, text: text.to_string(), ours: a, theirs: b, how });
    };
    if proto == 3 {
        let hello = words("HELLO 3");
        let (a, b) = (ours.call(&hello), theirs.call(&hello));
        compare(0, "HELLO 3", Mode::Shape, a, b);
    }
    let mut subscribers: Vec<(Conn, Conn)> = Vec::new();
    for line in lines {
        if line.proto.is_some_and(|p| p != proto) {
            continue;
        }
        if line.mode == Mode::Sub {
            let (mut a, mut b) = (Conn::new(ringdb.raw()), Conn::new(redis.raw()));
            for c in [&mut a, &mut b] {
                if proto == 3 {
                    c.call(&words("HELLO 3"));
                }
                c.send(&line.args);
                for _ in 1..line.args.len() {
                    let reply = c.read();
                    assert!(!reply.starts_with(b"-"), "{}: {}", line.text, show(&reply));
                }
            }
            subscribers.push((a, b));
            continue;
        }
        let (a, b) = (ours.call(&line.args), theirs.call(&line.args));
        compare(line.lineno, &line.text, line.mode, a, b);
    }
    diffs
}

#[test]
fn replies_match_redis_in_both_protocols() {
    let (lines, mut allows) = parse_corpus(CORPUS);
    let Some(redis) = RedisServer::start_default() else { return };
    let ringdb = Server::start(2);
    let versions = (version_of(ringdb.raw()), version_of(redis.raw()));
    let mut unexpected = 0;
    for proto in [2u8, 3] {
        for d in run_pass(proto, &lines, &ringdb, &redis, &versions) {
            let allowed = allows
                .iter_mut()
                .find(|a| a.text == d.text && a.proto.is_none_or(|p| p == d.proto));
            let tag = match allowed {
                Some(a) => {
                    a.used = true;
                    "allowed"
                }
                None => {
                    unexpected += 1;
                    "DIFFERENCE"
                }
            };
            let (so, st) = (parse(&d.ours).unwrap().0, parse(&d.theirs).unwrap().0);
            eprintln!(
                "{tag} (line {}, RESP{}, {}): {}\n  ringdb: {}\n  redis:  {}",
                d.lineno,
                d.proto,
                d.how,
                d.text,
                show(&d.ours),
                show(&d.theirs)
            );
            if d.how == "shape" {
                eprintln!("  ringdb shape: {so}\n  redis shape:  {st}");
            }
        }
    }
    let stale: Vec<String> = allows
        .iter()
        .filter(|a| !a.used)
        .map(|a| format!("line {}: {}", a.lineno, a.text))
        .collect();
    assert!(stale.is_empty(), "allow-list entries that match no difference: {stale:?}");
    assert_eq!(unexpected, 0, "{unexpected} replies differ from redis-server's (see above)");
}

#[test]
fn shapes_parse_and_print() {
    let (s, n) = parse(b"%2\r\n+a\r\n:1\r\n$1\r\nb\r\n*2\r\n,1.5\r\n_\r\nrest").unwrap();
    assert_eq!(n, 32);
    assert_eq!(s.to_string(), "%2[\"a\",:,\"b\",*2[,,_]]");
    assert!(parse(b"*2\r\n:1\r\n").is_none(), "incomplete");
    assert_eq!(parse(b"$-1\r\n").unwrap().0, parse(b"_\r\n").unwrap().0);
    assert_eq!(parse(b"=7\r\ntxt:abc\r\n").unwrap().0.to_string(), "=txt");
}

#[test]
fn versions_are_masked_in_single_strings() {
    let a = without_version(b"=23\r\ntxt:art Redis ver. 7.2.4\n\r\n", "7.2.4");
    let b = without_version(b"$20\r\nart Redis ver. 7.0.15\n\r\n", "7.0.15");
    assert_eq!(a, b"=27\r\ntxt:art Redis ver. VERSION\n\r\n");
    assert_eq!(b, b"$23\r\nart Redis ver. VERSION\n\r\n");
    assert_eq!(without_version(b"*1\r\n:1\r\n", "7.0.15"), b"*1\r\n:1\r\n");
}

#[test]
fn corpus_lines_parse() {
    let (lines, _) = parse_corpus(
        "exact SET k \"a b\\r\\n\\x41\" # note\nshape@3 GET 'x y'\nexact SET h #tag\n",
    );
    assert_eq!(lines[0].args, [b"SET".to_vec(), b"k".to_vec(), b"a b\r\nA".to_vec()]);
    assert_eq!((lines[1].proto, lines[1].mode), (Some(3), Mode::Shape));
    assert_eq!(lines[1].args[1], b"x y");
    assert_eq!(lines[2].args[2], b"#tag");
}
