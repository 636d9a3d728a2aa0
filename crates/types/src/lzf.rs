//! LZF, the compression RDB files use for strings and Redis uses for the
//! interior nodes of big lists (`list-compress-depth`), in liblzf's format: a
//! stream of literal runs (`000LLLLL` + up to 32 bytes) and back
//! references (`LLLooooo [L+] oooooooo`: 3 to 264 bytes from up to 8 KiB
//! back).
//!
//! The compressor is ringdb's own (a hash of the next three bytes finds a
//! candidate match, as liblzf does); any valid stream decompresses the same,
//! so Redis reads ringdb's output and the other way round.

/// Longest back reference.
const MAX_REF: usize = (1 << 8) + (1 << 3);
/// Farthest back reference.
const MAX_OFF: usize = 1 << 13;
/// Longest literal run.
const MAX_LIT: usize = 1 << 5;
/// Most bits of the hash table's index (16K entries, as liblzf's).
const HASH_LOG: u32 = 14;
/// Fewest: a short string gets a table about its own length, so that
/// compressing a 100-byte value (every string of an RDB snapshot) does not
/// clear a 64 KiB table.
const MIN_HASH_LOG: u32 = 4;

#[inline]
fn hash3(data: &[u8], i: usize, log: u32) -> usize {
    let v = (data[i] as u32) << 16 | (data[i + 1] as u32) << 8 | data[i + 2] as u32;
    (v.wrapping_mul(0x9E37_79B1) >> (32 - log)) as usize
}

/// Compresses `input`; `None` when the result would not be shorter than
/// `max_out` bytes (the caller then stores the string as it is).
pub fn compress(input: &[u8], max_out: usize) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(max_out.min(input.len()));
    let log = input.len().next_power_of_two().trailing_zeros().clamp(MIN_HASH_LOG, HASH_LOG);
    let mut table = vec![0u32; 1 << log];
    let mut lit_start = 0usize;
    let mut i = 0usize;
    let flush_literals = |out: &mut Vec<u8>, from: usize, to: usize| {
        let mut s = from;
        while s < to {
            let run = (to - s).min(MAX_LIT);
            out.push((run - 1) as u8);
            out.extend_from_slice(&input[s..s + run]);
            s += run;
        }
    };
    while i + 2 < input.len() {
        let h = hash3(input, i, log);
        let candidate = table[h] as usize;
        table[h] = (i + 1) as u32;
        if candidate > 0 {
            let r = candidate - 1;
            let off = i - r - 1;
            if off < MAX_OFF && input[r..r + 3] == input[i..i + 3] {
                let max_len = (input.len() - i).min(MAX_REF);
                let mut len = 3;
                while len < max_len && input[r + len] == input[i + len] {
                    len += 1;
                }
                flush_literals(&mut out, lit_start, i);
                let l = len - 2;
                if l < 7 {
                    out.push(((off >> 8) as u8) | ((l as u8) << 5));
                } else {
                    out.push(((off >> 8) as u8) | (7 << 5));
                    out.push((l - 7) as u8);
                }
                out.push(off as u8);
                if out.len() >= max_out {
                    return None;
                }
                // Index the positions inside the match so later matches
                // can find them.
                let end = i + len;
                let mut j = i + 1;
                while j < end && j + 2 < input.len() {
                    table[hash3(input, j, log)] = (j + 1) as u32;
                    j += 1;
                }
                i = end;
                lit_start = i;
                continue;
            }
        }
        i += 1;
        if out.len() + (i - lit_start) >= max_out {
            return None;
        }
    }
    flush_literals(&mut out, lit_start, input.len());
    (out.len() < max_out).then_some(out)
}

/// Decompresses `input` into exactly `out_len` bytes; `None` if the stream
/// is malformed or does not produce exactly that many.
pub fn decompress(input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    // A back reference of at most 3 bytes expands to at most 264 bytes: a
    // claimed length beyond that ratio is corrupt, and is refused before
    // anything is allocated.
    if out_len > input.len().saturating_mul(MAX_REF) {
        return None;
    }
    let mut out = Vec::with_capacity(out_len);
    let mut i = 0;
    while i < input.len() {
        let ctrl = input[i] as usize;
        i += 1;
        if ctrl < 32 {
            let run = ctrl + 1;
            out.extend_from_slice(input.get(i..i + run)?);
            i += run;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += *input.get(i)? as usize;
                i += 1;
            }
            let back = ((ctrl & 0x1f) << 8) + *input.get(i)? as usize + 1;
            i += 1;
            let start = out.len().checked_sub(back)?;
            if out.len() + len + 2 > out_len {
                return None;
            }
            for k in 0..len + 2 {
                let c = out[start + k];
                out.push(c);
            }
        }
        if out.len() > out_len {
            return None;
        }
    }
    (out.len() == out_len).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_and_back_references() {
        // "aaaaaaaaaa": literal 'a', then a back reference of 9.
        let compressed = [0x00, b'a', 0xe0, 0x00, 0x00];
        assert_eq!(decompress(&compressed, 10).unwrap(), b"aaaaaaaaaa");
        assert!(decompress(&compressed, 11).is_none());
        assert!(decompress(&compressed, 9).is_none());
        assert!(decompress(&[0xe0, 0x00, 0x00], 10).is_none(), "reference before any byte");
        assert!(decompress(&[0x05, b'a'], 6).is_none(), "short literal run");
    }

    #[test]
    fn round_trips() {
        let samples: Vec<Vec<u8>> = vec![
            vec![b'a'; 1000],
            b"hello hello hello hello hello world world world".to_vec(),
            (0..20_000u32).map(|i| (i % 251) as u8).collect(),
            (0..5000u32).map(|i| (i.wrapping_mul(2654435761u32) >> 24) as u8).collect(),
            [b"abc".repeat(300), vec![7; 9000], b"xyz".repeat(100)].concat(),
        ];
        for s in samples {
            match compress(&s, s.len() - 4) {
                Some(c) => {
                    assert!(c.len() < s.len() - 4);
                    assert_eq!(decompress(&c, s.len()).unwrap(), s);
                }
                // Incompressible (random-looking) input.
                None => assert!(s.len() == 5000),
            }
        }
        assert!(compress(b"abcdefghijklmnopqrstuvwxyz", 22).is_none());
    }
}
