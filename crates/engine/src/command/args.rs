//! Reading command arguments: numbers with Redis's rules and errors, and
//! case-insensitive option words.

use super::error::{CmdError, NOT_FLOAT, NOT_INTEGER};
use ringdb_types::number::{parse_f64, parse_i64};

/// Whether `arg` is the option word `word` (ASCII, case-insensitive).
#[inline]
pub fn is(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

/// An integer argument (`ERR value is not an integer or out of range`).
pub fn int(arg: &[u8]) -> Result<i64, CmdError> {
    parse_i64(arg).ok_or(NOT_INTEGER)
}

/// An integer argument with a command-specific error.
pub fn int_or(arg: &[u8], err: CmdError) -> Result<i64, CmdError> {
    parse_i64(arg).ok_or(err)
}

/// A non-negative integer argument with a command-specific error for
/// negatives (`ERR value is out of range, must be positive`).
pub fn positive(arg: &[u8]) -> Result<i64, CmdError> {
    let n = int(arg)?;
    if n < 0 {
        return Err(CmdError::new("ERR value is out of range, must be positive"));
    }
    Ok(n)
}

/// A float argument (`ERR value is not a valid float`).
pub fn float(arg: &[u8]) -> Result<f64, CmdError> {
    parse_f64(arg).ok_or(NOT_FLOAT)
}

/// Lossy text of an argument for error messages.
pub fn text(arg: &[u8]) -> String {
    String::from_utf8_lossy(arg).into_owned()
}
