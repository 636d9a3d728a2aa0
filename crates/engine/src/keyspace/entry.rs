//! [`Entry`]: a key and everything stored with it, in one heap block.
//!
//! The block is the [`EntryHead`] (the value, the access field, the key's
//! length and flags: 32 bytes), then the expiry (8 bytes, only for a key
//! with a TTL), then the key's bytes. A 12-byte key with a 16-byte value
//! (inline in the `Value`) is one 48-byte block; a boxed struct with an
//! inline key was 64 bytes, and a key past 22 bytes took a second block.
//!
//! Giving a key a TTL, or taking it away, moves the entry to a block of the
//! other shape. That is safe for the tables: a `&mut Entry` is the table's
//! own handle (the table holds `Entry`s), so the table follows the move.

use super::Value;
use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// The fixed part of an entry's block, reached through `Deref`.
#[repr(C)]
pub struct EntryHead {
    pub value: Value,
    /// LRU clock (seconds) or LFU counter, as `maxmemory-policy` asks.
    pub access: u32,
    /// The key's length (or [`LONG_KEY`]), with [`HAS_EXPIRE`].
    meta: u32,
}

/// An expiry (u64, Unix milliseconds) follows the head.
const HAS_EXPIRE: u32 = 1 << 31;
/// The key is too long for `meta`: its length follows the head (and the
/// expiry) as a u64. Keys are bounded by `proto-max-bulk-len` only.
const LONG_KEY: u32 = HAS_EXPIRE - 1;
/// Bytes of the head: the block's fixed cost per key.
pub const HEAD: usize = std::mem::size_of::<EntryHead>();

/// A key and everything stored with it (see the module's header). Owns its
/// block as a `Box` would.
pub struct Entry(NonNull<EntryHead>);

// SAFETY: an `Entry` owns its block exclusively, as `Box<EntryHead>` would,
// and `EntryHead` is Send and Sync (checked in the tests).
unsafe impl Send for Entry {}
// SAFETY: as above; `&Entry` only gives out shared references.
unsafe impl Sync for Entry {}

impl EntryHead {
    fn has_expire(&self) -> bool {
        self.meta & HAS_EXPIRE != 0
    }

    fn long_key(&self) -> bool {
        self.meta & LONG_KEY == LONG_KEY
    }
}

/// The block of an entry with `head`'s flags and a key of `key_len` bytes.
fn block_layout(has_expire: bool, long_key: bool, key_len: usize) -> Layout {
    let size = HEAD + 8 * usize::from(has_expire) + 8 * usize::from(long_key) + key_len;
    Layout::from_size_align(size.next_multiple_of(8), 8)
        .expect("a key that fits in memory fits in a layout")
}

impl Entry {
    pub fn new(key: &[u8], value: Value) -> Entry {
        Entry::make(key, value, 0, 0)
    }

    /// An entry with expiry `expire_at` (0 = none) and access field `access`.
    pub(super) fn make(key: &[u8], value: Value, expire_at: u64, access: u32) -> Entry {
        let long = key.len() >= LONG_KEY as usize;
        let len_bits = if long { LONG_KEY } else { key.len() as u32 };
        let meta = len_bits | if expire_at != 0 { HAS_EXPIRE } else { 0 };
        let layout = block_layout(expire_at != 0, long, key.len());
        // SAFETY: the layout is not empty (HEAD > 0). Every write is inside
        // it: the head, then the optional expiry and length (8-byte aligned,
        // as HEAD is a multiple of 8), then the key's bytes.
        unsafe {
            let block = alloc(layout);
            let Some(head) = NonNull::new(block.cast::<EntryHead>()) else {
                handle_alloc_error(layout)
            };
            head.as_ptr().write(EntryHead { value, access, meta });
            let mut at = block.add(HEAD);
            if expire_at != 0 {
                at.cast::<u64>().write(expire_at);
                at = at.add(8);
            }
            if long {
                at.cast::<u64>().write(key.len() as u64);
                at = at.add(8);
            }
            std::ptr::copy_nonoverlapping(key.as_ptr(), at, key.len());
            Entry(head)
        }
    }

