//! Dataset signatures for DEBUG DIGEST and DEBUG DIGEST-VALUE, computed as
//! Redis computes them (debug.c), so that a ringdb dataset and a Redis one
//! with the same contents have the same signature.
//!
//! A key's signature mixes its name, its type, its value and whether it has
//! a TTL; a database's is the XOR of its keys' (so the order keys are visited
//! in, and the shard they live on, do not matter); the dataset's mixes each
//! non-empty database's number, in order, before XOR-ing its keys in.

use crate::keyspace::{Db, Entry, Value};
use ringdb_protocol::reply::format_double;
use ringdb_types::sha1::sha1;
use ringdb_types::stream::StreamId;

pub type Digest = [u8; 20];

fn xor_into(digest: &mut Digest, other: &Digest) {
    digest.iter_mut().zip(other).for_each(|(d, o)| *d ^= o);
}

/// Redis's `xorDigest`: digest ^= SHA1(data).
fn xor_data(digest: &mut Digest, data: &[u8]) {
    xor_into(digest, &sha1(data));
}

/// Redis's `mixDigest`: digest = SHA1(digest ^ SHA1(data)), which makes the
/// order of what is mixed in matter.
fn mix(digest: &mut Digest, data: &[u8]) {
    xor_data(digest, data);
    *digest = sha1(digest);
}

/// Redis's type codes (`OBJ_STRING`, …), part of every value's signature.
fn type_code(value: &Value) -> u32 {
    match value {
        Value::Str(_) => 0,
        Value::List(_) => 1,
        Value::Set(_) => 2,
        Value::ZSet(_) => 3,
        Value::Hash(_) => 4,
        Value::Bloom(_) => 5,
        Value::Stream(_) => 6,
    }
}

/// Redis's `xorObjectDigest`: the type, the contents, and a marker when the
/// key has a TTL (its time is not part of the signature).
fn mix_value(digest: &mut Digest, entry: &Entry) {
    mix(digest, &type_code(&entry.value).to_be_bytes());
    let mut tmp = [0u8; 24];
    match &entry.value {
        Value::Str(s) => {
            let mut tmp = [0u8; 20];
            mix(digest, s.as_bytes(&mut tmp));
        }
        // Lists mix their elements in order.
        Value::List(list) => {
            for item in list.iter() {
                mix(digest, item.bytes(&mut tmp));
            }
        }
        // Sets, hashes and sorted sets XOR in per-element signatures (the
        // SHA-1 of each, as Redis's `xorDigest(digest, eledigest, 20)`), so
        // their internal order does not matter.
        Value::Set(set) => {
            for item in set.iter() {
                xor_data(digest, item.bytes(&mut tmp));
            }
        }
        Value::Hash(hash) => {
            let mut tmp2 = [0u8; 24];
            for (field, value) in hash.iter() {
                let mut element = [0u8; 20];
                mix(&mut element, field.bytes(&mut tmp));
                mix(&mut element, value.bytes(&mut tmp2));
                xor_data(digest, &element);
            }
        }
        // RedisBloom gives its type no digest callback, so Redis mixes in
        // only the type code: the same is done here.
        Value::Bloom(_) => {}
        // Redis mixes each entry's `<ms>.<seq>` and then its fields and
        // values, in order (groups are not part of the signature).
        Value::Stream(stream) => {
            for entry in stream.range(StreamId::MIN, StreamId::MAX, false) {
                let id = entry.id();
                mix(digest, format!("{}.{}", id.ms, id.seq).as_bytes());
                let mut tmp2 = [0u8; 24];
                for (field, value) in entry.pairs() {
                    mix(digest, field.bytes(&mut tmp));
                    mix(digest, value.bytes(&mut tmp2));
                }
            }
        }
        Value::ZSet(zset) => {
            let mut score_text = Vec::with_capacity(32);
            for (member, score) in zset.iter() {
                let mut element = [0u8; 20];
                mix(&mut element, member.bytes(&mut tmp));
                score_text.clear();
                format_double(&mut score_text, score);
                mix(&mut element, &score_text);
                xor_data(digest, &element);
            }
        }
    }
    if entry.expire_at().is_some() {
        xor_data(digest, b"!!expire!!");
    }
}

