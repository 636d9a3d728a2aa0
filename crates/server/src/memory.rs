//! Memory accounting for INFO memory: a global allocator wrapper that counts
//! the bytes the process has allocated (Redis's `zmalloc_used_memory`), and
//! the resident set size from `/proc/self/statm`.
//!
//! Counting must not cost a shared atomic per allocation on every core (that
//! line would bounce between cores on the data path), so each thread keeps
//! its own running delta in a slot of its own (a cache line only it writes)
//! and folds it into the global total once it passes [`FLUSH_BYTES`]. The
//! total alone is within `FLUSH_BYTES` per thread; [`used_memory`] adds the
//! slots and is exact, and [`used_memory_near`] reads the slots only when
//! the total is close enough to a limit for them to matter.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering::Relaxed};

/// How far a thread's unreported delta may drift before it is folded in.
pub const FLUSH_BYTES: i64 = 16 * 1024;

static USED: AtomicI64 = AtomicI64::new(0);
static PEAK: AtomicI64 = AtomicI64::new(0);

/// Threads with a slot; later ones add to [`USED`] directly.
const SLOTS: usize = 128;

#[repr(align(64))]
struct Slot(AtomicI64);

/// Each thread's delta not folded into [`USED`] yet.
static PENDING: [Slot; SLOTS] = [const { Slot(AtomicI64::new(0)) }; SLOTS];
/// Slots handed out (may pass [`SLOTS`]: those threads have none).
static TAKEN: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    // Const-initialised and without a destructor: safe to touch from inside
    // the allocator, even while a thread is exiting.
    static MY_SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// This thread's slot (taken at its first allocation), if it has one.
fn my_slot() -> Option<&'static AtomicI64> {
    let i = MY_SLOT
        .try_with(|slot| {
            if slot.get() == usize::MAX {
                slot.set(TAKEN.fetch_add(1, Relaxed));
            }
            slot.get()
        })
        .ok()?;
    PENDING.get(i).map(|s| &s.0)
}

fn account(delta: i64) {
    let Some(slot) = my_slot() else { return fold(delta) };
    // Only this thread writes its slot: a load and a store, no contention.
    let v = slot.load(Relaxed) + delta;
    if v.abs() >= FLUSH_BYTES {
        slot.store(0, Relaxed);
        fold(v);
    } else {
        slot.store(v, Relaxed);
    }
}

fn fold(delta: i64) {
    let now = USED.fetch_add(delta, Relaxed) + delta;
    PEAK.fetch_max(now, Relaxed);
}

fn slots_in_use() -> &'static [Slot] {
    &PENDING[..TAKEN.load(Relaxed).min(SLOTS)]
}

/// Bytes currently allocated through the global allocator, exactly (every
/// thread's slot added: a read of one line per thread).
pub fn used_memory() -> u64 {
    let pending: i64 = slots_in_use().iter().map(|s| s.0.load(Relaxed)).sum();
    (USED.load(Relaxed) + pending).max(0) as u64
}

/// [`used_memory`] for a comparison with `limit`: the folded total with
/// this thread's own delta while that is far enough below `limit` for the
/// other threads' deltas not to matter (one shared load), exact near it.
/// What `maxmemory` decisions use, before every command when it is set.
pub fn used_memory_near(limit: u64) -> u64 {
    let own = my_slot().map_or(0, |s| s.load(Relaxed));
    let rough = (USED.load(Relaxed) + own).max(0) as u64;
    let drift = slots_in_use().len() as u64 * FLUSH_BYTES as u64;
    if rough + drift < limit {
        rough
    } else {
        used_memory()
    }
}

/// The most `used_memory` has been since start (or the last reset).
pub fn peak_memory() -> u64 {
    PEAK.load(Relaxed).max(0) as u64
}

/// CONFIG RESETSTAT: the peak starts again from the current use.
pub fn reset_peak() {
    PEAK.store(used_memory() as i64, Relaxed);
}

/// Resident set size in bytes, from `/proc/self/statm` (0 where unavailable).
pub fn rss_bytes() -> u64 {
    let Ok(statm) = std::fs::read_to_string("/proc/self/statm") else { return 0 };
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * page.max(0) as u64
}

/// Physical memory of the machine in bytes (`total_system_memory`).
pub fn total_system_memory() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let (pages, page) =
        unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
    (pages.max(0) as u64) * (page.max(0) as u64)
}

