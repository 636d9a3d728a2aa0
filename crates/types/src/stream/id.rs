//! Stream entry ids (`<ms>-<seq>`) and Redis's rules for reading them from
//! arguments (`streamGenericParseIDOrReply`): `-` and `+` for the smallest
//! and largest ids, a missing sequence filled in by the caller, `<ms>-*` for
//! XADD, `(` for exclusive range bounds, and numbers read as `string2ull`
//! reads them (which falls back to C's `strtoull`, so ` 5` and `05` are
//! accepted where `-5` is not).

use crate::number::parse_i64;
use std::fmt;

/// A stream entry id: milliseconds and a sequence number, ordered as the
/// pair.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

/// An argument that is not a valid id (Redis's "Invalid stream ID specified
/// as stream command argument").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvalidId;

/// Longest id argument Redis reads (its parse buffer is 128 bytes).
const MAX_ID_ARG: usize = 127;

impl StreamId {
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId { ms: u64::MAX, seq: u64::MAX };

    pub const fn new(ms: u64, seq: u64) -> Self {
        StreamId { ms, seq }
    }

    pub fn is_zero(self) -> bool {
        self == Self::MIN
    }

    /// The next id (`streamIncrID`); `None` past the largest.
    pub fn next(self) -> Option<StreamId> {
        match (self.ms, self.seq) {
            (u64::MAX, u64::MAX) => None,
            (ms, u64::MAX) => Some(StreamId::new(ms + 1, 0)),
            (ms, seq) => Some(StreamId::new(ms, seq + 1)),
        }
    }

    /// The previous id (`streamDecrID`); `None` before the smallest.
    pub fn prev(self) -> Option<StreamId> {
        match (self.ms, self.seq) {
            (0, 0) => None,
            (ms, 0) => Some(StreamId::new(ms - 1, u64::MAX)),
            (ms, seq) => Some(StreamId::new(ms, seq - 1)),
        }
    }

    /// The id as 16 big-endian bytes: the key Redis's radix tree sorts by.
    pub fn to_be_bytes(self) -> [u8; 16] {
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&self.ms.to_be_bytes());
        out[8..].copy_from_slice(&self.seq.to_be_bytes());
        out
    }

    /// The id from its 16 big-endian bytes (RDB node keys and PEL ids).
    pub fn from_be_bytes(raw: [u8; 16]) -> StreamId {
        let (mut ms, mut seq) = ([0u8; 8], [0u8; 8]);
        ms.copy_from_slice(&raw[..8]);
        seq.copy_from_slice(&raw[8..]);
        StreamId::new(u64::from_be_bytes(ms), u64::from_be_bytes(seq))
    }

    /// `<ms>-<seq>` into `buf` (at most 41 bytes), returned as a slice.
    pub fn format<'a>(&self, buf: &'a mut [u8; 41]) -> &'a [u8] {
        let mut n = 0;
        for part in [self.ms, self.seq] {
            if n > 0 {
                buf[n] = b'-';
                n += 1;
            }
            let mut digits = [0u8; 20];
            let mut i = digits.len();
            let mut v = part;
            loop {
                i -= 1;
                digits[i] = b'0' + (v % 10) as u8;
                v /= 10;
                if v == 0 {
                    break;
                }
            }
            let len = digits.len() - i;
            buf[n..n + len].copy_from_slice(&digits[i..]);
            n += len;
        }
        &buf[..n]
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// An id argument where `-` and `+` are allowed (XRANGE bounds, XGROUP
/// SETID); a missing sequence becomes `missing_seq`.
pub fn parse(arg: &[u8], missing_seq: u64) -> Result<StreamId, InvalidId> {
    parse_generic(arg, missing_seq, false, None)
}

/// An id argument where `-` and `+` are not ids (XDEL, XACK, XCLAIM, …).
pub fn parse_strict(arg: &[u8], missing_seq: u64) -> Result<StreamId, InvalidId> {
    parse_generic(arg, missing_seq, true, None)
}

/// XADD's explicit id: strict, and `<ms>-*` leaves the sequence to the
/// stream. Returns the id and whether the sequence was given.
pub fn parse_for_add(arg: &[u8]) -> Result<(StreamId, bool), InvalidId> {
    let mut seq_given = true;
    let id = parse_generic(arg, 0, true, Some(&mut seq_given))?;
    Ok((id, seq_given))
}

/// A range bound: `(` makes it exclusive (and the rest strict); returns the
/// id and whether it was exclusive (`streamParseIntervalIDOrReply`).
pub fn parse_interval(arg: &[u8], missing_seq: u64) -> Result<(StreamId, bool), InvalidId> {
    if arg.len() > 1 && arg[0] == b'(' {
        return Ok((parse_strict(&arg[1..], missing_seq)?, true));
    }
    Ok((parse(arg, missing_seq)?, false))
}

