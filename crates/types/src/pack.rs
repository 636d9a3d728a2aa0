//! [`Pack`]: the compact, contiguous encoding behind every small collection
//! (Redis's listpack is the model) and behind the nodes of big lists and the
//! leaves of big sorted sets.
//!
//! A pack is one exact-size heap allocation holding the entries back to back,
//! behind a 16-byte handle ([`PackBuf`]) that also keeps the entry count.
//! Each entry is a small header and its payload, with integers stored
//! compactly (Redis's listpack entry encodings, byte for byte):
//!
//! | first byte | entry |
//! |---|---|
//! | `0xxxxxxx` | integer 0..=127, 1 byte in all |
//! | `10llllll` | string of 0..=63 bytes |
//! | `110xxxxx` + 1 | 13-bit signed integer |
//! | `1110llll` + 1 | string of 64..=4095 bytes |
//! | `0xF0` + u32 | longer string |
//! | `0xF1`/`F2`/`F3`/`F4` | 16/24/32/64-bit signed integer |
//! | `0xF5` + 8 | an `f64` (sorted-set scores that are not small integers) |
//! | `0xF6` + u64 | a string of 4 GiB or more (Redis would use a plain node) |
//!
//! A string that is a canonical decimal integer (what `string2ll` accepts) is
//! always stored as an integer, so a probe that is not such a string never
//! needs to be compared with integer entries, and vice versa ([`Probe`]).
//!
//! Two flavours share the code: `Pack<false>` (forward only: hashes, sets,
//! sorted sets) saves Redis's per-entry back-length byte, and `Pack<true>`
//! (lists) keeps it, so that the tail is reachable in O(1) for RPOP and
//! backward iteration. Against Redis's listpack a pack saves the robj (the
//! handle lives inline in the key's value), its 7 header and end bytes, and
//! for forward packs one byte per entry.
//!
//! The count saturates at [`COUNT_UNKNOWN`] (then `len()` walks the pack, as
//! Redis's `lpLength` does past 65535). No entry starts with `0xFF`, which
//! lets a set keep an intset (which does) or a pack in the same field.

use crate::number::parse_i64;
use std::cmp::Ordering;
use std::ptr::NonNull;

/// Offset of the first entry: packs have no header (the count lives in the
/// handle, see [`PackBuf`]).
pub const FIRST: usize = 0;
/// A stored count of this value means "count by walking".
pub const COUNT_UNKNOWN: usize = (1 << 24) - 1;
/// Redis's `LISTPACK_MAX_SAFETY_SIZE`: no pack grows past 1 GiB; callers
/// convert to the big encoding before that ([`Pack::safe_to_add`]).
pub const MAX_SAFE_BYTES: usize = 1 << 30;

const STR6: u8 = 0x80;
const INT13: u8 = 0xC0;
const STR12: u8 = 0xE0;
const STR32: u8 = 0xF0;
const INT16: u8 = 0xF1;
const INT24: u8 = 0xF2;
const INT32: u8 = 0xF3;
const INT64: u8 = 0xF4;
const FLOAT: u8 = 0xF5;
const STR64: u8 = 0xF6;

/// One entry as stored: bytes, an integer, or (sorted-set scores only) a
/// double.
#[derive(Clone, Copy, Debug)]
pub enum Item<'a> {
    Str(&'a [u8]),
    Int(i64),
    Float(f64),
}

impl<'a> Item<'a> {
    /// The item a string becomes when stored: canonical integers become
    /// `Int`, as Redis's `lpStringToInt64` decides.
    #[inline]
    pub fn from_bytes(bytes: &'a [u8]) -> Item<'a> {
        if bytes.len() <= 20 {
            if let Some(n) = parse_i64(bytes) {
                return Item::Int(n);
            }
        }
        Item::Str(bytes)
    }

    /// How a score is stored: small exact integers compactly (never `-0.0`,
    /// whose sign Redis keeps), everything else as 8 raw bytes.
    #[inline]
    pub fn from_score(score: f64) -> Item<'static> {
        const EXACT: f64 = (1u64 << 53) as f64;
        if score.fract() == 0.0
            && score.abs() < EXACT
            && !(score == 0.0 && score.is_sign_negative())
        {
            Item::Int(score as i64)
        } else {
            Item::Float(score)
        }
    }

    /// The item as a score (`Int` and `Float` entries; strings are never
    /// stored where a score is expected).
    #[inline]
    pub fn score(&self) -> f64 {
        match *self {
            Item::Int(n) => n as f64,
            Item::Float(f) => f,
            Item::Str(s) => crate::number::parse_f64(s).unwrap_or(0.0),
        }
    }

