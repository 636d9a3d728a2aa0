//! The values a key can hold. Strings keep Redis's three encodings because
//! `OBJECT ENCODING` reports them and clients (and Redis's tests) rely on
//! them: `int` for strings that are canonical 64-bit integers, `embstr` for
//! short strings never modified in place, `raw` for the rest. Collections
//! (`ringdb_types`' lists, hashes, sets, sorted sets) report their own
//! encodings. A HyperLogLog is a string, as in Redis. Bloom filters are a
//! type of their own, as RedisBloom's module type `MBbloom--` is. A long
//! string ([`SHARED_MIN`] bytes and more) is held as shared [`Bytes`], so a
//! GET hands the socket a reference instead of a copy; the first in-place
//! change turns it into an owned buffer (copy-on-write). Streams
//! are boxed ([`ringdb_types::stream::Stream`]). Every variant is at most
//! 16 bytes, so a `Value` is 24.

use bytes::Bytes;
use ringdb_types::bloom::BloomFilter;
use ringdb_types::hash::Hash;
use ringdb_types::list::List;
use ringdb_types::number::parse_i64;
use ringdb_types::set::Set;
use ringdb_types::stream::Stream;
use ringdb_types::zset::ZSet;
use ringdb_types::SmallBytes;

/// Longest string Redis stores as `embstr` (`OBJ_ENCODING_EMBSTR_SIZE_LIMIT`).
pub const EMBSTR_MAX: usize = 44;

/// Length from which a string is stored shared: the smallest value the
/// reply writer splices in by reference instead of copying (shorter values
/// would be copied into the reply anyway, so sharing them buys nothing).
pub const SHARED_MIN: usize = ringdb_protocol::SPLICE_MIN;

#[derive(Clone, Debug)]
pub enum Value {
    Str(StrValue),
    List(List),
    Hash(Hash),
    Set(Set),
    ZSet(ZSet),
    /// Boxed: the filter's header is larger than a `Value` may be.
    Bloom(Box<BloomFilter>),
    /// Boxed: a stream's header (lengths, ids, trees) is larger too.
    Stream(Box<Stream>),
}

/// A type a [`Value`] may hold, picked out of it for a change
/// ([`crate::command::KeyspaceView::write_as`] with [`typed`]).
pub trait Typed {
    fn of(value: &mut Value) -> Option<&mut Self>;
}

macro_rules! typed {
    ($t:ty => $variant:ident, $($unbox:tt)*) => {
        impl Typed for $t {
            fn of(value: &mut Value) -> Option<&mut Self> {
                match value {
                    Value::$variant(v) => Some($($unbox)* v),
                    _ => None,
                }
            }
        }
    };
}

typed!(StrValue => Str,);
typed!(List => List,);
typed!(Hash => Hash,);
typed!(Set => Set,);
typed!(ZSet => ZSet,);
typed!(BloomFilter => Bloom, &mut **);
typed!(Stream => Stream, &mut **);

/// The value of `entry` as a `T`, if it holds one.
pub fn typed<T: Typed>(entry: &mut super::Entry) -> Option<&mut T> {
    T::of(&mut entry.value)
}

/// The name TYPE reports for Bloom filters (RedisBloom's module type name).
pub const BLOOM_TYPE_NAME: &str = "MBbloom--";

#[derive(Clone, Debug)]
pub enum StrValue {
    /// A canonical decimal integer (`int`).
    Int(i64),
    /// A string as stored by SET, immutable in place: inline up to 22
    /// bytes, else in one heap block of its exact size. Reported as
    /// `embstr` up to 44 bytes and `raw` beyond, as Redis's encodings are.
    Emb(SmallBytes),
    /// A string that was modified in place (`raw`). Boxed so that a `Value`
    /// stays 24 bytes; amortised growth for APPEND.
    Raw(Box<Vec<u8>>),
    /// A long string as stored by SET (and loads): immutable and shared with
    /// the replies still sending it. Reported as `raw`, as Redis would.
    /// Boxed: `Bytes` is 32 bytes.
    Shared(Box<Bytes>),
}

