//! [`IntSet`]: a sorted array of distinct integers at the smallest width
//! (2, 4 or 8 bytes) that holds them all — Redis's intset, with a 2-byte
//! header instead of 8.
//!
//! Layout: `FF width` then the elements, little-endian, ascending, in a
//! [`PackBuf`]. `FF` starts no [`crate::pack::Pack`] entry, so a set keeps
//! either encoding in the same field and tells them apart by the first byte.
//! Lookups are binary searches; inserts and removes move the tail (O(n),
//! n ≤ `set-max-intset-entries`), as in Redis.

use crate::pack::PackBuf;

const MARKER: u8 = 0xFF;
const HEADER: usize = 2;

/// `repr(transparent)` over its bytes, so a set can view its small-encoding
/// field as an intset in place.
#[derive(Clone, PartialEq, Eq)]
#[repr(transparent)]
pub struct IntSet {
    buf: PackBuf,
}

impl Default for IntSet {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for IntSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// The narrowest width that holds `v`.
#[inline]
fn width_for(v: i64) -> usize {
    if i16::try_from(v).is_ok() {
        2
    } else if i32::try_from(v).is_ok() {
        4
    } else {
        8
    }
}

impl IntSet {
    pub fn new() -> Self {
        let mut buf = PackBuf::new();
        buf.set_bytes(vec![MARKER, 2]);
        IntSet { buf }
    }

    /// Whether `bytes` (a small set's field) hold an intset.
    #[inline]
    pub fn is_intset_bytes(bytes: &[u8]) -> bool {
        bytes.first() == Some(&MARKER)
    }

    pub fn from_buf(buf: PackBuf) -> Self {
        debug_assert!(Self::is_intset_bytes(buf.as_slice()));
        IntSet { buf }
    }

    pub fn into_buf(self) -> PackBuf {
        self.buf
    }

    fn bytes(&self) -> &[u8] {
        self.buf.as_slice()
    }

    /// Views intset bytes kept in a `Box<[u8]>` field (a set's small
    /// encodings share one field) as an intset.
    pub(crate) fn view(buf: &PackBuf) -> &Self {
        debug_assert!(Self::is_intset_bytes(buf.as_slice()));
        // SAFETY: `IntSet` is `repr(transparent)` over `PackBuf`.
        unsafe { &*(buf as *const PackBuf as *const Self) }
    }

    /// Mutable form of [`IntSet::view`].
    pub(crate) fn view_mut(buf: &mut PackBuf) -> &mut Self {
        debug_assert!(Self::is_intset_bytes(buf.as_slice()));
        // SAFETY: as in `view`; the unique borrow of `buf` is carried over.
        unsafe { &mut *(buf as *mut PackBuf as *mut Self) }
    }

    #[inline]
    fn width(&self) -> usize {
        self.bytes()[1] as usize
    }

    #[inline]
    pub fn len(&self) -> usize {
        (self.buf.len() - HEADER) / self.width()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.buf.len() == HEADER
    }

    /// Bytes of the allocation.
    #[inline]
    pub fn byte_len(&self) -> usize {
        self.buf.len()
    }

    /// The element at `index` (ascending order).
    #[inline]
    pub fn get(&self, index: usize) -> i64 {
        let w = self.width();
        let at = HEADER + index * w;
        let b = &self.bytes()[at..at + w];
        match w {
            2 => i16::from_le_bytes([b[0], b[1]]) as i64,
            4 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64,
            _ => i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        }
    }

