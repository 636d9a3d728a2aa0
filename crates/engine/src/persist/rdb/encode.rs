//! Writing RDB: lengths, strings (integer-encoded, LZF-compressed or plain,
//! as `rdbSaveRawString` chooses), every value type in the encoding Redis
//! 7.0 gives it, keys with their expiry and access data, and the file's
//! header and footer.

use super::{
    module_opcode, opcode, types, BLOOM_MODULE_ID, QUICKLIST_PACKED, QUICKLIST_PLAIN, RDB_VERSION,
};
use crate::keyspace::{Entry, StrValue, Value};
use crate::persist::crc64;
use crate::persist::encodings::{intset_blob, ListpackWriter};
use ringdb_types::lzf;
use ringdb_types::number::parse_i64;
use ringdb_types::pack::Item;
use ringdb_types::stream::StreamId;

/// Quicklist elements at least this long are saved as plain nodes, as
/// Redis 7.0 keeps them (its default `packed_threshold`, 1 GiB).
const PLAIN_NODE_THRESHOLD: usize = 1 << 30;

/// How values are written.
#[derive(Clone, Copy, Debug)]
pub struct Encoder {
    /// `rdbcompression`: LZF-compress strings longer than 20 bytes when it
    /// saves at least 4 bytes.
    pub compress: bool,
}

impl Default for Encoder {
    fn default() -> Self {
        Encoder { compress: true }
    }
}

/// The access data saved with a key (`RDB_OPCODE_IDLE` or `_FREQ`), as
/// `maxmemory-policy` asks: Redis saves idle times under LRU policies and
/// frequencies under LFU ones, and neither otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    None,
    /// Seconds idle.
    Idle(u64),
    /// The decayed LFU counter.
    Freq(u8),
}

/// `rdbSaveLen`.
pub fn put_len(out: &mut Vec<u8>, len: u64) {
    if len < 1 << 6 {
        out.push(len as u8);
    } else if len < 1 << 14 {
        out.extend_from_slice(&[0x40 | (len >> 8) as u8, len as u8]);
    } else if len <= u32::MAX as u64 {
        out.push(0x80);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&len.to_be_bytes());
    }
}

/// `rdbEncodeInteger`: an integer that fits 32 bits as a special string.
fn put_encoded_int(out: &mut Vec<u8>, v: i64) -> bool {
    if let Ok(b) = i8::try_from(v) {
        out.extend_from_slice(&[0xC0, b as u8]);
    } else if let Ok(h) = i16::try_from(v) {
        out.push(0xC1);
        out.extend_from_slice(&h.to_le_bytes());
    } else if let Ok(w) = i32::try_from(v) {
        out.push(0xC2);
        out.extend_from_slice(&w.to_le_bytes());
    } else {
        return false;
    }
    true
}

/// `rdbSaveLongLongAsStringObject`.
pub fn put_int_string(out: &mut Vec<u8>, v: i64) {
    if !put_encoded_int(out, v) {
        let text = v.to_string();
        put_len(out, text.len() as u64);
        out.extend_from_slice(text.as_bytes());
    }
}

/// A stream id as two lengths (ms, then seq).
fn put_id(out: &mut Vec<u8>, id: StreamId) {
    put_len(out, id.ms);
    put_len(out, id.seq);
}

/// A little-endian binary double (`rdbSaveBinaryDoubleValue`).
pub fn put_binary_double(out: &mut Vec<u8>, v: f64) {
    out.extend_from_slice(&v.to_le_bytes());
}

impl Encoder {
    /// `rdbSaveRawString`.
    pub fn string(&self, out: &mut Vec<u8>, s: &[u8]) {
        if s.len() <= 11 {
            if let Some(v) = parse_i64(s) {
                if put_encoded_int(out, v) {
                    return;
                }
            }
        }
        if self.compress && s.len() > 20 {
            if let Some(compressed) = lzf::compress(s, s.len() - 4) {
                out.push(0xC3);
                put_len(out, compressed.len() as u64);
                put_len(out, s.len() as u64);
                out.extend_from_slice(&compressed);
                return;
            }
        }
        put_len(out, s.len() as u64);
        out.extend_from_slice(s);
    }

    /// An item of a collection as an RDB string.
    fn item(&self, out: &mut Vec<u8>, item: &Item<'_>) {
        match *item {
            Item::Int(n) => put_int_string(out, n),
            _ => {
                let mut tmp = [0u8; 24];
                self.string(out, item.bytes(&mut tmp));
            }
        }
    }

    /// The value's bytes after its type byte (`rdbSaveObject`).
    pub fn value(&self, out: &mut Vec<u8>, value: &Value) {
        match value {
            Value::Str(StrValue::Int(n)) => put_int_string(out, *n),
            Value::Str(s) => {
                let mut tmp = [0u8; 20];
                self.string(out, s.as_bytes(&mut tmp));
            }
            Value::List(list) => self.list(out, list),
            Value::Set(set) => self.set(out, set),
            Value::ZSet(zset) => self.zset(out, zset),
            Value::Hash(hash) => self.hash(out, hash),
            Value::Bloom(filter) => self.bloom(out, filter),
            Value::Stream(stream) => self.stream(out, stream),
        }
    }

