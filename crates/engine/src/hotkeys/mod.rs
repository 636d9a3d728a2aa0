//! Hot-key detection on a shard (issue 8): rules, sliding-window counters
//! for the keys they cover, hot / cool state, and a heavy-hitters sketch of
//! every access.
//!
//! The shard calls [`HotKeys::record`] once for each key of each command it
//! runs (from [`crate::shard::call`], the one place a command's
//! keys are known on its shard), and [`HotKeys::tick`] periodically.
//!
//! - Every access feeds the sketch behind `HOTKEYS TOP` ([`topk`]).
//! - An access to a key that matches a rule (and is of a kind the rule
//!   counts) is counted in that key's sliding window ([`window`]). Keys that
//!   match no rule cost a rule match and nothing else. Tracked keys are
//!   bounded by `hotkeys-max-keys`; the least recently accessed makes room
//!   (at once when its window is empty, otherwise for one new key in
//!   [`ADMIT_ONE_IN`], so that a uniform load over many keys does not
//!   churn the table; a key left out is under-counted, never over-counted).
//! - The access that brings a key's count to the rule's threshold makes it
//!   hot at once; every access at or above the threshold keeps it hot for
//!   another `duration`. When `duration` has passed with no such access, it
//!   cools down (at the next tick or access).
//!
//! Becoming hot and cooling down are queued in the shard's effects (the
//! `out` every method that can cause them takes) while
//! some core has `HOTKEYS.WATCH` watchers ([`HotKeys::watchers`]); the
//! server sends them to those cores.

pub mod lru;
pub mod replica;
pub mod rule;
pub mod topk;
pub mod window;

use bytes::Bytes;
use lru::{Lru, Slot};
use rule::Rule;
use std::collections::BTreeMap;
use std::rc::Rc;
use window::SlidingWindow;

/// Default of `hotkeys-max-keys`: keys counted per shard.
pub const DEFAULT_MAX_KEYS: usize = 10_000;

/// A key's state under its rule.
struct Tracked {
    rule: Rc<Rule>,
    window: SlidingWindow,
    /// When it became hot, while it is.
    hot_since: Option<u64>,
    /// When it cools down unless an access renews it.
    hot_until: u64,
    /// Its last counted access.
    last_ms: u64,
}

impl Tracked {
    /// Forgetting it loses nothing: no access in its window, and not hot.
    fn is_spent(&self, now_ms: u64) -> bool {
        self.hot_since.is_none() && now_ms.saturating_sub(self.last_ms) >= self.rule.interval_ms
    }
}

/// When the table is full of keys still counting, a new key gets in with
/// probability 1 / this: a key accessed often gets in after a few accesses
/// (missing only those), while a uniform load over more keys than the
/// table holds does not churn it on every access.
const ADMIT_ONE_IN: u64 = 16;

/// A change of a key's state, for `HOTKEYS.WATCH` watchers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HotEvent {
    /// `["hotkey", key, count, rule]`.
    Hot { db: usize, key: Bytes, count: u32, rule: Bytes },
    /// `["coldkey", key]`.
    Cold { db: usize, key: Bytes },
}

impl HotEvent {
    pub fn key(&self) -> &Bytes {
        match self {
            HotEvent::Hot { key, .. } | HotEvent::Cold { key, .. } => key,
        }
    }
}

/// A key that is hot now (`HOTKEYS LIST`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HotEntry {
    pub db: usize,
    pub key: Bytes,
    pub rule: String,
    /// Accesses in the window now.
    pub count: u32,
    /// Unix ms it became hot, and when it cools down unless renewed.
    pub since_ms: u64,
    pub until_ms: u64,
}

/// Counters for INFO hotkeys.
#[derive(Clone, Copy, Debug, Default)]
pub struct HotStats {
    /// Keys that became hot / cooled down since start (or CONFIG RESETSTAT).
    pub detected: u64,
    pub cooled: u64,
    /// Tracked keys dropped to make room (`hotkeys-max-keys`).
    pub evicted: u64,
    /// Accesses counted against rules.
    pub counted: u64,
}

pub struct HotKeys {
    rules: Vec<Rc<Rule>>,
    tracked: Lru<Tracked>,
    /// Slots of the keys hot now.
    hot: Vec<Slot>,
    top: topk::TopK,
    /// Cores with `HOTKEYS.WATCH` watchers, and how many each has.
    pub watchers: BTreeMap<u16, u32>,
    /// `hotkeys-replicate-reads`: queue state changes even with no watcher.
    pub replicate: bool,
    pub stats: HotStats,
    /// xorshift state for admission.
    rng: u64,
}

