//! Longest common subsequence of two byte strings (the LCS command): the
//! dynamic-programming table, the subsequence itself and the matching ranges.
//!
//! The table, the walk back through it and the way ranges are cut follow
//! Redis's `lcsCommand` (t_string.c) step for step: when several longest
//! subsequences exist, clients get the one Redis picks, with the same ranges
//! in the same order (from the end of the strings towards the start).
//!
//! The table needs (|a|+1)·(|b|+1) 32-bit cells. Like Redis, [`lcs`] refuses
//! to build one larger than the caller's limit (Redis uses
//! `proto-max-bulk-len`) and reports a failed allocation instead of aborting.

/// What the caller wants besides the length.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LcsQuery {
    /// The subsequence itself.
    pub string: bool,
    /// The matching ranges (LCS IDX).
    pub ranges: bool,
    /// Ranges shorter than this are left out (0 keeps all).
    pub min_match_len: u64,
}

/// A run of consecutive matching bytes: `a.0..=a.1` in the first string
/// equals `b.0..=b.1` in the second.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LcsMatch {
    pub a: (u32, u32),
    pub b: (u32, u32),
    pub len: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Lcs {
    pub len: u32,
    /// Empty unless asked for.
    pub string: Vec<u8>,
    /// Empty unless asked for; from the end of the strings backwards.
    pub ranges: Vec<LcsMatch>,
}

/// Why no LCS was computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LcsError {
    /// A string is too long for 32-bit table cells.
    StringTooLong,
    /// The table would be larger than the limit.
    TableTooLarge,
    /// The table could not be allocated.
    OutOfMemory,
}

/// Bytes the table for strings of these lengths needs.
pub fn table_bytes(a_len: usize, b_len: usize) -> u64 {
    (a_len as u64 + 1).saturating_mul(b_len as u64 + 1).saturating_mul(4)
}

/// The LCS of `a` and `b`, refusing tables over `max_table_bytes`.
pub fn lcs(a: &[u8], b: &[u8], query: LcsQuery, max_table_bytes: u64) -> Result<Lcs, LcsError> {
    if a.len() as u64 >= u32::MAX as u64 - 1 || b.len() as u64 >= u32::MAX as u64 - 1 {
        return Err(LcsError::StringTooLong);
    }
    if table_bytes(a.len(), b.len()) > max_table_bytes {
        return Err(LcsError::TableTooLarge);
    }
    if !query.string && !query.ranges {
        // The length alone needs only two rows of the table.
        return Ok(Lcs { len: length_only(a, b)?, ..Lcs::default() });
    }
    let table = Table::build(a, b)?;
    Ok(table.walk_back(a, b, query))
}

/// An allocation of `n` zeroed cells, or `OutOfMemory`.
fn zeroed(n: usize) -> Result<Vec<u32>, LcsError> {
    let mut cells = Vec::new();
    cells.try_reserve_exact(n).map_err(|_| LcsError::OutOfMemory)?;
    cells.resize(n, 0);
    Ok(cells)
}

/// The length of the LCS, keeping one previous row of the table.
fn length_only(a: &[u8], b: &[u8]) -> Result<u32, LcsError> {
    let mut prev = zeroed(b.len() + 1)?;
    let mut row = zeroed(b.len() + 1)?;
    for &ca in a {
        for (j, &cb) in b.iter().enumerate() {
            row[j + 1] = if ca == cb { prev[j] + 1 } else { prev[j + 1].max(row[j]) };
        }
        std::mem::swap(&mut prev, &mut row);
    }
    Ok(prev[b.len()])
}

/// `cell(i, j)` = length of the LCS of `a[..i]` and `b[..j]`.
struct Table {
    cells: Vec<u32>,
    width: usize,
}

