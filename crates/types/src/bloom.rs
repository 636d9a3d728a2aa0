//! Scalable Bloom filters exactly as RedisBloom 2.x builds them (`sb.c`,
//! `bloom.c`): the same sizing, hashing and bit positions, so that a filter
//! dumped from RedisBloom with BF.SCANDUMP loads here with BF.LOADCHUNK and
//! answers the same, and the other way round.
//!
//! A filter is a chain of sub-filters ("links"). The first is sized for the
//! requested capacity at half the requested error rate (a scaling chain's
//! compound rate then stays under the request); when the newest link holds
//! as many items as it was sized for, a new link `expansion` times larger
//! with half the previous error rate is added. A non-scaling filter refuses
//! new items instead.
//!
//! For error rate `e`: bits per item `-ln(e) / ln(2)^2`, hash functions
//! `ceil(ln(2) * bits per item)` (1%: 9.59 bits and 7 hashes; RedisBloom's
//! halving makes a scaling 1% filter 11.03 bits and 8 hashes). Bit `i` of an
//! item is `(a + i * b) mod m` for the two 64-bit MurmurHash64A values `a`,
//! `b` of the item.
//!
//! Sizes come from clients, so every allocation is checked against a bound
//! the caller passes in.

use crate::murmur::{murmur2, murmur64a};

/// `BLOOM_OPT_NOROUND`: size the bit array exactly, not to a power of two.
pub const OPT_NOROUND: u32 = 1;
/// `BLOOM_OPT_ENTS_IS_BITS`: the capacity given is log2 of the bits.
pub const OPT_ENTS_IS_BITS: u32 = 2;
/// `BLOOM_OPT_FORCE64`: 64-bit hashing.
pub const OPT_FORCE64: u32 = 4;
/// `BLOOM_OPT_NO_SCALING`: refuse items past capacity.
pub const OPT_NO_SCALING: u32 = 8;
const KNOWN_OPTIONS: u32 = OPT_NOROUND | OPT_ENTS_IS_BITS | OPT_FORCE64 | OPT_NO_SCALING;

/// RedisBloom's default expansion.
pub const DEFAULT_EXPANSION: u32 = 2;
/// Each new link's error rate relative to the previous one.
const ERROR_TIGHTENING_RATIO: f64 = 0.5;
/// RedisBloom's value of ln(2) (fewer digits than `LN_2`; the hash count
/// depends on it).
#[allow(clippy::approx_constant)]
const LN2: f64 = 0.693147180559945;
/// RedisBloom's ln(2)^2.
const LN2_SQUARED: f64 = 0.480453013918201;
/// The most hash functions a link can need: the smallest positive double as
/// error rate needs 1075.
const MAX_HASHES: u32 = 1100;
/// Bytes of the chain's header in BF.SCANDUMP.
const HEADER_LEN: usize = 20;
/// Bytes of each link's description in the header.
const LINK_HEADER_LEN: usize = 53;
/// Largest BF.SCANDUMP chunk (RedisBloom's `MAX_SCANDUMP_SIZE`).
pub const MAX_CHUNK: u64 = 16 * 1024 * 1024;
/// `sizeof(SBChain)` and `sizeof(SBLink)` in RedisBloom: BF.INFO's Size
/// counts them.
const CHAIN_STRUCT_SIZE: u64 = 32;
const LINK_STRUCT_SIZE: u64 = 64;

/// Why a filter or a link could not be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BloomError {
    /// Parameters out of range (RedisBloom: `ERR could not create filter`).
    Invalid,
    /// The bit array would be larger than allowed (RedisBloom: out of
    /// memory, `ERR Insufficient memory to create filter`).
    TooBig,
}

/// What adding an item did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddResult {
    /// The item was new: at least one of its bits was clear.
    Added,
    /// Every bit was already set: probably added before.
    Exists,
    /// A non-scaling filter is full.
    Full,
    /// A new link was needed and could not be made.
    CannotGrow,
}

/// The two hash values of an item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct HashPair {
    a: u64,
    b: u64,
}

