//! Tests of [`Stream`]: appends, ranges, deletion, trimming, XSETID, the
//! read counter and lag, and group reads and claims.

use super::*;

fn id(ms: u64, seq: u64) -> StreamId {
    StreamId::new(ms, seq)
}

fn limits(entries: usize) -> Limits {
    Limits { stream_node_max_entries: entries, ..Limits::default() }
}

/// A stream with entries 1-0 … n-0, each `f <i>`, nodes of `per_node`.
fn numbered(n: u64, per_node: usize) -> Stream {
    let mut s = Stream::new();
    for i in 1..=n {
        let v = i.to_string();
        s.append(AddId::Exact(id(i, 0)), &[b"f", v.as_bytes()], 0, &limits(per_node))
            .expect("append");
    }
    s
}

fn ids(range: Range<'_>) -> Vec<u64> {
    range.map(|e| e.id().ms).collect()
}

#[test]
fn appends_pick_ids_as_redis_does() {
    let mut s = Stream::new();
    let l = Limits::default();
    assert_eq!(s.append(AddId::Auto, &[b"a", b"1"], 100, &l), Ok(id(100, 0)));
    // The clock went backwards: the last id's successor.
    assert_eq!(s.append(AddId::Auto, &[b"a", b"1"], 50, &l), Ok(id(100, 1)));
    assert_eq!(s.append(AddId::Ms(100), &[b"a", b"1"], 0, &l), Ok(id(100, 2)));
    assert_eq!(s.append(AddId::Ms(200), &[b"a", b"1"], 0, &l), Ok(id(200, 0)));
    assert_eq!(s.append(AddId::Exact(id(200, 0)), &[b"a", b"1"], 0, &l), Err(AddError::IdTooSmall));
    assert_eq!(s.append(AddId::Ms(150), &[b"a", b"1"], 0, &l), Err(AddError::IdTooSmall));
    assert_eq!(
        s.append(AddId::Exact(id(300, u64::MAX)), &[b"a", b"1"], 0, &l),
        Ok(id(300, u64::MAX))
    );
    assert_eq!(s.append(AddId::Ms(300), &[b"a", b"1"], 0, &l), Err(AddError::TooLarge));
    assert_eq!(
        (s.len(), s.entries_added(), s.first_id(), s.last_id()),
        (5, 5, id(100, 0), id(300, u64::MAX))
    );
    let e = s.get(id(100, 1)).expect("entry");
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = e.pairs().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
    assert_eq!(pairs, [(b"a".to_vec(), b"1".to_vec())]);
}

#[test]
fn nodes_split_by_entries_and_ranges_cross_them() {
    let s = numbered(25, 10);
    assert_eq!(s.node_count(), 3);
    assert_eq!(ids(s.range(id(9, 0), id(12, 0), false)), [9, 10, 11, 12]);
    assert_eq!(ids(s.range(id(9, 0), id(12, 0), true)), [12, 11, 10, 9]);
    assert_eq!(ids(s.range(StreamId::MIN, StreamId::MAX, false)).len(), 25);
    assert!(ids(s.range(id(12, 0), id(9, 0), false)).is_empty());
    assert_eq!(s.last_valid_id(), Some(id(25, 0)));
    // Different field names in the same node round-trip.
    let mut t = Stream::new();
    let l = Limits::default();
    t.append(AddId::Auto, &[b"a", b"1", b"b", b"2"], 1, &l).expect("append");
    t.append(AddId::Auto, &[b"x", b"9"], 1, &l).expect("append");
    let e = t.get(id(1, 1)).expect("entry");
    assert_eq!(e.to_copy().pairs().map(|(f, _)| f.to_vec()).collect::<Vec<_>>(), [b"x".to_vec()]);
}

#[test]
fn deleting_leaves_tombstones_and_tracks_first_and_max_deleted() {
    let mut s = numbered(5, 100);
    assert_eq!(s.delete(&[id(1, 0), id(3, 0), id(3, 0), id(9, 0)]), 2);
    assert_eq!((s.len(), s.first_id(), s.max_deleted_id()), (3, id(2, 0), id(3, 0)));
    assert!(s.get(id(3, 0)).is_none());
    assert_eq!(ids(s.range(StreamId::MIN, StreamId::MAX, true)), [5, 4, 2]);
    assert_eq!(s.delete(&[id(2, 0), id(4, 0), id(5, 0)]), 3);
    assert_eq!((s.len(), s.first_id(), s.node_count()), (0, StreamId::MIN, 0));
    assert_eq!(s.last_id(), id(5, 0), "the last id survives deletion");
}

#[test]
fn trimming_exact_approximate_and_limited() {
    let mut s = numbered(25, 10);
    let exact = Trim { to: TrimTo::MaxLen(7), approx: false, limit: 0 };
    assert_eq!(s.trim(&exact), 18);
    assert_eq!((s.len(), s.first_id()), (7, id(19, 0)));
    let mut s = numbered(25, 10);
    let approx = Trim { to: TrimTo::MaxLen(7), approx: true, limit: 0 };
    assert_eq!(s.trim(&approx), 10, "only whole nodes");
    let mut s = numbered(25, 10);
    let limited = Trim { to: TrimTo::MaxLen(0), approx: true, limit: 15 };
    assert_eq!(s.trim(&limited), 10);
    let mut s = numbered(25, 10);
    let minid = Trim { to: TrimTo::MinId(id(13, 0)), approx: false, limit: 0 };
    assert_eq!(s.trim(&minid), 12);
    assert_eq!(s.first_id(), id(13, 0));
}