impl Default for HotKeys {
    fn default() -> Self {
        HotKeys::new(DEFAULT_MAX_KEYS)
    }
}

impl HotKeys {
    pub fn new(max_keys: usize) -> Self {
        HotKeys {
            rules: Vec::new(),
            tracked: Lru::new(max_keys),
            hot: Vec::new(),
            top: topk::TopK::default(),
            watchers: BTreeMap::new(),
            replicate: false,
            stats: HotStats::default(),
            rng: 0x2545_F491_4F6C_DD1D,
        }
    }

    pub fn rules(&self) -> impl Iterator<Item = &Rule> {
        self.rules.iter().map(|r| &**r)
    }

    /// Replaces the rules. Keys whose rule is unchanged keep their counts
    /// and state; the others are forgotten (cooling down if hot), so a
    /// changed rule starts from a clean window.
    pub fn set_rules(&mut self, rules: Vec<Rule>, out: &mut Vec<HotEvent>) {
        let old = std::mem::take(&mut self.rules);
        self.rules = rules
            .into_iter()
            .map(|r| old.iter().find(|o| ***o == r).cloned().unwrap_or_else(|| Rc::new(r)))
            .collect();
        let stale: Vec<Slot> = self
            .tracked
            .slots()
            .into_iter()
            .filter(|&slot| {
                let Some(((_, key), t)) = self.tracked.get(slot) else { return false };
                !self.rule_for(key).is_some_and(|r| Rc::ptr_eq(r, &t.rule))
            })
            .collect();
        for slot in stale {
            self.forget(slot, out);
        }
    }

    /// Changes `hotkeys-max-keys`.
    pub fn set_max_keys(&mut self, max_keys: usize, out: &mut Vec<HotEvent>) {
        if max_keys == self.tracked.capacity() {
            return;
        }
        for (key, t) in self.tracked.set_capacity(max_keys) {
            self.stats.evicted += 1;
            self.gone(key, t, out);
        }
        self.hot.retain(|&s| self.tracked.get(s).is_some());
    }

    fn rule_for(&self, key: &[u8]) -> Option<&Rc<Rule>> {
        self.rules.iter().find(|r| r.matcher.matches(key))
    }

    fn wants_events(&self) -> bool {
        self.replicate || !self.watchers.is_empty()
    }

    /// Counts `n` reads of a tracked `key` served from per-core copies (they
    /// never reach this shard one by one).
    pub fn record_served(
        &mut self,
        db: usize,
        key: &[u8],
        n: u64,
        now_ms: u64,
        out: &mut Vec<HotEvent>,
    ) {
        if let Some(slot) = self.tracked.touch(db, key) {
            self.count(slot, false, now_ms, n.min(u32::MAX as u64) as u32, out);
        }
    }

    /// Starts loading what [`record`](Self::record) of `key` will touch.
    pub fn prefetch(&self, db: usize, key: &[u8]) {
        self.top.prefetch(db, key);
    }

    /// Counts one access of `key` in `db` at `now_ms`; `write` tells a write
    /// from a read.
    pub fn record(
        &mut self,
        db: usize,
        key: &[u8],
        write: bool,
        now_ms: u64,
        out: &mut Vec<HotEvent>,
    ) {
        self.top.add(db, key);
        if self.rules.is_empty() {
            return;
        }
        let slot = match self.tracked.touch(db, key) {
            Some(slot) => slot,
            None => {
                let Some(rule) = self.rule_for(key) else { return };
                if !rule.counted.counts(write) {
                    return;
                }
                let rule = rule.clone();
                if !self.admits(now_ms) {
                    return;
                }
                let t = Tracked {
                    rule,
                    window: SlidingWindow::default(),
                    hot_since: None,
                    hot_until: 0,
                    last_ms: now_ms,
                };
                let (slot, evicted) = self.tracked.insert((db, Bytes::copy_from_slice(key)), t);
                if let Some((old_key, old)) = evicted {
                    self.stats.evicted += 1;
                    self.gone(old_key, old, out);
                    self.hot.retain(|&s| s != slot);
                }
                slot
            }
        };
        self.count(slot, write, now_ms, 1, out);
    }

