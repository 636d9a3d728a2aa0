//! A sliding window of access counts made of time slices (JD's hotkey
//! workers keep a ring of slices per key; this is the same structure).
//!
//! A rule's window of `interval` milliseconds is cut into [`SLICES`] slices
//! of `interval / SLICES` milliseconds (rounded down). The count of a key is
//! the sum of the slice the access falls in and the `SLICES - 1` before it:
//! those slices all lie inside the last `interval`, so the count never
//! includes an access older than one window — it can only under-count the
//! oldest, partly expired slice. That is the guarantee detection rests on: a
//! key that is never accessed `threshold` times within one interval is never
//! reported hot, and one accessed `threshold` times within
//! `interval - interval / SLICES` always is, at the access that crosses it.

/// Slices per window.
pub const SLICES: usize = 10;

/// The shortest interval a rule may have, in milliseconds (one per slice).
pub const MIN_INTERVAL_MS: u64 = SLICES as u64;

/// One key's counts over the last window.
#[derive(Clone, Debug, Default)]
pub struct SlidingWindow {
    slices: [u32; SLICES],
    /// The absolute number (`now / slice_ms`) of the newest slice counted.
    newest: u64,
    /// Sum of `slices`.
    total: u32,
}

impl SlidingWindow {
    /// Counts one access at `now_ms` and returns the count in the window.
    pub fn add(&mut self, now_ms: u64, slice_ms: u64) -> u32 {
        self.add_n(now_ms, slice_ms, 1)
    }

    /// Counts `n` accesses at `now_ms` and returns the count in the window.
    pub fn add_n(&mut self, now_ms: u64, slice_ms: u64, n: u32) -> u32 {
        let slice = self.advance(now_ms, slice_ms);
        let at = (slice % SLICES as u64) as usize;
        self.slices[at] = self.slices[at].saturating_add(n);
        self.total = self.slices.iter().fold(0u32, |sum, &c| sum.saturating_add(c));
        self.total
    }

    /// The count in the window ending at `now_ms` (no access counted).
    pub fn count(&mut self, now_ms: u64, slice_ms: u64) -> u32 {
        self.advance(now_ms, slice_ms);
        self.total
    }

    /// Moves the window so that its newest slice is the one `now_ms` falls
    /// in, clearing the slices that left it; returns that slice's number.
    /// A clock that went backwards keeps the window where it is.
    fn advance(&mut self, now_ms: u64, slice_ms: u64) -> u64 {
        let slice = now_ms / slice_ms.max(1);
        if slice <= self.newest {
            return self.newest;
        }
        let gone = (slice - self.newest).min(SLICES as u64);
        for step in 1..=gone {
            let at = ((self.newest + step) % SLICES as u64) as usize;
            self.total = self.total.saturating_sub(self.slices[at]);
            self.slices[at] = 0;
        }
        self.newest = slice;
        slice
    }
}

/// The slice length of a window of `interval_ms` (at least one millisecond).
pub fn slice_ms(interval_ms: u64) -> u64 {
    (interval_ms / SLICES as u64).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_accesses_within_the_window() {
        let slice = slice_ms(1000);
        let mut w = SlidingWindow::default();
        for i in 0..5 {
            assert_eq!(w.add(10_000 + i * 50, slice), i as u32 + 1);
        }
        assert_eq!(w.count(10_250, slice), 5);
        // 10_000..10_099 is slice 100; it leaves the window at slice 110.
        assert_eq!(w.count(10_999, slice), 5);
        assert_eq!(w.count(11_000, slice), 3);
        assert_eq!(w.count(11_100, slice), 1);
        assert_eq!(w.count(11_200, slice), 0);
    }

    #[test]
    fn never_counts_an_access_older_than_one_interval() {
        let slice = slice_ms(1000);
        let mut w = SlidingWindow::default();
        // One access every 37 ms for a long time: at any moment the window
        // holds at most the accesses of the last 1000 ms.
        let mut times = Vec::new();
        let mut now = 50_000;
        while now < 60_000 {
            let count = w.add(now, slice) as usize;
            times.push(now);
            let in_last_interval = times.iter().filter(|&&t| t + 1000 > now).count();
            assert!(count <= in_last_interval, "at {now}: {count} > {in_last_interval}");
            // And it loses at most the oldest slice's worth.
            let in_covered = times.iter().filter(|&&t| t + 900 >= now - now % 100).count();
            assert!(count >= in_covered, "at {now}: {count} < {in_covered}");
            now += 37;
        }
    }

    #[test]
    fn a_long_pause_clears_everything_and_the_clock_going_back_is_harmless() {
        let slice = slice_ms(200);
        let mut w = SlidingWindow::default();
        for _ in 0..7 {
            w.add(1_000, slice);
        }
        assert_eq!(w.count(999, slice), 7);
        assert_eq!(w.add_n(1_050, slice, 3), 10);
        assert_eq!(w.count(1_000_000, slice), 0);
        assert_eq!(w.add_n(1_000_000, slice, u32::MAX), u32::MAX);
        assert_eq!(w.add_n(1_000_001, slice, 5), u32::MAX, "saturates");
        assert_eq!(w.count(2_000_000, slice), 0);
        assert_eq!(w.add(1_000_000, slice), 1);
    }
}