#[test]
fn set_last_id_checks_the_top_and_counters() {
    let mut s = numbered(3, 100);
    assert_eq!(s.set_last_id(id(2, 0), None, None), Err(SetIdError::SmallerThanTop));
    assert_eq!(s.set_last_id(id(9, 0), Some(2), None), Err(SetIdError::EntriesAddedTooSmall));
    assert_eq!(s.set_last_id(id(9, 0), Some(10), Some(id(4, 0))), Ok(()));
    assert_eq!((s.last_id(), s.entries_added(), s.max_deleted_id()), (id(9, 0), 10, id(4, 0)));
}

#[test]
fn read_counter_and_lag() {
    let mut s = numbered(5, 100);
    assert!(s.create_group(b"g", StreamId::MIN, 0));
    assert!(!s.create_group(b"g", StreamId::MIN, 0));
    assert_eq!(s.lag(s.group(b"g").expect("group")), Some(5));
    let read = s.read_group(b"g", b"c", GroupFrom::New, 2, false, 10).expect("read");
    assert!(read.consumer_created);
    assert_eq!(read.entries.iter().map(|e| e.id.ms).collect::<Vec<_>>(), [1, 2]);
    let g = s.group(b"g").expect("group");
    assert_eq!((g.last_id, g.entries_read, s.lag(g)), (id(2, 0), 2, Some(3)));
    // A deletion in the unread part makes the lag unknown.
    s.delete(&[id(4, 0)]);
    assert_eq!(s.lag(s.group(b"g").expect("group")), None);
    assert_eq!(s.estimate_distance(id(5, 0)), 5);
    assert_eq!(s.estimate_distance(id(9, 0)), ENTRIES_READ_INVALID);
}

#[test]
fn group_reads_history_acks_and_claims() {
    let mut s = numbered(4, 100);
    s.create_group(b"g", StreamId::MIN, 0);
    s.read_group(b"g", b"alice", GroupFrom::New, 0, false, 10).expect("read");
    assert!(s.read_group(b"g", b"bob", GroupFrom::New, 0, false, 10).is_none(), "nothing new");
    assert!(s.group(b"g").and_then(|g| g.consumer(b"bob")).is_none());
    // After a "crash", alice reads her pending entries again from 0.
    let again = s
        .read_group(b"g", b"alice", GroupFrom::History(StreamId::MIN), 0, false, 20)
        .expect("read");
    assert_eq!(again.entries.len(), 4);
    assert_eq!(s.group(b"g").and_then(|g| g.nack(id(1, 0))).map(|n| n.delivery_count), Some(2));
    assert!(s.group_mut(b"g").expect("group").ack(id(1, 0)));
    s.delete(&[id(2, 0)]);
    let hist = s
        .read_group(b"g", b"alice", GroupFrom::History(StreamId::MIN), 0, false, 30)
        .expect("read");
    assert!(hist.entries[0].is_missing(), "a deleted pending entry comes back without a body");
    // XCLAIM: idle long enough moves it; the deleted one is dropped.
    let opts = ClaimOptions { min_idle: 5, delivery_time: 100, ..ClaimOptions::default() };
    let c = s.claim(b"g", b"bob", &[id(2, 0), id(3, 0)], &opts, 100).expect("group");
    assert!(c.consumer_created);
    assert_eq!(c.entries.iter().map(|e| e.id).collect::<Vec<_>>(), [id(3, 0)]);
    assert!(s.group(b"g").and_then(|g| g.nack(id(2, 0))).is_none());
    // XAUTOCLAIM walks the rest with a cursor.
    let a = s
        .autoclaim(
            b"g",
            b"carol",
            &AutoClaim { start: StreamId::MIN, count: 1, min_idle: 0, just_id: true },
            200,
        )
        .expect("group");
    assert_eq!((a.entries.len(), a.cursor), (1, id(4, 0)));
    let a = s
        .autoclaim(
            b"g",
            b"carol",
            &AutoClaim { start: a.cursor, count: 10, min_idle: 0, just_id: false },
            200,
        )
        .expect("group");
    assert_eq!((a.entries.len(), a.cursor), (1, StreamId::MIN));
    assert!(s.group(b"g").is_some_and(|g| g.consistent()));
}

#[test]
fn radix_tree_nodes_counts_a_compressed_trie() {
    assert_eq!(Stream::new().radix_tree_nodes(), 1);
    let one = numbered(1, 100);
    // Root compressed node holding all 16 bytes, then the key's end node.
    assert_eq!(one.radix_tree_nodes(), 2);
    let two = numbered(2, 1);
    // Ids 1-0 and 2-0 share 7 bytes, branch on the 8th, and each goes on
    // with 8 shared zero bytes (a compressed node) to its end node.
    assert_eq!(two.radix_tree_nodes(), 6);
}