    /// The bytes after the head: expiry, long length, key.
    fn tail(&self) -> *mut u8 {
        // SAFETY: the block is at least HEAD bytes long.
        unsafe { self.0.as_ptr().cast::<u8>().add(HEAD) }
    }

    pub fn key(&self) -> &[u8] {
        let mut at = self.tail();
        // SAFETY: `make` laid the block out as these reads expect; the key
        // lives as long as the entry.
        unsafe {
            if self.has_expire() {
                at = at.add(8);
            }
            let len = if self.long_key() {
                let len = at.cast::<u64>().read() as usize;
                at = at.add(8);
                len
            } else {
                self.meta as usize & LONG_KEY as usize
            };
            std::slice::from_raw_parts(at, len)
        }
    }

    /// Absolute expiry in Unix milliseconds, if the key has a TTL.
    pub fn expire_at(&self) -> Option<u64> {
        // SAFETY: an entry with HAS_EXPIRE has its expiry right after the head.
        self.has_expire().then(|| unsafe { self.tail().cast::<u64>().read() })
    }

    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expire_at().is_some_and(|at| at <= now_ms)
    }

    /// Sets (`at` > 0) or clears (0) the expiry. Private to the keyspace, so
    /// that its count of keys with a TTL cannot go stale.
    pub(super) fn set_expire_at(&mut self, at: u64) {
        match (self.has_expire(), at != 0) {
            // SAFETY: the block has room for the expiry.
            (true, true) => unsafe { self.tail().cast::<u64>().write(at) },
            (false, false) => {}
            _ => {
                // SAFETY: the value is moved out once, into the new block,
                // and the old block is then freed without dropping it.
                let moved = unsafe {
                    let value = std::ptr::read(&self.value);
                    Entry::make(self.key(), value, at, self.access)
                };
                let old = std::mem::replace(self, moved);
                old.free_block();
            }
        }
    }

    /// The same entry with expiry `at` (for entries built before insertion).
    pub fn with_expire(mut self, at: Option<u64>) -> Self {
        self.set_expire_at(at.unwrap_or(0));
        self
    }

    /// A copy of this entry under another name (RENAME, COPY, MOVE).
    pub fn renamed(&self, key: &[u8]) -> Entry {
        Entry::make(key, self.value.clone(), self.expire_at().unwrap_or(0), self.access)
    }

    /// This entry under another name, the value moved (RENAME).
    pub fn into_renamed(self, key: &[u8]) -> Entry {
        let (expire_at, access) = (self.expire_at().unwrap_or(0), self.access);
        Entry::make(key, self.into_value(), expire_at, access)
    }

    /// The value, the rest of the entry freed.
    pub fn into_value(self) -> Value {
        // SAFETY: read once; `free_block` frees without dropping it again.
        let value = unsafe { std::ptr::read(&self.value) };
        self.free_block();
        value
    }

    /// The layout this entry's block was allocated with.
    fn layout(&self) -> Layout {
        block_layout(self.has_expire(), self.long_key(), self.key().len())
    }

    /// Bytes of the entry's block.
    pub fn block_size(&self) -> usize {
        self.layout().size()
    }

    /// Approximate bytes this entry costs (MEMORY USAGE, INFO memory): its
    /// block, the table's pointer to it, and what the value owns.
    pub fn memory(&self) -> usize {
        self.block_size() + 8 + self.value.heap_size()
    }

    /// Frees the block without dropping the value (moved out already).
    fn free_block(self) {
        let layout = self.layout();
        let block = self.0.as_ptr().cast::<u8>();
        std::mem::forget(self);
        // SAFETY: allocated by `make` with this very layout.
        unsafe { dealloc(block, layout) };
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        let layout = self.layout();
        // SAFETY: the block is ours alone; the value is dropped once, then
        // the block freed with the layout `make` allocated it with.
        unsafe {
            std::ptr::drop_in_place(&mut self.0.as_mut().value);
            dealloc(self.0.as_ptr().cast::<u8>(), layout);
        }
    }
}

