//! The reply writer: every byte ringdb sends to a client is written here.
//!
//! A [`ReplyWriter`] appends RESP to a buffer in the connection's protocol
//! version. Commands describe their reply in RESP3 terms (map, set, double,
//! null, push, verbatim) and the writer downgrades to RESP2 exactly as Redis
//! does: a map becomes a flat array of 2n items, a set an array, a double a
//! bulk string, a boolean an integer, a null `$-1` (or `*-1` for a null array).
//!
//! The writer is hand-made rather than built on `redis-protocol`'s frame
//! encoder because replies are streamed (an array header first, then each
//! element as it is produced, with no frame tree in between); the criterion
//! bench `reply` compares the two.

use crate::output::{Splices, SPLICE_MIN};
use bytes::Bytes;
use std::io::Write;

/// Protocol version of a connection (`HELLO 2|3`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Resp {
    #[default]
    V2,
    V3,
}

/// Appends replies to `buf` in protocol `resp`.
pub struct ReplyWriter<'a> {
    pub buf: &'a mut Vec<u8>,
    pub resp: Resp,
    /// Where large shared values go instead of being copied into `buf`
    /// (see [`crate::output`]); `None`: everything is copied.
    splices: Option<&'a mut Splices>,
}

impl<'a> ReplyWriter<'a> {
    pub fn new(buf: &'a mut Vec<u8>, resp: Resp) -> Self {
        ReplyWriter { buf, resp, splices: None }
    }

    /// A writer that splices large values into `splices` rather than copy
    /// them into `buf` (whoever sends `buf` sends both).
    pub fn spliced(buf: &'a mut Vec<u8>, splices: &'a mut Splices, resp: Resp) -> Self {
        ReplyWriter { buf, resp, splices: Some(splices) }
    }

    pub fn is_resp3(&self) -> bool {
        self.resp == Resp::V3
    }

    /// `+OK`
    pub fn ok(&mut self) {
        self.buf.extend_from_slice(b"+OK\r\n");
    }

    /// A status reply (`+text`). The text must not contain CR or LF.
    pub fn simple(&mut self, text: &str) {
        self.buf.push(b'+');
        self.buf.extend_from_slice(text.as_bytes());
        self.buf.extend_from_slice(b"\r\n");
    }

    /// An error reply. `text` starts with the error code (`ERR ...`,
    /// `WRONGTYPE ...`); newlines are replaced by spaces as Redis does, so a
    /// message can never break the framing.
    pub fn error(&mut self, text: &str) {
        self.buf.push(b'-');
        self.buf.extend(text.bytes().map(|c| if c == b'\r' || c == b'\n' { b' ' } else { c }));
        self.buf.extend_from_slice(b"\r\n");
    }

    pub fn int(&mut self, n: i64) {
        self.header(b':', n);
    }

    pub fn bulk(&mut self, data: &[u8]) {
        self.header(b'$', data.len() as i64);
        self.buf.extend_from_slice(data);
        self.buf.extend_from_slice(b"\r\n");
    }

    /// A bulk string of a shared value: a large one is spliced in by
    /// reference when the writer can (no copy of the value), anything else
    /// is copied as [`ReplyWriter::bulk`] does.
    pub fn bulk_shared(&mut self, data: &Bytes) {
        if data.len() < SPLICE_MIN || self.splices.is_none() {
            return self.bulk(data);
        }
        self.header(b'$', data.len() as i64);
        let at = self.buf.len();
        if let Some(splices) = self.splices.as_deref_mut() {
            splices.push(at, data.clone());
        }
        self.buf.extend_from_slice(b"\r\n");
    }

    /// A bulk string holding the decimal form of `n`.
    pub fn bulk_int(&mut self, n: i64) {
        let mut tmp = itoa_buf();
        let s = fmt_i64(&mut tmp, n);
        self.bulk(s);
    }

    /// The null bulk string (`$-1` / `_`).
    pub fn null(&mut self) {
        self.buf.extend_from_slice(if self.is_resp3() { b"_\r\n" } else { b"$-1\r\n" });
    }

    /// The null array (`*-1` / `_`).
    pub fn null_array(&mut self) {
        self.buf.extend_from_slice(if self.is_resp3() { b"_\r\n" } else { b"*-1\r\n" });
    }

    pub fn array(&mut self, len: usize) {
        self.header(b'*', len as i64);
    }

