//! DUMP payloads: an RDB value, the RDB version and a CRC64 footer
//! (`createDumpPayload` / `verifyDumpPayload`).

use super::crc64;
use super::rdb::decode::{Decoder, LoadLimits};
use super::rdb::{types, RDB_VERSION};
use crate::keyspace::Value;

/// RESTORE's reply to a payload whose footer does not check out.
pub const BAD_PAYLOAD: &str = "ERR DUMP payload version or checksum are wrong";
/// RESTORE's reply to a payload that checks out but cannot be read.
pub const BAD_FORMAT: &str = "ERR Bad data format";

/// Why a payload was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PayloadError {
    /// Wrong version or checksum.
    Footer,
    /// The value itself is malformed (or empty).
    Format,
}

impl PayloadError {
    pub fn text(self) -> &'static str {
        match self {
            PayloadError::Footer => BAD_PAYLOAD,
            PayloadError::Format => BAD_FORMAT,
        }
    }
}

/// Checks the footer: at least 10 bytes, a version this server reads (Redis
/// refuses newer ones), and the checksum.
pub fn verify(payload: &[u8]) -> Result<&[u8], PayloadError> {
    if payload.len() < 10 {
        return Err(PayloadError::Footer);
    }
    let footer = payload.len() - 10;
    let version = u16::from_le_bytes([payload[footer], payload[footer + 1]]);
    if version > RDB_VERSION {
        return Err(PayloadError::Footer);
    }
    let mut crc = [0u8; 8];
    crc.copy_from_slice(&payload[footer + 2..]);
    if crc64::crc64(&payload[..footer + 2]) != u64::from_le_bytes(crc) {
        return Err(PayloadError::Footer);
    }
    Ok(&payload[..footer])
}

/// The value in a DUMP payload.
pub fn decode(payload: &[u8], limits: &LoadLimits) -> Result<Value, PayloadError> {
    let body = verify(payload)?;
    let mut dec = Decoder::new(body, limits);
    let t = dec.byte().map_err(|_| PayloadError::Format)?;
    if !types::is_object(t) {
        return Err(PayloadError::Format);
    }
    match dec.value(t) {
        Ok(Some(value)) => Ok(value),
        _ => Err(PayloadError::Format),
    }
}
