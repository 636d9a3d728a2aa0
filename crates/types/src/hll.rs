//! HyperLogLog exactly as Redis 7 keeps it (`hyperloglog.c`): the same hash,
//! registers, encodings, promotion rule and estimator, so that any sequence
//! of additions leaves the same bytes and the same count as in Redis.
//!
//! An HLL is a plain byte string (Redis stores it as a string value):
//!
//! ```text
//! "HYLL" | encoding (0 dense, 1 sparse) | 3 unused bytes | cached count (8, LE)
//! | registers
//! ```
//!
//! - 16384 registers of 6 bits. Dense: packed little end first, 12288 bytes.
//!   Sparse: run-length opcodes `ZERO` (00xxxxxx: 1..64 zero registers),
//!   `XZERO` (01xxxxxx xxxxxxxx: 1..16384 zero registers) and `VAL`
//!   (1vvvvvxx: 1..4 registers holding 1..32).
//! - A sparse HLL becomes dense when a register needs a value above 32 or
//!   when growing would take it past `hll-sparse-max-bytes`.
//! - The top bit of the cached count's last byte marks the cache stale.
//!
//! Everything here takes bytes a client may have written (SET of any
//! string, SETRANGE): nothing indexes out of range or panics on corrupt
//! input. Where Redis reads the string's terminating zero byte past the end,
//! these functions read a zero too, so that corrupt input behaves as in
//! Redis.

use crate::murmur::murmur64a;

/// Bits of the hash that pick a register.
const P: u32 = 14;
/// Bits left for the run of zeroes.
const Q: usize = 64 - P as usize;
/// Number of registers.
pub const REGISTERS: usize = 1 << P;
const REGISTER_MAX: u8 = 63;
/// Length of the header before the registers.
pub const HEADER_LEN: usize = 16;
/// Length of a dense HLL.
pub const DENSE_LEN: usize = HEADER_LEN + (REGISTERS * 6).div_ceil(8);
/// Redis's default `hll-sparse-max-bytes`.
pub const DEFAULT_SPARSE_MAX_BYTES: usize = 3000;
/// Redis's hash seed for HyperLogLog elements.
const HASH_SEED: u64 = 0xadc8_3b19;

const DENSE: u8 = 0;
const SPARSE: u8 = 1;

const SPARSE_VAL_MAX_VALUE: u8 = 32;
const SPARSE_VAL_MAX_LEN: usize = 4;
const SPARSE_ZERO_MAX_LEN: usize = 64;
const SPARSE_XZERO_MAX_LEN: usize = 16384;
/// 0.5 / ln(2).
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

/// How an HLL's registers are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    Dense,
    Sparse,
}

impl Encoding {
    /// The name PFDEBUG ENCODING reports.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Dense => "dense",
            Encoding::Sparse => "sparse",
        }
    }
}

/// The string is not an HLL at all (Redis: `WRONGTYPE Key is not a valid
/// HyperLogLog string value.`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotHll;

/// The string looks like an HLL but its registers do not decode (Redis:
/// `INVALIDOBJ Corrupted HLL object detected`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Corrupt;

/// A new, empty HLL: sparse, every register zero (Redis's
/// `createHLLObject`).
pub fn new_sparse() -> Vec<u8> {
    let mut hll = Vec::with_capacity(HEADER_LEN + 2);
    hll.extend_from_slice(b"HYLL");
    hll.push(SPARSE);
    hll.extend_from_slice(&[0; 11]);
    let mut left = REGISTERS;
    while left > 0 {
        let run = left.min(SPARSE_XZERO_MAX_LEN);
        push_xzero(&mut hll, run);
        left -= run;
    }
    hll
}

/// Whether `bytes` is an HLL, and how it is encoded (Redis's
/// `isHLLObjectOrReply`: the magic, a known encoding, the exact dense
/// length; sparse registers are checked only when used).
pub fn check(bytes: &[u8]) -> Result<Encoding, NotHll> {
    if bytes.len() < HEADER_LEN || &bytes[..4] != b"HYLL" {
        return Err(NotHll);
    }
    match bytes[4] {
        DENSE if bytes.len() == DENSE_LEN => Ok(Encoding::Dense),
        SPARSE => Ok(Encoding::Sparse),
        _ => Err(NotHll),
    }
}