    /// A quicklist, node by node (`RDB_TYPE_LIST_QUICKLIST_2`). Elements too
    /// big for a packed node travel as plain nodes, as Redis keeps them.
    fn list(&self, out: &mut Vec<u8>, list: &ringdb_types::list::List) {
        let mut nodes: Vec<(u64, Vec<u8>)> = Vec::new();
        for pack in list.nodes() {
            let mut lp = ListpackWriter::new();
            for item in pack.iter() {
                if item.len() >= PLAIN_NODE_THRESHOLD {
                    if !lp.is_empty() {
                        nodes.push((QUICKLIST_PACKED, std::mem::take(&mut lp).finish()));
                    }
                    nodes.push((QUICKLIST_PLAIN, item.to_vec()));
                } else {
                    lp.push_item(&item);
                }
            }
            if !lp.is_empty() {
                nodes.push((QUICKLIST_PACKED, lp.finish()));
            }
        }
        put_len(out, nodes.len() as u64);
        for (container, blob) in nodes {
            put_len(out, container);
            self.string(out, &blob);
        }
    }

    fn set(&self, out: &mut Vec<u8>, set: &ringdb_types::set::Set) {
        if set.encoding() == "intset" {
            let values: Vec<i64> = set
                .iter()
                .map(|i| match i {
                    Item::Int(n) => n,
                    other => parse_i64(&other.to_vec()).unwrap_or(0),
                })
                .collect();
            self.string(out, &intset_blob(&values));
        } else {
            // RDB 10 has no listpack sets: both other encodings save as a
            // plain set.
            put_len(out, set.len() as u64);
            for member in set.iter() {
                self.item(out, &member);
            }
        }
    }

    fn zset(&self, out: &mut Vec<u8>, zset: &ringdb_types::zset::ZSet) {
        if zset.encoding() == "listpack" {
            let mut lp = ListpackWriter::new();
            for (member, score) in zset.iter() {
                lp.push_item(&member);
                lp.push_score(score);
            }
            self.string(out, &lp.finish());
        } else {
            // Greatest first, as Redis writes them (its loader then inserts
            // each at the head of the skiplist).
            put_len(out, zset.len() as u64);
            for (member, score) in zset.range_by_rank(0, -1, true) {
                self.item(out, &member);
                put_binary_double(out, score);
            }
        }
    }

    fn hash(&self, out: &mut Vec<u8>, hash: &ringdb_types::hash::Hash) {
        if hash.encoding() == "listpack" {
            let mut lp = ListpackWriter::new();
            for (field, value) in hash.iter() {
                lp.push_item(&field);
                lp.push_item(&value);
            }
            self.string(out, &lp.finish());
        } else {
            put_len(out, hash.len() as u64);
            for (field, value) in hash.iter() {
                self.item(out, &field);
                self.item(out, &value);
            }
        }
    }

    /// A stream as `RDB_TYPE_STREAM_LISTPACKS_2` (`rdbSaveObject`): its
    /// listpacks keyed by master id, its metadata, and each consumer group
    /// with its PEL and consumers.
    fn stream(&self, out: &mut Vec<u8>, stream: &ringdb_types::stream::Stream) {
        put_len(out, stream.node_count() as u64);
        for (master, items) in stream.listpacks() {
            self.string(out, &master.to_be_bytes());
            let mut lp = ListpackWriter::new();
            for item in &items {
                lp.push_item(item);
            }
            self.string(out, &lp.finish());
        }
        put_len(out, stream.len());
        put_id(out, stream.last_id());
        put_id(out, stream.first_id());
        put_id(out, stream.max_deleted_id());
        put_len(out, stream.entries_added());
        put_len(out, stream.groups_len() as u64);
        for (name, group) in stream.groups() {
            self.string(out, name);
            put_id(out, group.last_id);
            // -1 (unknown) is saved as a 64-bit length, as Redis's cast does.
            put_len(out, group.entries_read as u64);
            put_len(out, group.pending_len() as u64);
            for (id, nack) in group.pending_from(StreamId::MIN) {
                out.extend_from_slice(&id.to_be_bytes());
                out.extend_from_slice(&nack.delivery_time.to_le_bytes());
                put_len(out, nack.delivery_count);
            }
            put_len(out, group.consumers_len() as u64);
            for (name, consumer) in group.consumers() {
                self.string(out, name);
                out.extend_from_slice(&consumer.seen_time.to_le_bytes());
                put_len(out, consumer.pending_len() as u64);
                for id in consumer.pending_from(StreamId::MIN) {
                    out.extend_from_slice(&id.to_be_bytes());
                }
            }
        }
    }

