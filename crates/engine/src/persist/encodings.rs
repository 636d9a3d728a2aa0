//! The compact blobs RDB stores as strings, byte for byte as Redis lays
//! them out: listpacks (Redis 7), and for loading older files ziplists,
//! intsets and zipmaps.
//!
//! Decoders validate everything (lengths, terminators, back-lengths, counts)
//! and never trust a size in the blob before checking it against the bytes
//! actually there: a RESTORE payload is client input.

use ringdb_types::number::parse_i64;
use ringdb_types::pack::Item;

/// Redis's listpack header: total bytes (u32) and element count (u16).
const LP_HEADER: usize = 6;
const LP_EOF: u8 = 0xFF;
/// The count field's "too many to count here" value.
const LP_COUNT_UNKNOWN: u16 = u16::MAX;

/// Builds a Redis listpack.
pub struct ListpackWriter {
    buf: Vec<u8>,
    count: usize,
}

impl Default for ListpackWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl ListpackWriter {
    pub fn new() -> Self {
        let mut buf = Vec::with_capacity(64);
        buf.extend_from_slice(&[0; LP_HEADER]);
        ListpackWriter { buf, count: 0 }
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes so far (without the terminator).
    pub fn byte_len(&self) -> usize {
        self.buf.len()
    }

    /// Appends a string; canonical integers are stored as integers, as
    /// Redis's `lpAppend` does.
    pub fn push_bytes(&mut self, s: &[u8]) {
        match (s.len() <= 20).then(|| parse_i64(s)).flatten() {
            Some(n) => self.push_int(n),
            None => self.push_str(s),
        }
    }

    /// Appends an item (`Float` items are written as Redis writes scores).
    pub fn push_item(&mut self, item: &Item<'_>) {
        match *item {
            Item::Str(s) => self.push_bytes(s),
            Item::Int(n) => self.push_int(n),
            Item::Float(f) => self.push_score(f),
        }
    }

    /// Appends a sorted-set score as Redis's `d2string` formats it.
    pub fn push_score(&mut self, score: f64) {
        match double_to_i64(score) {
            Some(n) => self.push_int(n),
            None => {
                let mut text = Vec::with_capacity(24);
                ringdb_protocol::reply::format_double(&mut text, score);
                self.push_str(&text);
            }
        }
    }

    pub fn push_int(&mut self, v: i64) {
        let start = self.buf.len();
        if (0..=127).contains(&v) {
            self.buf.push(v as u8);
        } else if (-4096..=4095).contains(&v) {
            let u = if v < 0 { (1 << 13) + v } else { v } as u16;
            self.buf.extend_from_slice(&[(u >> 8) as u8 | 0xC0, u as u8]);
        } else if (-32768..=32767).contains(&v) {
            self.buf.push(0xF1);
            self.buf.extend_from_slice(&(v as i16).to_le_bytes());
        } else if (-8_388_608..=8_388_607).contains(&v) {
            self.buf.push(0xF2);
            self.buf.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
        } else if (i32::MIN as i64..=i32::MAX as i64).contains(&v) {
            self.buf.push(0xF3);
            self.buf.extend_from_slice(&(v as i32).to_le_bytes());
        } else {
            self.buf.push(0xF4);
            self.buf.extend_from_slice(&v.to_le_bytes());
        }
        self.finish_entry(start);
    }

    fn push_str(&mut self, s: &[u8]) {
        let start = self.buf.len();
        let len = s.len();
        if len < 64 {
            self.buf.push(0x80 | len as u8);
        } else if len < 4096 {
            self.buf.extend_from_slice(&[0xE0 | (len >> 8) as u8, len as u8]);
        } else {
            self.buf.push(0xF0);
            self.buf.extend_from_slice(&(len as u32).to_le_bytes());
        }
        self.buf.extend_from_slice(s);
        self.finish_entry(start);
    }

    /// Writes the back-length of the entry that started at `start`.
    fn finish_entry(&mut self, start: usize) {
        let l = self.buf.len() - start;
        encode_backlen(l, &mut self.buf);
        self.count += 1;
    }

    /// The finished listpack.
    pub fn finish(mut self) -> Vec<u8> {
        self.buf.push(LP_EOF);
        let total = self.buf.len() as u32;
        self.buf[0..4].copy_from_slice(&total.to_le_bytes());
        let count = if self.count < LP_COUNT_UNKNOWN as usize {
            self.count as u16
        } else {
            LP_COUNT_UNKNOWN
        };
        self.buf[4..6].copy_from_slice(&count.to_le_bytes());
        self.buf
    }
}

/// Redis's `lpEncodeBacklen`: the entry length in 7-bit groups, written so
/// that it reads right to left.
fn encode_backlen(l: usize, out: &mut Vec<u8>) {
    if l <= 127 {
        out.push(l as u8);
    } else if l < 16383 {
        out.extend_from_slice(&[(l >> 7) as u8, (l & 127) as u8 | 128]);
    } else if l < 2_097_151 {
        out.extend_from_slice(&[
            (l >> 14) as u8,
            ((l >> 7) & 127) as u8 | 128,
            (l & 127) as u8 | 128,
        ]);
    } else if l < 268_435_455 {
        out.extend_from_slice(&[
            (l >> 21) as u8,
            ((l >> 14) & 127) as u8 | 128,
            ((l >> 7) & 127) as u8 | 128,
            (l & 127) as u8 | 128,
        ]);
    } else {
        out.extend_from_slice(&[
            (l >> 28) as u8,
            ((l >> 21) & 127) as u8 | 128,
            ((l >> 14) & 127) as u8 | 128,
            ((l >> 7) & 127) as u8 | 128,
            (l & 127) as u8 | 128,
        ]);
    }
}

fn backlen_size(l: usize) -> usize {
    match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    }
}