/// The register an element updates and the value it offers: the length of
/// the run of zeroes after the register bits, plus one (Redis's
/// `hllPatLen`).
pub fn pattern(element: &[u8]) -> (usize, u8) {
    let hash = murmur64a(element, HASH_SEED);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    // The sentinel bit bounds the count at Q + 1.
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

/// Adds `element`; returns whether a register changed (PFADD's reply).
/// `sparse_max` is `hll-sparse-max-bytes`. The caller checked the value
/// with [`check`].
pub fn add(hll: &mut Vec<u8>, element: &[u8], sparse_max: usize) -> Result<bool, Corrupt> {
    let (index, count) = pattern(element);
    set_register(hll, index, count, sparse_max)
}

/// Raises register `index` to `count` if it is lower, in either encoding.
pub fn set_register(
    hll: &mut Vec<u8>,
    index: usize,
    count: u8,
    sparse_max: usize,
) -> Result<bool, Corrupt> {
    match hll.get(4) {
        Some(&DENSE) => Ok(dense_set(registers_mut(hll), index, count)),
        Some(&SPARSE) => sparse_set(hll, index, count, sparse_max),
        _ => Err(Corrupt),
    }
}

/// Marks the cached count stale (after any change to the registers).
pub fn invalidate_cache(hll: &mut [u8]) {
    if let Some(b) = hll.get_mut(15) {
        *b |= 0x80;
    }
}

/// PFCOUNT of one HLL: the cached count when it is valid, otherwise the
/// estimate, which is then cached. Returns the count and whether the value
/// changed (the cache was written).
pub fn cached_count(hll: &mut [u8]) -> Result<(u64, bool), Corrupt> {
    let card = hll.get(8..16).ok_or(Corrupt)?;
    if card[7] & 0x80 == 0 {
        let mut le = [0u8; 8];
        le.copy_from_slice(card);
        return Ok((u64::from_le_bytes(le), false));
    }
    let count = count(hll)?;
    hll[8..16].copy_from_slice(&count.to_le_bytes());
    Ok((count, true))
}

/// The estimated cardinality, computed from the registers (no cache).
pub fn count(hll: &[u8]) -> Result<u64, Corrupt> {
    let mut histogram = [0u32; 64];
    let registers = hll.get(HEADER_LEN..).ok_or(Corrupt)?;
    match hll[4] {
        DENSE => dense_histogram(registers, &mut histogram),
        SPARSE => {
            if sparse_histogram(registers, &mut histogram) != REGISTERS {
                return Err(Corrupt);
            }
        }
        _ => return Err(Corrupt),
    }
    Ok(estimate(&histogram))
}

/// Merges `hll` into `max` (one byte per register): `max[i] = max(max[i],
/// hll[i])` (Redis's `hllMerge`).
pub fn merge_into(max: &mut [u8; REGISTERS], hll: &[u8]) -> Result<(), Corrupt> {
    let registers = hll.get(HEADER_LEN..).ok_or(Corrupt)?;
    match hll[4] {
        DENSE => {
            for (r, out) in registers.chunks_exact(12).zip(max.chunks_exact_mut(16)) {
                for (m, v) in out.iter_mut().zip(unpack16(r)) {
                    *m = (*m).max(v);
                }
            }
            Ok(())
        }
        SPARSE => {
            let mut i = 0;
            let mut p = 0;
            while p < registers.len() {
                let op = registers[p];
                if is_zero(op) {
                    i += zero_len(op);
                    p += 1;
                } else if is_xzero(op) {
                    i += xzero_len(op, at(registers, p + 1));
                    p += 2;
                } else {
                    let (value, run) = (val_value(op), val_len(op));
                    if i + run > REGISTERS {
                        break;
                    }
                    for m in &mut max[i..i + run] {
                        *m = (*m).max(value);
                    }
                    i += run;
                    p += 1;
                }
            }
            if i == REGISTERS {
                Ok(())
            } else {
                Err(Corrupt)
            }
        }
        _ => Err(Corrupt),
    }
}

/// The estimated cardinality of registers held one per byte (PFCOUNT of
/// several keys counts their merge this way).
pub fn count_registers(registers: &[u8; REGISTERS]) -> u64 {
    let mut histogram = [0u32; 64];
    for &r in registers.iter() {
        histogram[(r & 63) as usize] += 1;
    }
    estimate(&histogram)
}

/// Writes merged registers into `hll` (PFMERGE's destination): dense first
/// when `to_dense`, then every non-zero register raised, then the cache
/// marked stale.
pub fn store_max(
    hll: &mut Vec<u8>,
    max: &[u8; REGISTERS],
    to_dense: bool,
    sparse_max: usize,
) -> Result<(), Corrupt> {
    if to_dense {
        to_dense_encoding(hll)?;
    }
    for (i, &m) in max.iter().enumerate() {
        if m != 0 {
            // Redis ignores a failure here: the destination was checked
            // while merging.
            let _ = set_register(hll, i, m, sparse_max);
        }
    }
    invalidate_cache(hll);
    Ok(())
}

/// Converts a sparse HLL to dense in place; returns whether it converted
/// (false when already dense). Redis's `hllSparseToDense`.
pub fn to_dense_encoding(hll: &mut Vec<u8>) -> Result<bool, Corrupt> {
    if hll.get(4) == Some(&DENSE) {
        return Ok(false);
    }
    let header = hll.get(..HEADER_LEN).ok_or(Corrupt)?;
    let mut dense = vec![0u8; DENSE_LEN];
    dense[..HEADER_LEN].copy_from_slice(header);
    dense[4] = DENSE;
    let sparse = &hll[HEADER_LEN..];
    let registers = &mut dense[HEADER_LEN..];
    let mut idx = 0;
    let mut p = 0;
    while p < sparse.len() {
        let op = sparse[p];
        if is_zero(op) {
            idx += zero_len(op);
            p += 1;
        } else if is_xzero(op) {
            idx += xzero_len(op, at(sparse, p + 1));
            p += 2;
        } else {
            let (value, run) = (val_value(op), val_len(op));
            if idx + run > REGISTERS {
                break;
            }
            for r in idx..idx + run {
                dense_write(registers, r, value);
            }
            idx += run;
            p += 1;
        }
    }
    if idx != REGISTERS {
        return Err(Corrupt);
    }
    *hll = dense;
    Ok(true)
}

/// Every register's value (PFDEBUG GETREG); the HLL must be dense.
pub fn registers(hll: &[u8]) -> Vec<u8> {
    let regs = hll.get(HEADER_LEN..).unwrap_or_default();
    (0..REGISTERS).map(|i| dense_get(regs, i)).collect()
}

/// The sparse opcodes in words (PFDEBUG DECODE): `z:len`, `Z:len`,
/// `v:value,len`, separated by spaces.
pub fn decode_sparse(hll: &[u8]) -> String {
    let sparse = hll.get(HEADER_LEN..).unwrap_or_default();
    let mut words = Vec::new();
    let mut p = 0;
    while p < sparse.len() {
        let op = sparse[p];
        if is_zero(op) {
            words.push(format!("z:{}", zero_len(op)));
            p += 1;
        } else if is_xzero(op) {
            words.push(format!("Z:{}", xzero_len(op, at(sparse, p + 1))));
            p += 2;
        } else {
            words.push(format!("v:{},{}", val_value(op), val_len(op)));
            p += 1;
        }
    }
    words.join(" ")
}

/// The encoding byte of a checked HLL.
pub fn encoding(hll: &[u8]) -> Encoding {
    if hll.get(4) == Some(&DENSE) {
        Encoding::Dense
    } else {
        Encoding::Sparse
    }
}

// ------------------------------------------------------------ dense

fn registers_mut(hll: &mut [u8]) -> &mut [u8] {
    hll.get_mut(HEADER_LEN..).unwrap_or_default()
}

/// Register `i` of packed 6-bit registers. The second byte may lie past the
/// end (the last register); it then reads as zero, as the C code reads the
/// string's terminator.
#[inline]
fn dense_get(registers: &[u8], i: usize) -> u8 {
    let byte = i * 6 / 8;
    let fb = (i * 6) & 7;
    let b0 = at(registers, byte) as u32;
    let b1 = at(registers, byte + 1) as u32;
    (((b0 >> fb) | (b1 << (8 - fb))) & REGISTER_MAX as u32) as u8
}

#[inline]
fn dense_write(registers: &mut [u8], i: usize, value: u8) {
    let byte = i * 6 / 8;
    let fb = (i * 6) & 7;
    let v = value as u32;
    let mask = REGISTER_MAX as u32;
    if let Some(b) = registers.get_mut(byte) {
        *b = ((*b as u32 & !(mask << fb)) | (v << fb)) as u8;
    }
    if let Some(b) = registers.get_mut(byte + 1) {
        *b = ((*b as u32 & !(mask >> (8 - fb))) | (v >> (8 - fb))) as u8;
    }
}

/// Redis's `hllDenseSet`: raises register `i` to `count`; whether it did.
fn dense_set(registers: &mut [u8], i: usize, count: u8) -> bool {
    if count > dense_get(registers, i) {
        dense_write(registers, i, count);
        true
    } else {
        false
    }
}

/// The 16 registers packed in 12 bytes.
#[inline]
fn unpack16(r: &[u8]) -> [u8; 16] {
    [
        r[0] & 63,
        (r[0] >> 6 | r[1] << 2) & 63,
        (r[1] >> 4 | r[2] << 4) & 63,
        (r[2] >> 2) & 63,
        r[3] & 63,
        (r[3] >> 6 | r[4] << 2) & 63,
        (r[4] >> 4 | r[5] << 4) & 63,
        (r[5] >> 2) & 63,
        r[6] & 63,
        (r[6] >> 6 | r[7] << 2) & 63,
        (r[7] >> 4 | r[8] << 4) & 63,
        (r[8] >> 2) & 63,
        r[9] & 63,
        (r[9] >> 6 | r[10] << 2) & 63,
        (r[10] >> 4 | r[11] << 4) & 63,
        (r[11] >> 2) & 63,
    ]
}

/// Counts registers by value, 16 registers (12 bytes) at a time.
fn dense_histogram(registers: &[u8], histogram: &mut [u32; 64]) {
    for r in registers.chunks_exact(12).take(REGISTERS / 16) {
        for v in unpack16(r) {
            histogram[v as usize] += 1;
        }
    }
}

// ------------------------------------------------------------ sparse

#[inline]
fn at(bytes: &[u8], i: usize) -> u8 {
    bytes.get(i).copied().unwrap_or(0)
}

#[inline]
fn is_zero(op: u8) -> bool {
    op & 0xc0 == 0
}

#[inline]
fn is_xzero(op: u8) -> bool {
    op & 0xc0 == 0x40
}

#[inline]
fn is_val(op: u8) -> bool {
    op & 0x80 != 0
}

#[inline]
fn zero_len(op: u8) -> usize {
    (op & 0x3f) as usize + 1
}

#[inline]
fn xzero_len(op: u8, next: u8) -> usize {
    (((op & 0x3f) as usize) << 8 | next as usize) + 1
}

#[inline]
fn val_value(op: u8) -> u8 {
    ((op >> 2) & 0x1f) + 1
}

#[inline]
fn val_len(op: u8) -> usize {
    (op & 0x3) as usize + 1
}

#[inline]
fn val_op(value: u8, len: usize) -> u8 {
    ((value - 1) << 2 | (len as u8 - 1)) | 0x80
}

fn push_xzero(out: &mut Vec<u8>, len: usize) {
    let l = len - 1;
    out.push((l >> 8) as u8 | 0x40);
    out.push((l & 0xff) as u8);
}

/// A run of zero registers as ZERO or XZERO.
fn push_zeros(out: &mut Vec<u8>, len: usize) {
    if len > SPARSE_ZERO_MAX_LEN {
        push_xzero(out, len);
    } else {
        out.push(len as u8 - 1);
    }
}

/// Counts registers by value; returns how many registers the opcodes cover
/// (16384 when valid).
fn sparse_histogram(sparse: &[u8], histogram: &mut [u32; 64]) -> usize {
    let mut idx = 0usize;
    let mut p = 0;
    while p < sparse.len() {
        let op = sparse[p];
        if is_zero(op) {
            let run = zero_len(op);
            idx += run;
            histogram[0] += run as u32;
            p += 1;
        } else if is_xzero(op) {
            let run = xzero_len(op, at(sparse, p + 1));
            idx += run;
            histogram[0] += run as u32;
            p += 2;
        } else {
            let run = val_len(op);
            idx += run;
            histogram[val_value(op) as usize] += run as u32;
            p += 1;
        }
    }
    idx
}

/// The length in bytes and the register span of the opcode at `p`.
#[inline]
fn opcode_at(hll: &[u8], p: usize) -> (usize, usize) {
    let op = hll[p];
    if is_zero(op) {
        (1, zero_len(op))
    } else if is_val(op) {
        (1, val_len(op))
    } else {
        (2, xzero_len(op, at(hll, p + 1)))
    }
}

/// Redis's `hllSparseSet`: raises register `index` to `count` in a sparse
/// HLL, splitting the opcode that covers it, merging equal neighbours, and
/// promoting to dense when the value does not fit or the string would pass
/// `sparse_max` bytes.
fn sparse_set(
    hll: &mut Vec<u8>,
    index: usize,
    count: u8,
    sparse_max: usize,
) -> Result<bool, Corrupt> {
    if count > SPARSE_VAL_MAX_VALUE {
        return promote(hll, index, count);
    }
    // Step 1: find the opcode covering `index`.
    let mut end = hll.len();
    let mut p = HEADER_LEN;
    let mut first = 0usize;
    let mut prev: Option<usize> = None;
    let mut span = 0usize;
    while p < end {
        let (oplen, s) = opcode_at(hll, p);
        span = s;
        if index < first + span {
            break;
        }
        prev = Some(p);
        p += oplen;
        first += span;
    }
    if span == 0 || p >= end {
        return Err(Corrupt);
    }
    let op = hll[p];
    let (is_zero_op, is_xzero_op) = (is_zero(op), is_xzero(op));
    let runlen = if is_zero_op {
        zero_len(op)
    } else if is_xzero_op {
        xzero_len(op, at(hll, p + 1))
    } else {
        val_len(op)
    };

    // Step 2: the easy cases, updated in place.
    let mut updated_in_place = false;
    if !is_zero_op && !is_xzero_op {
        if val_value(op) >= count {
            return Ok(false);
        }
        if runlen == 1 {
            hll[p] = val_op(count, 1);
            updated_in_place = true;
        }
    }
    if is_zero_op && runlen == 1 {
        hll[p] = val_op(count, 1);
        updated_in_place = true;
    }

    if !updated_in_place {
        // The general case: split the opcode into up to three.
        let last = first + span - 1;
        let mut seq: Vec<u8> = Vec::with_capacity(5);
        if is_zero_op || is_xzero_op {
            if index != first {
                push_zeros(&mut seq, index - first);
            }
            seq.push(val_op(count, 1));
            if index != last {
                push_zeros(&mut seq, last - index);
            }
        } else {
            let current = val_value(op);
            if index != first {
                seq.push(val_op(current, index - first));
            }
            seq.push(val_op(count, 1));
            if index != last {
                seq.push(val_op(current, last - index));
            }
        }
        // Step 3: put the new sequence in place of the old opcode.
        let oldlen = if is_xzero_op { 2 } else { 1 };
        let new_len = end + seq.len() - oldlen;
        if seq.len() > oldlen && new_len > sparse_max {
            return promote(hll, index, count);
        }
        // An XZERO cut off by the end of the string counts its second
        // byte as present, as Redis (which reads the terminator) does.
        let old_end = (p + oldlen).min(end);
        hll.splice(p..old_end, seq);
        hll.truncate(new_len);
        end = hll.len();
    }

    // Step 4: merge adjacent VAL opcodes of equal value, looking at up to
    // five opcodes from the one before the change.
    let mut p = prev.unwrap_or(HEADER_LEN);
    let mut scan = 5;
    while p < end {
        if scan == 0 {
            break;
        }
        scan -= 1;
        let op = hll[p];
        if is_xzero(op) {
            p += 2;
            continue;
        }
        if is_zero(op) {
            p += 1;
            continue;
        }
        if p + 1 < end && is_val(hll[p + 1]) {
            let next = hll[p + 1];
            let value = val_value(op);
            if value == val_value(next) {
                let len = val_len(op) + val_len(next);
                if len <= SPARSE_VAL_MAX_LEN {
                    hll[p + 1] = val_op(value, len);
                    hll.remove(p);
                    end -= 1;
                    continue;
                }
            }
        }
        p += 1;
    }
    invalidate_cache(hll);
    Ok(true)
}

/// Converts to dense and sets the register there.
fn promote(hll: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, Corrupt> {
    to_dense_encoding(hll)?;
    Ok(dense_set(registers_mut(hll), index, count))
}

// ------------------------------------------------------------ estimator

/// Ertl's sigma function ("New cardinality estimation algorithms for
/// HyperLogLog sketches", arXiv:1702.01284), as Redis computes it.
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let z_prev = z;
        z += x * y;
        y += y;
        if z_prev == z {
            return z;
        }
    }
}