    /// Binary search: `Ok(index)` when present, else where it would go.
    fn search(&self, v: i64) -> Result<usize, usize> {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.get(mid).cmp(&v) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(mid),
            }
        }
        Err(lo)
    }

    #[inline]
    pub fn contains(&self, v: i64) -> bool {
        width_for(v) <= self.width() && self.search(v).is_ok()
    }

    /// Adds `v`; false when already present.
    pub fn insert(&mut self, v: i64) -> bool {
        if width_for(v) > self.width() {
            self.upgrade_and_insert(v);
            return true;
        }
        let Err(pos) = self.search(v) else { return false };
        let w = self.width();
        let at = HEADER + pos * w;
        self.buf.splice(at, at, &v.to_le_bytes()[..w]);
        true
    }

    /// Re-encodes every element at the wider width needed by `v`; `v` is
    /// then either below or above everything (it did not fit the old width).
    fn upgrade_and_insert(&mut self, v: i64) {
        let w = width_for(v);
        let len = self.len();
        let mut bytes = Vec::with_capacity(HEADER + (len + 1) * w);
        bytes.extend_from_slice(&[MARKER, w as u8]);
        if v < 0 {
            bytes.extend_from_slice(&v.to_le_bytes()[..w]);
        }
        for i in 0..len {
            bytes.extend_from_slice(&self.get(i).to_le_bytes()[..w]);
        }
        if v >= 0 {
            bytes.extend_from_slice(&v.to_le_bytes()[..w]);
        }
        self.buf.set_bytes(bytes);
    }

    /// Removes `v`; false when absent. The width never shrinks (as Redis).
    pub fn remove(&mut self, v: i64) -> bool {
        if width_for(v) > self.width() {
            return false;
        }
        let Ok(pos) = self.search(v) else { return false };
        self.remove_at(pos);
        true
    }

    /// Removes the element at `index`, returning it.
    pub fn remove_at(&mut self, index: usize) -> i64 {
        let v = self.get(index);
        let w = self.width();
        let at = HEADER + index * w;
        self.buf.splice(at, at + w, &[]);
        v
    }

    /// Keeps the elements `keep` selects, in one pass.
    pub fn retain(&mut self, mut keep: impl FnMut(i64) -> bool) {
        let w = self.width();
        let mut bytes = Vec::with_capacity(self.buf.len());
        bytes.extend_from_slice(&self.bytes()[..HEADER]);
        for i in 0..self.len() {
            let v = self.get(i);
            if keep(v) {
                bytes.extend_from_slice(&v.to_le_bytes()[..w]);
            }
        }
        self.buf.set_bytes(bytes);
    }

    pub fn min(&self) -> Option<i64> {
        (!self.is_empty()).then(|| self.get(0))
    }

    pub fn max(&self) -> Option<i64> {
        (!self.is_empty()).then(|| self.get(self.len() - 1))
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = i64> + ExactSizeIterator + '_ {
        (0..self.len()).map(move |i| self.get(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::{below, test_rng};
    use std::collections::BTreeSet;

    #[test]
    fn upgrades_width_and_stays_sorted() {
        let mut s = IntSet::new();
        assert!(s.insert(5));
        assert!(s.insert(-3));
        assert!(!s.insert(5));
        assert_eq!(s.byte_len(), 2 + 2 * 2);
        assert!(s.insert(70_000));
        assert_eq!(s.byte_len(), 2 + 3 * 4);
        assert!(s.insert(i64::MIN));
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![i64::MIN, -3, 5, 70_000]);
        assert!(s.contains(70_000) && s.contains(i64::MIN) && !s.contains(6));
        assert!(s.remove(i64::MIN));
        assert!(!s.remove(i64::MAX));
        assert_eq!((s.min(), s.max()), (Some(-3), Some(70_000)));
        assert!(IntSet::is_intset_bytes(s.clone().into_buf().as_slice()));
    }

    #[test]
    fn matches_a_btreeset_under_random_operations() {
        let mut rng = test_rng(11);
        let mut s = IntSet::new();
        let mut model = BTreeSet::new();
        for step in 0..20_000 {
            let scale = [100i64, 40_000, 3_000_000_000, i64::MAX][step % 4];
            let v = (below(&mut rng, 2 * scale.min(1 << 40) as usize) as i64) - scale.min(1 << 40);
            if below(&mut rng, 3) == 0 {
                assert_eq!(s.remove(v), model.remove(&v));
            } else {
                assert_eq!(s.insert(v), model.insert(v));
            }
            assert_eq!(s.len(), model.len());
        }
        assert!(s.iter().eq(model.iter().copied()));
        s.retain(|v| v % 2 == 0);
        model.retain(|v| v % 2 == 0);
        assert!(s.iter().eq(model.iter().copied()));
    }
}
