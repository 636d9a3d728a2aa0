//! Bitmap algorithms over byte strings, bit 0 being the most significant bit
//! of byte 0 as in Redis: population count, first set/clear bit, and the
//! signed/unsigned integer fields of BITFIELD with Redis's overflow rules.
//!
//! Everything follows Redis's `bitops.c` to the bit, including its range
//! arithmetic (negative indexes, BYTE/BIT units, the "no end given" rule of
//! BITPOS) and the exact WRAP/SAT/FAIL results of
//! `checkUnsignedBitfieldOverflow` / `checkSignedBitfieldOverflow`: clients
//! see these numbers, so "close" is wrong.
//!
//! Nothing here allocates more than its result; bytes past the end of a
//! string read as zero, as Redis pads them.

/// The unit of a BITCOUNT/BITPOS range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Byte,
    Bit,
}

/// Number of set bits in `bytes` (Redis's `redisPopcount`).
pub fn popcount(bytes: &[u8]) -> u64 {
    let mut words = bytes.chunks_exact(8);
    let mut count: u64 = 0;
    for word in &mut words {
        let mut w = [0u8; 8];
        w.copy_from_slice(word);
        count += u64::from_ne_bytes(w).count_ones() as u64;
    }
    count + words.remainder().iter().map(|b| b.count_ones() as u64).sum::<u64>()
}

/// Position of the first bit equal to `bit` in `bytes` (Redis's
/// `redisBitpos`). Looking for a 1 in a string without one gives -1; looking
/// for a 0 in a string of only ones gives the bit just past the end, since
/// the string is taken as zero-padded on the right.
pub fn first_bit(bytes: &[u8], bit: bool) -> i64 {
    // Skip whole words that cannot hold the bit, then look inside one.
    let skip_word = if bit { 0 } else { u64::MAX };
    let skip_byte = if bit { 0 } else { u8::MAX };
    let mut pos = 0usize;
    for word in bytes.chunks_exact(8) {
        let mut w = [0u8; 8];
        w.copy_from_slice(word);
        if u64::from_ne_bytes(w) != skip_word {
            break;
        }
        pos += 8;
    }
    for (i, &byte) in bytes[pos..].iter().enumerate() {
        if byte != skip_byte {
            let inside = if bit { byte.leading_zeros() } else { byte.leading_ones() };
            return ((pos + i) * 8) as i64 + inside as i64;
        }
    }
    if bit {
        -1
    } else {
        bytes.len() as i64 * 8
    }
}

/// A BITCOUNT/BITPOS range resolved against a string: whole bytes
/// `start..=end` and, in BIT units, masks of the bits of the first and last
/// byte that lie outside the range. `None` when the range is empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ByteRange {
    start: usize,
    end: usize,
    /// Bits of byte `start` before the range (BIT unit), else 0.
    first_mask: u8,
    /// Bits of byte `end` after the range (BIT unit), else 0.
    last_mask: u8,
}

/// Redis's index arithmetic for BITCOUNT and BITPOS: negative indexes count
/// from the end, then both are clamped to the string, and BIT ranges are
/// turned into bytes plus edge masks.
fn resolve_range(len: usize, mut start: i64, mut end: i64, unit: Unit) -> Option<ByteRange> {
    let mut total = len as i64;
    if unit == Unit::Bit {
        total <<= 3;
    }
    if start < 0 {
        start += total;
    }
    if end < 0 {
        end += total;
    }
    start = start.max(0);
    end = end.max(0);
    if end >= total {
        end = total - 1;
    }
    if start > end {
        return None;
    }
    let (mut first_mask, mut last_mask) = (0u8, 0u8);
    if unit == Unit::Bit {
        first_mask = !((1u16 << (8 - (start & 7))) - 1) as u8;
        last_mask = ((1u16 << (7 - (end & 7))) - 1) as u8;
        start >>= 3;
        end >>= 3;
    }
    Some(ByteRange { start: start as usize, end: end as usize, first_mask, last_mask })
}

/// BITCOUNT with a range: the set bits of `bytes` between `start` and `end`
/// (inclusive, negative from the end) in `unit`s.
pub fn count_range(bytes: &[u8], start: i64, end: i64, unit: Unit) -> u64 {
    // Redis answers 0 for an inverted negative range before anything else.
    if start < 0 && end < 0 && start > end {
        return 0;
    }
    let Some(r) = resolve_range(bytes.len(), start, end, unit) else { return 0 };
    let outside =
        (bytes[r.start] & r.first_mask).count_ones() + (bytes[r.end] & r.last_mask).count_ones();
    popcount(&bytes[r.start..=r.end]) - outside as u64
}