/// Redis's `double2ll` as `d2string` uses it: the double as an integer when
/// it is one and within ±`LLONG_MAX / 2`.
pub fn double_to_i64(d: f64) -> Option<i64> {
    const HALF: f64 = (i64::MAX / 2) as f64;
    if !(-HALF..=HALF).contains(&d) {
        return None;
    }
    let n = d as i64;
    (n as f64 == d && !(d == 0.0 && d.is_sign_negative())).then_some(n)
}

/// Why a blob was refused.
pub type BlobError = &'static str;

fn le(bytes: &[u8]) -> u64 {
    bytes.iter().rev().fold(0u64, |acc, &b| (acc << 8) | b as u64)
}

/// Sign-extends the low `bits` bits of `v`.
fn sign_extend(v: u64, bits: u32) -> i64 {
    let shift = 64 - bits;
    ((v << shift) as i64) >> shift
}

/// The entries of a Redis listpack, validated as Redis's deep
/// `lpValidateIntegrity` does (header size, each entry inside the blob,
/// back-lengths, terminator, count when recorded).
pub fn listpack_items(lp: &[u8]) -> Result<Vec<Item<'_>>, BlobError> {
    const BAD: &str = "Listpack integrity check failed.";
    if lp.len() < LP_HEADER + 1 {
        return Err(BAD);
    }
    if le(&lp[0..4]) as usize != lp.len() || lp[lp.len() - 1] != LP_EOF {
        return Err(BAD);
    }
    let count = le(&lp[4..6]) as u16;
    let end = lp.len() - 1;
    let mut items = Vec::new();
    let mut p = LP_HEADER;
    while p < end {
        let first = lp[p];
        let need = |n: usize| if p + n <= end { Ok(()) } else { Err(BAD) };
        let (item, len) = if first & 0x80 == 0 {
            (Item::Int((first & 0x7f) as i64), 1)
        } else if first & 0xC0 == 0x80 {
            let n = (first & 0x3f) as usize;
            need(1 + n)?;
            (Item::Str(&lp[p + 1..p + 1 + n]), 1 + n)
        } else if first & 0xE0 == 0xC0 {
            need(2)?;
            let v = ((first & 0x1f) as u64) << 8 | lp[p + 1] as u64;
            (Item::Int(sign_extend(v, 13)), 2)
        } else if first & 0xF0 == 0xE0 {
            need(2)?;
            let n = ((first & 0x0f) as usize) << 8 | lp[p + 1] as usize;
            need(2 + n)?;
            (Item::Str(&lp[p + 2..p + 2 + n]), 2 + n)
        } else {
            match first {
                0xF0 => {
                    need(5)?;
                    let n = le(&lp[p + 1..p + 5]) as usize;
                    need(5usize.checked_add(n).ok_or(BAD)?)?;
                    (Item::Str(&lp[p + 5..p + 5 + n]), 5 + n)
                }
                0xF1 => {
                    need(3)?;
                    (Item::Int(sign_extend(le(&lp[p + 1..p + 3]), 16)), 3)
                }
                0xF2 => {
                    need(4)?;
                    (Item::Int(sign_extend(le(&lp[p + 1..p + 4]), 24)), 4)
                }
                0xF3 => {
                    need(5)?;
                    (Item::Int(sign_extend(le(&lp[p + 1..p + 5]), 32)), 5)
                }
                0xF4 => {
                    need(9)?;
                    (Item::Int(le(&lp[p + 1..p + 9]) as i64), 9)
                }
                _ => return Err(BAD),
            }
        };
        let back = backlen_size(len);
        need(len + back)?;
        if decode_backlen(&lp[p + len..p + len + back]) != Some(len) {
            return Err(BAD);
        }
        items.push(item);
        p += len + back;
    }
    if p != end || (count != LP_COUNT_UNKNOWN && count as usize != items.len()) {
        return Err(BAD);
    }
    Ok(items)
}