    /// RedisBloom's `BFRdbSave` through the module API: every field behind
    /// its module opcode, then the end-of-value opcode.
    fn bloom(&self, out: &mut Vec<u8>, filter: &ringdb_types::bloom::BloomFilter) {
        let unsigned = |out: &mut Vec<u8>, v: u64| {
            put_len(out, module_opcode::UINT);
            put_len(out, v);
        };
        let double = |out: &mut Vec<u8>, v: f64| {
            put_len(out, module_opcode::DOUBLE);
            put_binary_double(out, v);
        };
        put_len(out, BLOOM_MODULE_ID);
        unsigned(out, filter.size());
        unsigned(out, filter.links().len() as u64);
        unsigned(out, filter.options() as u64);
        unsigned(out, filter.growth() as u64);
        for link in filter.links() {
            unsigned(out, link.entries);
            double(out, link.error);
            unsigned(out, link.hashes as u64);
            double(out, link.bpe);
            unsigned(out, link.bits);
            unsigned(out, link.n2() as u64);
            put_len(out, module_opcode::STRING);
            self.string(out, link.bit_array());
            unsigned(out, link.size);
        }
        put_len(out, module_opcode::EOF);
    }

    /// One key: expiry, access data, type, name and value
    /// (`rdbSaveKeyValuePair`).
    pub fn entry(&self, out: &mut Vec<u8>, entry: &Entry, access: Access) {
        if let Some(at) = entry.expire_at() {
            out.push(opcode::EXPIRETIME_MS);
            out.extend_from_slice(&(at as i64).to_le_bytes());
        }
        match access {
            Access::None => {}
            Access::Idle(seconds) => {
                out.push(opcode::IDLE);
                put_len(out, seconds);
            }
            Access::Freq(counter) => out.extend_from_slice(&[opcode::FREQ, counter]),
        }
        out.push(value_type(&entry.value));
        self.string(out, entry.key());
        self.value(out, &entry.value);
    }

    /// A DUMP payload: type, value, RDB version and CRC64, both little
    /// endian (`createDumpPayload`).
    pub fn dump(&self, value: &Value) -> Vec<u8> {
        let mut out = vec![value_type(value)];
        self.value(&mut out, value);
        out.extend_from_slice(&RDB_VERSION.to_le_bytes());
        let crc = crc64::crc64(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }
}

/// The RDB type a value is saved as.
pub fn value_type(value: &Value) -> u8 {
    match value {
        Value::Str(_) => types::STRING,
        Value::List(_) => types::LIST_QUICKLIST_2,
        Value::Set(s) if s.encoding() == "intset" => types::SET_INTSET,
        Value::Set(_) => types::SET,
        Value::ZSet(z) if z.encoding() == "listpack" => types::ZSET_LISTPACK,
        Value::ZSet(_) => types::ZSET_2,
        Value::Hash(h) if h.encoding() == "listpack" => types::HASH_LISTPACK,
        Value::Hash(_) => types::HASH,
        Value::Bloom(_) => types::MODULE_2,
        Value::Stream(_) => types::STREAM_LISTPACKS_2,
    }
}

/// The file's magic and aux fields (`rdbSaveInfoAuxFields`): version, word
/// size, creation time, memory in use, whether it is an AOF base, and
/// ringdb's own fields (ignored by Redis, as the AUX contract requires).
pub fn header(out: &mut Vec<u8>, aux: &[(&str, String)]) {
    out.extend_from_slice(format!("REDIS{RDB_VERSION:04}").as_bytes());
    let raw = Encoder { compress: false };
    for (key, value) in aux {
        out.push(opcode::AUX);
        raw.string(out, key.as_bytes());
        raw.string(out, value.as_bytes());
    }
}

/// One function library (`RDB_OPCODE_FUNCTION2`).
pub fn function(out: &mut Vec<u8>, encoder: &Encoder, code: &[u8]) {
    out.push(opcode::FUNCTION2);
    encoder.string(out, code);
}

/// `SELECTDB db`: the keys that follow belong to database `db`.
pub fn select_db(out: &mut Vec<u8>, db: usize) {
    out.push(opcode::SELECTDB);
    put_len(out, db as u64);
}

/// `RESIZEDB`: the hint of how many keys (and keys with a TTL) follow.
pub fn resize_db(out: &mut Vec<u8>, keys: usize, volatile: usize) {
    out.push(opcode::RESIZEDB);
    put_len(out, keys as u64);
    put_len(out, volatile as u64);
}

/// Appends the `EOF` opcode and the checksum. `crc_before` is the checksum
/// of every byte of the file before this footer (those already in `out`
/// included). With `checksum` false Redis writes zero, which loaders take as
/// "not checked".
pub fn footer(out: &mut Vec<u8>, crc_before: u64, checksum: bool) {
    out.push(opcode::EOF);
    let crc = if checksum { crc64::update(crc_before, &[opcode::EOF]) } else { 0 };
    out.extend_from_slice(&crc.to_le_bytes());
}
