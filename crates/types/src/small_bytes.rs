//! [`SmallBytes`]: an immutable byte string that stores up to 22 bytes inline
//! and longer ones in one exact-size heap allocation. 24 bytes in all, so a
//! keyspace entry holding a key and a short value stays small (most Redis keys
//! and many values are under 23 bytes).

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

const INLINE: usize = 22;

#[derive(Clone)]
pub enum SmallBytes {
    Inline { len: u8, data: [u8; INLINE] },
    Heap(Box<[u8]>),
}

impl SmallBytes {
    pub const INLINE_CAPACITY: usize = INLINE;

    pub fn new(bytes: &[u8]) -> Self {
        if bytes.len() <= INLINE {
            let mut data = [0u8; INLINE];
            data[..bytes.len()].copy_from_slice(bytes);
            SmallBytes::Inline { len: bytes.len() as u8, data }
        } else {
            SmallBytes::Heap(bytes.into())
        }
    }

    pub fn as_slice(&self) -> &[u8] {
        match self {
            SmallBytes::Inline { len, data } => &data[..*len as usize],
            SmallBytes::Heap(b) => b,
        }
    }

    /// Heap bytes owned beyond the 24 bytes of the value itself.
    pub fn heap_size(&self) -> usize {
        match self {
            SmallBytes::Inline { .. } => 0,
            SmallBytes::Heap(b) => b.len(),
        }
    }
}

impl Default for SmallBytes {
    fn default() -> Self {
        SmallBytes::Inline { len: 0, data: [0; INLINE] }
    }
}

impl Deref for SmallBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl Borrow<[u8]> for SmallBytes {
    fn borrow(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for SmallBytes {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl PartialEq for SmallBytes {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}
impl Eq for SmallBytes {}

impl PartialOrd for SmallBytes {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for SmallBytes {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_slice().cmp(other.as_slice())
    }
}

impl Hash for SmallBytes {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state)
    }
}

impl From<&[u8]> for SmallBytes {
    fn from(b: &[u8]) -> Self {
        SmallBytes::new(b)
    }
}

impl From<&str> for SmallBytes {
    fn from(s: &str) -> Self {
        SmallBytes::new(s.as_bytes())
    }
}

impl From<Vec<u8>> for SmallBytes {
    fn from(v: Vec<u8>) -> Self {
        if v.len() <= INLINE {
            SmallBytes::new(&v)
        } else {
            SmallBytes::Heap(v.into_boxed_slice())
        }
    }
}

impl fmt::Debug for SmallBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_slice()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_24_bytes_and_round_trips() {
        assert_eq!(std::mem::size_of::<SmallBytes>(), 24);
        for len in [0, 1, 22, 23, 100] {
            let v: Vec<u8> = (0..len).map(|i| i as u8).collect();
            assert_eq!(SmallBytes::new(&v).as_slice(), &v[..]);
            assert_eq!(SmallBytes::from(v.clone()).as_slice(), &v[..]);
        }
        assert!(matches!(SmallBytes::new(&[1; 22]), SmallBytes::Inline { .. }));
        assert!(matches!(SmallBytes::new(&[1; 23]), SmallBytes::Heap(_)));
    }
}