/// Reads a back-length written by [`encode_backlen`].
fn decode_backlen(b: &[u8]) -> Option<usize> {
    let mut v = 0usize;
    for (i, &byte) in b.iter().rev().enumerate() {
        v |= ((byte & 127) as usize) << (7 * i);
        let more = byte & 128 != 0;
        if more != (i + 1 < b.len()) {
            return None;
        }
    }
    Some(v)
}

/// The entries of a Redis ziplist (RDB types of Redis 6 and older),
/// validated: header, each entry's previous-length and encoding, the
/// terminator and, when recorded, the count.
pub fn ziplist_items(zl: &[u8]) -> Result<Vec<Item<'_>>, BlobError> {
    const BAD: &str = "Ziplist integrity check failed.";
    const HEADER: usize = 10;
    if zl.len() < HEADER + 1 || le(&zl[0..4]) as usize != zl.len() || zl[zl.len() - 1] != 0xFF {
        return Err(BAD);
    }
    let count = le(&zl[8..10]) as u16;
    let end = zl.len() - 1;
    let mut items = Vec::new();
    let mut p = HEADER;
    let mut prev_len = 0usize;
    while p < end {
        let start = p;
        let need = |at: usize, n: usize| if at + n <= end { Ok(()) } else { Err(BAD) };
        // Previous entry's length: 1 byte, or 0xFE and 4 bytes.
        need(p, 1)?;
        let (prev, prev_size) = if zl[p] < 254 {
            (zl[p] as usize, 1)
        } else if zl[p] == 254 {
            need(p, 5)?;
            (le(&zl[p + 1..p + 5]) as usize, 5)
        } else {
            return Err(BAD);
        };
        if prev != prev_len {
            return Err(BAD);
        }
        p += prev_size;
        need(p, 1)?;
        let enc = zl[p];
        let item = match enc >> 6 {
            0 => {
                let n = (enc & 0x3f) as usize;
                need(p, 1 + n)?;
                p += 1 + n;
                Item::Str(&zl[p - n..p])
            }
            1 => {
                need(p, 2)?;
                let n = ((enc & 0x3f) as usize) << 8 | zl[p + 1] as usize;
                need(p, 2 + n)?;
                p += 2 + n;
                Item::Str(&zl[p - n..p])
            }
            2 => {
                if enc != 0x80 {
                    return Err(BAD);
                }
                need(p, 5)?;
                let n = u32::from_be_bytes([zl[p + 1], zl[p + 2], zl[p + 3], zl[p + 4]]) as usize;
                need(p, 5usize.checked_add(n).ok_or(BAD)?)?;
                p += 5 + n;
                Item::Str(&zl[p - n..p])
            }
            _ => {
                let (size, v) = match enc {
                    0xC0 => (2, sign_extend(le(zl.get(p + 1..p + 3).ok_or(BAD)?), 16)),
                    0xD0 => (4, sign_extend(le(zl.get(p + 1..p + 5).ok_or(BAD)?), 32)),
                    0xE0 => (8, le(zl.get(p + 1..p + 9).ok_or(BAD)?) as i64),
                    0xF0 => (3, sign_extend(le(zl.get(p + 1..p + 4).ok_or(BAD)?), 24)),
                    0xFE => (1, sign_extend(le(zl.get(p + 1..p + 2).ok_or(BAD)?), 8)),
                    0xF1..=0xFD => (0, (enc & 0x0f) as i64 - 1),
                    _ => return Err(BAD),
                };
                need(p, 1 + size)?;
                p += 1 + size;
                Item::Int(v)
            }
        };
        prev_len = p - start;
        items.push(item);
    }
    if p != end || (count != u16::MAX && count as usize != items.len()) {
        return Err(BAD);
    }
    Ok(items)
}

