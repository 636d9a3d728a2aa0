//! The server's TLS session cache (`tls-session-caching`,
//! `tls-session-cache-size`, `tls-session-cache-timeout`), shared by every
//! core: what lets a client resume a session (TLS 1.2 session ids, TLS 1.3
//! stateful tickets) instead of a full handshake. As OpenSSL's cache: at
//! most `size` sessions (0: no limit), each resumable for `timeout`
//! seconds; the oldest goes first when it is full.

use rustls::server::StoresServerSessions;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct SessionCache {
    size: usize,
    timeout: Duration,
    inner: Mutex<Entries>,
}

#[derive(Debug, Default)]
struct Entries {
    by_key: HashMap<Vec<u8>, (Vec<u8>, Instant)>,
    /// Keys in the order stored (a key taken or replaced stays listed
    /// until it reaches the front, where it is skipped).
    order: VecDeque<(Vec<u8>, Instant)>,
}

impl SessionCache {
    pub fn new(size: usize, timeout: Duration) -> SessionCache {
        SessionCache { size, timeout, inner: Mutex::new(Entries::default()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Entries {
    /// Drops expired sessions from the front, and the oldest while more
    /// than `size` are kept.
    fn trim(&mut self, size: usize, timeout: Duration, now: Instant) {
        while let Some((key, stored)) = self.order.front() {
            let current = self.by_key.get(key).is_some_and(|(_, at)| at == stored);
            let over = size > 0 && self.by_key.len() > size;
            if current && !over && now.duration_since(*stored) < timeout {
                break;
            }
            if current {
                self.by_key.remove(key);
            }
            self.order.pop_front();
        }
        // Entries taken or replaced leave stale listings behind: bound them.
        if self.order.len() > 2 * self.by_key.len() + 64 {
            let by_key = &self.by_key;
            self.order.retain(|(k, at)| by_key.get(k).is_some_and(|(_, a)| a == at));
        }
    }
}

impl StoresServerSessions for SessionCache {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        let now = Instant::now();
        let mut e = self.lock();
        e.order.push_back((key.clone(), now));
        e.by_key.insert(key, (value, now));
        e.trim(self.size, self.timeout, now);
        true
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        let now = Instant::now();
        let e = self.lock();
        let (value, at) = e.by_key.get(key)?;
        (now.duration_since(*at) < self.timeout).then(|| value.clone())
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        let now = Instant::now();
        let mut e = self.lock();
        let (value, at) = e.by_key.remove(key)?;
        (now.duration_since(at) < self.timeout).then_some(value)
    }

    fn can_cache(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_session_goes_when_full_and_expired_ones_are_not_resumed() {
        let cache = SessionCache::new(2, Duration::from_secs(300));
        cache.put(b"a".to_vec(), b"1".to_vec());
        cache.put(b"b".to_vec(), b"2".to_vec());
        cache.put(b"c".to_vec(), b"3".to_vec());
        assert_eq!(cache.get(b"a"), None);
        assert_eq!(cache.get(b"b"), Some(b"2".to_vec()));
        assert_eq!(cache.take(b"c"), Some(b"3".to_vec()));
        assert_eq!(cache.get(b"c"), None, "taken");
        let expired = SessionCache::new(0, Duration::ZERO);
        expired.put(b"a".to_vec(), b"1".to_vec());
        assert_eq!(expired.get(b"a"), None);
        let unbounded = SessionCache::new(0, Duration::from_secs(300));
        for i in 0..1000u32 {
            unbounded.put(i.to_be_bytes().to_vec(), vec![]);
            unbounded.take(&i.to_be_bytes());
        }
        assert!(unbounded.lock().order.len() <= 64 + 1, "stale listings are bounded");
    }
}