/// One sub-filter (RedisBloom's `struct bloom` and `SBLink`).
#[derive(Clone, Debug)]
pub struct Link {
    bits_array: Vec<u8>,
    /// Number of hash functions.
    pub hashes: u32,
    /// log2 of the bit count when it is a power of two; 0 otherwise.
    n2: u8,
    /// Capacity: items it is sized for.
    pub entries: u64,
    pub error: f64,
    /// Bits per entry.
    pub bpe: f64,
    /// Bits in the array (a multiple of 64).
    pub bits: u64,
    /// Items added to this link.
    pub size: u64,
}

impl Link {
    /// RedisBloom's `bloom_init`, with the bit array's bytes bounded by
    /// `max_bytes`.
    fn new(entries: u64, error: f64, options: u32, max_bytes: u64) -> Result<Link, BloomError> {
        if entries < 1 || error.is_nan() || error <= 0.0 || error >= 1.0 {
            return Err(BloomError::Invalid);
        }
        let bpe = bits_per_entry(error);
        let mut entries = entries;
        let mut n2 = 0u8;
        let bits: f64 = if options & OPT_ENTS_IS_BITS != 0 {
            // `entries` is log2 of the bits.
            if entries > 63 {
                return Err(BloomError::Invalid);
            }
            n2 = entries as u8;
            let bits = (1u64 << n2) as f64;
            entries = (bits / bpe) as u64;
            bits
        } else if options & OPT_NOROUND != 0 {
            (entries as f64 * bpe).trunc().max(1.0)
        } else {
            let wanted = entries as f64 * bpe;
            let exponent = logb(wanted);
            if !(0..=62).contains(&exponent) {
                return Err(BloomError::Invalid);
            }
            n2 = exponent as u8 + 1;
            let bits = (1u64 << n2) as f64;
            // The power of two leaves room for more items.
            let extra_bits = (bits - wanted) as u64;
            entries += (extra_bits as f64 / bpe) as u64;
            bits
        };
        // Whole 64-bit words, checked before any arithmetic can overflow.
        let words = (bits / 64.0).ceil();
        if words * 8.0 > max_bytes as f64 {
            return Err(BloomError::TooBig);
        }
        let bits = bits as u64;
        let bytes = if !bits.is_multiple_of(64) { (bits / 64 + 1) * 8 } else { bits / 8 };
        if bytes > max_bytes {
            return Err(BloomError::TooBig);
        }
        Ok(Link {
            bits_array: vec![0; bytes as usize],
            hashes: (LN2 * bpe).ceil() as u32,
            n2,
            entries,
            error,
            bpe,
            bits: bytes * 8,
            size: 0,
        })
    }

    /// Bytes of the bit array.
    pub fn bytes(&self) -> u64 {
        self.bits_array.len() as u64
    }

    pub fn bit_array(&self) -> &[u8] {
        &self.bits_array
    }

    /// log2 of the bit count when it is a power of two; 0 otherwise.
    pub fn n2(&self) -> u8 {
        self.n2
    }

    /// The bit count the positions are taken modulo. (RedisBloom computes
    /// in 32 bits when the count fits; the result is the same.)
    fn modulus(&self) -> u64 {
        if self.n2 > 0 {
            1u64 << self.n2
        } else {
            self.bits
        }
    }

    /// Whether every bit of the item is set.
    fn contains(&self, h: HashPair) -> bool {
        let m = self.modulus();
        (0..self.hashes as u64).all(|i| {
            let x = h.a.wrapping_add(i.wrapping_mul(h.b)) % m;
            let byte = self.bits_array.get((x >> 3) as usize).copied().unwrap_or(0);
            byte & (1 << (x % 8)) != 0
        })
    }

    /// Sets every bit of the item; whether any was clear.
    fn insert(&mut self, h: HashPair) -> bool {
        let m = self.modulus();
        let mut found_clear = false;
        for i in 0..self.hashes as u64 {
            let x = h.a.wrapping_add(i.wrapping_mul(h.b)) % m;
            if let Some(byte) = self.bits_array.get_mut((x >> 3) as usize) {
                let mask = 1 << (x % 8);
                if *byte & mask == 0 {
                    *byte |= mask;
                    found_clear = true;
                }
            }
        }
        found_clear
    }