/// Redis's intset blob (`encoding`, `length`, sorted little-endian values)
/// for these ascending, distinct values, at the smallest width.
pub fn intset_blob(values: &[i64]) -> Vec<u8> {
    let width: usize = if values.iter().all(|&v| i16::try_from(v).is_ok()) {
        2
    } else if values.iter().all(|&v| i32::try_from(v).is_ok()) {
        4
    } else {
        8
    };
    let mut out = Vec::with_capacity(8 + width * values.len());
    out.extend_from_slice(&(width as u32).to_le_bytes());
    out.extend_from_slice(&(values.len() as u32).to_le_bytes());
    for &v in values {
        out.extend_from_slice(&v.to_le_bytes()[..width]);
    }
    out
}

/// The values of an intset blob, checked as `intsetValidateIntegrity` does
/// deeply: a known width, the exact size, strictly ascending values.
pub fn intset_values(blob: &[u8]) -> Result<Vec<i64>, BlobError> {
    const BAD: &str = "Intset integrity check failed.";
    if blob.len() < 8 {
        return Err(BAD);
    }
    let width = le(&blob[0..4]) as usize;
    if !matches!(width, 2 | 4 | 8) {
        return Err(BAD);
    }
    let count = le(&blob[4..8]) as usize;
    if count == 0 || count.checked_mul(width).and_then(|n| n.checked_add(8)) != Some(blob.len()) {
        return Err(BAD);
    }
    let values: Vec<i64> =
        blob[8..].chunks_exact(width).map(|c| sign_extend(le(c), (width * 8) as u32)).collect();
    if values.windows(2).any(|w| w[0] >= w[1]) {
        return Err(BAD);
    }
    Ok(values)
}

/// A field and its value, borrowed from a blob.
pub type Pair<'a> = (&'a [u8], &'a [u8]);

