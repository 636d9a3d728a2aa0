//! Command errors, carrying Redis's exact texts. A command error is a reply:
//! the connection stays open (only protocol errors close it).

use std::borrow::Cow;
use std::fmt;

/// An error reply. The text starts with the error code (`ERR`, `WRONGTYPE`,
/// `NOAUTH`, …) exactly as Redis sends it, without the leading `-`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CmdError(pub Cow<'static, str>);

pub type CmdResult = Result<(), CmdError>;

impl CmdError {
    pub const fn new(text: &'static str) -> Self {
        CmdError(Cow::Borrowed(text))
    }

    pub fn owned(text: String) -> Self {
        CmdError(Cow::Owned(text))
    }

    pub fn text(&self) -> &str {
        &self.0
    }

    /// The error code: the first word (`ERR`, `WRONGTYPE`, …), as counted in
    /// INFO errorstats.
    pub fn code(&self) -> &str {
        self.0.split(' ').next().unwrap_or("ERR")
    }

    pub fn wrong_args(name: &str) -> Self {
        CmdError::owned(format!("ERR wrong number of arguments for '{}' command", name))
    }

    pub fn unknown_subcommand(sub: &[u8], container: &str) -> Self {
        CmdError::owned(format!(
            "ERR unknown subcommand '{}'. Try {} HELP.",
            String::from_utf8_lossy(&sub[..sub.len().min(128)]),
            container.to_ascii_uppercase()
        ))
    }
}

impl fmt::Display for CmdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

pub const WRONG_TYPE: CmdError =
    CmdError::new("WRONGTYPE Operation against a key holding the wrong kind of value");
pub const NOT_INTEGER: CmdError = CmdError::new("ERR value is not an integer or out of range");
pub const NOT_FLOAT: CmdError = CmdError::new("ERR value is not a valid float");
pub const SYNTAX: CmdError = CmdError::new("ERR syntax error");
pub const NO_SUCH_KEY: CmdError = CmdError::new("ERR no such key");
pub const OVERFLOW: CmdError = CmdError::new("ERR increment or decrement would overflow");
pub const OUT_OF_RANGE: CmdError = CmdError::new("ERR index out of range");
pub const DB_INDEX_OUT_OF_RANGE: CmdError = CmdError::new("ERR DB index is out of range");
pub const NOAUTH: CmdError = CmdError::new("NOAUTH Authentication required.");
pub const STRING_TOO_LONG: CmdError =
    CmdError::new("ERR string exceeds maximum allowed size (proto-max-bulk-len)");
