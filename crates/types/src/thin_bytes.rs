//! [`ThinBytes`]: an owned byte string in one machine word, the element of
//! the big hash tables. Up to 7 bytes live inline (small integers, short
//! names); longer strings live in one heap allocation that starts with their
//! length (LEB128), so a table slot is 8 bytes plus a control byte — against
//! Redis's 8-byte bucket pointer, 24-byte dictEntry and sds header.
//!
//! Representation: the word's lowest bit tells them apart. Heap
//! allocations are 2-aligned, so a heap pointer has it clear; inline
//! strings set it and keep their length in the next 3 bits, their bytes in
//! the 7 bytes above. Inline words are never dereferenced; they are made
//! without provenance.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ptr::NonNull;

const INLINE_MAX: usize = 7;

pub struct ThinBytes {
    word: NonNull<u8>,
}

// SAFETY: a `ThinBytes` uniquely owns its allocation (if any), like a Box.
unsafe impl Send for ThinBytes {}
// SAFETY: shared references only read the bytes.
unsafe impl Sync for ThinBytes {}

/// Bytes of the LEB128 encoding of `n`.
#[inline]
fn varint_len(n: usize) -> usize {
    let bits = usize::BITS - (n | 1).leading_zeros();
    bits.div_ceil(7) as usize
}

/// Heap layout for a string of `len` bytes.
#[inline]
fn layout(len: usize) -> Layout {
    // A string this long could not have been received: callers bound sizes.
    Layout::from_size_align(varint_len(len) + len, 2).expect("string size fits a layout")
}

impl ThinBytes {
    pub fn new(bytes: &[u8]) -> Self {
        let len = bytes.len();
        if len <= INLINE_MAX {
            let mut raw = [0u8; 8];
            raw[0] = ((len as u8) << 1) | 1;
            raw[1..1 + len].copy_from_slice(bytes);
            let word = usize::from_le_bytes(raw);
            // An address that is never dereferenced: it only carries bits.
            let ptr = std::ptr::null_mut::<u8>().wrapping_add(word);
            return ThinBytes { word: NonNull::new(ptr).unwrap_or(NonNull::dangling()) };
        }
        let layout = layout(len);
        // SAFETY: the layout has a non-zero size (len > 7).
        let ptr = unsafe { alloc(layout) };
        let Some(ptr) = NonNull::new(ptr) else { handle_alloc_error(layout) };
        let mut prefix = [0u8; 10];
        let mut n = len;
        let mut i = 0;
        loop {
            let byte = (n & 127) as u8;
            n >>= 7;
            if n == 0 {
                prefix[i] = byte;
                i += 1;
                break;
            }
            prefix[i] = byte | 128;
            i += 1;
        }
        // SAFETY: the allocation holds `i + len` bytes (`varint_len(len) ==
        // i`), and the sources do not overlap it.
        unsafe {
            std::ptr::copy_nonoverlapping(prefix.as_ptr(), ptr.as_ptr(), i);
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr.as_ptr().add(i), len);
        }
        ThinBytes { word: ptr }
    }

    #[inline]
    fn is_inline(&self) -> bool {
        (self.word.as_ptr() as usize) & 1 == 1
    }

    /// `(offset of the bytes, length)` of a heap string.
    #[inline]
    fn heap_header(&self) -> (usize, usize) {
        let p = self.word.as_ptr();
        let (mut len, mut shift, mut i) = (0usize, 0, 0);
        loop {
            // SAFETY: a heap string starts with its complete LEB128 length.
            let b = unsafe { *p.add(i) };
            len |= ((b & 127) as usize) << shift;
            i += 1;
            if b & 128 == 0 {
                return (i, len);
            }
            shift += 7;
        }
    }

    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        if self.is_inline() {
            let len = ((self.word.as_ptr() as usize) >> 1) & 7;
            // The inline bytes are the pointer field itself, read in place.
            let raw = &self.word as *const NonNull<u8> as *const u8;
            // SAFETY: `raw` points at the 8 bytes of `self.word`; on a
            // little-endian target byte 0 is the tag and bytes 1..=len the
            // string. Big-endian targets are rejected at compile time below.
            return unsafe { std::slice::from_raw_parts(raw.add(1), len) };
        }
        let (start, len) = self.heap_header();
        // SAFETY: the allocation holds the length prefix then `len` bytes.
        unsafe { std::slice::from_raw_parts(self.word.as_ptr().add(start), len) }
    }

    /// Heap bytes owned (0 when inline).
    #[inline]
    pub fn heap_size(&self) -> usize {
        if self.is_inline() {
            0
        } else {
            let (start, len) = self.heap_header();
            start + len
        }
    }
}

#[cfg(target_endian = "big")]
compile_error!("ThinBytes keeps inline bytes in a pointer word laid out little-endian");

impl Drop for ThinBytes {
    fn drop(&mut self) {
        if !self.is_inline() {
            let (_, len) = self.heap_header();
            // SAFETY: allocated in `new` with exactly this layout.
            unsafe { dealloc(self.word.as_ptr(), layout(len)) };
        }
    }
}

impl Clone for ThinBytes {
    fn clone(&self) -> Self {
        ThinBytes::new(self.as_slice())
    }
}

impl std::ops::Deref for ThinBytes {
    type Target = [u8];

    #[inline]
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl PartialEq for ThinBytes {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for ThinBytes {}

impl std::fmt::Debug for ThinBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_slice()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_word_and_round_trips() {
        assert_eq!(std::mem::size_of::<ThinBytes>(), 8);
        assert_eq!(std::mem::size_of::<Option<ThinBytes>>(), 8);
        for len in [0usize, 1, 6, 7, 8, 100, 127, 128, 300, 20_000] {
            let v: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            let t = ThinBytes::new(&v);
            assert_eq!(t.as_slice(), &v[..], "len {len}");
            assert_eq!(t.clone().as_slice(), &v[..]);
            assert_eq!(t.heap_size(), if len <= 7 { 0 } else { len + varint_len(len) });
        }
        assert_eq!(ThinBytes::new(b"").as_slice(), b"");
        assert_eq!(ThinBytes::new(b"1234567").heap_size(), 0);
    }

    #[test]
    fn varint_lengths() {
        assert_eq!([0, 127, 128, 16383, 16384].map(varint_len), [1, 1, 2, 2, 3]);
    }
}
