//! Replies on their way out as segments: a byte buffer with shared values
//! ([`Bytes`]) spliced in at offsets, so that a large string goes from the
//! keyspace to the socket without being copied into the buffer.
//!
//! What the client receives is `bytes[..at₀] + value₀ + bytes[at₀..at₁] +
//! value₁ + … + bytes[atₙ..]`. A splice is only ever added at the buffer's
//! current end, right after its `$<len>\r\n` header and before its `\r\n`,
//! so offsets never decrease and a splice belongs to the reply whose byte
//! range `(start, end]` holds its offset (never a reply's first position).
//! Positions ("marks") are offsets in the byte buffer, as they were when
//! replies were one `Vec<u8>`: truncating to a mark drops the splices after
//! it too.

use crate::reply::{ReplyWriter, Resp};
use bytes::Bytes;
use std::borrow::Cow;
use std::ops::Range;

/// Smallest value the reply writer splices rather than copies. A splice
/// costs an atomic reference count taken and dropped, two more iovecs and
/// a `sendmsg` instead of a plain `send`; a copy costs a pass over the
/// value. Measured on one shard with `redis-benchmark -t get -P 16`
/// (requests per server CPU-second, splicing vs copying): even at 4 KiB,
/// 1.28x better at 8 KiB, 1.6x at 16 KiB, 2x and more from 64 KiB.
pub const SPLICE_MIN: usize = 8 * 1024;

/// A value spliced into the reply stream before byte `at` of the buffer.
#[derive(Clone, Debug)]
pub struct Splice {
    pub at: usize,
    pub data: Bytes,
}

/// The splices of one buffer, in offset order, and their total length.
#[derive(Clone, Debug, Default)]
pub struct Splices {
    list: Vec<Splice>,
    bytes: usize,
}

impl Splices {
    /// Adds `data` at offset `at`, which must not be before the last one.
    pub fn push(&mut self, at: usize, data: Bytes) {
        debug_assert!(self.list.last().is_none_or(|s| s.at <= at));
        self.bytes += data.len();
        self.list.push(Splice { at, data });
    }

    /// Drops the splices after buffer position `mark` (the buffer is being
    /// truncated to it).
    pub fn truncate(&mut self, mark: usize) {
        let keep = self.list.partition_point(|s| s.at <= mark);
        self.bytes -= self.list[keep..].iter().map(|s| s.data.len()).sum::<usize>();
        self.list.truncate(keep);
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Total bytes of the spliced values.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Splice> {
        self.list.iter()
    }

    fn clear(&mut self) {
        self.list.clear();
        self.bytes = 0;
    }

    /// The splices in the buffer range `(range.start, range.end]`.
    fn within(&self, range: &Range<usize>) -> &[Splice] {
        let from = self.list.partition_point(|s| s.at <= range.start);
        let to = self.list.partition_point(|s| s.at <= range.end);
        &self.list[from..to.max(from)]
    }
}

/// Replies waiting to be sent: bytes plus spliced values.
#[derive(Debug, Default)]
pub struct Output {
    bytes: Vec<u8>,
    splices: Splices,
}

impl Output {
    pub fn with_capacity(capacity: usize) -> Output {
        Output { bytes: Vec::with_capacity(capacity), splices: Splices::default() }
    }

    /// A reply writer that splices large values in (see
    /// [`ReplyWriter::bulk_shared`]).
    pub fn writer(&mut self, resp: Resp) -> ReplyWriter<'_> {
        ReplyWriter::spliced(&mut self.bytes, &mut self.splices, resp)
    }

    /// The byte buffer and the splices, for code that writes both (a
    /// shard's command execution). Whoever truncates the buffer must
    /// truncate the splices to the same mark.
    pub fn parts(&mut self) -> (&mut Vec<u8>, &mut Splices) {
        (&mut self.bytes, &mut self.splices)
    }

    /// Length of the byte buffer: the position later replies start at (a
    /// mark for [`Output::truncate`]).
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Bytes the client will receive: the buffer and the spliced values.
    pub fn size(&self) -> usize {
        self.bytes.len() + self.splices.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty() && self.splices.is_empty()
    }

    pub fn has_splices(&self) -> bool {
        !self.splices.is_empty()
    }

    /// Capacity of the byte buffer.
    pub fn capacity(&self) -> usize {
        self.bytes.capacity()
    }

    /// Drops everything written after `mark` (a value of [`Output::len`]).
    pub fn truncate(&mut self, mark: usize) {
        self.bytes.truncate(mark);
        self.splices.truncate(mark);
    }