impl Table {
    fn build(a: &[u8], b: &[u8]) -> Result<Table, LcsError> {
        let width = b.len() + 1;
        let cells = zeroed((a.len() + 1) * width)?;
        let mut t = Table { cells, width };
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                let v = if a[i - 1] == b[j - 1] {
                    t.cell(i - 1, j - 1) + 1
                } else {
                    t.cell(i - 1, j).max(t.cell(i, j - 1))
                };
                t.cells[i * width + j] = v;
            }
        }
        Ok(t)
    }

    fn cell(&self, i: usize, j: usize) -> u32 {
        self.cells[i * self.width + j]
    }

    /// Redis's walk from the bottom-right corner: a match takes the byte and
    /// moves diagonally, extending the current range; otherwise it moves
    /// towards the larger neighbour (up on a strict win, else left) and
    /// closes the range.
    fn walk_back(&self, a: &[u8], b: &[u8], query: LcsQuery) -> Lcs {
        let len = self.cell(a.len(), b.len());
        let mut string = vec![0u8; len as usize];
        let mut ranges = Vec::new();
        let mut idx = len as usize;
        let (mut i, mut j) = (a.len(), b.len());
        // `None` while no range is open (Redis marks that with alen).
        let mut open: Option<LcsMatch> = None;
        while i > 0 && j > 0 {
            let mut emit = false;
            if a[i - 1] == b[j - 1] {
                string[idx - 1] = a[i - 1];
                let (ai, bj) = ((i - 1) as u32, (j - 1) as u32);
                match &mut open {
                    None => open = Some(LcsMatch { a: (ai, ai), b: (bj, bj), len: 0 }),
                    Some(r) if r.a.0 == i as u32 && r.b.0 == j as u32 => {
                        r.a.0 -= 1;
                        r.b.0 -= 1;
                    }
                    Some(_) => emit = true,
                }
                // A range that reached the start of either string ends here.
                if open.is_some_and(|r| r.a.0 == 0 || r.b.0 == 0) {
                    emit = true;
                }
                idx -= 1;
                i -= 1;
                j -= 1;
            } else {
                if self.cell(i - 1, j) > self.cell(i, j - 1) {
                    i -= 1;
                } else {
                    j -= 1;
                }
                emit = open.is_some();
            }
            if emit {
                if let Some(mut r) = open.take() {
                    r.len = r.a.1 - r.a.0 + 1;
                    if query.ranges
                        && (query.min_match_len == 0 || r.len as u64 >= query.min_match_len)
                    {
                        ranges.push(r);
                    }
                }
            }
        }
        if !query.string {
            string.clear();
        }
        Lcs { len, string, ranges }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: LcsQuery = LcsQuery { string: true, ranges: true, min_match_len: 0 };
    const NO_LIMIT: u64 = u64::MAX;

    fn m(a: (u32, u32), b: (u32, u32)) -> LcsMatch {
        LcsMatch { a, b, len: a.1 - a.0 + 1 }
    }

    #[test]
    fn redis_documentation_example() {
        let (a, b) = (b"ohmytext", b"mynewtext");
        let r = lcs(a, b, ALL, NO_LIMIT).unwrap();
        assert_eq!(r.len, 6);
        assert_eq!(r.string, b"mytext");
        assert_eq!(r.ranges, vec![m((4, 7), (5, 8)), m((2, 3), (0, 1))]);
        let r = lcs(a, b, LcsQuery { min_match_len: 4, ..ALL }, NO_LIMIT).unwrap();
        assert_eq!(r.ranges, vec![m((4, 7), (5, 8))]);
        let len = lcs(a, b, LcsQuery::default(), NO_LIMIT).unwrap();
        assert_eq!((len.len, len.string.len(), len.ranges.len()), (6, 0, 0));
    }

    const RNA1: &[u8] = b"CACCTTCCCAGGTAACAAACCAACCAACTTTCGATCTCTTGTAGATCTGTTCTCTAAACGAACTTTAAAATCTGTGTGGCTGTCACTCGGCTGCATGCTTAGTGCACTCACGCAGTATAATTAATAACTAATTACTGTCGTTGACAGGACACGAGTAACTCGTCTATCTTCTGCAGGCTGCTTACGGTTTCGTCCGTGTTGCAGCCGATCATCAGCACATCTAGGTTTCGTCCGGGTGTG";
    const RNA2: &[u8] = b"ATTAAAGGTTTATACCTTCCCAGGTAACAAACCAACCAACTTTCGATCTCTTGTAGATCTGTTCTCTAAACGAACTTTAAAATCTGTGTGGCTGTCACTCGGCTGCATGCTTAGTGCACTCACGCAGTATAATTAATAACTAATTACTGTCGTTGACAGGACACGAGTAACTCGTCTATCTTCTGCAGGCTGCTTACGGTTTCGTCCGTGTTGCAGCCGATCATCAGCACATCTAGGTTT";
    const RNA_LCS: &[u8] = b"ACCTTCCCAGGTAACAAACCAACCAACTTTCGATCTCTTGTAGATCTGTTCTCTAAACGAACTTTAAAATCTGTGTGGCTGTCACTCGGCTGCATGCTTAGTGCACTCACGCAGTATAATTAATAACTAATTACTGTCGTTGACAGGACACGAGTAACTCGTCTATCTTCTGCAGGCTGCTTACGGTTTCGTCCGTGTTGCAGCCGATCATCAGCACATCTAGGTTT";

    #[test]
    fn redis_test_suite_vectors() {
        // unit/type/string.tcl: "LCS basic", "LCS indexes ...".
        let r = lcs(RNA1, RNA2, ALL, NO_LIMIT).unwrap();
        assert_eq!(r.string, RNA_LCS);
        assert_eq!(r.len as usize, RNA_LCS.len());
        let expect = vec![
            m((238, 238), (239, 239)),
            m((236, 236), (238, 238)),
            m((229, 230), (236, 237)),
            m((224, 224), (235, 235)),
            m((1, 222), (13, 234)),
        ];
        assert_eq!(r.ranges, expect);
        let r = lcs(RNA1, RNA2, LcsQuery { min_match_len: 5, ..ALL }, NO_LIMIT).unwrap();
        assert_eq!(r.ranges, vec![m((1, 222), (13, 234))]);
    }

    fn is_subsequence(needle: &[u8], hay: &[u8]) -> bool {
        let mut it = hay.iter();
        needle.iter().all(|c| it.any(|h| h == c))
    }

    #[test]
    fn empty_and_disjoint() {
        let r = lcs(b"", b"abc", ALL, NO_LIMIT).unwrap();
        assert_eq!((r.len, r.string.len(), r.ranges.len()), (0, 0, 0));
        let r = lcs(b"abc", b"xyz", ALL, NO_LIMIT).unwrap();
        assert_eq!(r.len, 0);
        let r = lcs(b"same", b"same", ALL, NO_LIMIT).unwrap();
        assert_eq!(r.string, b"same");
        assert_eq!(r.ranges, vec![m((0, 3), (0, 3))]);
    }

    #[test]
    fn length_only_agrees_with_table() {
        let mut x = 12345u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b"ACGT"[(x % 4) as usize]
        };
        for (la, lb) in [(0, 5), (7, 3), (30, 41), (64, 64)] {
            let a: Vec<u8> = (0..la).map(|_| next()).collect();
            let b: Vec<u8> = (0..lb).map(|_| next()).collect();
            let full = lcs(&a, &b, ALL, NO_LIMIT).unwrap();
            let short = lcs(&a, &b, LcsQuery::default(), NO_LIMIT).unwrap();
            assert_eq!(full.len, short.len);
            assert!(is_subsequence(&full.string, &a) && is_subsequence(&full.string, &b));
            let covered: u32 = full.ranges.iter().map(|r| r.len).sum();
            assert_eq!(covered, full.len, "ranges cover the whole subsequence");
        }
    }

    #[test]
    fn table_limit() {
        assert_eq!(table_bytes(3, 4), 4 * 5 * 4);
        assert_eq!(lcs(b"abc", b"abcd", ALL, 79), Err(LcsError::TableTooLarge));
        assert!(lcs(b"abc", b"abcd", ALL, 80).is_ok());
        // The limit applies to LEN as well, as in Redis.
        assert_eq!(lcs(b"abc", b"abcd", LcsQuery::default(), 79), Err(LcsError::TableTooLarge));
    }
}