/// mimalloc, asked through the entry points that fit each layout.
///
/// The `mimalloc` crate's own allocator calls `mi_malloc_aligned` for every
/// layout. mimalloc 3 serves that from the exact size class only while the
/// class's current page has a free block; when it is full, the aligned
/// path over-allocates (size + alignment - 1) from the next class, and
/// every later block of that size follows it there. So a keyspace entry of
/// 48 bytes took 56, one of 56 took 64: 17 MB more RSS for 1M small
/// strings. Plain `mi_malloc` already gives every block 8-byte alignment,
/// and 16-byte alignment to sizes that are multiples of 16 (a page's first
/// block is 16-byte aligned, `MI_PAGE_MIN_START_BLOCK_ALIGN`, and such
/// sizes get classes that are multiples of 16); other layouts keep the
/// aligned entry points.
pub struct Mimalloc;

// Links the library: its C API is called directly below.
extern crate mimalloc;

#[inline]
fn plain(size: usize, align: usize) -> bool {
    align <= 8 || (align <= 16 && size.is_multiple_of(16))
}

extern "C" {
    fn mi_malloc(size: usize) -> *mut libc::c_void;
    fn mi_zalloc(size: usize) -> *mut libc::c_void;
    fn mi_realloc(p: *mut libc::c_void, size: usize) -> *mut libc::c_void;
    fn mi_malloc_aligned(size: usize, align: usize) -> *mut libc::c_void;
    fn mi_zalloc_aligned(size: usize, align: usize) -> *mut libc::c_void;
    fn mi_realloc_aligned(p: *mut libc::c_void, size: usize, align: usize) -> *mut libc::c_void;
    fn mi_free(p: *mut libc::c_void);
    fn mi_usable_size(p: *const libc::c_void) -> usize;
    fn mi_good_size(size: usize) -> usize;
}