    /// RedisBloom's `bloom_validate_integrity` for a link described by a
    /// dump header whose bit array will have `bytes` bytes. Also bounds the
    /// hash count by what any error rate a double can hold needs, so that a
    /// crafted header cannot make every lookup loop for long.
    fn is_consistent(&self, bytes: u64) -> bool {
        let error_ok = self.error > 0.0 && self.error < 1.0;
        let n2_ok = self.n2 <= 63 && (self.n2 == 0 || self.bits >= 1u64 << self.n2);
        error_ok
            && n2_ok
            && self.bits != 0
            && Some(self.bits) == bytes.checked_mul(8)
            && self.hashes as f64 == (LN2 * self.bpe).ceil()
            && self.hashes <= MAX_HASHES
    }
}

/// One link of a saved filter ([`BloomFilter::from_saved`]).
#[derive(Clone, Debug)]
pub struct SavedLink {
    pub entries: u64,
    pub error: f64,
    pub hashes: u32,
    pub bpe: f64,
    pub bits: u64,
    pub n2: u8,
    pub bit_array: Vec<u8>,
    pub size: u64,
}

/// `logb`: the binary exponent of a positive finite number.
fn logb(x: f64) -> i64 {
    if !(x.is_finite() && x > 0.0) {
        return i64::MAX;
    }
    let exponent = ((x.to_bits() >> 52) & 0x7ff) as i64;
    if exponent == 0 {
        // Subnormal: normalise first.
        return logb(x * 2f64.powi(64)) - 64;
    }
    exponent - 1023
}

/// RedisBloom's `calc_bpe`: bits per entry for an error rate.
pub fn bits_per_entry(error: f64) -> f64 {
    (-(error.ln() / LN2_SQUARED)).abs()
}

/// A scalable Bloom filter (RedisBloom's `SBChain`).
#[derive(Clone, Debug)]
pub struct BloomFilter {
    links: Vec<Link>,
    /// Items added over all links.
    size: u64,
    options: u32,
    /// Expansion factor for new links.
    growth: u32,
}

impl BloomFilter {
    /// A filter for `capacity` items at `error_rate` (RedisBloom's
    /// `bfCreateChain`: 64-bit hashing, exact sizing). `expansion` is kept
    /// as RedisBloom keeps it, in 32 bits.
    pub fn new(
        capacity: u64,
        error_rate: f64,
        expansion: u32,
        scaling: bool,
        max_bytes: u64,
    ) -> Result<BloomFilter, BloomError> {
        let options = OPT_FORCE64 | OPT_NOROUND | if scaling { 0 } else { OPT_NO_SCALING };
        Self::with_options(capacity, error_rate, options, expansion, max_bytes)
    }

    /// RedisBloom's `SB_NewChain`.
    pub fn with_options(
        capacity: u64,
        error_rate: f64,
        options: u32,
        growth: u32,
        max_bytes: u64,
    ) -> Result<BloomFilter, BloomError> {
        if capacity == 0 || !(error_rate != 0.0 && error_rate < 1.0) {
            return Err(BloomError::Invalid);
        }
        let tightening = if options & OPT_NO_SCALING != 0 { 1.0 } else { ERROR_TIGHTENING_RATIO };
        let link = Link::new(capacity, error_rate * tightening, options, max_bytes)?;
        Ok(BloomFilter { links: vec![link], size: 0, options, growth })
    }

    pub fn links(&self) -> &[Link] {
        &self.links
    }

    /// Items added (BF.CARD, BF.INFO Number of items inserted).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The expansion factor, or `None` for a non-scaling filter.
    pub fn expansion(&self) -> Option<u32> {
        (self.options & OPT_NO_SCALING == 0).then_some(self.growth)
    }

    /// RedisBloom's option bits (`OPT_*`).
    pub fn options(&self) -> u32 {
        self.options
    }

