//! Redis's CRC64 (Jones polynomial, reflected, no initial or final XOR): the
//! checksum at the end of RDB files and of DUMP payloads.
//!
//! Snapshots are gigabytes, so the checksum is table-driven eight bytes at a
//! time (slicing-by-8, the method of Redis's `crcspeed`). [`combine`] joins
//! the checksums of two pieces without reading them again, which lets each
//! shard checksum its own part of a snapshot and the parts be concatenated.

/// The reflected Jones polynomial (Redis's `crc64_jones`).
const POLY: u64 = 0x95ac_9329_ac4b_c9b5;

const fn tables() -> [[u64; 256]; 8] {
    let mut t = [[0u64; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u64;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ POLY } else { crc >> 1 };
            bit += 1;
        }
        t[0][i] = crc;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[k - 1][i];
            t[k][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            i += 1;
        }
        k += 1;
    }
    t
}

static TABLES: [[u64; 256]; 8] = tables();

/// Continues checksum `crc` over `data` (start with 0).
pub fn update(mut crc: u64, data: &[u8]) -> u64 {
    let t = &TABLES;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        crc ^= u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        crc = t[7][(crc & 0xff) as usize]
            ^ t[6][((crc >> 8) & 0xff) as usize]
            ^ t[5][((crc >> 16) & 0xff) as usize]
            ^ t[4][((crc >> 24) & 0xff) as usize]
            ^ t[3][((crc >> 32) & 0xff) as usize]
            ^ t[2][((crc >> 40) & 0xff) as usize]
            ^ t[1][((crc >> 48) & 0xff) as usize]
            ^ t[0][(crc >> 56) as usize];
    }
    for &b in chunks.remainder() {
        crc = t[0][((crc ^ b as u64) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

/// The checksum of `data`.
pub fn crc64(data: &[u8]) -> u64 {
    update(0, data)
}

fn gf2_times(matrix: &[u64; 64], mut vector: u64) -> u64 {
    let mut sum = 0;
    let mut i = 0;
    while vector != 0 {
        if vector & 1 == 1 {
            sum ^= matrix[i];
        }
        vector >>= 1;
        i += 1;
    }
    sum
}

fn gf2_square(square: &mut [u64; 64], matrix: &[u64; 64]) {
    for n in 0..64 {
        square[n] = gf2_times(matrix, matrix[n]);
    }
}

/// The checksum of `a ++ b` from `crc64(a)`, `crc64(b)` and `b.len()`
/// (zlib's `crc32_combine` method: multiply `crc64(a)` by x^(8·len) in
/// GF(2) with a matrix raised to that power by squaring). Valid because this
/// CRC has no initial value or final XOR, so it is linear.
pub fn combine(mut crc_a: u64, crc_b: u64, mut len_b: u64) -> u64 {
    if len_b == 0 {
        return crc_a;
    }
    let mut even = [0u64; 64];
    let mut odd = [0u64; 64];
    // The operator for one zero bit.
    odd[0] = POLY;
    for (n, row) in odd.iter_mut().enumerate().skip(1) {
        *row = 1 << (n - 1);
    }
    gf2_square(&mut even, &odd); // two zero bits
    gf2_square(&mut odd, &even); // four zero bits
    loop {
        gf2_square(&mut even, &odd);
        if len_b & 1 == 1 {
            crc_a = gf2_times(&even, crc_a);
        }
        len_b >>= 1;
        if len_b == 0 {
            break;
        }
        gf2_square(&mut odd, &even);
        if len_b & 1 == 1 {
            crc_a = gf2_times(&odd, crc_a);
        }
        len_b >>= 1;
        if len_b == 0 {
            break;
        }
    }
    crc_a ^ crc_b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bitwise(data: &[u8]) -> u64 {
        let mut crc = 0u64;
        for &b in data {
            crc ^= b as u64;
            for _ in 0..8 {
                crc = if crc & 1 == 1 { (crc >> 1) ^ POLY } else { crc >> 1 };
            }
        }
        crc
    }

    #[test]
    fn matches_redis_test_vector() {
        assert_eq!(crc64(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
        let long = b"This is a test of the emergency broadcast system.";
        assert_eq!(crc64(long), bitwise(long));
    }

    #[test]
    fn sliced_equals_bitwise_at_every_length() {
        let data: Vec<u8> = (0..300u32).map(|i| (i * 31 + 7) as u8).collect();
        for n in 0..data.len() {
            assert_eq!(crc64(&data[..n]), bitwise(&data[..n]), "length {n}");
        }
        assert_eq!(update(crc64(&data[..100]), &data[100..]), crc64(&data));
    }

    #[test]
    fn combine_joins_pieces() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 131 + i / 7) as u8).collect();
        for split in [0, 1, 7, 8, 9, 100, 4095, 5000] {
            let (a, b) = data.split_at(split);
            assert_eq!(combine(crc64(a), crc64(b), b.len() as u64), crc64(&data), "{split}");
        }
    }
}