    pub fn clear(&mut self) {
        self.bytes.clear();
        self.splices.clear();
    }

    pub fn extend_from_slice(&mut self, data: &[u8]) {
        self.bytes.extend_from_slice(data);
    }

    /// The byte buffer from `mark` on, for replies known not to splice
    /// (anything but a string value's bulk reply).
    pub fn bytes_since(&self, mark: usize) -> &[u8] {
        &self.bytes[mark..]
    }

    /// Moves everything in `other` to the end of this output, leaving
    /// `other` empty (no copy at all when this one is empty).
    pub fn append(&mut self, other: &mut Output) {
        if self.is_empty() {
            std::mem::swap(self, other);
            return;
        }
        let base = self.bytes.len();
        self.bytes.extend_from_slice(&other.bytes);
        for s in other.splices.list.drain(..) {
            self.splices.push(base + s.at, s.data);
        }
        other.clear();
    }

    /// Appends the replies of `other` in its buffer range `range`, with
    /// their spliced values (shared, not copied).
    pub fn append_range(&mut self, other: &Output, range: Range<usize>) {
        let base = self.bytes.len();
        for s in other.splices.within(&range) {
            self.splices.push(base + s.at - range.start, s.data.clone());
        }
        self.bytes.extend_from_slice(&other.bytes[range]);
    }

    /// Drops the replies before buffer position `upto` (a reply boundary).
    pub fn drain_front(&mut self, upto: usize) {
        self.bytes.drain(..upto);
        let gone = self.splices.list.partition_point(|s| s.at <= upto);
        self.splices.bytes -= self.splices.list[..gone].iter().map(|s| s.data.len()).sum::<usize>();
        self.splices.list.drain(..gone);
        self.splices.list.iter_mut().for_each(|s| s.at -= upto);
    }

    /// The stream as one contiguous buffer (copying the spliced values),
    /// for code that parses replies.
    pub fn into_flat(self) -> Vec<u8> {
        if self.splices.is_empty() {
            return self.bytes;
        }
        flatten_since(&self.bytes, &self.splices, 0).into_owned()
    }

    /// The stream's pieces in order (empty pieces left out).
    pub fn segments(&self) -> Segments<'_> {
        Segments { bytes: &self.bytes, splices: &self.splices.list, from: 0, value_next: false }
    }
}

/// The pieces of an [`Output`]'s stream: runs of its buffer and the
/// spliced values between them.
pub struct Segments<'a> {
    bytes: &'a [u8],
    /// The splices not passed yet.
    splices: &'a [Splice],
    /// Start of the next run of the buffer (past its end once it is done).
    from: usize,
    /// The first splice's value comes next (its run before it is done).
    value_next: bool,
}

impl<'a> Iterator for Segments<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        loop {
            let splices = self.splices;
            let piece = match splices.first() {
                Some(s) if self.value_next => {
                    self.value_next = false;
                    self.splices = &splices[1..];
                    &s.data[..]
                }
                Some(s) => {
                    self.value_next = true;
                    let run = &self.bytes[self.from..s.at];
                    self.from = s.at;
                    run
                }
                None if self.from <= self.bytes.len() => {
                    let run = &self.bytes[self.from..];
                    self.from = self.bytes.len() + 1;
                    run
                }
                None => return None,
            };
            if !piece.is_empty() {
                return Some(piece);
            }
        }
    }
}