    /// The expansion factor as stored, also for non-scaling filters.
    pub fn growth(&self) -> u32 {
        self.growth
    }

    pub fn is_scaling(&self) -> bool {
        self.options & OPT_NO_SCALING == 0
    }

    /// Total capacity of the links (BF.INFO Capacity).
    pub fn capacity(&self) -> u64 {
        self.links.iter().fold(0u64, |sum, l| sum.wrapping_add(l.entries))
    }

    /// BF.INFO Size: RedisBloom's memory usage (its structs plus the bit
    /// arrays).
    pub fn memory_usage(&self) -> u64 {
        self.links.iter().fold(CHAIN_STRUCT_SIZE, |sum, l| sum + LINK_STRUCT_SIZE + l.bytes())
    }

    /// Bytes held on the heap.
    pub fn heap_size(&self) -> usize {
        self.links.iter().map(|l| l.bits_array.capacity()).sum::<usize>()
            + self.links.capacity() * std::mem::size_of::<Link>()
    }

    fn hash(&self, item: &[u8]) -> HashPair {
        if self.options & OPT_FORCE64 != 0 {
            let a = murmur64a(item, 0xc6a4_a793_5bd1_e995);
            HashPair { a, b: murmur64a(item, a) }
        } else {
            let a = murmur2(item, 0x9747_b28c);
            HashPair { a: a as u64, b: murmur2(item, a) as u64 }
        }
    }

    /// Whether the item may have been added (no false negatives).
    pub fn contains(&self, item: &[u8]) -> bool {
        let h = self.hash(item);
        self.links.iter().rev().any(|l| l.contains(h))
    }

    /// RedisBloom's `SBChain_Add`. `max_bytes` bounds a new link.
    pub fn add(&mut self, item: &[u8], max_bytes: u64) -> AddResult {
        let h = self.hash(item);
        if self.links.iter().rev().any(|l| l.contains(h)) {
            return AddResult::Exists;
        }
        let Some(last) = self.links.last() else { return AddResult::CannotGrow };
        if last.size >= last.entries {
            if self.options & OPT_NO_SCALING != 0 {
                return AddResult::Full;
            }
            let entries = last.entries.wrapping_mul(self.growth as u64);
            let error = last.error * ERROR_TIGHTENING_RATIO;
            match Link::new(entries, error, self.options, max_bytes) {
                Ok(link) => self.links.push(link),
                Err(_) => return AddResult::CannotGrow,
            }
        }
        let Some(link) = self.links.last_mut() else { return AddResult::CannotGrow };
        if link.insert(h) {
            link.size += 1;
            self.size += 1;
            AddResult::Added
        } else {
            AddResult::Exists
        }
    }

    // -------------------------------------------------------- SCANDUMP

    /// The dump header (BF.SCANDUMP at iterator 0): RedisBloom's packed
    /// little-endian `dumpedChainHeader` and one `dumpedChainLink` per link.
    pub fn encode_header(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN + LINK_HEADER_LEN * self.links.len());
        out.extend_from_slice(&self.size.to_le_bytes());
        out.extend_from_slice(&(self.links.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.options.to_le_bytes());
        out.extend_from_slice(&self.growth.to_le_bytes());
        for l in &self.links {
            out.extend_from_slice(&l.bytes().to_le_bytes());
            out.extend_from_slice(&l.bits.to_le_bytes());
            out.extend_from_slice(&l.size.to_le_bytes());
            out.extend_from_slice(&l.error.to_le_bytes());
            out.extend_from_slice(&l.bpe.to_le_bytes());
            out.extend_from_slice(&l.hashes.to_le_bytes());
            out.extend_from_slice(&l.entries.to_le_bytes());
            out.push(l.n2);
        }
        out
    }

