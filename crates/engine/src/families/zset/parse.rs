//! Reading sorted-set arguments with Redis's rules: score and lex range
//! bounds (`zslParseRange`, `zslParseLexRange`), `LIMIT offset count`, and the
//! ranged integers of ZPOPMIN, ZMPOP, ZRANDMEMBER and ZINTERCARD with the
//! exact error text of each.

use crate::command::error::CmdError;
use ringdb_types::number::parse_i64;
use ringdb_types::zset::{LexBound, LexRange, ScoreRange};

pub const MIN_MAX_NOT_FLOAT: CmdError = CmdError::new("ERR min or max is not a float");
pub const MIN_MAX_NOT_LEX: CmdError = CmdError::new("ERR min or max not valid string range item");

/// C's `isspace`, which `strtod` skips before a number.
fn is_c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// A range bound's number, read as `zslParseRange` reads it: `strtod` must
/// consume the whole text and the result must not be NaN. Unlike score
/// arguments (`getDoubleFromObject`), leading whitespace is skipped, an
/// overflow reads as an infinity, and the empty text is 0 (strtod converts
/// nothing and stops at the terminating NUL, which Redis accepts). Hex
/// floats are refused, as [`ringdb_types::number::parse_f64`] refuses them.
pub fn range_number(arg: &[u8]) -> Option<f64> {
    if arg.is_empty() {
        return Some(0.0);
    }
    let start = arg.iter().position(|&c| !is_c_space(c))?;
    let text = std::str::from_utf8(&arg[start..]).ok()?.to_ascii_lowercase();
    let body = text.strip_prefix(['+', '-']).unwrap_or(&text);
    if body == "inf" || body == "infinity" {
        return Some(if text.starts_with('-') { f64::NEG_INFINITY } else { f64::INFINITY });
    }
    // Rust's reader also knows `nan` and `infinity`; only plain decimal
    // notation is left for it here.
    if !body.bytes().all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'+' | b'-')) {
        return None;
    }
    text.parse::<f64>().ok().filter(|v| !v.is_nan())
}

/// `min` and `max` of ZCOUNT, ZRANGEBYSCORE, … (`(` makes a bound exclusive).
pub fn score_range(min: &[u8], max: &[u8]) -> Result<ScoreRange, CmdError> {
    let bound = |arg: &[u8]| match arg.split_first() {
        Some((b'(', rest)) => range_number(rest).map(|v| (v, true)),
        _ => range_number(arg).map(|v| (v, false)),
    };
    match (bound(min), bound(max)) {
        (Some((lo, lo_ex)), Some((hi, hi_ex))) => Ok(ScoreRange::new(lo, lo_ex, hi, hi_ex)),
        _ => Err(MIN_MAX_NOT_FLOAT),
    }
}

/// `min` and `max` of ZLEXCOUNT, ZRANGEBYLEX, … (`-`, `+`, `[m`, `(m`).
pub fn lex_range(min: &[u8], max: &[u8]) -> Result<LexRange, CmdError> {
    match (LexBound::parse(min), LexBound::parse(max)) {
        (Some(min), Some(max)) => Ok(LexRange { min, max }),
        _ => Err(MIN_MAX_NOT_LEX),
    }
}

/// `LIMIT offset count` as the range commands apply it: a negative offset
/// skips everything (Redis walks past the end), a negative count means no
/// limit. Returns `(offset, limit)` for [`ringdb_types::zset::ZSet`]'s
/// windows; `None` when nothing can be returned.
pub fn window(offset: i64, count: i64) -> Option<(usize, Option<usize>)> {
    if offset < 0 || count == 0 {
        return None;
    }
    let offset = usize::try_from(offset).unwrap_or(usize::MAX);
    let limit = (count > 0).then(|| usize::try_from(count).unwrap_or(usize::MAX));
    Some((offset, limit))
}

/// Redis's `getRangeLongFromObjectOrReply` with a message: an integer in
/// `min..=max`, else `err` (also for text that is no integer).
pub fn int_in(arg: &[u8], min: i64, max: i64, err: CmdError) -> Result<i64, CmdError> {
    parse_i64(arg).filter(|n| (min..=max).contains(n)).ok_or(err)
}

