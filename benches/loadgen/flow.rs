//! Credit-based pacing between the threads that send (publishers, writers,
//! pushers, producers) and the sessions that receive what they sent.
//!
//! A sender takes `units` of credit per command (a PUBLISH to S subscribers
//! takes S, one per delivery it causes) and receivers give credit back as
//! deliveries arrive. At most `limit` units are outstanding, so the server
//! never builds a backlog the receivers cannot drain: the rate measured is
//! one the server sustains, and with a limit of one command's worth the
//! run is a ping-pong that measures pure latency.

use crate::measure::{now_ns, Window};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::Mutex;
use std::thread::{self, Thread};
use std::time::Duration;

/// A sender that has had no credit back for this long reports the run as
/// stuck (deliveries lost, or a server that stopped answering).
const STALL: Duration = Duration::from_secs(5);

pub struct Flow {
    issued: AtomicU64,
    completed: AtomicU64,
    limit: u64,
    /// Senders parked waiting for credit, and the threads to wake.
    waiting: AtomicUsize,
    senders: Mutex<Vec<Thread>>,
}

impl Flow {
    pub fn new(limit: u64) -> Flow {
        Flow {
            issued: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            limit,
            waiting: AtomicUsize::new(0),
            senders: Mutex::new(Vec::new()),
        }
    }

    /// Called by each sending thread before its first `acquire`.
    pub fn register(&self) {
        if let Ok(mut senders) = self.senders.lock() {
            senders.push(thread::current());
        }
    }

    fn outstanding(&self) -> u64 {
        self.issued.load(SeqCst).saturating_sub(self.completed.load(SeqCst))
    }

    /// Takes `units` of credit, waiting for receivers to give some back if
    /// the limit is reached. `Ok(false)` when the window ends first. Two
    /// senders may both pass the check at once and overshoot the limit by a
    /// command each; that is fine for pacing. Nothing outstanding always
    /// admits one command, however large.
    pub fn acquire(&self, units: u64, window: &Window) -> Result<bool, String> {
        let mut stalled_since = None;
        loop {
            let outstanding = self.outstanding();
            if outstanding == 0 || outstanding + units <= self.limit {
                self.issued.fetch_add(units, SeqCst);
                return Ok(true);
            }
            let now = now_ns();
            if window.over(now) {
                return Ok(false);
            }
            let since = *stalled_since.get_or_insert((now, self.completed.load(SeqCst)));
            if self.completed.load(SeqCst) != since.1 {
                stalled_since = None;
            } else if now - since.0 > STALL.as_nanos() as u64 {
                return Err(format!(
                    "no delivery for {} s with {outstanding} outstanding",
                    STALL.as_secs()
                ));
            }
            self.waiting.fetch_add(1, SeqCst);
            // Checked again after announcing the wait: a credit given in
            // between has seen `waiting` and unparks this thread.
            if self.outstanding() + units > self.limit {
                thread::park_timeout(Duration::from_millis(5));
            }
            self.waiting.fetch_sub(1, SeqCst);
        }
    }

    /// Gives back `units` of credit (deliveries that arrived).
    pub fn credit(&self, units: u64) {
        self.completed.fetch_add(units, SeqCst);
        if self.waiting.load(SeqCst) > 0 {
            if let Ok(senders) = self.senders.lock() {
                senders.iter().for_each(Thread::unpark);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn window_of(ms: u64) -> Window {
        Window::after(Duration::ZERO, Duration::from_millis(ms))
    }

    #[test]
    fn admits_up_to_the_limit() {
        let flow = Flow::new(3);
        let window = window_of(1000);
        assert_eq!(flow.acquire(2, &window), Ok(true));
        assert_eq!(flow.acquire(1, &window), Ok(true));
        flow.credit(2);
        assert_eq!(flow.acquire(2, &window), Ok(true));
        // Nothing outstanding admits a command larger than the limit.
        flow.credit(3);
        assert_eq!(flow.acquire(10, &window), Ok(true));
    }

    #[test]
    fn a_full_window_ends_the_wait() {
        let flow = Flow::new(1);
        let window = window_of(30);
        assert_eq!(flow.acquire(1, &window), Ok(true));
        assert_eq!(flow.acquire(1, &window), Ok(false));
    }

    #[test]
    fn credit_wakes_a_waiting_sender() {
        let flow = Arc::new(Flow::new(1));
        let window = window_of(3000);
        flow.register();
        assert_eq!(flow.acquire(1, &window), Ok(true));
        let giver = Arc::clone(&flow);
        let handle = thread::spawn(move || {
            thread::sleep(Duration::from_millis(20));
            giver.credit(1);
        });
        let started = now_ns();
        assert_eq!(flow.acquire(1, &window), Ok(true));
        assert!(now_ns() - started < 1_000_000_000);
        handle.join().unwrap();
    }
}