/// DEBUG DIGEST-VALUE's signature of one key's value.
pub fn value_digest(entry: &Entry) -> Digest {
    let mut digest = [0u8; 20];
    mix_value(&mut digest, entry);
    digest
}

/// A key's contribution to the dataset signature.
pub fn entry_digest(entry: &Entry) -> Digest {
    let mut digest = [0u8; 20];
    mix(&mut digest, entry.key());
    mix_value(&mut digest, entry);
    digest
}

/// What every key of `db` adds to the dataset signature: the XOR of the
/// SHA-1s of their signatures (Redis's `xorDigest(final, digest, 20)`),
/// expired keys not yet reclaimed included, as Redis's walk of its dict
/// includes them.
pub fn db_digest(db: &Db) -> Digest {
    let mut digest = [0u8; 20];
    for (_, table) in db.slots() {
        for entry in table.iter() {
            xor_data(&mut digest, &entry_digest(entry));
        }
    }
    digest
}

/// The dataset signature from each database's key count and [`db_digest`]
/// (already combined over shards with [`combine`]), in database order.
pub fn dataset_digest(dbs: &[(usize, Digest)]) -> Digest {
    let mut digest = [0u8; 20];
    for (index, (keys, db)) in dbs.iter().enumerate() {
        if *keys == 0 {
            continue;
        }
        mix(&mut digest, &(index as u32).to_be_bytes());
        xor_into(&mut digest, db);
    }
    digest
}

/// Combines two shards' parts of one database.
pub fn combine(a: &mut (usize, Digest), b: &(usize, Digest)) {
    a.0 += b.0;
    xor_into(&mut a.1, &b.1);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::{Keyspace, StrValue};
    use ringdb_types::sha1::hex;

    fn entry(key: &str, value: &str) -> Entry {
        Entry::new(key.as_bytes(), Value::Str(StrValue::from_bytes(value.as_bytes())))
    }

    #[test]
    fn empty_dataset_is_all_zeros() {
        assert_eq!(hex(&dataset_digest(&[(0, [0; 20]), (0, [0; 20])])), "0".repeat(40));
    }

    #[test]
    fn order_and_shards_do_not_matter_but_contents_do() {
        let mut one = Keyspace::scratch(2);
        let mut other = Keyspace::scratch(2);
        for (k, v) in [("a", "1"), ("b", "hello"), ("c", "3")] {
            one.db_mut(0).insert(entry(k, v));
        }
        for (k, v) in [("c", "3"), ("a", "1")] {
            other.db_mut(0).insert(entry(k, v));
        }
        // "b" on another "shard".
        let mut split = Keyspace::scratch(2);
        split.db_mut(0).insert(entry("b", "hello"));
        let mut left = (other.db(0).len(), db_digest(other.db(0)));
        combine(&mut left, &(split.db(0).len(), db_digest(split.db(0))));
        let whole = dataset_digest(&[(one.db(0).len(), db_digest(one.db(0)))]);
        assert_eq!(dataset_digest(&[left]), whole);
        // The same data in another database signs differently.
        assert_ne!(dataset_digest(&[(0, [0; 20]), (3, db_digest(one.db(0)))]), whole);
        // So does a TTL, and so does another value.
        let with_ttl = entry("a", "1").with_expire(Some(1));
        assert_ne!(value_digest(&with_ttl), value_digest(&entry("a", "1")));
        assert_ne!(value_digest(&entry("a", "2")), value_digest(&entry("a", "1")));
        // An integer signs as its decimal text.
        assert_eq!(value_digest(&entry("x", "12")), value_digest(&entry("y", "12")));
    }
}