    /// Whether a new key may take a place now (see [`ADMIT_ONE_IN`]).
    fn admits(&mut self, now_ms: u64) -> bool {
        if self.tracked.len() < self.tracked.capacity() {
            return true;
        }
        if self.tracked.oldest().is_some_and(|t| t.is_spent(now_ms)) {
            return true;
        }
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng.is_multiple_of(ADMIT_ONE_IN)
    }

    /// Counts `n` accesses of a tracked key and updates its state.
    fn count(&mut self, slot: Slot, write: bool, now_ms: u64, n: u32, out: &mut Vec<HotEvent>) {
        let Some(((db, key), t)) = self.tracked.get_mut(slot) else { return };
        if !t.rule.counted.counts(write) {
            return;
        }
        self.stats.counted += n as u64;
        t.last_ms = now_ms;
        let count = t.window.add_n(now_ms, window::slice_ms(t.rule.interval_ms), n);
        if count >= t.rule.threshold {
            t.hot_until = now_ms.saturating_add(t.rule.duration_ms);
            if t.hot_since.is_none() {
                t.hot_since = Some(now_ms);
                let event = HotEvent::Hot {
                    db: *db,
                    key: key.clone(),
                    count,
                    rule: Bytes::from(t.rule.name.clone()),
                };
                self.stats.detected += 1;
                self.hot.push(slot);
                if self.wants_events() {
                    out.push(event);
                }
            }
        }
    }

    /// Cools down the keys whose time is up and ages the sketch; the server
    /// calls it every 100 ms.
    pub fn tick(&mut self, now_ms: u64, out: &mut Vec<HotEvent>) {
        self.top.age(now_ms);
        if self.hot.is_empty() {
            return;
        }
        let hot = std::mem::take(&mut self.hot);
        for slot in hot {
            let Some(((db, key), t)) = self.tracked.get_mut(slot) else { continue };
            if t.hot_since.is_none() {
                // Its entry was evicted and the slot reused.
                continue;
            }
            if now_ms >= t.hot_until {
                t.hot_since = None;
                let event = HotEvent::Cold { db: *db, key: key.clone() };
                self.cooled(event, out);
            } else {
                self.hot.push(slot);
            }
        }
    }

    fn cooled(&mut self, event: HotEvent, out: &mut Vec<HotEvent>) {
        self.stats.cooled += 1;
        if self.wants_events() {
            out.push(event);
        }
    }

    /// Drops a tracked key (its rule changed or went away).
    fn forget(&mut self, slot: Slot, out: &mut Vec<HotEvent>) {
        if let Some((key, t)) = self.tracked.remove(slot) {
            self.gone(key, t, out);
        }
        self.hot.retain(|&s| s != slot);
    }

    /// A key no longer tracked: if it was hot, it cools down now.
    fn gone(&mut self, (db, key): lru::TrackedKey, t: Tracked, out: &mut Vec<HotEvent>) {
        if t.hot_since.is_some() {
            self.cooled(HotEvent::Cold { db, key }, out);
        }
    }

    /// The keys hot now, hottest first.
    pub fn list(&mut self, now_ms: u64) -> Vec<HotEntry> {
        let mut out = Vec::with_capacity(self.hot.len());
        for &slot in &self.hot {
            let Some(((db, key), t)) = self.tracked.get_mut(slot) else { continue };
            let Some(since_ms) = t.hot_since.filter(|_| now_ms < t.hot_until) else { continue };
            out.push(HotEntry {
                db: *db,
                key: key.clone(),
                rule: t.rule.name.clone(),
                count: t.window.count(now_ms, window::slice_ms(t.rule.interval_ms)),
                since_ms,
                until_ms: t.hot_until,
            });
        }
        out.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
        out
    }

    /// The heaviest keys of all accesses, at most `n`.
    pub fn top(&self, n: usize) -> Vec<topk::TopEntry> {
        self.top.top(n)
    }

    /// Keys tracked against rules and keys hot now (INFO hotkeys).
    pub fn counts(&self) -> (usize, usize) {
        (self.tracked.len(), self.hot.len())
    }

    /// One more (`delta` 1) or one less (-1) watcher on `core`.
    pub fn watch(&mut self, core: u16, delta: i32) {
        let n = self.watchers.entry(core).or_insert(0);
        *n = n.saturating_add_signed(delta);
        if *n == 0 {
            self.watchers.remove(&core);
        }
    }

    /// CONFIG RESETSTAT.
    pub fn reset_stats(&mut self) {
        self.stats = HotStats::default();
        self.top.clear();
    }
}

#[cfg(test)]
mod tests;