/// The same without a message: Redis's two texts for the two failures.
pub fn int_in_range(arg: &[u8], min: i64, max: i64) -> Result<i64, CmdError> {
    let n = crate::command::args::int(arg)?;
    if !(min..=max).contains(&n) {
        return Err(CmdError::owned(format!(
            "ERR value is out of range, value must between {min} and {max}"
        )));
    }
    Ok(n)
}

/// ZPOPMIN/ZPOPMAX's count (`getPositiveLongFromObjectOrReply` without a
/// message, which uses one text for both failures).
pub fn positive_count(arg: &[u8]) -> Result<usize, CmdError> {
    let n = int_in(arg, 0, i64::MAX, CmdError::new("ERR value is out of range, must be positive"))?;
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_numbers_read_as_strtod() {
        assert_eq!(range_number(b"1.5"), Some(1.5));
        assert_eq!(range_number(b""), Some(0.0), "strtod stops at the NUL at once");
        assert_eq!(range_number(b"  2"), Some(2.0), "leading space is skipped");
        assert_eq!(range_number(b"1e400"), Some(f64::INFINITY), "overflow is HUGE_VAL");
        assert_eq!(range_number(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(range_number(b"+Infinity"), Some(f64::INFINITY));
        assert_eq!(range_number(b".5"), Some(0.5));
        for bad in [&b"nan"[..], b"-nan", b"abc", b"1 ", b"  ", b"1e", b"--1", b"inf2", b"1,5"] {
            assert_eq!(range_number(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn score_ranges_and_exclusive_bounds() {
        let r = score_range(b"(1", b"+inf").unwrap();
        assert_eq!(r, ScoreRange::new(1.0, true, f64::INFINITY, false));
        let r = score_range(b"(", b"(5").unwrap();
        assert_eq!(r, ScoreRange::new(0.0, true, 5.0, true));
        assert_eq!(score_range(b"str", b"1"), Err(MIN_MAX_NOT_FLOAT));
        assert_eq!(score_range(b"1", b"((1"), Err(MIN_MAX_NOT_FLOAT));
        assert_eq!(score_range(b"1", b"nan"), Err(MIN_MAX_NOT_FLOAT));
    }

    #[test]
    fn lex_ranges_need_a_prefix() {
        let r = lex_range(b"[a", b"(c").unwrap();
        assert_eq!(r.min, LexBound::Inclusive(b"a".to_vec()));
        assert_eq!(r.max, LexBound::Exclusive(b"c".to_vec()));
        assert!(lex_range(b"-", b"+").is_ok());
        assert_eq!(lex_range(b"a", b"+"), Err(MIN_MAX_NOT_LEX));
        assert_eq!(lex_range(b"-", b"+x"), Err(MIN_MAX_NOT_LEX));
        assert_eq!(lex_range(b"", b"+"), Err(MIN_MAX_NOT_LEX));
    }

    #[test]
    fn limit_windows_and_ranged_integers() {
        assert_eq!(window(0, -1), Some((0, None)));
        assert_eq!(window(2, 3), Some((2, Some(3))));
        assert_eq!(window(-1, 3), None);
        assert_eq!(window(0, 0), None);
        let err = CmdError::new("ERR count should be greater than 0");
        assert_eq!(int_in(b"0", 1, i64::MAX, err.clone()), Err(err.clone()));
        assert_eq!(int_in(b"x", 1, i64::MAX, err.clone()), Err(err));
        assert_eq!(
            int_in_range(b"-9223372036854775808", -i64::MAX, i64::MAX).unwrap_err().text(),
            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"
        );
        assert_eq!(
            int_in_range(b"x", 0, 1).unwrap_err().text(),
            crate::command::error::NOT_INTEGER.text()
        );
        assert_eq!(positive_count(b"3"), Ok(3));
        assert_eq!(
            positive_count(b"abc").unwrap_err().text(),
            "ERR value is out of range, must be positive"
        );
        assert!(positive_count(b"-1").is_err());
    }
}
