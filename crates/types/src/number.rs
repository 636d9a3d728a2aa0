//! Numbers as Redis reads and prints them.
//!
//! Redis is strict: an integer argument is exactly what `string2ll` accepts
//! (no `+`, no spaces, no leading zeros), a float is what `strtod` accepts with
//! nothing left over and no overflow. Matching these rules exactly is what
//! makes `ERR value is not an integer or out of range` appear in the same
//! places as in Redis.

/// Redis's `string2ll`: an optional `-` then digits, no leading zeros (except
/// `0` itself), no `+`, no whitespace, within `i64`.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (neg, digits) = match s[0] {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    if neg {
        if v > (i64::MAX as u64) + 1 {
            return None;
        }
        Some((v as i64).wrapping_neg())
    } else {
        i64::try_from(v).ok()
    }
}

/// Redis's `string2ull`-style reading of an unsigned 64-bit number (used for
/// SCAN cursors): digits only, within `u64`.
pub fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

/// A double as Redis's `getDoubleFromObject` reads it: what `strtod` accepts
/// (including `inf`, `-inf`, exponents, a leading `+`), with no leading space,
/// nothing left over, no NaN and no overflow or underflow to zero.
pub fn parse_f64(s: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(s).ok()?;
    if text.is_empty() || text.as_bytes()[0].is_ascii_whitespace() {
        return None;
    }
    let lower = text.to_ascii_lowercase();
    let body = lower.trim_start_matches(['+', '-']);
    if body.starts_with("nan") {
        return None;
    }
    let v: f64 = if body == "inf" || body == "infinity" {
        if lower.starts_with('-') {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        }
    } else {
        if !body.bytes().all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'+' | b'-')) {
            return None;
        }
        let v: f64 = lower.parse().ok()?;
        // strtod reports ERANGE for overflow (±HUGE_VAL) and underflow to 0.
        if v.is_infinite() {
            return None;
        }
        if v == 0.0 && mantissa_has_nonzero_digit(body) {
            return None;
        }
        v
    };
    Some(v)
}

fn mantissa_has_nonzero_digit(body: &str) -> bool {
    body.split('e').next().unwrap_or("").bytes().any(|c| matches!(c, b'1'..=b'9'))
}

/// The human form Redis gives INCRBYFLOAT / HINCRBYFLOAT results: plain
/// decimal notation, no exponent, no trailing zeros, shortest digits that read
/// back to the same double, but never more than the 17 decimals Redis's
/// `ld2string` prints (`%.17Lf`), so tiny values round as there (to `0`).
pub fn format_human_f64(v: f64) -> String {
    let shortest = format!("{v}");
    let s = match shortest.split_once('.') {
        Some((_, decimals)) if decimals.len() > 17 => format!("{v:.17}"),
        _ => shortest,
    };
    let s = if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.') } else { &s };
    if s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_as_string2ll() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-1"), Some(-1));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"+1",
            b" 1",
            b"1 ",
            b"01",
            b"-0",
            b"9223372036854775808",
            b"1.0",
            b"-",
            b"abc",
        ] {
            assert_eq!(parse_i64(bad), None, "{:?}", std::str::from_utf8(bad));
        }
    }

    #[test]
    fn floats_as_strtod() {
        assert_eq!(parse_f64(b"1.5"), Some(1.5));
        assert_eq!(parse_f64(b"+1.5"), Some(1.5));
        assert_eq!(parse_f64(b"1e3"), Some(1000.0));
        assert_eq!(parse_f64(b".5"), Some(0.5));
        assert_eq!(parse_f64(b"5."), Some(5.0));
        assert_eq!(parse_f64(b"inf"), Some(f64::INFINITY));
        assert_eq!(parse_f64(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"+inf"), Some(f64::INFINITY));
        for bad in [&b""[..], b" 1", b"1 ", b"nan", b"1e400", b"1e-400", b"abc", b"1.5x", b"0x10"] {
            assert_eq!(parse_f64(bad), None, "{:?}", std::str::from_utf8(bad));
        }
        assert_eq!(parse_f64(b"0"), Some(0.0));
        assert_eq!(parse_f64(b"0.000"), Some(0.0));
    }

    #[test]
    fn human_floats() {
        assert_eq!(format_human_f64(3.0), "3");
        assert_eq!(format_human_f64(10.5 + 0.1), "10.6");
        assert_eq!(format_human_f64(1.25), "1.25");
        assert_eq!(format_human_f64(-0.0), "0");
        assert_eq!(format_human_f64(17179869185.5), "17179869185.5");
        assert_eq!(format_human_f64(1e20), "100000000000000000000");
        assert_eq!(format_human_f64(5e-7), "0.0000005");
        assert_eq!(format_human_f64(1e-20), "0");
        assert_eq!(format_human_f64(-1e-20), "0");
        assert_eq!(format_human_f64(0.012345678901234567), "0.01234567890123457");
        assert_eq!(format_human_f64(0.30000000000000004), "0.30000000000000004");
    }
}