/// The range of a BITPOS: `start`, and `end` when the client gave one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PosRange {
    pub start: i64,
    pub end: Option<i64>,
    pub unit: Unit,
}

/// BITPOS: the first bit equal to `bit` in `bytes` within `range` (the whole
/// string when `None`), as an absolute bit position; -1 when there is none.
///
/// As in Redis, when no end is given a search for 0 in a range of ones
/// answers the first bit past the string (it is zero-padded), but with an
/// explicit end it answers -1.
pub fn bitpos(bytes: &[u8], bit: bool, range: Option<PosRange>) -> i64 {
    let (resolved, end_given) = match range {
        None => {
            let r = (!bytes.is_empty()).then(|| ByteRange {
                start: 0,
                end: bytes.len() - 1,
                first_mask: 0,
                last_mask: 0,
            });
            (r, false)
        }
        Some(PosRange { start, end, unit }) => {
            let default_end = match unit {
                Unit::Bit => ((bytes.len() as i64) << 3) + 7,
                Unit::Byte => bytes.len() as i64 - 1,
            };
            (resolve_range(bytes.len(), start, end.unwrap_or(default_end), unit), end.is_some())
        }
    };
    // An empty range holds neither a 0 nor a 1.
    let Some(r) = resolved else { return -1 };
    let (start, bytes_left, pos) = search_range(bytes, bit, r);
    if end_given && !bit && pos == (bytes_left as i64) << 3 {
        return -1;
    }
    if pos == -1 {
        return -1;
    }
    pos + ((start as i64) << 3)
}

/// The body of Redis's `bitposCommand`: searches the masked first byte, the
/// whole bytes in between, then the masked last byte, stopping at the first
/// step that finds the bit. Returns where that step started (bytes), how
/// many bytes it covered, and the position it found relative to its start.
fn search_range(bytes: &[u8], bit: bool, r: ByteRange) -> (usize, usize, i64) {
    let masked = |byte: u8, mask: u8| if bit { byte & !mask } else { byte | mask };
    let mut start = r.start;
    let mut count = r.end - r.start + 1;
    if r.first_mask != 0 {
        let mut first = masked(bytes[start], r.first_mask);
        if r.last_mask != 0 && count == 1 {
            first = masked(first, r.last_mask);
        }
        let pos = first_bit(&[first], bit);
        if count == 1 || (pos != -1 && pos != 8) {
            return (start, count, pos);
        }
        start += 1;
        count -= 1;
    }
    let whole = count - (r.last_mask != 0) as usize;
    if whole > 0 {
        let pos = first_bit(&bytes[start..start + whole], bit);
        if count == whole || (pos != -1 && pos != (whole as i64) << 3) {
            return (start, count, pos);
        }
        start += whole;
        count -= whole;
    }
    let last = masked(bytes[r.end], r.last_mask);
    (start, count, first_bit(&[last], bit))
}

/// A BITOP operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BitOp {
    And,
    Or,
    Xor,
    Not,
}

/// BITOP over `sources` (NOT uses only the first). The result is as long as
/// the longest source; shorter ones count as zero-padded.
pub fn bitop(op: BitOp, sources: &[&[u8]]) -> Vec<u8> {
    let max_len = sources.iter().map(|s| s.len()).max().unwrap_or(0);
    let Some((first, rest)) = sources.split_first() else { return Vec::new() };
    let mut out = vec![0u8; max_len];
    out[..first.len()].copy_from_slice(first);
    match op {
        BitOp::Not => out.iter_mut().for_each(|b| *b = !*b),
        BitOp::And => {
            for src in rest {
                out.iter_mut().zip(src.iter()).for_each(|(o, s)| *o &= s);
                // Past the end of a source its bytes are 0.
                out[src.len()..].fill(0);
            }
        }
        BitOp::Or => {
            for src in rest {
                out.iter_mut().zip(src.iter()).for_each(|(o, s)| *o |= s);
            }
        }
        BitOp::Xor => {
            for src in rest {
                out.iter_mut().zip(src.iter()).for_each(|(o, s)| *o ^= s);
            }
        }
    }
    out
}

