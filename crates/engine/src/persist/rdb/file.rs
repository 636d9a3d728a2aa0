//! A whole RDB file as a stream of records: aux fields, function libraries,
//! and keys (with database, expiry and access data, and the value's bytes
//! still encoded, so that a loader may decode them on another thread), then
//! the end mark and the checksum.

use super::decode::{Decoder, LoadLimits};
use super::{module_type_name, opcode, types, RdbError, MAX_READ_VERSION};
use crate::persist::crc64;
use std::borrow::Cow;

/// One key as the file stores it.
#[derive(Debug)]
pub struct KeyRecord<'a> {
    pub db: usize,
    pub key: Cow<'a, [u8]>,
    /// Absolute expiry, Unix milliseconds.
    pub expire_ms: Option<i64>,
    /// `RDB_OPCODE_IDLE`: seconds since last access.
    pub idle: Option<u64>,
    /// `RDB_OPCODE_FREQ`: LFU counter.
    pub freq: Option<u8>,
    pub rdb_type: u8,
    /// The value, still encoded ([`KeyRecord::decode`]).
    pub value: &'a [u8],
    /// Where the value starts in the file (for error messages).
    pub value_offset: usize,
}

impl KeyRecord<'_> {
    /// The value; `Ok(None)` for an empty collection (skipped, as Redis
    /// skips them).
    pub fn decode(&self, limits: &LoadLimits) -> Result<Option<crate::keyspace::Value>, RdbError> {
        Decoder::at(self.value, self.value_offset, limits).value(self.rdb_type)
    }
}

/// A record of the file.
#[derive(Debug)]
pub enum Record<'a> {
    Aux(Cow<'a, [u8]>, Cow<'a, [u8]>),
    /// A function library's code.
    Function(Cow<'a, [u8]>),
    Key(KeyRecord<'a>),
    /// The end mark, checksum verified.
    End,
}

/// Reads a file's records in order.
pub struct RdbReader<'a> {
    data: &'a [u8],
    dec: Decoder<'a>,
    pub version: u16,
    db: usize,
    /// Checksum of `data[..crc_pos]`.
    crc: u64,
    crc_pos: usize,
    /// Verify the checksum at the end (`rdbchecksum`).
    verify: bool,
    done: bool,
}

/// Limits for skipping values: nothing is built.
static SKIP_LIMITS: std::sync::OnceLock<LoadLimits> = std::sync::OnceLock::new();

impl<'a> RdbReader<'a> {
    /// Checks the magic and version.
    pub fn new(data: &'a [u8], verify: bool) -> Result<Self, RdbError> {
        let limits = SKIP_LIMITS.get_or_init(LoadLimits::default);
        let bad = |reason: &str| RdbError { offset: 0, reason: reason.into() };
        if data.len() < 9 || &data[..5] != b"REDIS" {
            return Err(bad("Wrong signature trying to load DB from file"));
        }
        let version = std::str::from_utf8(&data[5..9])
            .ok()
            .and_then(|v| v.parse::<u16>().ok())
            .ok_or_else(|| bad("Wrong signature trying to load DB from file"))?;
        if !(1..=MAX_READ_VERSION).contains(&version) {
            return Err(bad(&format!("Can't handle RDB format version {version}")));
        }
        let mut dec = Decoder::new(data, limits);
        dec.take(9)?;
        Ok(RdbReader { data, dec, version, db: 0, crc: 0, crc_pos: 0, verify, done: false })
    }

    /// Bytes read so far.
    pub fn position(&self) -> usize {
        self.dec.pos()
    }

    fn fold_crc(&mut self) {
        let pos = self.dec.pos();
        self.crc = crc64::update(self.crc, &self.data[self.crc_pos..pos]);
        self.crc_pos = pos;
    }

    /// The next record, or an error naming the byte where reading failed.
    pub fn next_record(&mut self) -> Result<Record<'a>, RdbError> {
        if self.done {
            return Ok(Record::End);
        }
        // The checksum follows the reading, while the bytes are in cache.
        self.fold_crc();
        let mut expire_ms = None;
        let mut idle = None;
        let mut freq = None;
        loop {
            let t = self.dec.byte()?;
            match t {
                opcode::EXPIRETIME => {
                    let b = self.dec.take(4)?;
                    expire_ms = Some(i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64 * 1000);
                }
                opcode::EXPIRETIME_MS => {
                    let b = self.dec.take(8)?;
                    let mut a = [0u8; 8];
                    a.copy_from_slice(b);
                    expire_ms = Some(i64::from_le_bytes(a));
                }
                opcode::FREQ => freq = Some(self.dec.byte()?),
                opcode::IDLE => idle = Some(self.dec.length()?),
                opcode::EOF => return self.finish(),
                opcode::SELECTDB => {
                    let db = self.dec.length()?;
                    self.db = usize::try_from(db).unwrap_or(usize::MAX);
                }
                opcode::RESIZEDB => {
                    self.dec.length()?;
                    self.dec.length()?;
                }
                opcode::AUX => {
                    let key = self.dec.string()?;
                    let value = self.dec.string()?;
                    return Ok(Record::Aux(key, value));
                }
                opcode::MODULE_AUX => {
                    let id = self.dec.length()?;
                    return self.dec.err(format!(
                        "The RDB file contains AUX module data I can't load: no matching module '{}'",
                        module_type_name(id)
                    ));
                }
                opcode::FUNCTION2 => return Ok(Record::Function(self.dec.string()?)),
                opcode::FUNCTION => {
                    return self.dec.err("Pre-release function format not supported.");
                }
                t if types::is_object(t) => {
                    let key = self.dec.string()?;
                    let start = self.dec.pos();
                    self.dec.skip_value(t)?;
                    let value = &self.data[start..self.dec.pos()];
                    return Ok(Record::Key(KeyRecord {
                        db: self.db,
                        key,
                        expire_ms,
                        idle,
                        freq,
                        rdb_type: t,
                        value,
                        value_offset: start,
                    }));
                }
                other => return self.dec.err(format!("Unknown RDB encoding type {other}")),
            }
        }
    }

    /// After `EOF`: the checksum (RDB 5 and later), where zero means "not
    /// computed".
    fn finish(&mut self) -> Result<Record<'a>, RdbError> {
        self.done = true;
        if self.version < 5 {
            return Ok(Record::End);
        }
        self.fold_crc();
        let b = self.dec.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        let expected = u64::from_le_bytes(a);
        if self.verify && expected != 0 && expected != self.crc {
            return self
                .dec
                .err(format!("Wrong RDB checksum expected: ({expected:x}) got: ({:x})", self.crc));
        }
        Ok(Record::End)
    }
}