impl Deref for Entry {
    type Target = EntryHead;
    fn deref(&self) -> &EntryHead {
        // SAFETY: the block lives as long as `self`.
        unsafe { self.0.as_ref() }
    }
}

impl DerefMut for Entry {
    fn deref_mut(&mut self) -> &mut EntryHead {
        // SAFETY: `&mut self` is the only way to the block.
        unsafe { self.0.as_mut() }
    }
}

impl Clone for Entry {
    fn clone(&self) -> Self {
        self.renamed(self.key())
    }
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("key", &String::from_utf8_lossy(self.key()))
            .field("value", &self.value)
            .field("expire_at", &self.expire_at())
            .field("access", &self.access)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::StrValue;

    fn string(s: &[u8]) -> Value {
        Value::Str(StrValue::from_bytes(s))
    }

    #[test]
    fn heads_are_shareable_and_small() {
        fn shareable<T: Send + Sync>() {}
        shareable::<EntryHead>();
        assert_eq!(HEAD, 32);
        assert_eq!(std::mem::size_of::<Entry>(), 8);
    }

    #[test]
    fn a_small_string_key_is_one_block_of_48_bytes() {
        let e = Entry::new(b"key:00000001", string(b"vvvvvvvvvvvvvvvv"));
        assert_eq!(e.block_size(), 48);
        assert_eq!(e.value.heap_size(), 0);
        assert!(e.memory() <= 56, "{} bytes per small string", e.memory());
        // With a TTL: 8 bytes more, in the same block.
        let e = e.with_expire(Some(1));
        assert_eq!(e.block_size(), 56);
    }

    #[test]
    fn expiry_comes_and_goes_with_key_value_and_access_kept() {
        let mut e = Entry::new(b"k", string(b"v"));
        e.access = 7;
        assert_eq!(e.expire_at(), None);
        e.set_expire_at(1_000);
        assert_eq!((e.expire_at(), e.key(), e.access), (Some(1_000), &b"k"[..], 7));
        e.set_expire_at(2_000);
        assert_eq!(e.expire_at(), Some(2_000));
        assert!(e.is_expired(2_000) && !e.is_expired(1_999));
        e.set_expire_at(0);
        assert_eq!((e.expire_at(), e.key()), (None, &b"k"[..]));
        let mut tmp = [0; 20];
        let Value::Str(s) = &e.value else { panic!("a string") };
        assert_eq!(s.as_bytes(&mut tmp), b"v");
    }

    #[test]
    fn keys_of_every_length_round_trip() {
        for len in [0, 1, 7, 8, 22, 23, 100, 5000] {
            let key: Vec<u8> = (0..len).map(|i| i as u8).collect();
            for at in [0, 99] {
                let e = Entry::new(&key, string(b"x")).with_expire(Some(at).filter(|&a| a > 0));
                assert_eq!(e.key(), &key[..]);
                assert_eq!(e.expire_at(), Some(at).filter(|&a| a > 0));
                let c = e.clone();
                assert_eq!((c.key(), c.expire_at()), (e.key(), e.expire_at()));
                let r = e.renamed(b"other");
                assert_eq!((r.key(), r.expire_at()), (&b"other"[..], e.expire_at()));
                let moved = c.into_renamed(b"moved");
                assert_eq!((moved.key(), moved.expire_at()), (&b"moved"[..], e.expire_at()));
            }
        }
    }

    #[test]
    fn values_that_own_memory_are_dropped_or_moved_once() {
        let long = vec![b'v'; 10_000];
        let e = Entry::new(b"k", string(&long)).with_expire(Some(5));
        let c = e.clone();
        drop(e);
        let Value::Str(s) = c.into_value() else { panic!("a string") };
        assert_eq!(s.len(), 10_000);
    }
}