/// The field/value pairs of a zipmap (RDB files of Redis 2.4 and older).
pub fn zipmap_pairs(zm: &[u8]) -> Result<Vec<Pair<'_>>, BlobError> {
    const BAD: &str = "Zipmap integrity check failed.";
    let mut p = 1usize;
    let mut pairs = Vec::new();
    let len_at = |p: usize| -> Result<(usize, usize), BlobError> {
        match zm.get(p) {
            Some(&b) if b < 254 => Ok((b as usize, 1)),
            Some(&254) => Ok((le(zm.get(p + 1..p + 5).ok_or(BAD)?) as usize, 5)),
            _ => Err(BAD),
        }
    };
    loop {
        match zm.get(p) {
            Some(&255) => break,
            None => return Err(BAD),
            _ => {}
        }
        let (klen, size) = len_at(p)?;
        p += size;
        let key = zm.get(p..p.checked_add(klen).ok_or(BAD)?).ok_or(BAD)?;
        p += klen;
        let (vlen, size) = len_at(p)?;
        p += size;
        let free = *zm.get(p).ok_or(BAD)? as usize;
        p += 1;
        let value = zm.get(p..p.checked_add(vlen).ok_or(BAD)?).ok_or(BAD)?;
        p += vlen + free;
        pairs.push((key, value));
    }
    if p + 1 != zm.len() {
        return Err(BAD);
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strs(items: &[Item<'_>]) -> Vec<Vec<u8>> {
        items.iter().map(|i| i.to_vec()).collect()
    }

    #[test]
    fn listpack_round_trip_every_encoding() {
        let long = vec![b'x'; 5000];
        let mid = vec![b'y'; 100];
        let values: Vec<Vec<u8>> = vec![
            b"0".to_vec(),
            b"127".to_vec(),
            b"-1".to_vec(),
            b"4095".to_vec(),
            b"-4096".to_vec(),
            b"30000".to_vec(),
            b"8000000".to_vec(),
            b"-2000000000".to_vec(),
            b"9223372036854775807".to_vec(),
            b"-9223372036854775808".to_vec(),
            b"007".to_vec(),
            b"".to_vec(),
            b"hello".to_vec(),
            mid,
            long,
        ];
        let mut w = ListpackWriter::new();
        for v in &values {
            w.push_bytes(v);
        }
        let lp = w.finish();
        assert_eq!(strs(&listpack_items(&lp).unwrap()), values);
        // Redis's own bytes for a listpack of "a", 1: header, 0x81 'a' 02, 01 01, FF.
        let mut w = ListpackWriter::new();
        w.push_bytes(b"a");
        w.push_bytes(b"1");
        assert_eq!(w.finish(), vec![12, 0, 0, 0, 2, 0, 0x81, b'a', 2, 1, 1, 0xFF]);
    }

    #[test]
    fn listpack_corruption_is_refused() {
        let mut w = ListpackWriter::new();
        w.push_bytes(b"hello");
        w.push_bytes(b"12");
        let lp = w.finish();
        for cut in 0..lp.len() {
            assert!(listpack_items(&lp[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad = lp.clone();
        bad[4] = 3; // wrong count
        assert!(listpack_items(&bad).is_err());
        let mut bad = lp.clone();
        bad[12] ^= 0x40; // wrong back-length
        assert!(listpack_items(&bad).is_err());
        // A string length pointing past the end.
        let mut bad = lp;
        bad[6] = 0x80 | 60;
        assert!(listpack_items(&bad).is_err());
    }

    #[test]
    fn backlen_round_trips() {
        for l in [1usize, 127, 128, 16382, 16383, 2_097_150, 2_097_151, 300_000_000] {
            let mut b = Vec::new();
            encode_backlen(l, &mut b);
            assert_eq!(b.len(), backlen_size(l));
            assert_eq!(decode_backlen(&b), Some(l));
        }
    }

    #[test]
    fn scores_as_redis_formats_them() {
        let mut w = ListpackWriter::new();
        for s in [1.0, 1.5, -0.0, f64::INFINITY, 1e20] {
            w.push_score(s);
        }
        let lp = w.finish();
        let items = listpack_items(&lp).unwrap();
        assert_eq!(
            strs(&items),
            vec![
                b"1".to_vec(),
                b"1.5".to_vec(),
                b"-0".to_vec(),
                b"inf".to_vec(),
                b"1e+20".to_vec()
            ]
        );
    }

    #[test]
    fn ziplist_from_redis() {
        // A ziplist of "a", 1, "hello", 1000, made by Redis 6.
        let zl: Vec<u8> = vec![
            0x1b, 0, 0, 0, 0x16, 0, 0, 0, 4, 0, 0, 0x01, b'a', 3, 0xf2, 2, 0x05, b'h', b'e', b'l',
            b'l', b'o', 7, 0xc0, 0xe8, 0x03, 0xff,
        ];
        let items = ziplist_items(&zl).unwrap();
        assert_eq!(
            strs(&items),
            vec![b"a".to_vec(), b"1".to_vec(), b"hello".to_vec(), b"1000".to_vec()]
        );
        let mut bad = zl.clone();
        bad[13] = 9; // wrong previous length
        assert!(ziplist_items(&bad).is_err());
        assert!(ziplist_items(&zl[..20]).is_err());
    }

    #[test]
    fn intsets() {
        let blob = intset_blob(&[-5, 3, 70000]);
        assert_eq!(&blob[..8], &[4, 0, 0, 0, 3, 0, 0, 0]);
        assert_eq!(intset_values(&blob).unwrap(), vec![-5, 3, 70000]);
        assert_eq!(intset_values(&intset_blob(&[1, 2])).unwrap(), vec![1, 2]);
        assert!(intset_values(&intset_blob(&[2, 1])).is_err());
        assert!(intset_values(&blob[..10]).is_err());
        assert_eq!(intset_blob(&[i64::MIN, 0]).len(), 8 + 16);
    }

    #[test]
    fn zipmaps() {
        // zipmap {"foo": "bar"} with one free byte.
        let zm = [1, 3, b'f', b'o', b'o', 3, 1, b'b', b'a', b'r', 0, 255];
        assert_eq!(zipmap_pairs(&zm).unwrap(), vec![(&b"foo"[..], &b"bar"[..])]);
        assert!(zipmap_pairs(&zm[..8]).is_err());
    }
}
