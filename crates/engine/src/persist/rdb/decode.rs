//! Reading RDB values into ringdb's structures.
//!
//! The input may come from a client (RESTORE), so every length is checked
//! against the bytes actually left before anything is allocated, LZF
//! expansion is bounded, and structures are validated as Redis's deep
//! sanitisation does (listpack and intset integrity, duplicate members,
//! NaN scores). Values get the encodings Redis would give them on load
//! under the current limits (a big listpack hash becomes a hashtable, a
//! small skiplist sorted set becomes a listpack, …).

use super::{
    module_opcode, module_type_name, types, RdbError, BLOOM_MODULE_ID, QUICKLIST_PACKED,
    QUICKLIST_PLAIN,
};
use crate::keyspace::{StrValue, Value};
use crate::persist::encodings::{intset_values, listpack_items, ziplist_items, zipmap_pairs};
use ringdb_types::bloom::{BloomFilter, SavedLink};
use ringdb_types::hash::Hash;
use ringdb_types::limits::Limits;
use ringdb_types::list::{End, List};
use ringdb_types::lzf;
use ringdb_types::number::parse_f64;
use ringdb_types::pack::Item;
use ringdb_types::set::Set;
use ringdb_types::stream::{SavedMeta, Stream, StreamId};
use ringdb_types::zset::{AddFlags, ZSet};
use std::borrow::Cow;
use std::collections::BTreeMap;

/// What loading may build.
#[derive(Clone, Debug)]
pub struct LoadLimits {
    /// The encoding thresholds of the collections built.
    pub collections: Limits,
    /// Largest Bloom filter (all bit arrays together).
    pub max_bloom_bytes: u64,
    /// Most bytes LZF may expand to while reading one value: a RESTORE
    /// payload is client input, and LZF expands up to 264-fold.
    pub max_expanded_bytes: usize,
}

impl Default for LoadLimits {
    fn default() -> Self {
        LoadLimits {
            collections: Limits::default(),
            max_bloom_bytes: 1 << 32,
            max_expanded_bytes: usize::MAX,
        }
    }
}

/// A cursor over RDB bytes.
pub struct Decoder<'a> {
    data: &'a [u8],
    pos: usize,
    /// Offset of `data` in the file, for error messages.
    base: usize,
    /// LZF output so far (see [`LoadLimits::max_expanded_bytes`]).
    expanded: usize,
    limits: &'a LoadLimits,
}

type R<T> = Result<T, RdbError>;

impl<'a> Decoder<'a> {
    pub fn new(data: &'a [u8], limits: &'a LoadLimits) -> Self {
        Decoder { data, pos: 0, base: 0, expanded: 0, limits }
    }

    /// A decoder over a piece of a file that starts at byte `base`.
    pub fn at(data: &'a [u8], base: usize, limits: &'a LoadLimits) -> Self {
        Decoder { data, pos: 0, base, expanded: 0, limits }
    }

    pub fn pos(&self) -> usize {
        self.pos
    }

    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    pub fn err<T>(&self, reason: impl Into<String>) -> R<T> {
        Err(RdbError { offset: self.base + self.pos, reason: reason.into() })
    }

    fn short<T>(&self) -> R<T> {
        self.err("Unexpected EOF reading RDB file")
    }