/// A BITFIELD integer type: `i1`..`i64` or `u1`..`u63`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldType {
    pub signed: bool,
    pub bits: u32,
}

impl FieldType {
    /// Parses `i<bits>` / `u<bits>` as Redis's `getBitfieldTypeFromArgument`
    /// does. u64 is refused because replies are signed 64-bit integers.
    pub fn parse(arg: &[u8]) -> Option<FieldType> {
        let (&sign, digits) = arg.split_first()?;
        let signed = match sign {
            b'i' => true,
            b'u' => false,
            _ => return None,
        };
        let bits = crate::number::parse_i64(digits)?;
        let max = if signed { 64 } else { 63 };
        if !(1..=max).contains(&bits) {
            return None;
        }
        Some(FieldType { signed, bits: bits as u32 })
    }
}

/// Reads the 9 bytes that hold any field of up to 64 bits starting in byte
/// `offset / 8`, zero-padded past the end of `bytes`, as the low 72 bits.
fn window(bytes: &[u8], offset: u64) -> u128 {
    let first = offset >> 3;
    (0..9u64).fold(0u128, |w, i| {
        let byte = usize::try_from(first + i).ok().and_then(|at| bytes.get(at)).copied();
        (w << 8) | byte.unwrap_or(0) as u128
    })
}

fn low_mask(bits: u32) -> u64 {
    u64::MAX.checked_shr(64 - bits).unwrap_or(0)
}

/// The unsigned `bits`-wide field at bit `offset` (Redis's
/// `getUnsignedBitfield`); bits past the end read as 0.
pub fn get_unsigned(bytes: &[u8], offset: u64, bits: u32) -> u64 {
    let shift = 72 - (offset & 7) as u32 - bits;
    (window(bytes, offset) >> shift) as u64 & low_mask(bits)
}

/// The signed `bits`-wide field at bit `offset`, sign-extended.
pub fn get_signed(bytes: &[u8], offset: u64, bits: u32) -> i64 {
    let mut value = get_unsigned(bytes, offset, bits);
    if bits < 64 && value & (1 << (bits - 1)) != 0 {
        value |= u64::MAX << bits;
    }
    value as i64
}

/// Stores the low `bits` bits of `value` at bit `offset` (Redis's
/// `setUnsignedBitfield`). The caller makes `bytes` long enough; bytes that
/// are not there are left out rather than written.
pub fn set_unsigned(bytes: &mut [u8], offset: u64, bits: u32, value: u64) {
    let shift = 72 - (offset & 7) as u32 - bits;
    let mask = (low_mask(bits) as u128) << shift;
    let updated = (window(bytes, offset) & !mask) | (((value & low_mask(bits)) as u128) << shift);
    let first = offset >> 3;
    for i in 0..9u64 {
        let Some(slot) = usize::try_from(first + i).ok().and_then(|at| bytes.get_mut(at)) else {
            break;
        };
        *slot = (updated >> (64 - 8 * i)) as u8;
    }
}

/// Stores `value` as a `bits`-wide two's complement field.
pub fn set_signed(bytes: &mut [u8], offset: u64, bits: u32, value: i64) {
    set_unsigned(bytes, offset, bits, value as u64)
}

/// BITFIELD's OVERFLOW behaviour.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OverflowMode {
    /// Wrap around (modular arithmetic; signed wraps towards the most
    /// negative value).
    #[default]
    Wrap,
    /// Saturate at the type's minimum or maximum.
    Sat,
    /// Refuse the operation: nothing is written and the reply is null.
    Fail,
}

/// Whether a value fits a field, as Redis's overflow checks report it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overflow<T> {
    /// It fits: store it as it is.
    Fits,
    /// It does not fit. `store` is what WRAP or SAT store instead; `None`
    /// under FAIL.
    Above {
        store: Option<T>,
    },
    Below {
        store: Option<T>,
    },
}

impl<T: Copy> Overflow<T> {
    /// What to store: `Some(fits)` when it fits, the WRAP/SAT replacement
    /// otherwise, `None` when FAIL refuses it.
    pub fn resolve(self, fits: T) -> Option<T> {
        match self {
            Overflow::Fits => Some(fits),
            Overflow::Above { store } | Overflow::Below { store } => store,
        }
    }
}

