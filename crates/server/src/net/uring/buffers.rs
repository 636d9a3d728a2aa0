//! The shard's provided-buffer ring: receive buffers the kernel picks from
//! for every multishot receive of the shard's connections.
//!
//! One ring of `count` buffers of `size` bytes serves every connection of the
//! shard, so memory for receives does not grow with the number of idle
//! connections (a buffer is taken only while data is in it). The driver
//! copies a received buffer into its connection's input at once and hands
//! the buffer back, so the ring empties only under a burst bigger than all
//! of it; the kernel then ends the receive with `ENOBUFS` and the driver
//! re-arms it once buffers are back.

use io_uring::types::BufRingEntry;
use std::io;
use std::sync::atomic::{AtomicU16, Ordering};

pub struct BufRing {
    /// The ring shared with the kernel: `count` entries, the tail in the
    /// first entry's reserved field (page-aligned, as the kernel requires).
    entries: *mut BufRingEntry,
    ring_bytes: usize,
    /// The buffers themselves, `count * size` bytes.
    memory: Box<[u8]>,
    count: u16,
    size: usize,
    /// Our copy of the tail: entries added since the last publish are
    /// made visible to the kernel by [`BufRing::publish`].
    tail: u16,
}

impl BufRing {
    /// Allocates `count` (a power of two) buffers of `size` bytes.
    pub fn new(count: u16, size: usize) -> io::Result<BufRing> {
        assert!(count.is_power_of_two(), "buffer count must be a power of two");
        let ring_bytes = count as usize * std::mem::size_of::<BufRingEntry>();
        // SAFETY: an anonymous private mapping; checked for failure below.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                ring_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_ANONYMOUS | libc::MAP_PRIVATE,
                -1,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mut ring = BufRing {
            entries: addr.cast(),
            ring_bytes,
            memory: vec![0u8; count as usize * size].into_boxed_slice(),
            count,
            size,
            tail: 0,
        };
        for bid in 0..count {
            ring.give_back(bid);
        }
        ring.publish();
        Ok(ring)
    }

    /// The ring's address and entry count, for registering it.
    pub fn registration(&self) -> (u64, u16) {
        (self.entries as u64, self.count)
    }

    /// The first `len` bytes of buffer `bid`, as the kernel filled them.
    pub fn data(&self, bid: u16, len: usize) -> &[u8] {
        let start = (bid as usize % self.count as usize) * self.size;
        &self.memory[start..start + len.min(self.size)]
    }

    /// [`BufRing::data`], to change in place (TLS decrypts there).
    pub fn data_mut(&mut self, bid: u16, len: usize) -> &mut [u8] {
        let start = (bid as usize % self.count as usize) * self.size;
        &mut self.memory[start..start + len.min(self.size)]
    }

    /// Queues buffer `bid` for the kernel again (visible after `publish`).
    pub fn give_back(&mut self, bid: u16) {
        let bid = bid % self.count;
        let index = (self.tail & (self.count - 1)) as usize;
        let addr = self.memory.as_ptr() as u64 + (bid as usize * self.size) as u64;
        // SAFETY: `index` < count, inside the mapping; the kernel reads this
        // entry only once the tail is published past it.
        let entry = unsafe { &mut *self.entries.add(index) };
        entry.set_addr(addr);
        entry.set_len(self.size as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Makes the buffers given back visible to the kernel.
    pub fn publish(&self) {
        // SAFETY: the tail lives in the first entry's reserved field, which
        // the kernel reads atomically; the release store orders the entries
        // written by `give_back` before it.
        unsafe {
            let tail = BufRingEntry::tail(self.entries) as *const AtomicU16;
            (*tail).store(self.tail, Ordering::Release);
        }
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`; the ring is unregistered (or
        // the io_uring closed) before the driver drops it.
        unsafe { libc::munmap(self.entries.cast(), self.ring_bytes) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_handed_out_in_ring_order_and_wrap() {
        let mut ring = BufRing::new(4, 16).unwrap();
        // SAFETY: reading back entries we wrote, inside the mapping.
        let bid_at = |ring: &BufRing, i: usize| unsafe { (*ring.entries.add(i)).bid() };
        assert_eq!((0..4).map(|i| bid_at(&ring, i)).collect::<Vec<_>>(), vec![0, 1, 2, 3]);
        ring.give_back(2);
        ring.publish();
        assert_eq!(bid_at(&ring, 0), 2, "the fifth entry wraps to slot 0");
        assert_eq!(ring.data(3, 100).len(), 16, "a length is capped at the buffer size");
    }
}