    /// The link holding byte `position` of the concatenated bit arrays
    /// (iterator − 1), and the offset in it.
    fn link_at(&self, iter: i64) -> Option<(usize, u64)> {
        if iter < 1 {
            return None;
        }
        let position = (iter - 1) as u64;
        let mut seek = 0u64;
        for (i, l) in self.links.iter().enumerate() {
            if seek + l.bytes() > position {
                return Some((i, position - seek));
            }
            seek += l.bytes();
        }
        None
    }

    /// BF.SCANDUMP at a non-zero iterator: the next chunk (at most
    /// [`MAX_CHUNK`] bytes, never across links) and the iterator that
    /// follows it; `(0, empty)` at the end.
    pub fn chunk(&self, iter: i64) -> (i64, &[u8]) {
        let Some((i, offset)) = self.link_at(iter) else { return (0, &[]) };
        let bits = &self.links[i].bits_array[offset as usize..];
        let len = bits.len().min(MAX_CHUNK as usize);
        (iter + len as i64, &bits[..len])
    }

    /// A filter from a dump header (BF.LOADCHUNK at iterator 1), its bit
    /// arrays zeroed until the chunks arrive. `None` when the header is
    /// malformed or inconsistent, or its arrays total more than `max_bytes`.
    pub fn from_header(header: &[u8], max_bytes: u64) -> Option<BloomFilter> {
        let mut r = Reader(header);
        let size = r.u64()?;
        let nfilters = r.u32()? as usize;
        let options = r.u32()?;
        let growth = r.u32()?;
        if nfilters == 0 || header.len() != HEADER_LEN + LINK_HEADER_LEN * nfilters {
            return None;
        }
        let mut links = Vec::with_capacity(nfilters);
        let mut total_bytes = 0u64;
        for _ in 0..nfilters {
            let bytes = r.u64()?;
            let mut link = Link {
                bits_array: Vec::new(),
                bits: r.u64()?,
                size: r.u64()?,
                error: r.f64()?,
                bpe: r.f64()?,
                hashes: r.u32()?,
                entries: r.u64()?,
                n2: r.u8()?,
            };
            total_bytes = total_bytes.checked_add(bytes)?;
            if total_bytes > max_bytes || !link.is_consistent(bytes) {
                return None;
            }
            link.bits_array = vec![0; bytes as usize];
            links.push(link);
        }
        if options & !KNOWN_OPTIONS != 0 {
            return None;
        }
        let total = links.iter().try_fold(0u64, |sum, l| sum.checked_add(l.size))?;
        if total != size {
            return None;
        }
        Some(BloomFilter { links, size, options, growth })
    }

    /// A filter as RedisBloom's `BFRdbSave` stores it (an RDB module value):
    /// the chain's fields and each link with its bit array. `None` when the
    /// parts are inconsistent (the same checks as a dump header's).
    pub fn from_saved(
        size: u64,
        options: u32,
        growth: u32,
        links: Vec<SavedLink>,
    ) -> Option<BloomFilter> {
        if links.is_empty() || options & !KNOWN_OPTIONS != 0 {
            return None;
        }
        let mut total = 0u64;
        let mut out = Vec::with_capacity(links.len());
        for saved in links {
            let bytes = saved.bit_array.len() as u64;
            let link = Link {
                bits_array: saved.bit_array,
                hashes: saved.hashes,
                n2: saved.n2,
                entries: saved.entries,
                error: saved.error,
                bpe: saved.bpe,
                bits: saved.bits,
                size: saved.size,
            };
            if !link.is_consistent(bytes) {
                return None;
            }
            total = total.checked_add(link.size)?;
            out.push(link);
        }
        (total == size).then_some(BloomFilter { links: out, size, options, growth })
    }

    /// BF.LOADCHUNK past the header: copies `data`, which ends just before
    /// byte `iter - 1` of the concatenated arrays (the iterator SCANDUMP
    /// returned with it). RedisBloom's errors.
    pub fn load_chunk(&mut self, iter: i64, data: &[u8]) -> Result<(), &'static str> {
        if iter <= 0 || (iter as u64) < data.len() as u64 {
            return Err("ERR received bad data");
        }
        let start = iter - data.len() as i64;
        let (i, offset) = self.link_at(start).ok_or("ERR invalid offset - no link found")?;
        let link = &mut self.links[i];
        if data.len() as u64 > link.bytes() - offset {
            return Err("ERR invalid chunk - Too big for current filter");
        }
        let offset = offset as usize;
        link.bits_array[offset..offset + data.len()].copy_from_slice(data);
        Ok(())
    }
}