fn parse_generic(
    arg: &[u8],
    missing_seq: u64,
    strict: bool,
    seq_given: Option<&mut bool>,
) -> Result<StreamId, InvalidId> {
    if arg.len() > MAX_ID_ARG {
        return Err(InvalidId);
    }
    // Redis reads the argument as a C string: it ends at the first NUL.
    let arg = &arg[..arg.iter().position(|&b| b == 0).unwrap_or(arg.len())];
    match arg {
        b"-" | b"+" if strict => return Err(InvalidId),
        b"-" => return Ok(StreamId::MIN),
        b"+" => return Ok(StreamId::MAX),
        _ => {}
    }
    let (ms_part, seq_part) = match arg.iter().position(|&b| b == b'-') {
        Some(dash) => (&arg[..dash], Some(&arg[dash + 1..])),
        None => (arg, None),
    };
    let ms = string2ull(ms_part).ok_or(InvalidId)?;
    let seq = match (seq_part, seq_given) {
        (Some(b"*"), Some(given)) => {
            *given = false;
            0
        }
        (Some(part), _) => string2ull(part).ok_or(InvalidId)?,
        (None, _) => missing_seq,
    };
    Ok(StreamId { ms, seq })
}

/// Redis's `string2ull`: `string2ll` when that accepts the text (negative
/// values refused), otherwise C's `strtoull` with nothing left over.
pub fn string2ull(s: &[u8]) -> Option<u64> {
    if let Some(n) = parse_i64(s) {
        return u64::try_from(n).ok();
    }
    strtoull(s)
}

/// C's `strtoull(s, &end, 10)` accepting only when it consumed all of `s`
/// and did not overflow: leading white space, an optional sign (`-` negates
/// modulo 2^64), then at least one digit.
fn strtoull(s: &[u8]) -> Option<u64> {
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        i += 1;
    }
    let negative = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let digits = &s[i..];
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: u64 = 0;
    for &d in digits {
        v = v.checked_mul(10)?.checked_add((d - b'0') as u64)?;
    }
    Some(if negative { v.wrapping_neg() } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ms: u64, seq: u64) -> StreamId {
        StreamId::new(ms, seq)
    }

    #[test]
    fn successor_and_predecessor_wrap_at_the_ends() {
        assert_eq!(id(1, 2).next(), Some(id(1, 3)));
        assert_eq!(id(1, u64::MAX).next(), Some(id(2, 0)));
        assert_eq!(StreamId::MAX.next(), None);
        assert_eq!(id(2, 0).prev(), Some(id(1, u64::MAX)));
        assert_eq!(StreamId::MIN.prev(), None);
        assert!(id(1, 5) < id(2, 0) && id(2, 0) < id(2, 1));
    }

    #[test]
    fn formats_as_ms_dash_seq() {
        let mut buf = [0u8; 41];
        assert_eq!(StreamId::MAX.format(&mut buf), b"18446744073709551615-18446744073709551615");
        assert_eq!(id(0, 0).format(&mut buf), b"0-0");
        assert_eq!(id(1526919030474, 55).to_string(), "1526919030474-55");
        assert_eq!(id(1, 2).to_be_bytes()[7], 1);
        assert_eq!(id(1, 2).to_be_bytes()[15], 2);
    }

    #[test]
    fn parses_as_redis_does() {
        assert_eq!(parse(b"-", 0), Ok(StreamId::MIN));
        assert_eq!(parse(b"+", 0), Ok(StreamId::MAX));
        assert_eq!(parse_strict(b"-", 0), Err(InvalidId));
        assert_eq!(parse_strict(b"+", 0), Err(InvalidId));
        assert_eq!(parse(b"5", 7), Ok(id(5, 7)));
        assert_eq!(parse(b"5-3", 7), Ok(id(5, 3)));
        assert_eq!(parse(b"18446744073709551615-18446744073709551615", 0), Ok(StreamId::MAX));
        for bad in
            [&b"18446744073709551616"[..], b"5-", b"-5", b"5-3-1", b"abc", b"", b"5-x", b"1--5"]
        {
            assert_eq!(parse(bad, 0), Err(InvalidId), "{:?}", String::from_utf8_lossy(bad));
        }
        // strtoull's leniency, which Redis inherits.
        assert_eq!(parse(b"05-+3", 0), Ok(id(5, 3)));
        assert_eq!(parse(b" 5", 0), Ok(id(5, 0)));
        assert_eq!(parse(b"1--05", 0), Ok(id(1, 5u64.wrapping_neg())));
        // C strings end at NUL; Redis's buffer is 128 bytes.
        assert_eq!(parse(b"7\0junk", 0), Ok(id(7, 0)));
        assert_eq!(parse(&[b'1'; 128], 0), Err(InvalidId));
    }

    #[test]
    fn xadd_ids_and_interval_bounds() {
        assert_eq!(parse_for_add(b"5-*"), Ok((id(5, 0), false)));
        assert_eq!(parse_for_add(b"5-2"), Ok((id(5, 2), true)));
        assert_eq!(parse_for_add(b"5"), Ok((id(5, 0), true)));
        assert_eq!(parse_for_add(b"*"), Err(InvalidId));
        assert_eq!(parse(b"5-*", 0), Err(InvalidId), "only XADD knows <ms>-*");
        assert_eq!(parse_interval(b"(5-1", 0), Ok((id(5, 1), true)));
        assert_eq!(parse_interval(b"(5", u64::MAX), Ok((id(5, u64::MAX), true)));
        assert_eq!(parse_interval(b"(-", 0), Err(InvalidId));
        assert_eq!(parse_interval(b"(", 0), Err(InvalidId));
        assert_eq!(parse_interval(b"-", 0), Ok((StreamId::MIN, false)));
    }
}
