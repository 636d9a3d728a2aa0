//! A shard's part of an RDB snapshot, and loading a shard from an RDB file.
//!
//! Saving in one go: a keyspace serialises all its keys ([`serialize`]) into
//! one buffer per database, and [`assemble`] makes one RDB file of the parts,
//! as Redis would write it: aux fields, function libraries, then per
//! database `SELECTDB`, `RESIZEDB` and every part's keys, then `EOF` and the
//! CRC64. The append-only log's RDB preamble uses this. The node's snapshot
//! files do not: they are streamed while the shards keep serving (see
//! [`super::live`] and the server's `persist` module).
//!
//! Loading: every shard reads the same file ([`load`]) and keeps the keys it
//! owns, so that shards load in parallel; values of other shards' keys are
//! skipped without being decoded.

use super::crc64;
use super::rdb::decode::LoadLimits;
use super::rdb::encode::{self, Access, Encoder};
use super::rdb::file::{RdbReader, Record};
use super::rdb::RdbError;
use crate::keyspace::{Entry, Keyspace};
use crate::shard::ShardState;

/// One database's keys on one shard, serialised.
#[derive(Debug, Default)]
pub struct DbPart {
    pub keys: usize,
    pub volatile: usize,
    pub bytes: Vec<u8>,
}

/// One shard's part of a snapshot.
#[derive(Debug, Default)]
pub struct ShardPart {
    /// Indexed by database.
    pub dbs: Vec<DbPart>,
    /// The shard's change counter when the part was taken (what a
    /// successful save subtracts, as Redis's `dirty_before_bgsave`).
    pub dirty: u64,
    /// The code of every function library (the same on every shard).
    pub functions: Vec<Vec<u8>>,
}

/// Serialises every live key of `keyspace` (keys already expired at
/// `now_ms` are left out: a loader would drop them anyway). Under an LFU
/// policy each key carries its access frequency, as Redis saves it.
pub fn serialize(
    keyspace: &Keyspace,
    state: &ShardState,
    now_ms: u64,
    encoder: Encoder,
) -> ShardPart {
    let lfu = state.settings.lfu;
    let dbs = keyspace
        .iter()
        .map(|db| {
            let mut part = DbPart::default();
            for (_, table) in db.slots() {
                for entry in table.iter().filter(|e| !e.is_expired(now_ms)) {
                    let access = if lfu {
                        Access::Freq(state.lfu_decayed(entry.access, now_ms).min(255) as u8)
                    } else {
                        Access::None
                    };
                    encoder.entry(&mut part.bytes, entry, access);
                    part.keys += 1;
                    part.volatile += usize::from(entry.expire_at().is_some());
                }
            }
            part
        })
        .collect();
    let functions = state
        .scripting
        .libraries()
        .map(|libs| libs.libs.values().map(|l| l.code.to_vec()).collect())
        .unwrap_or_default();
    ShardPart { dbs, dirty: state.funnel.dirty, functions }
}

/// The whole file: header with `aux` fields, the function libraries, each
/// database's parts, footer. `checksum` false writes a zero CRC
/// (`rdbchecksum no`).
pub fn assemble(
    aux: &[(&str, String)],
    parts: &[ShardPart],
    encoder: Encoder,
    checksum: bool,
) -> Vec<u8> {
    let total: usize = parts.iter().flat_map(|p| &p.dbs).map(|d| d.bytes.len()).sum();
    let mut out = Vec::with_capacity(total + 4096);
    encode::header(&mut out, aux);
    if let Some(first) = parts.first() {
        for code in &first.functions {
            encode::function(&mut out, &encoder, code);
        }
    }
    let databases = parts.iter().map(|p| p.dbs.len()).max().unwrap_or(0);
    for db in 0..databases {
        let of_db = || parts.iter().filter_map(move |p| p.dbs.get(db));
        let keys: usize = of_db().map(|d| d.keys).sum();
        if keys == 0 {
            continue;
        }
        encode::select_db(&mut out, db);
        encode::resize_db(&mut out, keys, of_db().map(|d| d.volatile).sum());
        for part in of_db() {
            out.extend_from_slice(&part.bytes);
        }
    }
    let crc = if checksum { crc64::crc64(&out) } else { 0 };
    encode::footer(&mut out, crc, checksum);
    out
}

/// What loading a file into one shard found.
#[derive(Debug, Default)]
pub struct LoadReport {
    /// Keys this shard loaded.
    pub keys: usize,
    /// Keys of this shard already expired, not loaded.
    pub expired: usize,
    pub version: u16,
    /// Where the file ended (after its checksum): an append-only log with
    /// an RDB preamble goes on with records from there.
    pub end: usize,
}