/// Reads the little-endian fields of a dump header.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_at_checked(N)?;
        self.0 = rest;
        head.try_into().ok()
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take::<1>()?[0])
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take()?))
    }
    fn f64(&mut self) -> Option<f64> {
        Some(f64::from_le_bytes(self.take()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: u64 = 1 << 30;

    #[test]
    fn sizing_follows_redisbloom() {
        // Non-scaling 1%: 9.585 bits per item, 7 hashes.
        let f = BloomFilter::new(1000, 0.01, 2, false, MAX).unwrap();
        let l = &f.links()[0];
        assert_eq!(l.hashes, 7);
        assert_eq!((l.bpe * 1000.0).round(), 9585.0);
        assert_eq!(l.bits, 9600); // 9585 bits rounded up to whole words
        assert_eq!(l.entries, 1000);
        // 0.1% and 0.01%: 10 and 14 hashes.
        assert_eq!(BloomFilter::new(100, 0.001, 2, false, MAX).unwrap().links()[0].hashes, 10);
        assert_eq!(BloomFilter::new(100, 0.0001, 2, false, MAX).unwrap().links()[0].hashes, 14);
        // Scaling: the first link gets half the rate. BF.ADD's default
        // filter (100 items at 1%) is the 240 bytes BF.INFO shows in
        // RedisBloom's documentation.
        let f = BloomFilter::new(100, 0.01, 2, true, MAX).unwrap();
        assert_eq!(f.links()[0].hashes, 8);
        assert_eq!(f.links()[0].error, 0.005);
        assert_eq!(f.memory_usage(), 240);
        assert_eq!(f.capacity(), 100);
    }

    #[test]
    fn scaling_adds_larger_tighter_links() {
        let mut f = BloomFilter::new(10, 0.01, 3, true, MAX).unwrap();
        let mut added = 0;
        for i in 0..200u32 {
            if f.add(&i.to_le_bytes(), MAX) == AddResult::Added {
                added += 1;
            }
        }
        assert_eq!(f.size(), added);
        assert!(f.links().len() >= 3);
        assert_eq!(f.links()[1].entries, 30);
        assert_eq!(f.links()[1].error, 0.0025);
        assert_eq!(f.capacity(), f.links().iter().map(|l| l.entries).sum::<u64>());
        for i in 0..200u32 {
            assert!(f.contains(&i.to_le_bytes()), "false negative for {i}");
        }
    }

    #[test]
    fn non_scaling_filters_fill_up() {
        let mut f = BloomFilter::new(5, 0.01, 2, false, MAX).unwrap();
        let mut results = Vec::new();
        for i in 0..50u32 {
            results.push(f.add(&i.to_le_bytes(), MAX));
        }
        assert!(results.contains(&AddResult::Full));
        assert_eq!(f.size(), 5);
        assert_eq!(f.links().len(), 1);
    }

    #[test]
    fn invalid_and_oversized() {
        assert_eq!(BloomFilter::new(0, 0.01, 2, true, MAX).unwrap_err(), BloomError::Invalid);
        assert_eq!(BloomFilter::new(10, 1.0, 2, true, MAX).unwrap_err(), BloomError::Invalid);
        assert_eq!(BloomFilter::new(u64::MAX, 0.01, 2, true, MAX).unwrap_err(), BloomError::TooBig);
        // Growth by zero cannot make a link.
        let mut f = BloomFilter::new(1, 0.01, 0, true, MAX).unwrap();
        f.add(b"a", MAX);
        assert_eq!(f.add(b"b", MAX), AddResult::CannotGrow);
    }

    #[test]
    fn dump_and_load_round_trip() {
        let mut f = BloomFilter::new(100, 0.01, 2, true, MAX).unwrap();
        for i in 0..500u32 {
            f.add(&i.to_le_bytes(), MAX);
        }
        let header = f.encode_header();
        assert_eq!(header.len(), 20 + 53 * f.links().len());
        let mut g = BloomFilter::from_header(&header, MAX).unwrap();
        assert!(!g.contains(&7u32.to_le_bytes()));
        let mut iter = 1;
        loop {
            let (next, data) = f.chunk(iter);
            if next == 0 {
                break;
            }
            g.load_chunk(next, data).unwrap();
            iter = next;
        }
        for i in 0..500u32 {
            assert!(g.contains(&i.to_le_bytes()));
        }
        assert_eq!(g.size(), f.size());
        assert_eq!(g.encode_header(), header);
        // Malformed headers and chunks.
        assert!(BloomFilter::from_header(&header[..header.len() - 1], MAX).is_none());
        let mut bad = header.clone();
        bad[0] ^= 1; // size no longer the links' sum
        assert!(BloomFilter::from_header(&bad, MAX).is_none());
        assert!(BloomFilter::from_header(&header, 10).is_none());
        assert_eq!(g.load_chunk(0, b"x"), Err("ERR received bad data"));
        assert_eq!(g.load_chunk(1 << 40, b"x"), Err("ERR invalid offset - no link found"));
        let first = f.links()[0].bytes() as i64;
        assert_eq!(
            g.load_chunk(first + 2, &[0; 2]),
            Err("ERR invalid chunk - Too big for current filter")
        );
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Replays tests/data/bloom/expected.txt (RedisBloom 2.8's own C code
    /// run on fixed chains, see its generate.sh): every add result, the
    /// SCANDUMP header, every bit, and the probes' answers must match.
    #[test]
    fn matches_redisbloom_bit_for_bit() {
        let data = include_str!("../../../tests/data/bloom/expected.txt");
        let mut checked = 0;
        for line in data.lines().filter(|l| !l.starts_with('#')) {
            let f: Vec<&str> = line.split(' ').collect();
            let (capacity, error): (u64, f64) = (f[1].parse().unwrap(), f[2].parse().unwrap());
            let (options, growth, items): (u32, u32, usize) =
                (f[3].parse().unwrap(), f[4].parse().unwrap(), f[5].parse().unwrap());
            let mut chain =
                BloomFilter::with_options(capacity, error, options, growth, MAX).unwrap();
            let adds: String = (0..items)
                .map(|i| match chain.add(format!("item:{i}").as_bytes(), MAX) {
                    AddResult::Added => '1',
                    AddResult::Exists => '0',
                    AddResult::Full => '2',
                    AddResult::CannotGrow => 'x',
                })
                .collect();
            assert_eq!(adds, f[6], "{line:.40}: add results");
            assert_eq!(hex(&chain.encode_header()), f[7], "{line:.40}: header");
            let bits: String = chain.links().iter().map(|l| hex(l.bit_array())).collect();
            assert_eq!(bits, f[8], "{line:.40}: bits");
            let probes: String = (0..1000)
                .map(|i| if chain.contains(format!("probe:{i}").as_bytes()) { '1' } else { '0' })
                .collect();
            assert_eq!(probes, f[9], "{line:.40}: probes");
            checked += 1;
        }
        assert_eq!(checked, 7);
    }

    #[test]
    fn thirty_two_bit_and_power_of_two_filters_work() {
        // Old RedisBloom dumps may use 32-bit hashing and power-of-two sizes.
        for options in [0, OPT_FORCE64, OPT_NOROUND] {
            let mut f = BloomFilter::with_options(1000, 0.01, options, 2, MAX).unwrap();
            for i in 0..3000u32 {
                f.add(&i.to_le_bytes(), MAX);
            }
            for i in 0..3000u32 {
                assert!(f.contains(&i.to_le_bytes()));
            }
            let g = BloomFilter::from_header(&f.encode_header(), MAX).unwrap();
            assert_eq!(g.links().len(), f.links().len());
        }
    }
}