    /// The item's bytes as a client sees them; integers are formatted into
    /// `tmp`.
    #[inline]
    pub fn bytes<'b>(&'b self, tmp: &'b mut [u8; 24]) -> &'b [u8] {
        match *self {
            Item::Str(s) => s,
            Item::Int(n) => format_i64(tmp, n),
            Item::Float(f) => {
                let text = format!("{f}");
                let n = text.len().min(24);
                tmp[..n].copy_from_slice(&text.as_bytes()[..n]);
                &tmp[..n]
            }
        }
    }

    pub fn to_vec(&self) -> Vec<u8> {
        let mut tmp = [0u8; 24];
        self.bytes(&mut tmp).to_vec()
    }

    /// Length of the client-visible bytes (HSTRLEN).
    pub fn len(&self) -> usize {
        let mut tmp = [0u8; 24];
        self.bytes(&mut tmp).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Compares the client-visible bytes with `other` (member order in
    /// sorted sets: memcmp, shorter first on a common prefix).
    #[inline]
    pub fn cmp_bytes(&self, other: &[u8]) -> Ordering {
        let mut tmp = [0u8; 24];
        self.bytes(&mut tmp).cmp(other)
    }

    /// Whether the item's bytes equal `other`.
    #[inline]
    pub fn eq_bytes(&self, other: &[u8]) -> bool {
        match *self {
            Item::Str(s) => s == other,
            _ => self.cmp_bytes(other) == Ordering::Equal,
        }
    }
}

/// Writes `n` in decimal into `tmp`, returning the digits.
#[inline]
pub fn format_i64(tmp: &mut [u8; 24], n: i64) -> &[u8] {
    let mut i = tmp.len();
    let neg = n < 0;
    let mut v = n.unsigned_abs();
    loop {
        i -= 1;
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    if neg {
        i -= 1;
        tmp[i] = b'-';
    }
    &tmp[i..]
}

/// A value to look for, prepared once: whether it is stored as an integer
/// decides which entries can match at all.
#[derive(Clone, Copy, Debug)]
pub struct Probe<'a> {
    pub bytes: &'a [u8],
    int: Option<i64>,
}

impl<'a> Probe<'a> {
    #[inline]
    pub fn new(bytes: &'a [u8]) -> Self {
        let int = match Item::from_bytes(bytes) {
            Item::Int(n) => Some(n),
            _ => None,
        };
        Probe { bytes, int }
    }

    /// The probe as it would be stored.
    #[inline]
    pub fn item(&self) -> Item<'a> {
        match self.int {
            Some(n) => Item::Int(n),
            None => Item::Str(self.bytes),
        }
    }

    #[inline]
    pub fn as_int(&self) -> Option<i64> {
        self.int
    }

    /// Whether a stored item equals this probe.
    #[inline]
    pub fn matches(&self, item: &Item<'_>) -> bool {
        match (*item, self.int) {
            (Item::Int(n), Some(m)) => n == m,
            (Item::Str(s), None) => s == self.bytes,
            _ => false,
        }
    }
}

/// Bytes the entry for `item` takes, without a back-length.
#[inline]
pub fn encoded_len(item: &Item<'_>) -> usize {
    match *item {
        Item::Int(n) => int_len(n),
        Item::Float(_) => 9,
        Item::Str(s) => match Item::from_bytes(s) {
            Item::Int(n) => int_len(n),
            _ => str_header_len(s.len()) + s.len(),
        },
    }
}

#[inline]
fn int_len(n: i64) -> usize {
    match n {
        0..=127 => 1,
        -4096..=4095 => 2,
        -32768..=32767 => 3,
        -8388608..=8388607 => 4,
        -2147483648..=2147483647 => 5,
        _ => 9,
    }
}

#[inline]
fn str_header_len(len: usize) -> usize {
    if len < 64 {
        1
    } else if len < 4096 {
        2
    } else if len <= u32::MAX as usize {
        5
    } else {
        9
    }
}

/// Appends the entry for `item` (without a back-length) to `out`.
pub fn encode(item: &Item<'_>, out: &mut Vec<u8>) {
    match *item {
        Item::Int(n) => encode_int(n, out),
        Item::Float(f) => {
            out.push(FLOAT);
            out.extend_from_slice(&f.to_le_bytes());
        }
        Item::Str(s) => match Item::from_bytes(s) {
            Item::Int(n) => encode_int(n, out),
            _ => encode_str(s, out),
        },
    }
}

fn encode_int(n: i64, out: &mut Vec<u8>) {
    match int_len(n) {
        1 => out.push(n as u8),
        2 => {
            let v = (n as u16) & 0x1FFF;
            out.push(INT13 | (v >> 8) as u8);
            out.push(v as u8);
        }
        3 => {
            out.push(INT16);
            out.extend_from_slice(&(n as i16).to_le_bytes());
        }
        4 => {
            out.push(INT24);
            out.extend_from_slice(&(n as i32).to_le_bytes()[..3]);
        }
        5 => {
            out.push(INT32);
            out.extend_from_slice(&(n as i32).to_le_bytes());
        }
        _ => {
            out.push(INT64);
            out.extend_from_slice(&n.to_le_bytes());
        }
    }
}

fn encode_str(s: &[u8], out: &mut Vec<u8>) {
    let len = s.len();
    if len < 64 {
        out.push(STR6 | len as u8);
    } else if len < 4096 {
        out.push(STR12 | (len >> 8) as u8);
        out.push(len as u8);
    } else if let Ok(len) = u32::try_from(len) {
        out.push(STR32);
        out.extend_from_slice(&len.to_le_bytes());
    } else {
        out.push(STR64);
        out.extend_from_slice(&(len as u64).to_le_bytes());
    }
    out.extend_from_slice(s);
}

/// Decodes the entry at `off`, returning it and its length (without a
/// back-length). The pack's own writes are the only source of its bytes, so
/// a malformed entry is a bug, not input: it panics through slice bounds.
/// Small integers and short strings (most entries) decode inline.
#[inline(always)]
pub fn decode(buf: &[u8], off: usize) -> (Item<'_>, usize) {
    let b = buf[off];
    if b < 0x80 {
        return (Item::Int(b as i64), 1);
    }
    if b & 0xC0 == STR6 {
        let len = (b & 0x3F) as usize;
        return (Item::Str(&buf[off + 1..off + 1 + len]), 1 + len);
    }
    decode_wide(buf, off, b)
}

#[inline(never)]
fn decode_wide(buf: &[u8], off: usize, b: u8) -> (Item<'_>, usize) {
    if b & 0xE0 == INT13 {
        let raw = (((b & 0x1F) as u16) << 8) | buf[off + 1] as u16;
        let v = ((raw << 3) as i16 >> 3) as i64;
        return (Item::Int(v), 2);
    }
    if b & 0xF0 == STR12 {
        let len = (((b & 0x0F) as usize) << 8) | buf[off + 1] as usize;
        return (Item::Str(&buf[off + 2..off + 2 + len]), 2 + len);
    }
    match b {
        STR32 => {
            let len = u32::from_le_bytes(le4(&buf[off + 1..])) as usize;
            (Item::Str(&buf[off + 5..off + 5 + len]), 5 + len)
        }
        INT16 => (Item::Int(i16::from_le_bytes([buf[off + 1], buf[off + 2]]) as i64), 3),
        INT24 => {
            let v = i32::from_le_bytes([0, buf[off + 1], buf[off + 2], buf[off + 3]]) >> 8;
            (Item::Int(v as i64), 4)
        }
        INT32 => (Item::Int(i32::from_le_bytes(le4(&buf[off + 1..])) as i64), 5),
        INT64 => (Item::Int(i64::from_le_bytes(le8(&buf[off + 1..]))), 9),
        FLOAT => (Item::Float(f64::from_le_bytes(le8(&buf[off + 1..]))), 9),
        STR64 => {
            let len = u64::from_le_bytes(le8(&buf[off + 1..])) as usize;
            (Item::Str(&buf[off + 9..off + 9 + len]), 9 + len)
        }
        _ => unreachable!("corrupt pack entry header {b:#x}"),
    }
}

#[inline]
fn le4(b: &[u8]) -> [u8; 4] {
    [b[0], b[1], b[2], b[3]]
}

#[inline]
fn le8(b: &[u8]) -> [u8; 8] {
    [b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]
}

/// Size of the back-length that follows an entry of `len` bytes (Redis's
/// `lpEncodeBacklen`, 7 bits per byte, with its exact thresholds; entries
/// past Redis's 5-byte range just take more groups).
#[inline]
pub fn backlen_len(len: usize) -> usize {
    match len {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        268435455..=34359738366 => 5,
        _ => (usize::BITS - len.leading_zeros()).div_ceil(7) as usize,
    }
}

fn encode_backlen(len: usize, out: &mut Vec<u8>) {
    let n = backlen_len(len);
    // Most significant group first; every byte but the first has the high
    // bit set, so reading backwards stops at the first byte without it.
    for i in (0..n).rev() {
        let group = ((len >> (7 * i)) & 127) as u8;
        out.push(if i == n - 1 { group } else { group | 128 });
    }
}

/// Reads the back-length that ends at `end`: the entry length it holds and
/// where the back-length starts.
#[inline]
fn read_backlen(buf: &[u8], end: usize) -> (usize, usize) {
    let mut p = end - 1;
    let mut len = 0usize;
    let mut shift = 0;
    loop {
        let b = buf[p];
        len |= ((b & 127) as usize) << shift;
        if b & 128 == 0 {
            return (len, p);
        }
        shift += 7;
        p -= 1;
    }
}

/// Given `end`, the offset just past an entry's back-length, returns the
/// entry's start.
#[inline]
fn entry_start_before(buf: &[u8], end: usize) -> usize {
    let (len, start) = read_backlen(buf, end);
    start - len
}

/// Full stored size of an entry (with a back-length when `BACK`).
#[inline]
fn stored_len<const BACK: bool>(item: &Item<'_>) -> usize {
    let n = encoded_len(item);
    if BACK {
        n + backlen_len(n)
    } else {
        n
    }
}

fn encode_stored<const BACK: bool>(item: &Item<'_>, out: &mut Vec<u8>) {
    let start = out.len();
    encode(item, out);
    if BACK {
        let n = out.len() - start;
        encode_backlen(n, out);
    }
}

/// The owned bytes of a pack (or an intset) behind a 16-byte handle: a
/// pointer, and in one word the length (40 bits) and the entry count (24
/// bits, saturating at [`COUNT_UNKNOWN`]). Keeping the count here rather
/// than in a header saves those bytes in every small collection.
///
/// It is a `Box<[u8]>` taken apart: built from one, turned back into one to
/// change or drop it, so the allocation is always exactly `len` bytes.
pub struct PackBuf {
    ptr: NonNull<u8>,
    meta: u64,
}

// SAFETY: a `PackBuf` uniquely owns its allocation, like the `Box<[u8]>` it
// is made from.
unsafe impl Send for PackBuf {}
// SAFETY: shared references only read the bytes.
unsafe impl Sync for PackBuf {}

const LEN_SHIFT: u32 = 24;
const MAX_LEN: usize = (1 << 40) - 1;

impl PackBuf {
    pub fn new() -> Self {
        Self::from_box(Box::default(), 0)
    }