/// Loads the keys this shard owns from an RDB file into `keyspace`
/// (which should be empty), and the file's function libraries (every shard
/// has them all). `verify`: check the CRC64 (`rdbchecksum`).
/// Errors name the byte where the file went wrong.
pub fn load(
    data: &[u8],
    keyspace: &mut Keyspace,
    state: &mut ShardState,
    limits: &LoadLimits,
    now_ms: u64,
    verify: bool,
) -> Result<LoadReport, RdbError> {
    let mut loader = Loader::new(data, verify, false)?;
    loop {
        if let Some(report) =
            loader.step(keyspace, state, limits, now_ms, usize::MAX, &mut || {})?
        {
            return Ok(report);
        }
    }
}

/// A load done a piece at a time, so that a shard loading a big file at
/// start-up can serve between pieces (INFO `loading:1`, `-LOADING`), as
/// Redis processes events every `loading-process-events-interval-bytes`.
pub struct Loader<'a> {
    reader: RdbReader<'a>,
    report: LoadReport,
    total: usize,
    /// DEBUG RELOAD MERGE: a key or function library already there is
    /// replaced; without it, one is an error.
    merge: bool,
}

impl<'a> Loader<'a> {
    pub fn new(data: &'a [u8], verify: bool, merge: bool) -> Result<Self, RdbError> {
        let reader = RdbReader::new(data, verify)?;
        let report = LoadReport { version: reader.version, ..LoadReport::default() };
        Ok(Loader { reader, report, total: data.len(), merge })
    }

    /// Bytes of the file read so far.
    pub fn position(&self) -> usize {
        self.reader.position()
    }

    /// The file's size.
    pub fn total(&self) -> usize {
        self.total
    }

    /// Keys of this shard loaded so far.
    pub fn keys(&self) -> usize {
        self.report.keys
    }