    pub fn byte(&mut self) -> R<u8> {
        match self.data.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                Ok(b)
            }
            None => self.short(),
        }
    }

    pub fn take(&mut self, n: u64) -> R<&'a [u8]> {
        if n > self.remaining() as u64 {
            return self.short();
        }
        let start = self.pos;
        self.pos += n as usize;
        Ok(&self.data[start..self.pos])
    }

    /// `rdbLoadLen`: a length, or (second field true) the code of a
    /// special string encoding.
    pub fn len_or_encoding(&mut self) -> R<(u64, bool)> {
        let first = self.byte()?;
        match first >> 6 {
            0 => Ok(((first & 0x3f) as u64, false)),
            1 => Ok((((first & 0x3f) as u64) << 8 | self.byte()? as u64, false)),
            3 => Ok(((first & 0x3f) as u64, true)),
            _ => match first {
                0x80 => {
                    let b = self.take(4)?;
                    Ok((u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as u64, false))
                }
                0x81 => {
                    let b = self.take(8)?;
                    let mut a = [0u8; 8];
                    a.copy_from_slice(b);
                    Ok((u64::from_be_bytes(a), false))
                }
                _ => self.err(format!("Unknown length encoding {} in rdbLoadLen()", first >> 6)),
            },
        }
    }

    /// A plain length.
    pub fn length(&mut self) -> R<u64> {
        match self.len_or_encoding()? {
            (n, false) => Ok(n),
            _ => self.err("Unexpected string encoding where a length was expected"),
        }
    }

    /// A count of things that each take at least `min_bytes` bytes: more
    /// than could fit in what is left is corrupt (and must not size an
    /// allocation).
    fn count(&mut self, min_bytes: u64) -> R<usize> {
        let n = self.length()?;
        if n.saturating_mul(min_bytes) > self.remaining() as u64 {
            return self.err(format!("count {n} larger than the data left"));
        }
        Ok(n as usize)
    }

    /// `rdbGenericLoadStringObject`: a string, integer-encoded,
    /// LZF-compressed or plain.
    pub fn string(&mut self) -> R<Cow<'a, [u8]>> {
        match self.len_or_encoding()? {
            (n, false) => Ok(Cow::Borrowed(self.take(n)?)),
            (0, true) => Ok(Cow::Owned((self.byte()? as i8).to_string().into_bytes())),
            (1, true) => {
                let b = self.take(2)?;
                Ok(Cow::Owned(i16::from_le_bytes([b[0], b[1]]).to_string().into_bytes()))
            }
            (2, true) => {
                let b = self.take(4)?;
                Ok(Cow::Owned(
                    i32::from_le_bytes([b[0], b[1], b[2], b[3]]).to_string().into_bytes(),
                ))
            }
            (3, true) => {
                let compressed_len = self.length()?;
                let len = self.length()?;
                let compressed = self.take(compressed_len)?;
                let budget = self.limits.max_expanded_bytes.saturating_sub(self.expanded);
                if len as usize > budget {
                    return self.err("compressed string expands beyond the allowed size");
                }
                match lzf::decompress(compressed, len as usize) {
                    Some(out) => {
                        self.expanded += out.len();
                        Ok(Cow::Owned(out))
                    }
                    None => self.err("Invalid LZF compressed string"),
                }
            }
            (other, _) => self.err(format!("Unknown RDB string encoding type {other}")),
        }
    }

    /// Skips a string without building it.
    pub fn skip_string(&mut self) -> R<()> {
        match self.len_or_encoding()? {
            (n, false) => self.take(n).map(drop),
            (0, true) => self.take(1).map(drop),
            (1, true) => self.take(2).map(drop),
            (2, true) => self.take(4).map(drop),
            (3, true) => {
                let compressed_len = self.length()?;
                self.length()?;
                self.take(compressed_len).map(drop)
            }
            (other, _) => self.err(format!("Unknown RDB string encoding type {other}")),
        }
    }

    pub fn binary_double(&mut self) -> R<f64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(f64::from_le_bytes(a))
    }

    /// The old text double of `RDB_TYPE_ZSET` (`rdbLoadDoubleValue`).
    fn text_double(&mut self) -> R<f64> {
        match self.byte()? {
            255 => Ok(f64::NEG_INFINITY),
            254 => Ok(f64::INFINITY),
            253 => Ok(f64::NAN),
            n => {
                let text = self.take(n as u64)?;
                match parse_f64(text) {
                    Some(v) => Ok(v),
                    None => self.err("Invalid double value"),
                }
            }
        }
    }

    /// Skips a value of type `t` (finding where the next record starts).
    pub fn skip_value(&mut self, t: u8) -> R<()> {
        match t {
            types::STRING
            | types::HASH_ZIPMAP
            | types::LIST_ZIPLIST
            | types::SET_INTSET
            | types::ZSET_ZIPLIST
            | types::HASH_ZIPLIST
            | types::HASH_LISTPACK
            | types::ZSET_LISTPACK
            | types::SET_LISTPACK => self.skip_string(),
            types::LIST | types::SET => {
                for _ in 0..self.count(1)? {
                    self.skip_string()?;
                }
                Ok(())
            }
            types::HASH => {
                for _ in 0..self.count(2)? {
                    self.skip_string()?;
                    self.skip_string()?;
                }
                Ok(())
            }
            types::ZSET | types::ZSET_2 => {
                for _ in 0..self.count(2)? {
                    self.skip_string()?;
                    if t == types::ZSET_2 {
                        self.take(8)?;
                    } else {
                        self.text_double()?;
                    }
                }
                Ok(())
            }
            types::LIST_QUICKLIST | types::LIST_QUICKLIST_2 => {
                for _ in 0..self.count(1)? {
                    if t == types::LIST_QUICKLIST_2 {
                        self.length()?;
                    }
                    self.skip_string()?;
                }
                Ok(())
            }
            types::MODULE_2 => self.skip_module(),
            types::STREAM_LISTPACKS | types::STREAM_LISTPACKS_2 | types::STREAM_LISTPACKS_3 => {
                self.stream(t).map(drop)
            }
            other => self.unsupported(other),
        }
    }

    fn unsupported<T>(&self, t: u8) -> R<T> {
        match t {
            types::MODULE => self.err("ringdb cannot load version 1 module values (RDB type 6)"),
            _ => self.err(format!("Unknown RDB encoding type {t}")),
        }
    }

    /// Skips a module value by its field opcodes.
    fn skip_module(&mut self) -> R<()> {
        self.length()?;
        loop {
            match self.length()? {
                module_opcode::EOF => return Ok(()),
                module_opcode::SINT | module_opcode::UINT => {
                    self.length()?;
                }
                module_opcode::FLOAT => {
                    self.take(4)?;
                }
                module_opcode::DOUBLE => {
                    self.take(8)?;
                }
                module_opcode::STRING => self.skip_string()?,
                other => return self.err(format!("Unknown module opcode {other}")),
            }
        }
    }

    /// Reads a value of type `t`. `Ok(None)` is an empty collection, which
    /// Redis also skips rather than fails on.
    pub fn value(&mut self, t: u8) -> R<Option<Value>> {
        let limits = &self.limits_ref().collections;
        match t {
            types::STRING => {
                let s = self.string()?;
                Ok(Some(Value::Str(StrValue::from_bytes(&s))))
            }
            types::LIST => {
                let n = self.count(1)?;
                let mut elements = Vec::with_capacity(capacity(n));
                for _ in 0..n {
                    elements.push(self.string()?);
                }
                Ok(list_of(elements.iter().map(|e| &e[..]), limits))
            }
            types::LIST_ZIPLIST => {
                let blob = self.string()?;
                let items = self.blob(ziplist_items(&blob))?;
                Ok(list_of_items(&items, limits))
            }
            types::LIST_QUICKLIST | types::LIST_QUICKLIST_2 => self.quicklist(t),
            types::SET => self.plain_set(),
            types::SET_INTSET => {
                let blob = self.string()?;
                let values = self.blob(intset_values(&blob))?;
                let mut set = Set::new_intset();
                for v in &values {
                    set.add(v.to_string().as_bytes(), limits);
                }
                Ok(Some(Value::Set(set)))
            }
            types::SET_LISTPACK => {
                let blob = self.string()?;
                let items = self.blob(listpack_items(&blob))?;
                self.set_of(&items)
            }
            types::ZSET | types::ZSET_2 => self.plain_zset(t),
            types::ZSET_ZIPLIST | types::ZSET_LISTPACK => {
                let blob = self.string()?;
                let items = if t == types::ZSET_LISTPACK {
                    self.blob(listpack_items(&blob))?
                } else {
                    self.blob(ziplist_items(&blob))?
                };
                self.zset_of_pairs(&items)
            }
            types::HASH => self.plain_hash(),
            types::HASH_ZIPLIST | types::HASH_LISTPACK => {
                let blob = self.string()?;
                let items = if t == types::HASH_LISTPACK {
                    self.blob(listpack_items(&blob))?
                } else {
                    self.blob(ziplist_items(&blob))?
                };
                if !items.len().is_multiple_of(2) {
                    return self.err("Hash listpack with an odd number of entries");
                }
                let mut tmp = ([0u8; 24], [0u8; 24]);
                let pairs: Vec<(Vec<u8>, Vec<u8>)> = items
                    .chunks(2)
                    .map(|p| (p[0].bytes(&mut tmp.0).to_vec(), p[1].bytes(&mut tmp.1).to_vec()))
                    .collect();
                self.hash_of(pairs.iter().map(|(f, v)| (&f[..], &v[..])), pairs.len())
            }
            types::HASH_ZIPMAP => {
                let blob = self.string()?;
                let pairs = self.blob(zipmap_pairs(&blob))?;
                self.hash_of(pairs.iter().copied(), pairs.len())
            }
            types::MODULE_2 => self.module(),
            types::STREAM_LISTPACKS | types::STREAM_LISTPACKS_2 | types::STREAM_LISTPACKS_3 => {
                self.stream(t)
            }
            other => self.unsupported(other),
        }
    }

    /// The limits, as a reference that does not hold `self` borrowed.
    fn limits_ref(&self) -> &'a LoadLimits {
        self.limits
    }

    fn blob<T>(&self, result: Result<T, &'static str>) -> R<T> {
        result.or_else(|reason| self.err(reason))
    }

    fn quicklist(&mut self, t: u8) -> R<Option<Value>> {
        let limits = &self.limits_ref().collections;
        let nodes = self.count(1)?;
        let mut list = List::new();
        for _ in 0..nodes {
            let container =
                if t == types::LIST_QUICKLIST_2 { self.length()? } else { QUICKLIST_PACKED };
            let blob = self.string()?;
            if blob.is_empty() {
                return self.err("Quicklist integrity check failed.");
            }
            match container {
                QUICKLIST_PLAIN => list.push(End::Tail, &[&blob], limits),
                QUICKLIST_PACKED => {
                    let items = if t == types::LIST_QUICKLIST_2 {
                        self.blob(listpack_items(&blob))?
                    } else {
                        self.blob(ziplist_items(&blob))?
                    };
                    push_items(&mut list, &items, limits);
                }
                _ => return self.err("Quicklist integrity check failed."),
            }
        }
        Ok((!list.is_empty()).then_some(Value::List(list)))
    }

    fn plain_set(&mut self) -> R<Option<Value>> {
        let limits = &self.limits_ref().collections;
        let n = self.count(1)?;
        if n == 0 {
            return Ok(None);
        }
        let mut set = if n > limits.set_max_intset_entries.min(1 << 30) {
            Set::new_table(capacity(n))
        } else {
            Set::new_intset()
        };
        for _ in 0..n {
            let member = self.string()?;
            if !set.add(&member, limits) {
                return self.err("Duplicate set members detected");
            }
        }
        Ok(Some(Value::Set(set)))
    }

    fn set_of(&self, items: &[Item<'_>]) -> R<Option<Value>> {
        let limits = &self.limits_ref().collections;
        let Some(first) = items.first() else { return Ok(None) };
        let mut set = Set::new_for(&first.to_vec(), items.len(), limits);
        for item in items {
            if !set.add(&item.to_vec(), limits) {
                return self.err("Duplicate set members detected");
            }
        }
        Ok(Some(Value::Set(set)))
    }

    fn plain_zset(&mut self, t: u8) -> R<Option<Value>> {
        let limits = &self.limits_ref().collections;
        let n = self.count(2)?;
        if n == 0 {
            return Ok(None);
        }
        let mut zset = ZSet::new_tree(capacity(n));
        for _ in 0..n {
            let member = self.string()?;
            let score =
                if t == types::ZSET_2 { self.binary_double()? } else { self.text_double()? };
            if score.is_nan() {
                return self.err("Zset with NAN score detected");
            }
            match zset.add(&member, score, AddFlags::default(), limits) {
                Ok(outcome) if outcome.added => {}
                _ => return self.err("Duplicate zset fields detected"),
            }
        }
        // Sorted sets are not saved in order, so Redis converts after
        // loading them whole.
        zset.convert_to_pack_if_needed(limits);
        Ok(Some(Value::ZSet(zset)))
    }

    fn zset_of_pairs(&self, items: &[Item<'_>]) -> R<Option<Value>> {
        let limits = &self.limits_ref().collections;
        if !items.len().is_multiple_of(2) {
            return self.err("Zset listpack with an odd number of entries");
        }
        if items.is_empty() {
            return Ok(None);
        }
        let n = items.len() / 2;
        let mut zset = if n > limits.zset_max_listpack_entries {
            ZSet::new_tree(capacity(n))
        } else {
            ZSet::new()
        };
        for pair in items.chunks(2) {
            let score = match pair[1] {
                Item::Int(v) => v as f64,
                Item::Float(f) => f,
                Item::Str(s) => match parse_f64(s) {
                    Some(v) => v,
                    None => return self.err("Zset listpack with an invalid score"),
                },
            };
            match zset.add(&pair[0].to_vec(), score, AddFlags::default(), limits) {
                Ok(outcome) if outcome.added => {}
                _ => return self.err("Duplicate zset fields detected"),
            }
        }
        Ok(Some(Value::ZSet(zset)))
    }

    fn plain_hash(&mut self) -> R<Option<Value>> {
        let n = self.count(2)?;
        let mut pairs = Vec::with_capacity(capacity(n));
        for _ in 0..n {
            let field = self.string()?;
            let value = self.string()?;
            pairs.push((field, value));
        }
        self.hash_of(pairs.iter().map(|(f, v)| (&f[..], &v[..])), n)
    }

    fn hash_of<'p>(
        &self,
        pairs: impl Iterator<Item = (&'p [u8], &'p [u8])>,
        n: usize,
    ) -> R<Option<Value>> {
        let limits = &self.limits_ref().collections;
        if n == 0 {
            return Ok(None);
        }
        // The hash converts itself once it passes the limits, as Redis's
        // loader converts it.
        let mut hash = Hash::new();
        for (field, value) in pairs {
            if !hash.set(field, value, limits) {
                return self.err("Duplicate hash fields detected");
            }
        }
        Ok(Some(Value::Hash(hash)))
    }

    /// A stream (`RDB_TYPE_STREAM_LISTPACKS`, `_2` or `_3`), as Redis's
    /// `rdbLoadObject` reads it. Empty streams exist, so this is never
    /// `None`.
    fn stream(&mut self, t: u8) -> R<Option<Value>> {
        let mut stream = Stream::new();
        // A node is a 16-byte key and a listpack of at least 7 bytes.
        for _ in 0..self.count(2 + 16 + 7)? {
            let key = self.string()?;
            let Ok(raw) = <[u8; 16]>::try_from(&key[..]) else {
                return self.err("Stream node key entry is not the size of a stream ID");
            };
            let blob = self.string()?;
            let items = self.blob(listpack_items(&blob))?;
            if items.is_empty() {
                return self.err("Empty listpack inside stream");
            }
            let pushed = stream.push_saved_node(StreamId::from_be_bytes(raw), &items);
            self.blob(pushed)?;
        }
        let length = self.length()?;
        let last_id = self.stream_id()?;
        let meta = if t == types::STREAM_LISTPACKS {
            SavedMeta {
                length,
                last_id,
                first_id: None,
                max_deleted_id: StreamId::MIN,
                entries_added: length,
            }
        } else {
            SavedMeta {
                length,
                last_id,
                first_id: Some(self.stream_id()?),
                max_deleted_id: self.stream_id()?,
                entries_added: self.length()?,
            }
        };
        let restored = stream.restore_meta(&meta);
        self.blob(restored)?;
        // A group takes at least a name, an id, a counter and two counts.
        for _ in 0..self.count(6)? {
            self.stream_group(t, &mut stream)?;
        }
        Ok(Some(Value::Stream(Box::new(stream))))
    }

    /// One consumer group: name, last id, read counter (type 19 on), the
    /// global PEL (ids, delivery times and counts), then the consumers with
    /// their seen times and the ids they own.
    fn stream_group(&mut self, t: u8, stream: &mut Stream) -> R<()> {
        let name = self.string()?;
        let last_id = self.stream_id()?;
        let entries_read = if t == types::STREAM_LISTPACKS {
            stream.estimate_distance(last_id)
        } else {
            // Saved from a signed counter: -1 comes back as u64::MAX.
            self.length()? as i64
        };
        if !stream.create_group(&name, last_id, entries_read) {
            return self
                .err(format!("Duplicated consumer group name {}", String::from_utf8_lossy(&name)));
        }
        // Delivery times and counts until their owners are read.
        let mut unowned: BTreeMap<StreamId, (i64, u64)> = BTreeMap::new();
        for _ in 0..self.count(16 + 8 + 1)? {
            let id = self.raw_stream_id()?;
            let delivery_time = self.millis()?;
            let delivery_count = self.length()?;
            if unowned.insert(id, (delivery_time, delivery_count)).is_some() {
                return self.err("Duplicated global PEL entry loading stream consumer group");
            }
        }
        let with_active_time = t == types::STREAM_LISTPACKS_3;
        for _ in 0..self.count(1 + 8 + 1)? {
            let consumer = self.string()?;
            let seen_time = self.millis()?;
            // Redis 7.2's estimate when the active time was not saved.
            let active_time = if with_active_time { self.millis()? } else { seen_time };
            let Some(group) = stream.group_mut(&name) else {
                return self.err("Stream consumer group vanished while loading");
            };
            if !group.restore_consumer(&consumer, seen_time, active_time) {
                return self.err("Duplicate stream consumer detected.");
            }
            for _ in 0..self.count(16)? {
                let id = self.raw_stream_id()?;
                let Some((time, count)) = unowned.remove(&id) else {
                    return self.err("Consumer entry not found in group global PEL");
                };
                if !group.restore_pending(id, &consumer, time, count) {
                    return self
                        .err("Duplicated consumer PEL entry loading a stream consumer group");
                }
            }
        }
        if !unowned.is_empty() {
            return self.err("Stream CG PEL entry without consumer");
        }
        Ok(())
    }

    /// An id saved as two lengths.
    fn stream_id(&mut self) -> R<StreamId> {
        Ok(StreamId::new(self.length()?, self.length()?))
    }

    /// An id saved raw, 16 big-endian bytes.
    fn raw_stream_id(&mut self) -> R<StreamId> {
        let mut raw = [0u8; 16];
        raw.copy_from_slice(self.take(16)?);
        Ok(StreamId::from_be_bytes(raw))
    }

    /// `rdbLoadMillisecondTime`: a little-endian 64-bit time.
    fn millis(&mut self) -> R<i64> {
        let mut raw = [0u8; 8];
        raw.copy_from_slice(self.take(8)?);
        Ok(i64::from_le_bytes(raw))
    }

    /// A module value: only RedisBloom's Bloom filter type is known.
    fn module(&mut self) -> R<Option<Value>> {
        let id = self.length()?;
        if id >> 10 != BLOOM_MODULE_ID >> 10 {
            return self.err(format!(
                "The RDB file contains module data I can't load: no matching module type '{}'",
                module_type_name(id)
            ));
        }
        let encver = id & 1023;
        if !(2..=super::BLOOM_ENCVER).contains(&encver) {
            return self.err(format!("Unsupported MBbloom-- encoding version {encver}"));
        }
        let size = self.module_uint()?;
        let nfilters = self.module_uint()?;
        let options = self.module_uint()?;
        let growth = if encver >= 4 { self.module_uint()? } else { 2 };
        // Each link takes at least 16 bytes: refuse counts the data cannot hold.
        if nfilters == 0
            || nfilters >= 1000
            || nfilters.saturating_mul(16) > self.remaining() as u64
        {
            return self.err("Bloom filter with an invalid number of links");
        }
        let mut links = Vec::with_capacity(nfilters as usize);
        let mut total_bytes = 0u64;
        for _ in 0..nfilters {
            let entries = self.module_uint()?;
            let error = self.module_double()?;
            let hashes = self.module_uint()?;
            let bpe = self.module_double()?;
            let bits = self.module_uint()?;
            let n2 = self.module_uint()?;
            if self.length()? != module_opcode::STRING {
                return self.err("Bloom filter: a bit array was expected");
            }
            let bit_array = self.string()?.into_owned();
            total_bytes = total_bytes.saturating_add(bit_array.len() as u64);
            if total_bytes > self.limits.max_bloom_bytes {
                return self.err("Bloom filter larger than allowed");
            }
            let size = self.module_uint()?;
            links.push(SavedLink {
                entries,
                error,
                hashes: u32::try_from(hashes).unwrap_or(u32::MAX),
                bpe,
                bits,
                n2: u8::try_from(n2).unwrap_or(u8::MAX),
                bit_array,
                size,
            });
        }
        if self.length()? != module_opcode::EOF {
            return self.err(
                "The RDB file contains module data for the module 'bf' that is not terminated by the proper module value EOF marker",
            );
        }
        let options = u32::try_from(options).unwrap_or(u32::MAX);
        let growth = u32::try_from(growth).unwrap_or(u32::MAX);
        match BloomFilter::from_saved(size, options, growth, links) {
            Some(filter) => Ok(Some(Value::Bloom(Box::new(filter)))),
            None => self.err("Bloom filter with inconsistent fields"),
        }
    }

    fn module_uint(&mut self) -> R<u64> {
        if self.length()? != module_opcode::UINT {
            return self.err("Error loading an unsigned integer from a module value");
        }
        self.length()
    }

    fn module_double(&mut self) -> R<f64> {
        if self.length()? != module_opcode::DOUBLE {
            return self.err("Error loading a double from a module value");
        }
        self.binary_double()
    }
}

/// A capacity hint from a count read from the data: counts are checked
/// against the bytes left, but one byte per element still allows a hint
/// far beyond what the elements will take, so hints are capped (structures
/// grow past them as elements arrive).
fn capacity(n: usize) -> usize {
    n.min(1 << 16)
}

fn push_items(list: &mut List, items: &[Item<'_>], limits: &Limits) {
    let owned: Vec<Vec<u8>> = items.iter().map(Item::to_vec).collect();
    let refs: Vec<&[u8]> = owned.iter().map(|v| &v[..]).collect();
    list.push(End::Tail, &refs, limits);
}

fn list_of<'e>(elements: impl Iterator<Item = &'e [u8]>, limits: &Limits) -> Option<Value> {
    let refs: Vec<&[u8]> = elements.collect();
    if refs.is_empty() {
        return None;
    }
    let mut list = List::new();
    list.push(End::Tail, &refs, limits);
    Some(Value::List(list))
}

fn list_of_items(items: &[Item<'_>], limits: &Limits) -> Option<Value> {
    if items.is_empty() {
        return None;
    }
    let mut list = List::new();
    push_items(&mut list, items, limits);
    Some(Value::List(list))
}