    /// A map of `len` pairs; in RESP2 a flat array of `2 * len` items.
    pub fn map(&mut self, len: usize) {
        if self.is_resp3() {
            self.header(b'%', len as i64);
        } else {
            self.header(b'*', 2 * len as i64);
        }
    }

    pub fn set(&mut self, len: usize) {
        self.header(if self.is_resp3() { b'~' } else { b'*' }, len as i64);
    }

    /// An out-of-band push (`>`); an array in RESP2.
    pub fn push(&mut self, len: usize) {
        self.header(if self.is_resp3() { b'>' } else { b'*' }, len as i64);
    }

    pub fn bool(&mut self, b: bool) {
        if self.is_resp3() {
            self.buf.extend_from_slice(if b { b"#t\r\n" } else { b"#f\r\n" });
        } else {
            self.int(b as i64);
        }
    }

    /// A double, formatted as Redis 7.0 does (`%.17g`, `inf`, `-inf`).
    pub fn double(&mut self, d: f64) {
        let start = self.buf.len();
        if self.is_resp3() {
            self.buf.push(b',');
            format_double(self.buf, d);
        } else {
            // Formatted in place, then its `$len` header rotated in front:
            // no scratch allocation for a reply this common.
            format_double(self.buf, d);
            let len = self.buf.len() - start;
            let mut tmp = itoa_buf();
            let digits = fmt_i64(&mut tmp, len as i64);
            self.buf.push(b'$');
            self.buf.extend_from_slice(digits);
            self.buf.extend_from_slice(b"\r\n");
            self.buf[start..].rotate_right(digits.len() + 3);
        }
        self.buf.extend_from_slice(b"\r\n");
    }

    /// Verbatim text (`=len\r\ntxt:...`); a bulk string in RESP2.
    pub fn verbatim(&mut self, format: &str, text: &[u8]) {
        if self.is_resp3() {
            self.header(b'=', (text.len() + 4) as i64);
            self.buf.extend_from_slice(format.as_bytes());
            self.buf.push(b':');
            self.buf.extend_from_slice(text);
            self.buf.extend_from_slice(b"\r\n");
        } else {
            self.bulk(text);
        }
    }

    /// Bytes already in RESP form (a reply produced elsewhere).
    pub fn raw(&mut self, resp: &[u8]) {
        self.buf.extend_from_slice(resp);
    }

    fn header(&mut self, kind: u8, n: i64) {
        let mut tmp = itoa_buf();
        let s = fmt_i64(&mut tmp, n);
        self.buf.push(kind);
        self.buf.extend_from_slice(s);
        self.buf.extend_from_slice(b"\r\n");
    }
}

fn itoa_buf() -> [u8; 20] {
    [0u8; 20]
}

/// Decimal form of `n` in `tmp` (no allocation).
pub fn fmt_i64(tmp: &mut [u8; 20], n: i64) -> &[u8] {
    let mut u = n.unsigned_abs();
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (u % 10) as u8;
        u /= 10;
        if u == 0 {
            break;
        }
    }
    if n < 0 {
        i -= 1;
        tmp[i] = b'-';
    }
    &tmp[i..]
}

/// Formats `d` like C's `printf("%.17g")`, Redis 7.0's format for doubles in
/// replies: 17 significant digits, trailing zeros removed, exponent form
/// when the exponent is < -4 or >= 17, `inf`/`-inf`/`nan`.
pub fn format_double(out: &mut Vec<u8>, d: f64) {
    if d.is_nan() {
        out.extend_from_slice(b"nan");
        return;
    }
    if d.is_infinite() {
        out.extend_from_slice(if d > 0.0 { b"inf" } else { b"-inf" });
        return;
    }
    format_g(out, d, 17);
}

