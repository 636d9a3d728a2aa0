//! Random choices for the random-member commands (SRANDMEMBER, SPOP,
//! HRANDFIELD, ZRANDMEMBER). Randomness comes from the caller (`FnMut() ->
//! u64`, the shard's generator) so this crate stays deterministic in tests.

/// A uniform integer in `0..n` (`n > 0`), by multiply-shift.
#[inline]
pub fn below(rng: &mut (impl FnMut() -> u64 + ?Sized), n: usize) -> usize {
    debug_assert!(n > 0);
    ((rng() as u128 * n as u128) >> 64) as usize
}

/// `k` distinct indices of `0..n` (`k <= n`), ascending, so that a pack can
/// be read in one pass: Floyd's algorithm when `k` is small against `n`,
/// selection sampling (Knuth's algorithm S) otherwise.
pub fn distinct_sorted(rng: &mut (impl FnMut() -> u64 + ?Sized), n: usize, k: usize) -> Vec<usize> {
    let k = k.min(n);
    if k.saturating_mul(8) < n {
        let mut chosen = hashbrown::HashSet::with_capacity(k);
        let mut out = Vec::with_capacity(k);
        for j in (n - k)..n {
            let t = below(rng, j + 1);
            let pick = if chosen.contains(&t) { j } else { t };
            chosen.insert(pick);
            out.push(pick);
        }
        out.sort_unstable();
        out
    } else {
        let mut out = Vec::with_capacity(k);
        let mut needed = k;
        for i in 0..n {
            if needed == 0 {
                break;
            }
            if below(rng, n - i) < needed {
                out.push(i);
                needed -= 1;
            }
        }
        out
    }
}

/// `k` independent uniform indices of `0..n` as `(index, pick order)`,
/// sorted by index: read a pack once, then place each result at its pick
/// order so the reply keeps the random order (Redis's `lpRandomPairs`).
pub fn with_repeats_sorted(
    rng: &mut (impl FnMut() -> u64 + ?Sized),
    n: usize,
    k: usize,
) -> Vec<(usize, usize)> {
    let mut picks: Vec<(usize, usize)> = (0..k).map(|order| (below(rng, n), order)).collect();
    picks.sort_unstable();
    picks
}

#[cfg(test)]
pub(crate) fn test_rng(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_indices_are_distinct_sorted_and_cover_uniformly() {
        let mut rng = test_rng(7);
        let mut hits = [0usize; 20];
        for _ in 0..4000 {
            for k in [1, 3, 10, 20] {
                let picks = distinct_sorted(&mut rng, 20, k);
                assert_eq!(picks.len(), k);
                assert!(picks.windows(2).all(|w| w[0] < w[1]));
                if k == 3 {
                    for p in picks {
                        hits[p] += 1;
                    }
                }
            }
        }
        // 12000 picks over 20 slots: 600 expected each.
        assert!(hits.iter().all(|&h| (450..750).contains(&h)), "{hits:?}");
        let big = distinct_sorted(&mut rng, 1_000_000, 5);
        assert_eq!(big.len(), 5);
        assert!(big.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn repeats_keep_pick_order() {
        let mut rng = test_rng(3);
        let picks = with_repeats_sorted(&mut rng, 5, 100);
        assert_eq!(picks.len(), 100);
        assert!(picks.windows(2).all(|w| w[0].0 <= w[1].0));
        let mut orders: Vec<usize> = picks.iter().map(|p| p.1).collect();
        orders.sort_unstable();
        assert_eq!(orders, (0..100).collect::<Vec<_>>());
    }
}