    fn from_box(bytes: Box<[u8]>, count: usize) -> Self {
        let len = bytes.len();
        assert!(len <= MAX_LEN, "a pack holds at most 1 TiB");
        let ptr = NonNull::from(Box::leak(bytes)).cast::<u8>();
        let count = count.min(COUNT_UNKNOWN);
        PackBuf { ptr, meta: ((len as u64) << LEN_SHIFT) | count as u64 }
    }

    /// Takes the bytes out as the `Box<[u8]>` they were made from, leaving
    /// this buffer empty.
    fn take_box(&mut self) -> Box<[u8]> {
        let len = self.len();
        let ptr = std::mem::replace(&mut self.ptr, NonNull::dangling());
        self.meta = 0;
        // SAFETY: `ptr` and `len` came from `Box::leak` of a `Box<[u8]>` of
        // exactly this length (`from_box`), and ownership moves back out once
        // since `self` now holds an empty dangling slice.
        unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr.as_ptr(), len)) }
    }

    #[inline]
    pub fn len(&self) -> usize {
        (self.meta >> LEN_SHIFT) as usize
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` points to `len` initialised bytes owned by `self`
        // (or is dangling with `len` 0).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len()) }
    }

    /// The stored entry count (None once it saturated).
    #[inline]
    fn count(&self) -> Option<usize> {
        let c = (self.meta & COUNT_UNKNOWN as u64) as usize;
        (c != COUNT_UNKNOWN).then_some(c)
    }

    #[inline]
    fn set_count(&mut self, n: usize) {
        self.meta = (self.meta & !(COUNT_UNKNOWN as u64)) | n.min(COUNT_UNKNOWN) as u64;
    }

    /// Replaces the bytes, keeping the count field.
    pub(crate) fn set_bytes(&mut self, bytes: Vec<u8>) {
        let count = self.meta & COUNT_UNKNOWN as u64;
        drop(self.take_box());
        *self = Self::from_box(bytes.into_boxed_slice(), 0);
        self.meta |= count;
    }

    /// Replaces bytes `start..end` with `with`, reallocating to the exact new
    /// size (mimalloc and glibc resize in place within a size class, as
    /// jemalloc does for Redis's listpacks).
    pub(crate) fn splice(&mut self, start: usize, end: usize, with: &[u8]) {
        self.edit(|v| {
            v.reserve_exact(with.len().saturating_sub(end - start));
            v.splice(start..end, with.iter().copied());
        });
    }

    /// Edits the bytes as a `Vec` (which must end up with capacity == len
    /// for no waste: use `reserve_exact`), keeping the count field.
    pub(crate) fn edit(&mut self, f: impl FnOnce(&mut Vec<u8>)) {
        let count = self.meta & COUNT_UNKNOWN as u64;
        let mut v = self.take_box().into_vec();
        f(&mut v);
        *self = Self::from_box(v.into_boxed_slice(), 0);
        self.meta |= count;
    }

    #[inline]
    fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and `&mut self` makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len()) }
    }
}

impl Default for PackBuf {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for PackBuf {
    fn drop(&mut self) {
        drop(self.take_box());
    }
}

impl Clone for PackBuf {
    fn clone(&self) -> Self {
        let mut copy = Self::from_box(self.as_slice().into(), 0);
        copy.meta = self.meta;
        copy
    }
}

impl PartialEq for PackBuf {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for PackBuf {}

impl std::fmt::Debug for PackBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PackBuf({} bytes)", self.len())
    }
}

/// The compact encoding. `BACK` adds a back-length after each entry so the
/// pack can be walked from the end.
///
/// `repr(transparent)` over its [`PackBuf`] so that a set, which keeps an
/// intset or a pack in one `PackBuf` field, can view that field as a pack in
/// place.
#[derive(Clone, PartialEq, Eq, Default)]
#[repr(transparent)]
pub struct Pack<const BACK: bool> {
    buf: PackBuf,
}

impl<const BACK: bool> std::fmt::Debug for Pack<BACK> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter().map(|i| i.to_vec())).finish()
    }
}

impl<const BACK: bool> Pack<BACK> {
    pub fn new() -> Self {
        Pack { buf: PackBuf::new() }
    }

    /// A pack of `bytes` this crate encoded itself (a list node it had
    /// compressed), holding `count` entries.
    pub(crate) fn from_own_bytes(bytes: Vec<u8>, count: usize) -> Self {
        Pack { buf: PackBuf::from_box(bytes.into_boxed_slice(), count) }
    }

    /// Wraps a buffer produced by [`Pack::into_buf`] (a set keeps its small
    /// encodings in one field).
    pub fn from_buf(buf: PackBuf) -> Self {
        Pack { buf }
    }

    pub fn into_buf(self) -> PackBuf {
        self.buf
    }

    /// Views a set's buffer as a pack.
    pub(crate) fn view(buf: &PackBuf) -> &Self {
        // SAFETY: `Pack` is `repr(transparent)` over `PackBuf`, so both have
        // the same layout and the reference keeps `buf`'s lifetime.
        unsafe { &*(buf as *const PackBuf as *const Self) }
    }

    /// Mutable form of [`Pack::view`].
    pub(crate) fn view_mut(buf: &mut PackBuf) -> &mut Self {
        // SAFETY: as in `view`; the unique borrow of `buf` is carried over.
        unsafe { &mut *(buf as *mut PackBuf as *mut Self) }
    }

    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        self.buf.as_slice()
    }

    /// Number of entries: O(1) below 16M, counted by walking past that.
    #[inline]
    pub fn len(&self) -> usize {
        match self.buf.count() {
            Some(n) => n,
            None => self.iter().count(),
        }
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Bytes of the allocation (MEMORY USAGE, conversion thresholds).
    #[inline]
    pub fn byte_len(&self) -> usize {
        self.buf.len()
    }

    /// The size Redis's listpack would report for the same entries
    /// (`lpBytes`: our entries plus its 6-byte header and end byte). Used
    /// where Redis compares listpack bytes with `list-max-listpack-size`.
    #[inline]
    pub fn redis_bytes(&self) -> usize {
        self.buf.len() + 7
    }

    /// Redis's `lpSafeToAdd`: whether `add` more bytes keep the pack under
    /// 1 GiB.
    #[inline]
    pub fn safe_to_add(&self, add: usize) -> bool {
        self.redis_bytes().saturating_add(add) <= MAX_SAFE_BYTES
    }

    /// Sets the count after a change of `removed`/`added` entries, walking
    /// only when the old count had saturated.
    fn adjust_len(&mut self, old: Option<usize>, added: usize, removed: usize) {
        match old {
            Some(n) => self.buf.set_count(n + added - removed),
            None => {
                let n = self.iter().count();
                self.buf.set_count(n);
            }
        }
    }

    /// Offset of the first entry, if any.
    #[inline]
    pub fn first(&self) -> Option<usize> {
        (!self.buf.is_empty()).then_some(FIRST)
    }

    /// The entry at `off` and the offset of the next one (`byte_len()` at the
    /// end).
    #[inline]
    pub fn entry(&self, off: usize) -> (Item<'_>, usize) {
        let (item, n) = decode(self.buf.as_slice(), off);
        let next = if BACK { off + n + backlen_len(n) } else { off + n };
        (item, next)
    }

    #[inline]
    pub fn get(&self, off: usize) -> Item<'_> {
        decode(self.buf.as_slice(), off).0
    }

    /// Offset of the entry after the one at `off`, if any.
    #[inline]
    pub fn next(&self, off: usize) -> Option<usize> {
        let (_, next) = self.entry(off);
        (next < self.buf.len()).then_some(next)
    }

    /// Offset of the entry `skip` entries after `off` (None past the end).
    pub fn skip(&self, mut off: usize, skip: usize) -> Option<usize> {
        if off >= self.buf.len() {
            return None;
        }
        for _ in 0..skip {
            off = self.next(off)?;
        }
        Some(off)
    }

    /// Offset of the entry at `index` (forward walk; backward from the tail
    /// when `BACK` and the index is in the second half).
    pub fn seek(&self, index: usize) -> Option<usize> {
        let len = self.len();
        if index >= len {
            return None;
        }
        if BACK && index > len / 2 {
            let mut off = self.last()?;
            for _ in 0..(len - 1 - index) {
                off = self.prev(off)?;
            }
            return Some(off);
        }
        self.skip(FIRST, index)
    }

    /// Forward iteration over the items.
    pub fn iter(&self) -> PackIter<'_, BACK> {
        PackIter { pack: self, off: FIRST }
    }

    /// Forward iteration with each item's offset.
    pub fn iter_offsets(&self) -> impl Iterator<Item = (usize, Item<'_>)> + '_ {
        let mut off = FIRST;
        std::iter::from_fn(move || {
            if off >= self.buf.len() {
                return None;
            }
            let (item, next) = self.entry(off);
            let here = off;
            off = next;
            Some((here, item))
        })
    }

    /// Offset of the first entry from `off` on (every `stride`-th entry) that
    /// matches `probe`.
    pub fn find(&self, probe: &Probe<'_>, mut off: usize, stride: usize) -> Option<usize> {
        let end = self.buf.len();
        while off < end {
            let (item, mut next) = self.entry(off);
            if probe.matches(&item) {
                return Some(off);
            }
            for _ in 1..stride {
                if next >= end {
                    return None;
                }
                next = self.entry(next).1;
            }
            off = next;
        }
        None
    }

    /// Inserts `items` before the entry at `off` (`byte_len()` appends):
    /// one reallocation, encoding straight into the pack.
    pub fn insert(&mut self, off: usize, items: &[Item<'_>]) {
        let add: usize = items.iter().map(stored_len::<BACK>).sum();
        let old = self.buf.count();
        self.buf.edit(|v| {
            v.reserve_exact(add);
            for item in items {
                encode_stored::<BACK>(item, v);
            }
            v[off..].rotate_right(add);
        });
        self.adjust_len(old, items.len(), 0);
    }

    pub fn push_back(&mut self, items: &[Item<'_>]) {
        let end = self.buf.len();
        self.insert(end, items);
    }

    pub fn push_front(&mut self, items: &[Item<'_>]) {
        self.insert(FIRST, items);
    }

    /// Replaces the entry at `off` with `item` (in place when the sizes
    /// match, as for most HSET/LSET overwrites of like values).
    pub fn replace(&mut self, off: usize, item: &Item<'_>) {
        let (_, end) = self.entry(off);
        let mut encoded = Vec::with_capacity(stored_len::<BACK>(item));
        encode_stored::<BACK>(item, &mut encoded);
        if encoded.len() == end - off {
            self.buf.as_mut_slice()[off..end].copy_from_slice(&encoded);
        } else {
            self.buf.splice(off, end, &encoded);
        }
    }

    /// Deletes `n` entries starting at `off`.
    pub fn delete(&mut self, off: usize, n: usize) {
        let mut end = off;
        let mut removed = 0;
        while removed < n && end < self.buf.len() {
            end = self.entry(end).1;
            removed += 1;
        }
        self.delete_bytes(off, end, removed);
    }

    /// Deletes the entries in the byte range `start..end` that hold `n`
    /// entries (callers that already walked the range).
    pub fn delete_bytes(&mut self, start: usize, end: usize, n: usize) {
        let old = self.buf.count();
        self.buf.splice(start, end, &[]);
        self.adjust_len(old, 0, n);
    }

    /// Keeps only the entries `keep` selects (one pass, one reallocation);
    /// returns how many went.
    pub fn retain(&mut self, mut keep: impl FnMut(usize, Item<'_>) -> bool) -> usize {
        let bytes = self.buf.as_slice();
        let mut out = Vec::with_capacity(bytes.len());
        let mut kept = 0;
        let mut index = 0;
        let mut off = FIRST;
        while off < bytes.len() {
            let (item, next) = self.entry(off);
            if keep(index, item) {
                out.extend_from_slice(&bytes[off..next]);
                kept += 1;
            }
            index += 1;
            off = next;
        }
        let removed = index - kept;
        if removed > 0 {
            self.buf.set_bytes(out);
            self.buf.set_count(kept);
        }
        removed
    }

    /// Splits off the entries from `off` on into a new pack holding `n`
    /// entries (quicklist nodes, tree leaves).
    pub fn split_off(&mut self, off: usize, n: usize) -> Pack<BACK> {
        let right = self.buf.as_slice()[off..].to_vec();
        let old = self.buf.count();
        let len = self.buf.len();
        self.buf.splice(off, len, &[]);
        self.adjust_len(old, 0, n);
        let mut buf = PackBuf::from_box(right.into_boxed_slice(), n);
        if old.is_none() {
            let pack = Pack::<BACK> { buf };
            let n = pack.iter().count();
            buf = pack.buf;
            buf.set_count(n);
        }
        Pack { buf }
    }

    /// Appends all of `other`'s entries.
    pub fn append(&mut self, other: &Pack<BACK>) {
        let old = match (self.buf.count(), other.buf.count()) {
            (Some(a), Some(_)) => Some(a),
            _ => None,
        };
        let end = self.buf.len();
        self.buf.splice(end, end, other.buf.as_slice());
        self.adjust_len(old, other.len(), 0);
    }

    /// Offset of the last entry, if any: O(1) with back-lengths, a walk
    /// otherwise (forward packs are small or read forwards).
    #[inline]
    pub fn last(&self) -> Option<usize> {
        if BACK {
            (!self.buf.is_empty()).then(|| entry_start_before(self.buf.as_slice(), self.buf.len()))
        } else {
            let mut off = self.first()?;
            while let Some(next) = self.next(off) {
                off = next;
            }
            Some(off)
        }
    }

    /// Offset of the entry before the one at `off`, if any.
    #[inline]
    pub fn prev(&self, off: usize) -> Option<usize> {
        if BACK {
            (off > FIRST).then(|| entry_start_before(self.buf.as_slice(), off))
        } else {
            let mut cur = self.first()?;
            let mut prev = None;
            while cur < off {
                prev = Some(cur);
                cur = self.next(cur)?;
            }
            prev
        }
    }
}

impl Pack<true> {
    /// Backward iteration over the items.
    pub fn iter_rev(&self) -> impl Iterator<Item = Item<'_>> + '_ {
        let mut end = self.buf.len();
        std::iter::from_fn(move || {
            if end == FIRST {
                return None;
            }
            let start = entry_start_before(self.buf.as_slice(), end);
            end = start;
            Some(self.get(start))
        })
    }
}

pub struct PackIter<'a, const BACK: bool> {
    pack: &'a Pack<BACK>,
    off: usize,
}

impl<'a, const BACK: bool> Iterator for PackIter<'a, BACK> {
    type Item = Item<'a>;

    #[inline]
    fn next(&mut self) -> Option<Item<'a>> {
        if self.off >= self.pack.buf.len() {
            return None;
        }
        let (item, next) = self.pack.entry(self.off);
        self.off = next;
        Some(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(item: Item<'_>) -> Vec<u8> {
        let mut out = Vec::new();
        encode(&item, &mut out);
        assert_eq!(out.len(), encoded_len(&item), "{item:?}");
        let (back, n) = decode(&out, 0);
        assert_eq!(n, out.len());
        match (item, back) {
            (Item::Int(a), Item::Int(b)) => assert_eq!(a, b),
            (Item::Float(a), Item::Float(b)) => assert_eq!(a.to_bits(), b.to_bits()),
            (Item::Str(a), Item::Str(b)) => assert_eq!(a, b),
            (Item::Str(a), Item::Int(b)) => assert_eq!(parse_i64(a), Some(b)),
            (a, b) => panic!("{a:?} came back as {b:?}"),
        }
        out
    }

    #[test]
    fn integers_use_redis_listpack_sizes() {
        let cases: [(i64, usize); 14] = [
            (0, 1),
            (127, 1),
            (128, 2),
            (-1, 2),
            (-4096, 2),
            (4095, 2),
            (4096, 3),
            (-32768, 3),
            (32768, 4),
            (-8388608, 4),
            (8388608, 5),
            (i32::MIN as i64, 5),
            (i32::MAX as i64 + 1, 9),
            (i64::MIN, 9),
        ];
        for (v, size) in cases {
            assert_eq!(round_trip(Item::Int(v)).len(), size, "{v}");
        }
        assert_eq!(round_trip(Item::Int(i64::MAX)).len(), 9);
    }

    #[test]
    fn strings_floats_and_canonical_integers() {
        for len in [0usize, 1, 63, 64, 4095, 4096, 70_000] {
            let s = vec![b'x'; len];
            assert_eq!(round_trip(Item::Str(&s)).len(), len + str_header_len(len));
        }
        // Canonical integers are stored as integers, anything else as text.
        assert_eq!(round_trip(Item::Str(b"12")).len(), 1);
        for text in [&b"012"[..], b"-0", b"+1", b"1 ", b"99999999999999999999", b""] {
            let mut out = Vec::new();
            encode(&Item::Str(text), &mut out);
            assert!(matches!(decode(&out, 0).0, Item::Str(s) if s == text), "{text:?}");
        }
        for f in [0.5, -0.0, f64::INFINITY, f64::NEG_INFINITY, 1e-300] {
            round_trip(Item::Float(f));
        }
        assert!(matches!(Item::from_score(3.0), Item::Int(3)));
        assert!(matches!(Item::from_score(-0.0), Item::Float(_)));
        assert!(matches!(Item::from_score(1e20), Item::Float(_)));
        assert!(matches!(Item::from_score(0.25), Item::Float(_)));
    }

    #[test]
    fn probes_compare_like_strings() {
        let p = Probe::new(b"42");
        assert!(p.matches(&Item::Int(42)) && !p.matches(&Item::Str(b"42")));
        let p = Probe::new(b"042");
        assert!(p.matches(&Item::Str(b"042")) && !p.matches(&Item::Int(42)));
        assert!(Item::Int(-17).eq_bytes(b"-17"));
        assert_eq!(Item::Int(10).cmp_bytes(b"9"), Ordering::Less, "bytes order, not numeric");
        let mut tmp = [0u8; 24];
        assert_eq!(Item::Int(i64::MIN).bytes(&mut tmp), b"-9223372036854775808");
    }

    #[test]
    fn huge_strings_and_back_lengths_encode() {
        for len in [
            0usize,
            127,
            128,
            16382,
            16383,
            2097151,
            268435455,
            34359738366,
            34359738367,
            40_000_000_000,
        ] {
            let mut out = vec![7u8];
            encode_backlen(len, &mut out);
            assert_eq!(out.len(), 1 + backlen_len(len));
            assert_eq!(read_backlen(&out, out.len()), (len, 1), "{len}");
        }
        assert_eq!((backlen_len((1 << 35) - 1), backlen_len(1 << 35)), (5, 6));
        assert_eq!(str_header_len(u32::MAX as usize), 5);
        assert_eq!(str_header_len(u32::MAX as usize + 1), 9);
    }

    #[test]
    fn back_lengths_walk_every_entry_size_backwards() {
        let mut p = Pack::<true>::new();
        let sizes = [0usize, 5, 125, 126, 127, 128, 16_380, 16_383, 16_384, 3_000_000];
        let values: Vec<Vec<u8>> = sizes.iter().map(|&n| vec![b'a' + (n % 26) as u8; n]).collect();
        let items: Vec<Item<'_>> = values.iter().map(|v| Item::Str(v)).collect();
        p.push_back(&items);
        p.push_front(&[Item::Int(-5), Item::Str(b"head")]);
        let back: Vec<Vec<u8>> = p.iter_rev().map(|i| i.to_vec()).collect();
        let mut forward: Vec<Vec<u8>> = p.iter().map(|i| i.to_vec()).collect();
        forward.reverse();
        assert_eq!(back, forward);
        assert_eq!(p.len(), sizes.len() + 2);
        assert_eq!(p.get(p.last().unwrap()).to_vec(), values[values.len() - 1]);
        for i in 0..p.len() {
            let off = p.seek(i).unwrap();
            assert_eq!(p.get(off).to_vec(), forward[forward.len() - 1 - i]);
        }
    }

    #[test]
    fn counts_saturate_and_stay_right() {
        let mut p = Pack::<false>::new();
        let batch = vec![Item::Int(7); 1 << 20];
        for _ in 0..16 {
            p.push_back(&batch);
        }
        p.push_back(&batch[..(COUNT_UNKNOWN + 10) - (16 << 20)]);
        assert_eq!(p.len(), COUNT_UNKNOWN + 10);
        p.delete(FIRST, 20);
        assert_eq!(p.len(), COUNT_UNKNOWN - 10);
        p.delete(FIRST, 1);
        assert_eq!(p.len(), COUNT_UNKNOWN - 11);
        let right = p.split_off(p.seek(10).unwrap(), p.len() - 10);
        assert_eq!((p.len(), right.len()), (10, COUNT_UNKNOWN - 21));
    }

    #[test]
    fn edits_keep_exact_sizes() {
        let mut p = Pack::<false>::new();
        p.push_back(&[Item::Str(b"a"), Item::Int(300), Item::Str(b"ccc")]);
        assert_eq!(p.byte_len(), 2 + 2 + 4, "300 is a 13-bit integer");
        assert_eq!(p.redis_bytes(), 8 + 7);
        let off = p.next(FIRST).unwrap();
        p.replace(off, &Item::Str(b"bb"));
        assert_eq!(
            p.iter().map(|i| i.to_vec()).collect::<Vec<_>>(),
            [b"a".to_vec(), b"bb".to_vec(), b"ccc".to_vec()]
        );
        assert_eq!(p.find(&Probe::new(b"ccc"), FIRST, 1), p.seek(2));
        assert_eq!(p.find(&Probe::new(b"ccc"), FIRST, 2), p.seek(2));
        assert_eq!(p.find(&Probe::new(b"bb"), FIRST, 2), None, "stride skips values");
        assert_eq!(p.retain(|i, _| i != 1), 1);
        assert_eq!(p.len(), 2);
        let q = p.clone();
        p.append(&q);
        assert_eq!(p.len(), 4);
        assert_eq!(p.byte_len(), 2 * q.byte_len());
        p.delete(FIRST, 4);
        assert!(p.is_empty() && p.first().is_none() && p.last().is_none());
    }
}
