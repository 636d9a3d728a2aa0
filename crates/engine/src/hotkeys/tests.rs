//! Window semantics of hot-key detection, on a clock the tests drive.

use super::rule::{parse_rules, Rule};
use super::*;

fn rules(text: &str) -> Vec<Rule> {
    parse_rules(text).unwrap()
}

/// Hot keys with the events they queued (a shard's effects, in a server).
struct Tracker {
    keys: HotKeys,
    outbox: Vec<HotEvent>,
}

impl Tracker {
    fn new(max_keys: usize) -> Tracker {
        Tracker { keys: HotKeys::new(max_keys), outbox: Vec::new() }
    }
    fn set_rules(&mut self, rules: Vec<Rule>, _now_ms: u64) {
        self.keys.set_rules(rules, &mut self.outbox);
    }
    fn set_max_keys(&mut self, max_keys: usize, _now_ms: u64) {
        self.keys.set_max_keys(max_keys, &mut self.outbox);
    }
    fn record(&mut self, db: usize, key: &[u8], write: bool, now_ms: u64) {
        self.keys.record(db, key, write, now_ms, &mut self.outbox);
    }
    fn record_served(&mut self, db: usize, key: &[u8], n: u64, now_ms: u64) {
        self.keys.record_served(db, key, n, now_ms, &mut self.outbox);
    }
    fn tick(&mut self, now_ms: u64) {
        self.keys.tick(now_ms, &mut self.outbox);
    }
}

impl std::ops::Deref for Tracker {
    type Target = HotKeys;
    fn deref(&self) -> &HotKeys {
        &self.keys
    }
}

impl std::ops::DerefMut for Tracker {
    fn deref_mut(&mut self) -> &mut HotKeys {
        &mut self.keys
    }
}

/// A tracker with one rule over `user:` keys: 1 s window, threshold 10,
/// hot for 2 s; and one watcher so events are queued.
fn tracker() -> Tracker {
    let mut h = Tracker::new(100);
    h.set_rules(rules("users PREFIX user: INTERVAL 1 THRESHOLD 10 DURATION 2"), 0);
    h.watch(0, 1);
    h
}

fn hot_keys(h: &mut Tracker, now: u64) -> Vec<String> {
    h.list(now).iter().map(|e| String::from_utf8_lossy(&e.key).into_owned()).collect()
}

#[test]
fn just_below_the_threshold_is_never_hot() {
    let mut h = tracker();
    // Nine accesses in every second, spread evenly, for a minute.
    let mut now = 100_000;
    while now < 160_000 {
        h.record(0, b"user:1", false, now);
        h.tick(now);
        assert!(hot_keys(&mut h, now).is_empty(), "hot at {now}");
        now += 1000 / 9 + 1;
    }
    assert!(h.outbox.is_empty());
    assert_eq!(h.stats.detected, 0);
}

#[test]
fn crossing_the_threshold_is_hot_at_once_then_cools_after_the_duration() {
    let mut h = tracker();
    for i in 0..9 {
        h.record(0, b"user:7", false, 10_000 + i);
    }
    assert!(h.outbox.is_empty());
    h.record(0, b"user:7", false, 10_009);
    assert_eq!(
        h.outbox,
        vec![HotEvent::Hot {
            db: 0,
            key: Bytes::from_static(b"user:7"),
            count: 10,
            rule: Bytes::from_static(b"users")
        }]
    );
    h.outbox.clear();
    let listed = h.list(10_010);
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].count, listed[0].since_ms, listed[0].until_ms), (10, 10_009, 12_009));
    // More accesses while hot renew it, and send nothing new.
    h.record(0, b"user:7", false, 10_500);
    assert!(h.outbox.is_empty());
    h.tick(12_100);
    assert_eq!(hot_keys(&mut h, 12_100), vec!["user:7"]);
    // 2 s after the last access at or above the threshold, it cools down.
    h.tick(12_499);
    assert!(h.outbox.is_empty());
    h.tick(12_500);
    assert_eq!(h.outbox, vec![HotEvent::Cold { db: 0, key: Bytes::from_static(b"user:7") }]);
    assert!(hot_keys(&mut h, 12_500).is_empty());
    assert_eq!((h.stats.detected, h.stats.cooled), (1, 1));
}

#[test]
fn accesses_below_the_threshold_do_not_renew_a_hot_key() {
    let mut h = tracker();
    for i in 0..10 {
        h.record(0, b"user:7", false, 5_000 + i);
    }
    // Later accesses, one a second: the window never reaches 10 again.
    for s in 1..=3 {
        h.record(0, b"user:7", false, 5_000 + s * 1000);
    }
    h.tick(7_009);
    assert!(h.list(7_010).is_empty());
    assert!(matches!(h.outbox.last(), Some(HotEvent::Cold { .. })));
}