// SAFETY: every call goes to mimalloc's C API (linked through the
// `mimalloc` crate) with the layout's size, and its alignment wherever
// plain allocation would not guarantee it (see `plain`).
unsafe impl GlobalAlloc for Mimalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let (size, align) = (layout.size(), layout.align());
        // SAFETY: as the impl's comment says.
        unsafe {
            if plain(size, align) {
                mi_malloc(size).cast()
            } else {
                mi_malloc_aligned(size, align).cast()
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let (size, align) = (layout.size(), layout.align());
        // SAFETY: as the impl's comment says.
        unsafe {
            if plain(size, align) {
                mi_zalloc(size).cast()
            } else {
                mi_zalloc_aligned(size, align).cast()
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from one of the calls above.
        unsafe { mi_free(ptr.cast()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let align = layout.align();
        // mimalloc keeps a block that shrinks by up to half where it is, so
        // `shrink_to_fit` (a full stream node, a list node) gave nothing
        // back while the count dropped: 7 MB of a 1M-entry stream. A block
        // that would fit a smaller size class moves to it.
        // SAFETY: `ptr` is a live block of ours; the new one is checked,
        // and `new_size` bytes of the old are valid to copy.
        if new_size < layout.size()
            && unsafe { mi_good_size(new_size) < mi_usable_size(ptr.cast()) }
        {
            // SAFETY: as above; a layout of a size smaller than a valid one.
            unsafe {
                let moved = self.alloc(Layout::from_size_align_unchecked(new_size, align));
                if !moved.is_null() {
                    std::ptr::copy_nonoverlapping(ptr, moved, new_size);
                    mi_free(ptr.cast());
                }
                return moved;
            }
        }
        // SAFETY: `ptr` came from one of the calls above; the new block
        // keeps the alignment the layout asks for.
        unsafe {
            if plain(new_size, align) {
                mi_realloc(ptr.cast(), new_size).cast()
            } else {
                mi_realloc_aligned(ptr.cast(), new_size, align).cast()
            }
        }
    }
}

/// Wraps the process's allocator to count what it hands out
/// (`#[global_allocator] static A: CountingAlloc<Mimalloc> = CountingAlloc::new(Mimalloc);`).
pub struct CountingAlloc<A> {
    inner: A,
}

impl<A> CountingAlloc<A> {
    pub const fn new(inner: A) -> Self {
        CountingAlloc { inner }
    }
}

// SAFETY: every call is forwarded unchanged to `inner`, itself a correct
// GlobalAlloc; the accounting neither allocates nor touches the memory.
unsafe impl<A: GlobalAlloc> GlobalAlloc for CountingAlloc<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = self.inner.alloc(layout);
        if !p.is_null() {
            account(layout.size() as i64);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = self.inner.alloc_zeroed(layout);
        if !p.is_null() {
            account(layout.size() as i64);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        self.inner.dealloc(ptr, layout);
        account(-(layout.size() as i64));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = self.inner.realloc(ptr, layout, new_size);
        if !p.is_null() {
            account(new_size as i64 - layout.size() as i64);
        }
        p
    }
}

/// Redis's `bytesToHuman`: `512B`, `1.50K`, `2.00M`, … with two decimals.
pub fn human(n: u64) -> String {
    const UNITS: [(u64, &str); 5] =
        [(1 << 50, "P"), (1 << 40, "T"), (1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")];
    if n >= 1 << 60 {
        return format!("{n}B");
    }
    for (size, unit) in UNITS {
        if n >= size {
            return format!("{:.2}{unit}", n as f64 / size as f64);
        }
    }
    format!("{n}B")
}

/// `used_memory` once the server had started, before it held any data
/// (MEMORY STATS `startup.allocated`, Redis's `initial_memory_usage`).
static STARTUP: AtomicI64 = AtomicI64::new(0);

/// Records the start-up baseline (see [`startup_memory`]).
pub fn mark_startup() {
    STARTUP.store(used_memory() as i64, Relaxed);
}

pub fn startup_memory() -> u64 {
    STARTUP.load(Relaxed).max(0) as u64
}

/// The allocator's name, as INFO's `mem_allocator` gives it.
pub const ALLOCATOR: &str = "mimalloc";

// mimalloc's own statistics. The library is linked through the `mimalloc`
// crate (the global allocator); these are part of its C API, which the
// crate's default features do not bind.
extern "C" {
    fn mi_stats_print_out(
        out: Option<unsafe extern "C" fn(*const libc::c_char, *mut libc::c_void)>,
        arg: *mut libc::c_void,
    );
    fn mi_collect(force: bool);
}

/// Anonymous resident bytes (`RssAnon` of `/proc/self/status`): the heap
/// as the kernel holds it, with the threads' stacks and the rings' pinned
/// I/O memory (about 1 MiB per shard); the RSS less the program's and
/// libraries' pages. It stands for jemalloc's `active` and
/// `resident` in INFO: mimalloc's own count of committed memory includes
/// the arena it commits up front but never touches (1 GiB with mimalloc 2).
pub fn allocator_resident() -> u64 {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else { return 0 };
    status
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// mimalloc's statistics report (MEMORY MALLOC-STATS), as it prints it.
pub fn allocator_report() -> Vec<u8> {
    unsafe extern "C" fn collect(msg: *const libc::c_char, arg: *mut libc::c_void) {
        if msg.is_null() || arg.is_null() {
            return;
        }
        // SAFETY: `arg` is the Vec passed below, alive for the call; `msg`
        // is a NUL-terminated string mimalloc owns for this callback.
        unsafe {
            let out = &mut *(arg as *mut Vec<u8>);
            out.extend_from_slice(std::ffi::CStr::from_ptr(msg).to_bytes());
        }
    }
    let mut out: Vec<u8> = Vec::new();
    // SAFETY: the callback only appends to `out`, which outlives the call.
    unsafe { mi_stats_print_out(Some(collect), &mut out as *mut Vec<u8> as *mut libc::c_void) };
    out
}

/// Turns transparent huge pages off (or back on) for the whole process
/// (`disable-thp`). mimalloc asks for huge pages on its arenas
/// (`MADV_HUGEPAGE`), so even with the kernel's default `madvise` mode a
/// heap holding a few kilobytes in a 2 MB region keeps all of it resident:
/// 12 MB of a fresh one-shard server's 25 MB RSS. Redis turns them off for
/// the same reason (its fork's copy-on-write is the other).
pub fn set_thp_disabled(disabled: bool) -> std::io::Result<()> {
    // SAFETY: PR_SET_THP_DISABLE takes a flag and three zeros.
    let rc = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, disabled as libc::c_ulong, 0, 0, 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Returns this thread's free memory to the OS where it can (MEMORY PURGE,
/// run on every core: mimalloc's heaps are per thread).
pub fn purge_this_thread() {
    // SAFETY: no preconditions; mimalloc frees only pages it owns.
    unsafe { mi_collect(true) };
}

/// Gives this core's free memory back to the OS once the core has been
/// quiet for [`QUIET`] after some activity (commands, connections opened or
/// closed). mimalloc purges a heap's free pages only while that heap is
/// used, and takes frees made by other cores into it only then: a core that
/// went quiet after a burst (10,000 connections closed, a FLUSHALL) kept
/// them all in its RSS.
pub async fn give_back_when_quiet(core: std::rc::Rc<crate::node::Core>) {
    let activity = |core: &crate::node::Core| {
        let stats = &core.shard.borrow().state.stats;
        (stats.commands_processed, stats.connections_received, core.clients.borrow().len())
    };
    let (mut last, mut purged) = (activity(&core), activity(&core));
    loop {
        glommio::timer::sleep(QUIET).await;
        let now = activity(&core);
        if now == last && now != purged {
            purge_this_thread();
            purged = now;
        }
        last = now;
    }
}

/// See [`give_back_when_quiet`].
const QUIET: std::time::Duration = std::time::Duration::from_secs(1);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_shrunk_to_a_smaller_class_moves_there() {
        let layout = Layout::from_size_align(2048, 1).unwrap();
        // SAFETY: non-empty layouts; each block is used with its own.
        unsafe {
            let p = Mimalloc.alloc(layout);
            p.write_bytes(7, 2048);
            let q = Mimalloc.realloc(p, layout, 1300);
            assert!(mi_usable_size(q.cast()) < 2048, "a 1300-byte block kept 2048 bytes");
            assert!(std::slice::from_raw_parts(q, 1300).iter().all(|&b| b == 7));
            // A shrink inside the same class stays in place.
            let small = Layout::from_size_align(1300, 1).unwrap();
            let r = Mimalloc.realloc(q, small, 1290);
            assert_eq!(r, q);
            Mimalloc.dealloc(r, Layout::from_size_align(1290, 1).unwrap());
        }
    }

    #[test]
    fn plain_allocations_keep_the_alignment_asked_for() {
        let mut held = Vec::new();
        for size in (8..=4096).step_by(8) {
            for align in [8, 16, 32] {
                let layout = Layout::from_size_align(size, align).unwrap();
                // Enough blocks to fill a page or two of the size class.
                for _ in 0..64 {
                    // SAFETY: a non-empty layout; freed below with it.
                    let p = unsafe { Mimalloc.alloc(layout) };
                    assert!(!p.is_null());
                    assert_eq!(p as usize % align, 0, "{size} bytes aligned {align}");
                    held.push((p, layout));
                }
            }
        }
        for (p, layout) in held {
            // SAFETY: allocated above with this layout.
            unsafe { Mimalloc.dealloc(p, layout) };
        }
    }

    #[test]
    fn human_sizes_as_redis() {
        assert_eq!(human(0), "0B");
        assert_eq!(human(1023), "1023B");
        assert_eq!(human(1024), "1.00K");
        assert_eq!(human(1536), "1.50K");
        assert_eq!(human(3 << 20), "3.00M");
        assert_eq!(human(5 << 30), "5.00G");
    }

    #[test]
    fn deltas_fold_into_the_total() {
        let before = USED.load(Relaxed);
        account(FLUSH_BYTES);
        account(-FLUSH_BYTES);
        assert_eq!(USED.load(Relaxed), before);
        assert!(peak_memory() as i64 >= before + FLUSH_BYTES);
        assert!(rss_bytes() > 0);
        assert!(total_system_memory() > 0);
    }

    #[test]
    fn a_thread_delta_below_the_fold_is_still_counted_exactly() {
        // A fresh thread: nothing else allocates on it meanwhile.
        std::thread::spawn(|| {
            let slot = my_slot().expect("a slot");
            let before = slot.load(Relaxed);
            let delta = if before > 0 { -100 } else { 100 };
            account(delta);
            assert_eq!(slot.load(Relaxed), before + delta);
            let pending: i64 = slots_in_use().iter().map(|s| s.0.load(Relaxed)).sum();
            assert!(pending.abs() <= slots_in_use().len() as i64 * FLUSH_BYTES);
            account(-delta);
        })
        .join()
        .unwrap();
    }
}
