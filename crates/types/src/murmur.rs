//! Austin Appleby's MurmurHash2 in the two variants ringdb must reproduce bit
//! for bit: the 64-bit `MurmurHash64A` (Redis's HyperLogLog hashes elements
//! with it; RedisBloom's 64-bit filters too) and the 32-bit `MurmurHash2`
//! (RedisBloom filters created without 64-bit hashing).
//!
//! Both read their input in little-endian words, as Redis's endian-neutral
//! copy does, so the values are the same on every machine.

const M64: u64 = 0xc6a4_a793_5bd1_e995;
const R64: u32 = 47;

/// `MurmurHash64A(data, len, seed)`. Redis passes a 32-bit seed (zero
/// extended); RedisBloom a 64-bit one.
pub fn murmur64a(data: &[u8], seed: u64) -> u64 {
    // C multiplies the `int` length by the 64-bit constant.
    let mut h = seed ^ (data.len() as u64).wrapping_mul(M64);
    let mut words = data.chunks_exact(8);
    for word in &mut words {
        let mut k = u64::from_le_bytes(word.try_into().unwrap_or([0; 8]));
        k = k.wrapping_mul(M64);
        k ^= k >> R64;
        k = k.wrapping_mul(M64);
        h ^= k;
        h = h.wrapping_mul(M64);
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= (b as u64) << (8 * i);
        }
        h = h.wrapping_mul(M64);
    }
    h ^= h >> R64;
    h = h.wrapping_mul(M64);
    h ^= h >> R64;
    h
}

/// The 32-bit `MurmurHash2(data, len, seed)`.
pub fn murmur2(data: &[u8], seed: u32) -> u32 {
    const M: u32 = 0x5bd1_e995;
    let mut h = seed ^ data.len() as u32;
    let mut words = data.chunks_exact(4);
    for word in &mut words {
        let mut k = u32::from_le_bytes(word.try_into().unwrap_or([0; 4]));
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= (b as u32) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A direct transcription of the C loops (byte-wise tail with
    /// fall-through), to check the chunked versions above against.
    fn reference64(data: &[u8], seed: u64) -> u64 {
        let mut h = seed ^ (data.len() as u64).wrapping_mul(M64);
        let whole = data.len() - data.len() % 8;
        let mut i = 0;
        while i < whole {
            let mut k = 0u64;
            for j in 0..8 {
                k |= (data[i + j] as u64) << (8 * j);
            }
            k = k.wrapping_mul(M64);
            k ^= k >> 47;
            k = k.wrapping_mul(M64);
            h ^= k;
            h = h.wrapping_mul(M64);
            i += 8;
        }
        let rest = &data[whole..];
        for j in (0..rest.len()).rev() {
            h ^= (rest[j] as u64) << (8 * j);
        }
        if !rest.is_empty() {
            h = h.wrapping_mul(M64);
        }
        h ^= h >> 47;
        h = h.wrapping_mul(M64);
        h ^= h >> 47;
        h
    }

    #[test]
    fn chunked_matches_the_c_loop() {
        let data: Vec<u8> = (0..40u8).map(|i| i.wrapping_mul(37)).collect();
        for len in 0..data.len() {
            assert_eq!(
                murmur64a(&data[..len], 0xadc8_3b19),
                reference64(&data[..len], 0xadc8_3b19)
            );
        }
    }

    #[test]
    fn known_values() {
        // MurmurHash2 of the empty input with seed 0 is 0; with a seed it
        // is the finalised seed.
        assert_eq!(murmur2(b"", 0), 0);
        assert_eq!(murmur64a(b"", 0), 0);
        // Values computed with RedisBloom's C implementation.
        assert_eq!(murmur2(b"hello", 0x9747_b28c), 0x7f1d_dbbd);
        assert_eq!(murmur64a(b"hello", 0xadc8_3b19), 0x0f65_6f01_eecf_e400);
        assert_eq!(murmur64a(b"hello world, 12", 0xc6a4_a793_5bd1_e995), 0x4868_af25_ee9a_998d);
    }
}