/// The stream from buffer position `mark` on as one slice: borrowed from
/// `bytes` when nothing after `mark` is spliced, else a copy.
pub fn flatten_since<'a>(bytes: &'a [u8], splices: &Splices, mark: usize) -> Cow<'a, [u8]> {
    let spliced = splices.within(&(mark..bytes.len()));
    if spliced.is_empty() {
        return Cow::Borrowed(&bytes[mark..]);
    }
    let size = bytes.len() - mark + spliced.iter().map(|s| s.data.len()).sum::<usize>();
    let mut flat = Vec::with_capacity(size);
    let mut from = mark;
    for s in spliced {
        flat.extend_from_slice(&bytes[from..s.at]);
        flat.extend_from_slice(&s.data);
        from = s.at;
    }
    flat.extend_from_slice(&bytes[from..]);
    Cow::Owned(flat)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn large(fill: u8) -> Bytes {
        Bytes::from(vec![fill; SPLICE_MIN])
    }

    fn flat(out: &Output) -> Vec<u8> {
        out.segments().flat_map(|s| s.iter().copied()).collect()
    }

    fn expected_bulk(value: &[u8]) -> Vec<u8> {
        let mut v = format!("${}\r\n", value.len()).into_bytes();
        v.extend_from_slice(value);
        v.extend_from_slice(b"\r\n");
        v
    }

    #[test]
    fn large_values_are_spliced_not_copied() {
        let value = large(b'x');
        let mut out = Output::default();
        let mut w = out.writer(Resp::V2);
        w.int(1);
        w.bulk_shared(&value);
        w.bulk_shared(&Bytes::from_static(b"small"));
        let header = format!("${SPLICE_MIN}\r\n").len();
        assert_eq!(
            out.len(),
            4 + header + 2 + 11,
            "only headers and small values are in the buffer"
        );
        assert_eq!(out.size(), out.len() + SPLICE_MIN);
        let spliced = out.splices.iter().next().map(|s| s.data.as_ptr());
        assert_eq!(spliced, Some(value.as_ptr()), "the value itself, shared");
        let mut want = b":1\r\n".to_vec();
        want.extend(expected_bulk(&value));
        want.extend(expected_bulk(b"small"));
        assert_eq!(flat(&out), want);
        assert_eq!(out.into_flat(), want);
    }

    #[test]
    fn segments_are_the_runs_and_the_values_in_order() {
        let (a, b) = (large(b'a'), large(b'b'));
        let mut out = Output::default();
        assert_eq!(out.segments().count(), 0);
        out.writer(Resp::V2).bulk_shared(&a);
        out.writer(Resp::V2).bulk_shared(&b);
        let pieces: Vec<&[u8]> = out.segments().collect();
        let header = format!("${}\r\n", SPLICE_MIN).into_bytes();
        let mut between = b"\r\n".to_vec();
        between.extend_from_slice(&header);
        let want: Vec<&[u8]> = vec![&header, &a, &between, &b, b"\r\n"];
        assert_eq!(pieces, want);
        out.extend_from_slice(b"+OK\r\n");
        assert_eq!(out.segments().last(), Some(&b"\r\n+OK\r\n"[..]));
    }

    #[test]
    fn a_plain_writer_copies() {
        let value = large(b'y');
        let mut buf = Vec::new();
        ReplyWriter::new(&mut buf, Resp::V3).bulk_shared(&value);
        assert_eq!(buf, expected_bulk(&value));
    }

    #[test]
    fn truncate_drops_the_splices_after_the_mark() {
        let mut out = Output::default();
        out.writer(Resp::V2).bulk_shared(&large(b'a'));
        let mark = out.len();
        out.writer(Resp::V2).bulk_shared(&large(b'b'));
        out.truncate(mark);
        assert_eq!(out.size(), mark + SPLICE_MIN);
        assert_eq!(flat(&out), expected_bulk(&large(b'a')));
        out.truncate(0);
        assert!(out.is_empty());
        assert_eq!(out.size(), 0);
    }

    #[test]
    fn ranges_and_appends_keep_values_in_place() {
        let mut src = Output::default();
        let mut ends = Vec::new();
        for (i, fill) in [b'a', b'b', b'c'].into_iter().enumerate() {
            src.writer(Resp::V2).int(i as i64);
            src.writer(Resp::V2).bulk_shared(&large(fill));
            ends.push(src.len());
        }
        // The second reply alone.
        let mut dst = Output::default();
        dst.extend_from_slice(b"+OK\r\n");
        dst.append_range(&src, ends[0]..ends[1]);
        let mut want = b"+OK\r\n".to_vec();
        want.extend(b":1\r\n");
        want.extend(expected_bulk(&large(b'b')));
        assert_eq!(flat(&dst), want);
        // Dropping the first reply keeps the other two intact.
        let whole = flat(&src);
        let first_size = ends[0] + SPLICE_MIN;
        src.drain_front(ends[0]);
        assert_eq!(flat(&src), whole[first_size..]);
        assert_eq!(src.size(), whole.len() - first_size);
        // Appending moves values and shifts their offsets.
        let mut moved = Output::default();
        moved.extend_from_slice(b"+OK\r\n");
        let mut rest = std::mem::take(&mut src);
        moved.append(&mut rest);
        assert!(rest.is_empty());
        let mut want = b"+OK\r\n".to_vec();
        want.extend_from_slice(&whole[first_size..]);
        assert_eq!(flat(&moved), want);
        assert_eq!(moved.size(), want.len());
    }
}