/// C's `%.{precision}g` for a finite double.
pub fn format_g(out: &mut Vec<u8>, d: f64, precision: usize) {
    if d == 0.0 {
        out.extend_from_slice(if d.is_sign_negative() { b"-0" } else { b"0" });
        return;
    }
    // Whole numbers with at most `precision` digits print as themselves
    // (the common scores and counters); the exact formatting below costs
    // a big-number division for many values.
    // (Powers of ten up to 1e22 are exact doubles; `as i64` is exact below
    // 1e17.)
    let limit = if precision <= 17 { 10f64.powi(precision as i32) } else { 0.0 };
    if d.fract() == 0.0 && d.abs() < limit {
        let mut tmp = itoa_buf();
        out.extend_from_slice(fmt_i64(&mut tmp, d as i64));
        return;
    }
    // `{:.*e}` gives exactly `precision` significant digits, correctly rounded.
    let sci = format!("{:.*e}", precision - 1, d);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let negative = mantissa.starts_with('-');
    let digits: Vec<u8> = mantissa.bytes().filter(|c| c.is_ascii_digit()).collect();
    if negative {
        out.push(b'-');
    }
    if exp < -4 || exp >= precision as i32 {
        // d.ddddde[+-]XX with trailing zeros of the fraction removed.
        let frac_end = digits.iter().rposition(|&c| c != b'0').map_or(1, |p| p + 1).max(1);
        out.push(digits[0]);
        if frac_end > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..frac_end]);
        }
        let _ = write!(out, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    } else if exp >= 0 {
        let int_len = exp as usize + 1;
        out.extend_from_slice(&digits[..int_len]);
        let frac = &digits[int_len..];
        let frac_end = frac.iter().rposition(|&c| c != b'0').map_or(0, |p| p + 1);
        if frac_end > 0 {
            out.push(b'.');
            out.extend_from_slice(&frac[..frac_end]);
        }
    } else {
        out.extend_from_slice(b"0.");
        out.extend(std::iter::repeat_n(b'0', (-exp - 1) as usize));
        let end = digits.iter().rposition(|&c| c != b'0').map_or(0, |p| p + 1);
        out.extend_from_slice(&digits[..end]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g17(d: f64) -> String {
        let mut v = Vec::new();
        format_double(&mut v, d);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn doubles_as_printf_g17() {
        assert_eq!(g17(1.0), "1");
        assert_eq!(g17(1.1), "1.1000000000000001");
        assert_eq!(g17(-2.5), "-2.5");
        assert_eq!(g17(0.0001), "0.0001");
        assert_eq!(g17(0.00001), "1.0000000000000001e-05");
        assert_eq!(g17(1e17), "1e+17");
        assert_eq!(g17(12345678901234567.0), "12345678901234568");
        assert_eq!(g17(f64::INFINITY), "inf");
        assert_eq!(g17(f64::NEG_INFINITY), "-inf");
        assert_eq!(g17(3.0e-300), "3.0000000000000002e-300");
    }

    #[test]
    fn whole_numbers_take_the_short_path_with_the_same_text() {
        // The exact path's text for every whole number the short path takes.
        let exact = |d: f64, precision: usize| {
            let sci = format!("{:.*e}", precision - 1, d);
            let (mantissa, exp) = sci.split_once('e').unwrap();
            let exp: i32 = exp.parse().unwrap();
            assert!(exp < precision as i32);
            let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
            let sign = if d < 0.0 { "-" } else { "" };
            format!("{sign}{}", &digits[..exp as usize + 1])
        };
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut samples: Vec<f64> = vec![1.0, -1.0, 9.0, 10.0, 99999999999999999.0, 1e16, -1e16];
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let digits = (x % 18) as i32;
            let v = ((x >> 8) % 10u64.pow(digits as u32).max(1)) as f64;
            samples.push(if x & 1 == 1 { -v } else { v });
        }
        for d in samples.into_iter().filter(|d| *d != 0.0) {
            for precision in [6, 15, 17] {
                let mut v = Vec::new();
                format_g(&mut v, d, precision);
                let got = String::from_utf8(v).unwrap();
                if d.abs() < 10f64.powi(precision as i32) {
                    assert_eq!(got, exact(d, precision), "{d} at {precision}");
                } else {
                    assert!(got.contains('e'), "{d} at {precision}: {got}");
                }
            }
        }
        assert_eq!(g17(1e17), "1e+17");
        assert_eq!(g17(-123456789.0), "-123456789");
    }

    #[test]
    fn resp2_and_resp3_forms() {
        let mut b = Vec::new();
        let mut w = ReplyWriter::new(&mut b, Resp::V2);
        w.map(2);
        w.null();
        w.null_array();
        w.double(1.5);
        w.bool(true);
        w.int(-42);
        w.error("ERR bad\r\nthing");
        assert_eq!(b, b"*4\r\n$-1\r\n*-1\r\n$3\r\n1.5\r\n:1\r\n:-42\r\n-ERR bad  thing\r\n");
        let mut b = Vec::new();
        let mut w = ReplyWriter::new(&mut b, Resp::V3);
        w.map(2);
        w.null();
        w.double(1.5);
        w.bool(false);
        w.set(0);
        w.push(1);
        assert_eq!(b, b"%2\r\n_\r\n,1.5\r\n#f\r\n~0\r\n>1\r\n");
    }
}