    /// Loads records until `budget` more bytes of the file are read or the
    /// file ends; at the end, what the whole load found. `per_key` runs
    /// after every key loaded (`key-load-delay`).
    pub fn step(
        &mut self,
        keyspace: &mut Keyspace,
        state: &mut ShardState,
        limits: &LoadLimits,
        now_ms: u64,
        budget: usize,
        per_key: &mut dyn FnMut(),
    ) -> Result<Option<LoadReport>, RdbError> {
        let until = self.reader.position().saturating_add(budget);
        let (reader, report, merge) = (&mut self.reader, &mut self.report, self.merge);
        while reader.position() < until {
            let key = match reader.next_record()? {
                Record::End => {
                    report.end = reader.position();
                    return Ok(Some(std::mem::take(report)));
                }
                Record::Aux(..) => continue,
                Record::Function(code) => {
                    // As Redis, a library that does not load fails the whole load.
                    let code = bytes::Bytes::copy_from_slice(&code);
                    state.scripting.function_load(&code, merge).map_err(|e| RdbError {
                        offset: reader.position(),
                        reason: format!("a function library: {}", e.text()),
                    })?;
                    continue;
                }
                Record::Key(key) => key,
            };
            if key.db >= keyspace.db_count() {
                return Err(RdbError {
                    offset: key.value_offset,
                    reason: format!(
                        "FATAL: Data file was created with a Redis server configured to handle more than {} databases. Exiting",
                        keyspace.db_count()
                    ),
                });
            }
            if !keyspace.owns_key(&key.key) {
                continue;
            }
            let expire = key.expire_ms.map(|ms| ms.max(1) as u64);
            if expire.is_some_and(|at| at <= now_ms) {
                report.expired += 1;
                continue;
            }
            // Empty collections are skipped, as Redis skips them.
            let Some(value) = key.decode(limits)? else { continue };
            let mut entry = Entry::new(&key.key, value).with_expire(expire);
            entry.access = state
                .restored_access(now_ms, key.idle, key.freq)
                .unwrap_or_else(|| state.new_access(now_ms));
            if keyspace.db_mut(key.db).insert(entry).is_some() && !merge {
                return Err(RdbError {
                    offset: key.value_offset,
                    reason: format!(
                        "RDB has duplicated key '{}' in DB {}",
                        String::from_utf8_lossy(&key.key),
                        key.db
                    ),
                });
            }
            report.keys += 1;
            per_key();
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::{StrValue, Value};
    use crate::shard::{ShardSettings, SlotMap};

    fn put(ks: &mut Keyspace, db: usize, key: &str, value: &str, expire: Option<u64>) {
        if ks.owns_key(key.as_bytes()) {
            let e = Entry::new(key.as_bytes(), Value::Str(StrValue::from_bytes(value.as_bytes())));
            ks.db_mut(db).insert(e.with_expire(expire));
        }
    }

    /// The keyspaces of a two-shard node.
    fn two_shards() -> Vec<Keyspace> {
        let map = SlotMap::new(2);
        (0..2u16)
            .map(|i| {
                let (first, count) = map.slots_of(crate::ShardId(i));
                Keyspace::for_slots(16, first, count)
            })
            .collect()
    }

    #[test]
    fn shards_save_one_file_and_each_loads_its_own_keys() {
        let mut state = ShardState::recording(ShardSettings::default());
        let now = 1_000_000;
        let mut shards = two_shards();
        for ks in &mut shards {
            for i in 0..50 {
                put(ks, 0, &format!("k{i}"), &format!("v{i}"), None);
                put(ks, 3, &format!("t{i}"), "x", Some(now + 10_000));
            }
            put(ks, 0, "gone", "x", Some(now - 1));
        }
        let parts: Vec<ShardPart> =
            shards.iter().map(|ks| serialize(ks, &state, now, Encoder::default())).collect();
        assert!(parts.iter().all(|p| p.dbs[0].keys > 0), "keys on both shards");
        let file = assemble(&[("redis-ver", "7.0.15".into())], &parts, Encoder::default(), true);

        let mut loaded = two_shards();
        let mut total = 0;
        for ks in &mut loaded {
            let report = load(&file, ks, &mut state, &LoadLimits::default(), now, true).unwrap();
            total += report.keys;
        }
        assert_eq!(total, 100);
        for (before, after) in shards.iter().zip(&loaded) {
            for db in [0, 3] {
                assert_eq!(
                    before.db(db).len(),
                    after.db(db).len()
                        + usize::from(db == 0 && before.db(0).get(b"gone").is_some())
                );
            }
            assert!(after.db(0).get(b"gone").is_none());
        }
        let t0 = loaded.iter().find_map(|ks| ks.db(3).get(b"t0")).unwrap();
        assert_eq!(t0.expire_at(), Some(now + 10_000));
        // Later, the keys with a TTL have expired and are not loaded.
        let mut late = two_shards();
        let expired: usize = late
            .iter_mut()
            .map(|ks| {
                load(&file, ks, &mut state, &LoadLimits::default(), now + 20_000, true)
                    .unwrap()
                    .expired
            })
            .sum();
        assert_eq!(expired, 50);
        // A damaged file is refused with the offset.
        let mut bad = file.clone();
        let at = bad.len() - 20;
        bad[at] ^= 0xff;
        let err = load(&bad, &mut two_shards()[0], &mut state, &LoadLimits::default(), now, true)
            .unwrap_err();
        assert!(err.offset > 0, "{err}");
    }

    /// An RDB file of one keyspace.
    fn file_of(ks: &Keyspace, state: &ShardState) -> Vec<u8> {
        assemble(&[], &[serialize(ks, state, 0, Encoder::default())], Encoder::default(), true)
    }

    #[test]
    fn too_many_databases_is_fatal() {
        let mut state = ShardState::recording(ShardSettings::default());
        let mut ks = Keyspace::for_slots(16, 0, 16384);
        put(&mut ks, 12, "k", "v", None);
        let file = file_of(&ks, &state);
        let mut small = Keyspace::for_slots(4, 0, 16384);
        let err = load(&file, &mut small, &mut state, &LoadLimits::default(), 0, true).unwrap_err();
        assert!(err.reason.contains("more than 4 databases"), "{err}");
    }

    #[test]
    fn a_load_goes_in_steps_of_its_budget() {
        let mut state = ShardState::recording(ShardSettings::default());
        let mut ks = Keyspace::for_slots(1, 0, 16384);
        let keys = 10_000;
        for i in 0..keys {
            put(&mut ks, 0, &format!("k{i}"), "v", None);
        }
        let file = file_of(&ks, &state);
        let mut back = Keyspace::for_slots(1, 0, 16384);
        let mut loader = Loader::new(&file, true, false).unwrap();
        let (mut steps, mut per_key, mut last) = (0, 0, 0);
        let limits = LoadLimits::default();
        let report = loop {
            let step = loader.step(&mut back, &mut state, &limits, 0, 1024, &mut || per_key += 1);
            steps += 1;
            if let Some(report) = step.unwrap() {
                break report;
            }
            // Each step reads its budget (a record may end past it), no more.
            assert!(loader.position() >= last + 1024 && loader.position() < last + 1024 + 64);
            last = loader.position();
            assert_eq!(loader.keys(), back.db(0).len());
        };
        assert_eq!((report.keys, per_key, back.db(0).len()), (keys, keys, keys));
        assert!(steps >= file.len() / 1024, "{steps} steps for {} bytes", file.len());
    }
}