impl Value {
    /// The name TYPE reports.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::List(_) => "list",
            Value::Hash(_) => "hash",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
            Value::Bloom(_) => BLOOM_TYPE_NAME,
            Value::Stream(_) => "stream",
        }
    }

    /// The name OBJECT ENCODING reports.
    pub fn encoding(&self) -> &'static str {
        match self {
            Value::Str(StrValue::Int(_)) => "int",
            Value::Str(StrValue::Emb(s)) if s.len() <= EMBSTR_MAX => "embstr",
            Value::Str(StrValue::Emb(_) | StrValue::Raw(_) | StrValue::Shared(_)) => "raw",
            Value::List(l) => l.encoding(),
            Value::Hash(h) => h.encoding(),
            Value::Set(s) => s.encoding(),
            Value::ZSet(z) => z.encoding(),
            // Redis reports module values as `raw`.
            Value::Bloom(_) => "raw",
            Value::Stream(_) => "stream",
        }
    }

    /// Number of elements of a collection (1 for a string), for the lazy-free
    /// and statistics decisions that depend on size.
    pub fn len(&self) -> usize {
        match self {
            Value::Str(_) => 1,
            Value::List(l) => l.len(),
            Value::Hash(h) => h.len(),
            Value::Set(s) => s.len(),
            Value::ZSet(z) => z.len(),
            Value::Bloom(_) => 1,
            // Redis's lazy-free effort for a stream is its node count.
            Value::Stream(s) => s.node_count().max(1),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether a copy costs about as little as the command that changes the
    /// value (a script's journal copies a value before its run changes it):
    /// strings, and collections in their compact encodings (one buffer),
    /// up to 512 bytes. O(1).
    pub fn cheap_to_copy(&self) -> bool {
        const BYTES: usize = 512;
        match self {
            Value::Str(StrValue::Int(_) | StrValue::Emb(_)) => true,
            Value::Str(StrValue::Raw(v)) => v.len() <= BYTES,
            Value::Str(StrValue::Shared(b)) => b.len() <= BYTES,
            Value::List(List::Pack(p)) => p.byte_len() <= BYTES,
            Value::Hash(Hash::Pack(p)) => p.byte_len() <= BYTES,
            Value::ZSet(ZSet::Pack(p)) => p.byte_len() <= BYTES,
            Value::Set(Set::Small(b)) => b.len() <= BYTES,
            _ => false,
        }
    }

    /// Approximate heap bytes owned by the value (for INFO and MEMORY USAGE).
    pub fn heap_size(&self) -> usize {
        match self {
            Value::Str(StrValue::Int(_)) => 0,
            Value::Str(StrValue::Emb(s)) => s.heap_size(),
            Value::Str(StrValue::Raw(v)) => 24 + v.capacity(),
            Value::Str(StrValue::Shared(b)) => std::mem::size_of::<Bytes>() + b.len(),
            Value::List(l) => l.heap_size(),
            Value::Hash(h) => h.heap_size(),
            Value::Set(s) => s.heap_size(),
            Value::ZSet(z) => z.heap_size(),
            Value::Bloom(b) => std::mem::size_of::<BloomFilter>() + b.heap_size(),
            Value::Stream(s) => std::mem::size_of::<Stream>() + s.heap_size(),
        }
    }
}

impl StrValue {
    /// Stores `bytes` as Redis would after `tryObjectEncoding`.
    pub fn from_bytes(bytes: &[u8]) -> Self {
        if bytes.len() <= 20 {
            if let Some(n) = parse_i64(bytes) {
                return StrValue::Int(n);
            }
        }
        if bytes.len() >= SHARED_MIN {
            // Copied once, to a buffer of its own: a command's argument is a
            // slice of the connection's read buffer, which it would pin
            // whole (with whatever else that read held) for as long as the
            // key lives. SET copied the value before too (into a `Vec`).
            StrValue::Shared(Box::new(Bytes::copy_from_slice(bytes)))
        } else {
            // One allocation past 22 bytes (a `Raw` would take two: its
            // box and its buffer).
            StrValue::Emb(SmallBytes::new(bytes))
        }
    }

    /// The shared bytes of a long string (for replies that send it by
    /// reference); `None` for the other encodings.
    pub fn shared(&self) -> Option<&Bytes> {
        match self {
            StrValue::Shared(b) => Some(b),
            _ => None,
        }
    }

    /// The string's bytes; integers are formatted into `tmp`.
    pub fn as_bytes<'a>(&'a self, tmp: &'a mut [u8; 20]) -> &'a [u8] {
        match self {
            StrValue::Int(n) => ringdb_protocol::reply::fmt_i64(tmp, *n),
            StrValue::Emb(s) => s.as_slice(),
            StrValue::Raw(v) => v.as_slice(),
            StrValue::Shared(b) => b,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            StrValue::Int(n) => {
                let mut tmp = [0u8; 20];
                ringdb_protocol::reply::fmt_i64(&mut tmp, *n).len()
            }
            StrValue::Emb(s) => s.len(),
            StrValue::Raw(v) => v.len(),
            StrValue::Shared(b) => b.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes as a growable buffer for in-place changes (APPEND, SETRANGE,
    /// SETBIT, BITFIELD); the value becomes `raw`, as in Redis. A shared
    /// string is copied here (copy-on-write): replies still sending it keep
    /// the old bytes, and later changes are in place.
    pub fn make_raw(&mut self) -> &mut Vec<u8> {
        if !matches!(self, StrValue::Raw(_)) {
            let mut tmp = [0u8; 20];
            let bytes = self.as_bytes(&mut tmp).to_vec();
            *self = StrValue::Raw(Box::new(bytes));
        }
        match self {
            StrValue::Raw(v) => v,
            _ => unreachable!("converted to raw above"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_stay_small() {
        assert_eq!(std::mem::size_of::<StrValue>(), 24);
        assert_eq!(std::mem::size_of::<Value>(), 24);
    }

    #[test]
    fn encodings_follow_redis() {
        assert_eq!(Value::Str(StrValue::from_bytes(b"12345")).encoding(), "int");
        assert_eq!(Value::Str(StrValue::from_bytes(b"012")).encoding(), "embstr");
        assert_eq!(Value::Str(StrValue::from_bytes(&[b'a'; 44])).encoding(), "embstr");
        assert_eq!(Value::Str(StrValue::from_bytes(&[b'a'; 45])).encoding(), "raw");
        let mut v = StrValue::from_bytes(b"-7");
        v.make_raw().extend_from_slice(b"0");
        let mut tmp = [0; 20];
        assert_eq!(v.as_bytes(&mut tmp), b"-70");
    }

    #[test]
    fn long_strings_are_shared_and_copied_on_write() {
        let long = vec![b'v'; SHARED_MIN];
        assert!(StrValue::from_bytes(&long[1..]).shared().is_none());
        let mut v = StrValue::from_bytes(&long);
        let Some(sent) = v.shared().cloned() else { panic!("not shared") };
        let value = Value::Str(v.clone());
        assert_eq!(value.encoding(), "raw");
        assert!(value.heap_size() >= SHARED_MIN);
        assert_eq!(v.len(), SHARED_MIN);
        // A reply holds `sent`; the change must not show in it.
        v.make_raw().extend_from_slice(b"tail");
        assert!(v.shared().is_none());
        assert_eq!(v.len(), SHARED_MIN + 4);
        let mut tmp = [0; 20];
        assert!(v.as_bytes(&mut tmp).ends_with(b"vtail"));
        v.make_raw()[0] = b'X';
        assert_eq!(v.as_bytes(&mut tmp)[0], b'X');
        assert_eq!(sent.len(), SHARED_MIN);
        assert!(sent.iter().all(|&c| c == b'v'));
        // The other copy of the value (a scratch clone) is untouched too.
        let Value::Str(other) = value else { panic!("a string") };
        assert_eq!(other.as_bytes(&mut tmp), &long[..]);
    }
}