#[test]
fn only_matching_keys_and_counted_kinds_are_tracked() {
    let mut h = Tracker::new(100);
    h.set_rules(
        rules(
            "w PATTERN item:*:stock INTERVAL 1 THRESHOLD 3 DURATION 1 COUNT writes; \
             all PREFIX item: INTERVAL 1 THRESHOLD 3 DURATION 1",
        ),
        0,
    );
    for i in 0..5 {
        h.record(0, b"other", false, 1_000 + i);
        h.record(0, b"item:1:stock", false, 1_000 + i);
    }
    assert_eq!(h.counts(), (0, 0), "reads of a writes-only rule's keys are not counted");
    for i in 0..3 {
        h.record(0, b"item:1:stock", true, 1_000 + i);
        h.record(0, b"item:2:price", false, 1_000 + i);
    }
    let listed = h.list(1_010);
    let pairs: Vec<(String, String)> = listed
        .iter()
        .map(|e| (String::from_utf8_lossy(&e.key).into_owned(), e.rule.clone()))
        .collect();
    assert_eq!(
        pairs,
        vec![("item:1:stock".into(), "w".into()), ("item:2:price".into(), "all".into())]
    );
    assert_eq!(h.stats.counted, 6);
    // The sketch saw every access, matching or not.
    assert_eq!(h.top(1)[0].count, 8);
}

#[test]
fn the_tracked_keys_are_bounded_and_the_oldest_go() {
    let mut h = Tracker::new(3);
    h.set_rules(rules("r PREFIX k INTERVAL 1 THRESHOLD 2 DURATION 10"), 0);
    h.watch(1, 1);
    h.record(0, b"k0", false, 1_000);
    h.record(0, b"k0", false, 1_001);
    h.record(0, b"k1", false, 1_002);
    h.record(0, b"k2", false, 1_003);
    // Full, and the oldest (k0) is hot: a new key gets in one time in
    // ADMIT_ONE_IN.
    let mut tries = 0;
    while h.stats.evicted == 0 {
        h.record(0, b"k3", false, 1_004);
        tries += 1;
        assert!(tries < 1_000);
    }
    // The accesses of k3 that did not get in were not counted.
    assert_eq!(h.stats.counted, 5);
    assert_eq!(h.counts(), (3, 0));
    // k0 was hot; evicted, it cooled down.
    assert!(matches!(&h.outbox[..], [HotEvent::Hot { .. }, HotEvent::Cold { .. }]));
    // Spent keys (nothing in their window) make room at once.
    h.record(0, b"k4", false, 5_000);
    assert_eq!((h.counts(), h.stats.evicted), ((3, 0), 2));
    h.set_max_keys(1, 5_000);
    assert_eq!(h.counts(), (1, 0));
    assert_eq!(h.stats.evicted, 4);
}

#[test]
fn a_uniform_load_over_many_keys_does_not_churn_the_table_but_a_hot_key_gets_in() {
    let mut h = Tracker::new(100);
    h.set_rules(rules("all PREFIX k INTERVAL 1 THRESHOLD 50 DURATION 1"), 0);
    let mut now = 10_000;
    for i in 0..10_000u64 {
        h.record(0, format!("k{}", i % 1000).as_bytes(), false, now);
        now += i % 2;
    }
    assert!(h.stats.evicted < 1_500, "{} evictions", h.stats.evicted);
    for _ in 0..200 {
        h.record(0, b"khot", false, now);
    }
    assert_eq!(hot_keys(&mut h, now), vec!["khot"]);
}

#[test]
fn changing_a_rule_restarts_its_keys_and_keeps_the_others() {
    let mut h = Tracker::new(100);
    h.watch(0, 1);
    h.set_rules(
        rules("a PREFIX a: INTERVAL 1 THRESHOLD 2 DURATION 10; b PREFIX b: INTERVAL 1 THRESHOLD 2 DURATION 10"),
        0,
    );
    for k in [&b"a:1"[..], b"a:1", b"b:1", b"b:1"] {
        h.record(0, k, false, 1_000);
    }
    assert_eq!(hot_keys(&mut h, 1_001), vec!["a:1", "b:1"]);
    h.outbox.clear();
    h.set_rules(
        rules("a PREFIX a: INTERVAL 1 THRESHOLD 5 DURATION 10; b PREFIX b: INTERVAL 1 THRESHOLD 2 DURATION 10"),
        1_002,
    );
    assert_eq!(hot_keys(&mut h, 1_003), vec!["b:1"]);
    assert_eq!(h.outbox, vec![HotEvent::Cold { db: 0, key: Bytes::from_static(b"a:1") }]);
    h.set_rules(Vec::new(), 1_004);
    assert_eq!(h.counts(), (0, 0));
    h.record(0, b"a:1", false, 1_005);
    assert_eq!(h.counts(), (0, 0));
}

#[test]
fn no_watchers_no_events() {
    let mut h = tracker();
    h.watch(0, -1);
    for i in 0..20 {
        h.record(0, b"user:1", false, 1_000 + i);
    }
    assert!(h.outbox.is_empty());
    assert_eq!(h.list(1_100).len(), 1);
}

#[test]
fn reads_served_elsewhere_count_in_bulk_and_keep_a_key_hot() {
    let mut h = tracker();
    for i in 0..10 {
        h.record(0, b"user:1", false, 1_000 + i);
    }
    assert_eq!(h.list(1_010).len(), 1);
    // Untracked keys are not started by served reads.
    h.record_served(0, b"user:2", 50, 1_500);
    assert_eq!(h.counts(), (1, 1));
    // 40 reads served from copies during the next second renew it.
    h.record_served(0, b"user:1", 40, 2_500);
    assert_eq!(h.list(2_500)[0].count, 40);
    h.tick(4_000);
    assert_eq!(h.list(4_000).len(), 1, "hot until 2_500 + 2_000");
    h.tick(4_500);
    assert!(h.list(4_500).is_empty());
    assert_eq!(h.stats.counted, 50);
}