/// Ertl's tau function.
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let z_prev = z;
        y *= 0.5;
        z -= (1.0 - x) * (1.0 - x) * y;
        if z_prev == z {
            return z / 3.0;
        }
    }
}

/// The cardinality estimate from the register histogram (Redis's
/// `hllCount` after the histogram).
fn estimate(histogram: &[u32; 64]) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - histogram[Q + 1] as f64) / m);
    for j in (1..=Q).rev() {
        z += histogram[j] as f64;
        z *= 0.5;
    }
    z += m * sigma(histogram[0] as f64 / m);
    // llroundl: halves away from zero, as f64::round.
    (ALPHA_INF * m * m / z).round() as u64
}

// ------------------------------------------------------------ self test

/// PFSELFTEST (Redis's `pfselftestCommand`): register access in the packed
/// dense form, then the estimate's error at cardinalities 1, 10, …, 10^7,
/// with a sparse and a dense HLL fed the same elements, which must agree.
/// `random` supplies random numbers; `sparse_max` is `hll-sparse-max-bytes`.
pub fn self_test(random: &mut dyn FnMut() -> u32, sparse_max: usize) -> Result<(), String> {
    let mut dense = vec![0u8; DENSE_LEN];
    dense[4] = DENSE;
    let mut bytes = [0u8; REGISTERS];
    for _ in 0..1000 {
        for (i, b) in bytes.iter_mut().enumerate() {
            let r = (random() & REGISTER_MAX as u32) as u8;
            *b = r;
            dense_write(registers_mut(&mut dense), i, r);
        }
        for (i, &b) in bytes.iter().enumerate() {
            let got = dense_get(&dense[HEADER_LEN..], i);
            if got != b {
                return Err(format!("TESTFAILED Register {i} should be {b} but is {got}"));
            }
        }
    }

    dense[HEADER_LEN..].fill(0);
    let mut sparse = new_sparse();
    let relerr = 1.04 / (REGISTERS as f64).sqrt();
    let mut checkpoint: u64 = 1;
    let seed = random() as u64 | (random() as u64) << 32;
    let corrupt = |_: Corrupt| "TESTFAILED corrupted HLL".to_string();
    for j in 1..=10_000_000u64 {
        let element = (j ^ seed).to_le_bytes();
        let (index, run) = pattern(&element);
        dense_set(registers_mut(&mut dense), index, run);
        add(&mut sparse, &element, sparse_max).map_err(corrupt)?;
        if j != checkpoint {
            continue;
        }
        if j < (sparse_max / 2) as u64 && encoding(&sparse) != Encoding::Sparse {
            return Err("TESTFAILED sparse encoding not used".into());
        }
        let dense_count = count(&dense).map_err(corrupt)?;
        if dense_count != count(&sparse).map_err(corrupt)? {
            return Err("TESTFAILED dense/sparse disagree".into());
        }
        let abserr = (checkpoint as i64 - dense_count as i64).unsigned_abs();
        // Redis allows 1 at cardinality 10, where collisions make larger
        // errors likely enough to fail now and then.
        let maxerr = if j == 10 { 1 } else { (relerr * 6.0 * checkpoint as f64).ceil() as u64 };
        if abserr > maxerr {
            return Err(format!("TESTFAILED Too big error. card:{checkpoint} abserr:{abserr}"));
        }
        checkpoint *= 10;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hll_of(elements: impl IntoIterator<Item = Vec<u8>>, sparse_max: usize) -> Vec<u8> {
        let mut hll = new_sparse();
        for e in elements {
            add(&mut hll, &e, sparse_max).unwrap();
        }
        hll
    }

    #[test]
    fn empty_hll_is_one_xzero_run() {
        let hll = new_sparse();
        assert_eq!(hll.len(), 18);
        assert_eq!(&hll[..5], b"HYLL\x01");
        assert_eq!(&hll[16..], &[0x7f, 0xff]);
        assert_eq!(decode_sparse(&hll), "Z:16384");
        assert_eq!(check(&hll), Ok(Encoding::Sparse));
        assert_eq!(count(&hll), Ok(0));
    }

    #[test]
    fn check_follows_redis() {
        let mut hll = new_sparse();
        assert_eq!(check(b"HYLL"), Err(NotHll));
        hll[0] = b'h';
        assert_eq!(check(&hll), Err(NotHll));
        let mut hll = new_sparse();
        hll[4] = 2;
        assert_eq!(check(&hll), Err(NotHll));
        hll[4] = 0;
        assert_eq!(check(&hll), Err(NotHll), "dense of the wrong length");
        let mut dense = new_sparse();
        to_dense_encoding(&mut dense).unwrap();
        assert_eq!(dense.len(), DENSE_LEN);
        assert_eq!(check(&dense), Ok(Encoding::Dense));
    }

    #[test]
    fn add_reports_changes_and_counts_match_dense() {
        let mut hll = new_sparse();
        assert!(add(&mut hll, b"a", 3000).unwrap());
        assert!(!add(&mut hll, b"a", 3000).unwrap());
        for i in 0..500u32 {
            add(&mut hll, &i.to_le_bytes(), 3000).unwrap();
        }
        assert_eq!(encoding(&hll), Encoding::Sparse);
        let mut dense = hll.clone();
        assert_eq!(to_dense_encoding(&mut dense), Ok(true));
        assert_eq!(count(&hll), count(&dense));
        let c = count(&hll).unwrap();
        assert!((490..=512).contains(&c), "{c}");
        // The dense registers are those the sparse opcodes describe.
        let mut max = [0u8; REGISTERS];
        merge_into(&mut max, &hll).unwrap();
        assert_eq!(registers(&dense), max.to_vec());
        assert_eq!(count_registers(&max), c);
    }

    #[test]
    fn promotion_when_too_long_or_value_too_big() {
        let mut hll = new_sparse();
        let mut i = 0u32;
        while encoding(&hll) == Encoding::Sparse {
            add(&mut hll, &i.to_le_bytes(), 300).unwrap();
            assert!(hll.len() <= 300 || encoding(&hll) == Encoding::Dense);
            i += 1;
        }
        assert_eq!(hll.len(), DENSE_LEN);
        // A register value above 32 cannot be sparse.
        let mut hll = new_sparse();
        assert!(set_register(&mut hll, 7, 33, 3000).unwrap());
        assert_eq!(encoding(&hll), Encoding::Dense);
        assert_eq!(registers(&hll)[7], 33);
    }

    #[test]
    fn sparse_split_and_merge() {
        let mut hll = new_sparse();
        set_register(&mut hll, 100, 3, 3000).unwrap();
        assert_eq!(decode_sparse(&hll), "Z:100 v:3,1 Z:16283");
        set_register(&mut hll, 101, 3, 3000).unwrap();
        assert_eq!(decode_sparse(&hll), "Z:100 v:3,2 Z:16282");
        set_register(&mut hll, 0, 1, 3000).unwrap();
        assert_eq!(decode_sparse(&hll), "v:1,1 Z:99 v:3,2 Z:16282");
        assert!(!set_register(&mut hll, 101, 2, 3000).unwrap());
        set_register(&mut hll, 102, 3, 3000).unwrap();
        set_register(&mut hll, 103, 3, 3000).unwrap();
        assert_eq!(decode_sparse(&hll), "v:1,1 Z:99 v:3,4 Z:16280");
        set_register(&mut hll, 104, 3, 3000).unwrap();
        assert_eq!(decode_sparse(&hll), "v:1,1 Z:99 v:3,4 v:3,1 Z:16279");
        // Splitting a VAL run.
        set_register(&mut hll, 102, 5, 3000).unwrap();
        assert_eq!(decode_sparse(&hll), "v:1,1 Z:99 v:3,2 v:5,1 v:3,2 Z:16279");
    }

    #[test]
    fn cache_is_used_and_invalidated() {
        let mut hll = hll_of((0..10u8).map(|i| vec![i]), 3000);
        assert_eq!(hll[15] & 0x80, 0x80);
        let (c, recomputed) = cached_count(&mut hll).unwrap();
        assert!(recomputed);
        assert_eq!(hll[15], 0);
        assert_eq!(cached_count(&mut hll).unwrap(), (c, false));
        // A stale cache with a bogus value is recomputed.
        hll[8] = 0xff;
        invalidate_cache(&mut hll);
        assert_eq!(cached_count(&mut hll).unwrap(), (c, true));
    }

    #[test]
    fn corrupt_input_never_panics() {
        let mut seed = 0x1234_5678u32;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed
        };
        for round in 0..2000 {
            let n = rnd() % 200;
            let mut hll = hll_of((0..n).map(|i| i.to_le_bytes().to_vec()), 3000);
            if round % 3 == 0 {
                to_dense_encoding(&mut hll).unwrap();
            }
            for _ in 0..1 + rnd() % 5 {
                let pos = HEADER_LEN + (rnd() as usize % (hll.len() - HEADER_LEN));
                hll[pos] = rnd() as u8;
            }
            if round % 7 == 0 {
                hll.truncate(HEADER_LEN + (rnd() as usize % (hll.len() - HEADER_LEN)));
            }
            let _ = count(&hll);
            let mut max = [0u8; REGISTERS];
            let _ = merge_into(&mut max, &hll);
            let mut copy = hll.clone();
            for i in 0..20u32 {
                let _ = add(&mut copy, &(i + 1000).to_le_bytes(), 3000);
            }
            let _ = to_dense_encoding(&mut hll);
            let _ = decode_sparse(&hll);
        }
    }

    /// The PFADD batches an element spec of tests/data/hll/expected.txt
    /// stands for (see tests/data/hll/generate.py).
    fn spec_batches(spec: &str) -> Vec<Vec<Vec<u8>>> {
        let parts: Vec<&str> = spec.split(':').collect();
        let (items, batch): (Vec<Vec<u8>>, usize) = match parts[0] {
            "str" => {
                let (start, end): (u64, u64) =
                    (parts[2].parse().unwrap(), parts[3].parse().unwrap());
                let items = (start..end).map(|i| format!("{}{i}", parts[1]).into_bytes()).collect();
                (items, parts[4].parse().unwrap())
            }
            "u64" => {
                let (start, end): (u64, u64) =
                    (parts[1].parse().unwrap(), parts[2].parse().unwrap());
                (
                    (start..end).map(|i| i.to_le_bytes().to_vec()).collect(),
                    parts[3].parse().unwrap(),
                )
            }
            "len" => {
                let (start, end): (usize, usize) =
                    (parts[1].parse().unwrap(), parts[2].parse().unwrap());
                let items = (start..end)
                    .map(|i| (0..i).map(|j| ((i * 31 + j) % 256) as u8).collect())
                    .collect();
                (items, parts[3].parse().unwrap())
            }
            other => panic!("unknown element spec {other}"),
        };
        let batches: Vec<Vec<Vec<u8>>> = items.chunks(batch).map(|c| c.to_vec()).collect();
        if batches.is_empty() {
            vec![Vec::new()]
        } else {
            batches
        }
    }

    fn unhex(hex: &str) -> Vec<u8> {
        (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect()
    }

    /// Replays the inputs of tests/data/hll/expected.txt (produced by a real
    /// redis-server 7.0.15) and compares every byte and every count.
    #[test]
    fn matches_redis_byte_for_byte() {
        let data = include_str!("../../../tests/data/hll/expected.txt");
        let mut built: std::collections::HashMap<&str, Vec<u8>> = Default::default();
        let mut checked = 0;
        for line in data.lines().filter(|l| !l.starts_with('#')) {
            let f: Vec<&str> = line.split(' ').collect();
            match f[0] {
                "hll" => {
                    let sparse_max: usize = f[2].parse().unwrap();
                    let mut hll = new_sparse();
                    for (n, batch) in spec_batches(f[3]).into_iter().enumerate() {
                        // The first PFADD creates the key: a change.
                        let mut changed = n == 0;
                        for e in &batch {
                            changed |= add(&mut hll, e, sparse_max).unwrap();
                        }
                        // PFADD marks the cache stale when anything changed.
                        if changed {
                            invalidate_cache(&mut hll);
                        }
                    }
                    assert_eq!(hll, unhex(f[5]), "{}: bytes after PFADD", f[1]);
                    let (c, _) = cached_count(&mut hll).unwrap();
                    assert_eq!(c.to_string(), f[4], "{}: count", f[1]);
                    assert_eq!(hll, unhex(f[6]), "{}: bytes after PFCOUNT", f[1]);
                    built.insert(f[1], hll);
                }
                "union" => {
                    let mut max = [0u8; REGISTERS];
                    for name in f[1].split(',') {
                        merge_into(&mut max, &built[name]).unwrap();
                    }
                    assert_eq!(count_registers(&max).to_string(), f[2], "union {}", f[1]);
                }
                "merge" => {
                    let mut dest = if f[1] == "-" { new_sparse() } else { built[f[1]].clone() };
                    let mut max = [0u8; REGISTERS];
                    let mut dense = encoding(&dest) == Encoding::Dense;
                    merge_into(&mut max, &dest).unwrap();
                    for name in f[2].split(',') {
                        dense |= encoding(&built[name]) == Encoding::Dense;
                        merge_into(&mut max, &built[name]).unwrap();
                    }
                    store_max(&mut dest, &max, dense, DEFAULT_SPARSE_MAX_BYTES).unwrap();
                    assert_eq!(dest, unhex(f[4]), "merge {} {}: bytes", f[1], f[2]);
                    assert_eq!(count(&dest).unwrap().to_string(), f[3], "merge {} {}", f[1], f[2]);
                }
                other => panic!("unknown record {other}"),
            }
            checked += 1;
        }
        assert!(checked >= 25, "only {checked} records");
    }

    #[test]
    fn error_stays_small_for_many_elements() {
        let mut hll = new_sparse();
        let n = 200_000u64;
        for i in 0..n {
            add(&mut hll, format!("element:{i}").as_bytes(), 3000).unwrap();
        }
        let c = count(&hll).unwrap() as f64;
        let err = (c - n as f64).abs() / n as f64;
        assert!(err < 0.02, "estimate {c} for {n}: error {err}");
    }
}
