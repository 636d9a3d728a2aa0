//! Key → hash slot, exactly as Redis Cluster computes it: CRC16 (XMODEM) of
//! the key, or of the part between the first `{` and the next `}` when that
//! part is non-empty, modulo 16384. Keys that share a hash tag share a slot,
//! and therefore a shard.

pub const SLOTS: usize = 16384;

/// CRC16-CCITT (XMODEM), polynomial 0x1021, as in Redis's `crc16.c`, read
/// eight bytes at a time ("slicing by 8"): `TABLES[k][b]` is the CRC of byte
/// `b` followed by `k` zero bytes, so the eight lookups of a word are
/// independent instead of a chain of eight. Every command computes a slot
/// (to route it and to find its table), so this is on the hot path.
const fn crc16_tables() -> [[u16; 256]; 8] {
    let mut tables = [[0u16; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
            bit += 1;
        }
        tables[0][i] = crc;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = tables[k - 1][i];
            tables[k][i] = (prev << 8) ^ tables[0][(prev >> 8) as usize];
            i += 1;
        }
        k += 1;
    }
    tables
}

static CRC16_TABLES: [[u16; 256]; 8] = crc16_tables();

pub fn crc16(data: &[u8]) -> u16 {
    let t = &CRC16_TABLES;
    let mut crc = 0u16;
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        // The register folds into the word's first two bytes.
        let (hi, lo) = ((crc >> 8) as u8 ^ w[0], crc as u8 ^ w[1]);
        crc = t[7][hi as usize]
            ^ t[6][lo as usize]
            ^ t[5][w[2] as usize]
            ^ t[4][w[3] as usize]
            ^ t[3][w[4] as usize]
            ^ t[2][w[5] as usize]
            ^ t[1][w[6] as usize]
            ^ t[0][w[7] as usize];
    }
    words
        .remainder()
        .iter()
        .fold(crc, |crc, &b| (crc << 8) ^ t[0][(((crc >> 8) as u8) ^ b) as usize])
}

/// The part of `key` that is hashed: its `{tag}` if it has a non-empty one.
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = memchr::memchr(b'{', key) {
        if let Some(len) = memchr::memchr(b'}', &key[open + 1..]) {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

/// The hash slot of `key` (0..16384).
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) & (SLOTS as u16 - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_redis_cluster_keyslot() {
        // Values from `CLUSTER KEYSLOT` on Redis.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"{user1000}.followers"));
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") & 16383);
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        assert_eq!(key_slot(b""), 0);
    }

    /// The bit-at-a-time definition, to check the sliced tables against.
    fn crc16_bitwise(data: &[u8]) -> u16 {
        let mut crc = 0u16;
        for &b in data {
            crc ^= (b as u16) << 8;
            for _ in 0..8 {
                crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
            }
        }
        crc
    }

    #[test]
    fn sliced_crc16_matches_the_definition_at_every_length() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let data: Vec<u8> = (0..200)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        for len in 0..data.len() {
            for start in [0, 1, 3] {
                let part = &data[start.min(len)..len];
                assert_eq!(crc16(part), crc16_bitwise(part), "length {}", part.len());
            }
        }
    }
}