/// Redis's `checkUnsignedBitfieldOverflow`: whether `value + incr` fits an
/// unsigned `bits`-wide field, and what WRAP/SAT store when it does not.
pub fn check_unsigned_overflow(
    value: u64,
    incr: i64,
    bits: u32,
    mode: OverflowMode,
) -> Overflow<u64> {
    let max = low_mask(bits);
    // As in Redis these wrap where they cannot be represented; they are only
    // compared once `value` is known to be within the field.
    let max_incr = max.wrapping_sub(value) as i64;
    let min_incr = (value as i64).wrapping_neg();
    let wrapped = || value.wrapping_add(incr as u64) & max;
    let store = |limit: u64| match mode {
        OverflowMode::Wrap => Some(wrapped()),
        OverflowMode::Sat => Some(limit),
        OverflowMode::Fail => None,
    };
    if value > max || (incr > 0 && incr > max_incr) {
        Overflow::Above { store: store(max) }
    } else if incr < 0 && incr < min_incr {
        Overflow::Below { store: store(0) }
    } else {
        Overflow::Fits
    }
}

/// Redis's `checkSignedBitfieldOverflow`: whether `value + incr` fits a
/// signed `bits`-wide field, and what WRAP/SAT store when it does not.
pub fn check_signed_overflow(
    value: i64,
    incr: i64,
    bits: u32,
    mode: OverflowMode,
) -> Overflow<i64> {
    let max: i64 = if bits == 64 { i64::MAX } else { (1i64 << (bits - 1)) - 1 };
    let min = -max - 1;
    let max_incr = (max as u64).wrapping_sub(value as u64) as i64;
    let min_incr = min.wrapping_sub(value);
    let wrapped = || {
        let mut c = (value as u64).wrapping_add(incr as u64);
        if bits < 64 {
            // Propagate the field's sign bit to the bits above it.
            let high = u64::MAX << bits;
            c = if c & (1 << (bits - 1)) != 0 { c | high } else { c & !high };
        }
        c as i64
    };
    let store = |limit: i64| match mode {
        OverflowMode::Wrap => Some(wrapped()),
        OverflowMode::Sat => Some(limit),
        OverflowMode::Fail => None,
    };
    let narrow = bits != 64;
    if value > max || (narrow && incr > max_incr) || (value >= 0 && incr > 0 && incr > max_incr) {
        Overflow::Above { store: store(max) }
    } else if value < min
        || (narrow && incr < min_incr)
        || (value < 0 && incr < 0 && incr < min_incr)
    {
        Overflow::Below { store: store(min) }
    } else {
        Overflow::Fits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reference popcount, bit by bit.
    fn slow_count(bytes: &[u8]) -> u64 {
        bytes.iter().map(|b| (0..8).filter(|i| b & (1 << i) != 0).count() as u64).sum()
    }

    fn bit_at(bytes: &[u8], i: usize) -> bool {
        bytes[i / 8] & (0x80 >> (i % 8)) != 0
    }

    /// A deterministic pseudo-random byte string.
    fn noise(len: usize, seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[test]
    fn popcount_matches_bit_by_bit() {
        for len in [0, 1, 7, 8, 9, 31, 64, 100] {
            let s = noise(len, len as u64 + 3);
            assert_eq!(popcount(&s), slow_count(&s), "len {len}");
        }
        assert_eq!(popcount(&[0xff; 1000]), 8000);
    }

    #[test]
    fn first_bit_semantics() {
        assert_eq!(first_bit(b"", true), -1);
        assert_eq!(first_bit(b"", false), 0);
        assert_eq!(first_bit(&[0, 0, 0], true), -1);
        assert_eq!(first_bit(&[0xff, 0xff], false), 16);
        assert_eq!(first_bit(&[0, 0, 0x10], true), 19);
        assert_eq!(first_bit(&[0xff, 0xf7], false), 12);
        // Past the word-skipping loop.
        let mut long = vec![0u8; 37];
        long[33] = 1;
        assert_eq!(first_bit(&long, true), 33 * 8 + 7);
        let mut ones = vec![0xffu8; 37];
        ones[20] = 0xfe;
        assert_eq!(first_bit(&ones, false), 20 * 8 + 7);
    }

    #[test]
    fn count_range_bytes_and_bits() {
        let s = b"foobar";
        assert_eq!(count_range(s, 0, -1, Unit::Byte), 26);
        assert_eq!(count_range(s, 1, 1, Unit::Byte), 6);
        assert_eq!(count_range(s, 5, 30, Unit::Bit), 17);
        assert_eq!(count_range(s, 0, 0, Unit::Bit), 0);
        assert_eq!(count_range(s, 1, 1, Unit::Bit), 1);
        assert_eq!(count_range(s, -1, -2, Unit::Byte), 0);
        assert_eq!(count_range(s, 100, 200, Unit::Byte), 0);
        assert_eq!(count_range(s, -100, -1, Unit::Byte), 26);
        // Exhaustive against the bit-by-bit definition.
        let s = noise(5, 9);
        for start in -45..45i64 {
            for end in -45..45i64 {
                let total = 40i64;
                let (a, b) = (
                    if start < 0 { start + total } else { start },
                    if end < 0 { end + total } else { end },
                );
                let (a, b) = (a.max(0), b.max(0).min(total - 1));
                let expect = if start < 0 && end < 0 && start > end || a > b {
                    0
                } else {
                    (a..=b).filter(|&i| bit_at(&s, i as usize)).count() as u64
                };
                assert_eq!(count_range(&s, start, end, Unit::Bit), expect, "{start} {end}");
            }
        }
        // An inverted negative range is 0 even when clamping would meet.
        assert_eq!(count_range(b"\xff", -1, -2, Unit::Byte), 0);
        assert_eq!(count_range(b"", 0, -1, Unit::Byte), 0);
    }

    fn pos(start: i64, end: Option<i64>, unit: Unit) -> Option<PosRange> {
        Some(PosRange { start, end, unit })
    }

    #[test]
    fn bitpos_as_redis() {
        assert_eq!(bitpos(b"\xff\xf0\x00", false, None), 12);
        assert_eq!(bitpos(b"\x00\xff\xf0", true, pos(0, None, Unit::Byte)), 8);
        assert_eq!(bitpos(b"\x00\xff\xf0", true, pos(2, None, Unit::Byte)), 16);
        assert_eq!(bitpos(b"\x00\x00\x00", true, None), -1);
        assert_eq!(bitpos(b"", false, None), -1);
        // No end: the string continues with zeros.
        assert_eq!(bitpos(b"\xff\xff\xff", false, None), 24);
        assert_eq!(bitpos(b"\xff\xff\xff", false, pos(0, None, Unit::Byte)), 24);
        assert_eq!(bitpos(b"\xff\xff\xff", false, pos(3, None, Unit::Bit)), 24);
        // An explicit end makes that -1.
        assert_eq!(bitpos(b"\xff\xff\xff", false, pos(0, Some(-1), Unit::Byte)), -1);
        assert_eq!(bitpos(b"\xff\xff\xff", false, pos(0, Some(-1), Unit::Bit)), -1);
        assert_eq!(bitpos(b"\xff\xff\xff", false, pos(1, Some(1), Unit::Bit)), -1);
        // Bit ranges inside one byte and across bytes.
        assert_eq!(bitpos(b"\x00\xff\x00", true, pos(7, Some(15), Unit::Bit)), 8);
        assert_eq!(bitpos(b"\x00\xff\x00", true, pos(9, Some(15), Unit::Bit)), 9);
        assert_eq!(bitpos(b"\x00\xff\x00", false, pos(7, Some(15), Unit::Bit)), 7);
        assert_eq!(bitpos(b"\x00\xff\x00", false, pos(8, Some(15), Unit::Bit)), -1);
        assert_eq!(bitpos(b"\x00\x00\x01", true, pos(0, Some(22), Unit::Bit)), -1);
        assert_eq!(bitpos(b"\x00\x00\x01", true, pos(0, Some(23), Unit::Bit)), 23);
        assert_eq!(bitpos(b"\x00\xff\x00", true, pos(-5, Some(-1), Unit::Byte)), 8);
        assert_eq!(bitpos(b"\x00\xff\x00", true, pos(2, Some(1), Unit::Byte)), -1);
    }

    #[test]
    fn bitpos_matches_bit_by_bit_with_end() {
        let s = noise(4, 77);
        let total = 32i64;
        for bit in [false, true] {
            for start in -34..34i64 {
                for end in -34..34i64 {
                    let a = if start < 0 { start + total } else { start }.max(0);
                    let b = if end < 0 { end + total } else { end }.max(0).min(total - 1);
                    let expect = (a..=b).find(|&i| bit_at(&s, i as usize) == bit).unwrap_or(-1);
                    let got = bitpos(&s, bit, pos(start, Some(end), Unit::Bit));
                    assert_eq!(got, expect, "bit {bit} {start} {end}");
                }
            }
        }
    }

    #[test]
    fn bitop_pads_with_zeros() {
        let a: &[u8] = b"\x0f\xf0\xaa";
        let b: &[u8] = b"\xff\x0f";
        assert_eq!(bitop(BitOp::And, &[a, b]), vec![0x0f, 0x00, 0x00]);
        assert_eq!(bitop(BitOp::Or, &[a, b]), vec![0xff, 0xff, 0xaa]);
        assert_eq!(bitop(BitOp::Xor, &[a, b]), vec![0xf0, 0xff, 0xaa]);
        assert_eq!(bitop(BitOp::Not, &[b]), vec![0x00, 0xf0]);
        assert_eq!(bitop(BitOp::And, &[b, a]), vec![0x0f, 0x00, 0x00]);
        assert_eq!(bitop(BitOp::Or, &[b"", b""]), Vec::<u8>::new());
    }

    #[test]
    fn field_types() {
        assert_eq!(FieldType::parse(b"i64"), Some(FieldType { signed: true, bits: 64 }));
        assert_eq!(FieldType::parse(b"u63"), Some(FieldType { signed: false, bits: 63 }));
        assert_eq!(FieldType::parse(b"u1"), Some(FieldType { signed: false, bits: 1 }));
        for bad in [&b"u64"[..], b"i65", b"i0", b"u", b"", b"x8", b"U8", b"i08", b"i-1", b"i8 "] {
            assert_eq!(FieldType::parse(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn fields_follow_redis_layout() {
        // Redis's own example: u5 = 23 at offset 7 gives 00000001|01110000.
        let mut s = vec![0u8; 2];
        set_unsigned(&mut s, 7, 5, 23);
        assert_eq!(s, vec![0b0000_0001, 0b0111_0000]);
        assert_eq!(get_unsigned(&s, 7, 5), 23);
        assert_eq!(get_signed(&s, 7, 5), -9);
        // 64-bit fields at odd offsets, and reads past the end.
        let mut s = vec![0u8; 10];
        set_signed(&mut s, 3, 64, -2);
        assert_eq!(get_signed(&s, 3, 64), -2);
        assert_eq!(get_unsigned(&s, 3, 63), u64::MAX >> 1);
        assert_eq!(get_unsigned(&s, 0, 3), 0);
        assert_eq!(get_unsigned(&s, 67, 5), 0);
        assert_eq!(get_unsigned(b"\xff", 4, 8), 0xf0);
        assert_eq!(get_unsigned(b"", 1000, 63), 0);
        // Bit-by-bit agreement on random data.
        let data = noise(12, 5);
        for offset in 0..24u64 {
            for bits in 1..=64u32 {
                let expect = (0..bits as u64)
                    .fold(0u64, |v, i| (v << 1) | bit_at(&data, (offset + i) as usize) as u64);
                assert_eq!(get_unsigned(&data, offset, bits), expect, "{offset} {bits}");
                let mut copy = data.clone();
                set_unsigned(&mut copy, offset, bits, !expect);
                for i in 0..96u64 {
                    let inside = i >= offset && i < offset + bits as u64;
                    assert_eq!(
                        bit_at(&copy, i as usize),
                        bit_at(&data, i as usize) ^ inside,
                        "{offset} {bits} {i}"
                    );
                }
            }
        }
    }

    #[test]
    fn set_ignores_missing_bytes() {
        let mut s = vec![0u8; 1];
        set_unsigned(&mut s, 4, 8, 0xff);
        assert_eq!(s, vec![0x0f]);
    }

    #[test]
    fn unsigned_overflow() {
        use OverflowMode::*;
        assert_eq!(check_unsigned_overflow(200, 55, 8, Wrap), Overflow::Fits);
        assert_eq!(check_unsigned_overflow(200, 56, 8, Wrap), Overflow::Above { store: Some(0) });
        assert_eq!(check_unsigned_overflow(200, 100, 8, Sat), Overflow::Above { store: Some(255) });
        assert_eq!(check_unsigned_overflow(200, 100, 8, Fail), Overflow::Above { store: None });
        assert_eq!(check_unsigned_overflow(5, -6, 8, Wrap), Overflow::Below { store: Some(255) });
        assert_eq!(check_unsigned_overflow(5, -6, 8, Sat), Overflow::Below { store: Some(0) });
        assert_eq!(check_unsigned_overflow(5, -5, 8, Sat), Overflow::Fits);
        // SET of a negative value: seen as a huge unsigned value.
        assert_eq!(
            check_unsigned_overflow(-1i64 as u64, 0, 8, Wrap),
            Overflow::Above { store: Some(255) }
        );
        assert_eq!(
            check_unsigned_overflow(-1i64 as u64, 0, 8, Sat),
            Overflow::Above { store: Some(255) }
        );
        assert_eq!(check_unsigned_overflow(300, 0, 8, Wrap), Overflow::Above { store: Some(44) });
        assert_eq!(check_unsigned_overflow(0, i64::MAX, 63, Wrap), Overflow::Fits);
        assert_eq!(
            check_unsigned_overflow(1, i64::MAX, 63, Wrap),
            Overflow::Above { store: Some(0) }
        );
        assert_eq!(
            check_unsigned_overflow(0, i64::MIN, 63, Wrap),
            Overflow::Below { store: Some(0) }
        );
        assert_eq!(check_unsigned_overflow(1, -1, 1, Wrap), Overflow::Fits);
        assert_eq!(check_unsigned_overflow(1, 1, 1, Wrap), Overflow::Above { store: Some(0) });
    }

    #[test]
    fn signed_overflow() {
        use OverflowMode::*;
        assert_eq!(check_signed_overflow(100, 27, 8, Wrap), Overflow::Fits);
        assert_eq!(check_signed_overflow(100, 28, 8, Wrap), Overflow::Above { store: Some(-128) });
        assert_eq!(check_signed_overflow(100, 28, 8, Sat), Overflow::Above { store: Some(127) });
        assert_eq!(check_signed_overflow(100, 28, 8, Fail), Overflow::Above { store: None });
        assert_eq!(check_signed_overflow(-100, -29, 8, Wrap), Overflow::Below { store: Some(127) });
        assert_eq!(check_signed_overflow(-100, -29, 8, Sat), Overflow::Below { store: Some(-128) });
        assert_eq!(check_signed_overflow(-100, -28, 8, Sat), Overflow::Fits);
        assert_eq!(check_signed_overflow(1000, 0, 8, Wrap), Overflow::Above { store: Some(-24) });
        assert_eq!(check_signed_overflow(-1000, 0, 8, Sat), Overflow::Below { store: Some(-128) });
        // 64-bit fields: only real i64 overflow counts.
        assert_eq!(
            check_signed_overflow(i64::MAX, 1, 64, Wrap),
            Overflow::Above { store: Some(i64::MIN) }
        );
        assert_eq!(
            check_signed_overflow(i64::MAX, 1, 64, Sat),
            Overflow::Above { store: Some(i64::MAX) }
        );
        assert_eq!(
            check_signed_overflow(i64::MIN, -1, 64, Sat),
            Overflow::Below { store: Some(i64::MIN) }
        );
        assert_eq!(
            check_signed_overflow(i64::MIN, -1, 64, Wrap),
            Overflow::Below { store: Some(i64::MAX) }
        );
        assert_eq!(check_signed_overflow(-5, i64::MAX, 64, Fail), Overflow::Fits);
        assert_eq!(check_signed_overflow(5, i64::MIN, 64, Fail), Overflow::Fits);
        // i1 holds -1 and 0.
        assert_eq!(check_signed_overflow(0, 1, 1, Wrap), Overflow::Above { store: Some(-1) });
        assert_eq!(check_signed_overflow(-1, -1, 1, Sat), Overflow::Below { store: Some(-1) });
        assert_eq!(check_signed_overflow(-1, 1, 1, Fail), Overflow::Fits);
    }

    #[test]
    fn resolve_picks_the_stored_value() {
        assert_eq!(Overflow::<u64>::Fits.resolve(7), Some(7));
        assert_eq!(Overflow::Above { store: Some(9u64) }.resolve(7), Some(9));
        assert_eq!(Overflow::<u64>::Below { store: None }.resolve(7), None);
    }
}
