//! SCAN: one cursor over every shard of the keyspace.
//!
//! The guarantee (Redis's): a full iteration returns every key that was
//! present from its start to its end, never a key that was absent all along,
//! possibly some keys twice. ringdb keeps it across shards with one cursor
//! and no state on the server:
//!
//! - a key's place in the iteration is (its hash slot, the top 32 bits of its
//!   [`key_hash`]), and both are fixed for the life of the process, whatever
//!   the slot's table does (grow, shrink, rehash);
//! - the cursor is that place: the slot in bits 32..46 and the position in
//!   the low 32 bits. Cursor 0 is the start and, returned, the end;
//! - a call sweeps forward from the cursor: a slot with few keys is taken
//!   whole, a large slot a window `[pos, pos + w)` of hash positions sized to
//!   hold about as many keys as still wanted. The next call starts where the
//!   sweep stopped, so the windows of an iteration tile the whole
//!   (slot, position) space exactly once.
//!
//! Shards own contiguous slot ranges in ascending order, so the sweep visits
//! shard after shard; [`op_scan`] covers one shard's part and says where the
//! next part starts, and the server continues on the next shard when a shard
//! ran out before COUNT keys were found.
//!
//! A window costs one pass over its slot's table (positions are not ordered
//! in it). To keep a whole iteration linear even when one slot holds many
//! keys (hash tags), a window is never smaller than 1/[`MAX_PASSES`] of its
//! slot: a call may then return more keys than COUNT asked for, which COUNT,
//! a hint, allows.

use crate::command::args::{self, is};
use crate::command::error::{CmdError, SYNTAX};
use crate::keyspace::{key_hash, Db, Entry};
use crate::shard::Shard;
use bytes::Bytes;
use ringdb_types::glob::glob_match;
use ringdb_types::slot::SLOTS;

/// Upper bound on the windows one slot is split into during an iteration.
pub const MAX_PASSES: usize = 64;

/// One past the last hash position inside a slot.
const POS_END: u64 = 1 << 32;

/// A place in the iteration: everything before it has been visited.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ScanCursor {
    pub slot: u16,
    pub pos: u32,
}

impl ScanCursor {
    pub const START: ScanCursor = ScanCursor { slot: 0, pos: 0 };

    /// The place a client's cursor names; `None` when it lies past the last
    /// slot (a cursor ringdb never hands out): the iteration is then over.
    pub fn decode(cursor: u64) -> Option<Self> {
        let slot = cursor >> 32;
        (slot < SLOTS as u64).then_some(ScanCursor { slot: slot as u16, pos: cursor as u32 })
    }

    pub fn encode(self) -> u64 {
        ((self.slot as u64) << 32) | self.pos as u64
    }

    /// The start of `slot`, or `None` past the last slot.
    pub fn at_slot(slot: u32) -> Option<Self> {
        (slot < SLOTS as u32).then_some(ScanCursor { slot: slot as u16, pos: 0 })
    }
}

/// The cursor a reply carries: where to resume, or 0 when done.
pub fn reply_cursor(next: Option<ScanCursor>) -> u64 {
    next.map_or(0, ScanCursor::encode)
}

/// The SCAN position of a key inside its slot.
#[inline]
pub fn key_pos(key: &[u8]) -> u32 {
    (key_hash(key) >> 32) as u32
}

/// MATCH and TYPE. Redis applies them after collecting, so filtered keys
/// still count toward COUNT.
#[derive(Clone, Debug, Default)]
pub struct ScanFilter {
    pattern: Option<Bytes>,
    type_name: Option<Bytes>,
}

impl ScanFilter {
    /// `*` alone matches everything and is no filter at all.
    pub fn new(pattern: Option<Bytes>, type_name: Option<Bytes>) -> Self {
        let pattern = pattern.filter(|p| p.as_ref() != b"*");
        ScanFilter { pattern, type_name }
    }

    pub fn admits(&self, entry: &Entry) -> bool {
        if let Some(p) = &self.pattern {
            if !glob_match(p, entry.key(), false) {
                return false;
            }
        }
        match &self.type_name {
            Some(t) => t.eq_ignore_ascii_case(entry.value.type_name().as_bytes()),
            None => true,
        }
    }
}

/// A client's cursor, read as Redis reads it (`strtoul`): decimal digits
/// with an optional sign (`-n` wraps around), the empty string is 0, and
/// anything else, or a value beyond 64 bits, is refused.
pub fn parse_cursor(arg: &[u8]) -> Option<u64> {
    let (negative, digits) = match arg.first() {
        None => return Some(0),
        Some(b'-') => (true, &arg[1..]),
        Some(b'+') => (false, &arg[1..]),
        Some(_) => (false, arg),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n =
        digits.iter().try_fold(0u64, |n, &d| n.checked_mul(10)?.checked_add((d - b'0') as u64))?;
    Some(if negative { n.wrapping_neg() } else { n })
}

/// SCAN's arguments.
#[derive(Clone, Debug)]
pub struct ScanArgs {
    pub cursor: u64,
    pub count: usize,
    pub filter: ScanFilter,
}

impl ScanArgs {
    /// `SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]`, with Redis's
    /// errors (`scanGenericCommand`).
    pub fn parse(argv: &[Bytes]) -> Result<Self, CmdError> {
        let cursor =
            argv.get(1).and_then(|c| parse_cursor(c)).ok_or(CmdError::new("ERR invalid cursor"))?;
        let mut count = 10;
        let (mut pattern, mut type_name) = (None, None);
        let mut i = 2;
        while i < argv.len() {
            let Some(value) = argv.get(i + 1) else { return Err(SYNTAX) };
            if is(&argv[i], "COUNT") {
                let n = args::int(value)?;
                if n < 1 {
                    return Err(SYNTAX);
                }
                count = usize::try_from(n).unwrap_or(usize::MAX);
            } else if is(&argv[i], "MATCH") {
                pattern = Some(value.clone());
            } else if is(&argv[i], "TYPE") {
                type_name = Some(value.clone());
            } else {
                return Err(SYNTAX);
            }
            i += 2;
        }
        Ok(ScanArgs { cursor, count, filter: ScanFilter::new(pattern, type_name) })
    }
}

/// What one shard's part of a SCAN call found.
#[derive(Debug, Default)]
pub struct ScanStep {
    /// Keys that passed the filter.
    pub keys: Vec<Bytes>,
    /// Keys visited before filtering: what COUNT counts.
    pub visited: usize,
    /// Where the next call resumes; `None` once the last slot is done.
    pub next: Option<ScanCursor>,
    /// Keys found expired on the way: the caller reclaims them.
    pub expired: Vec<Bytes>,
}

/// The end (exclusive) of the window starting at `pos` in a slot of `len`
/// keys when `want` more keys are wanted: the rest of the slot when it holds
/// about that many, else a share of the position space proportional to
/// `want / len` (hash positions are uniform, so it holds about `want`).
fn window_end(pos: u32, len: usize, want: usize) -> u64 {
    let take = want.max(len / MAX_PASSES).max(1);
    if take >= len {
        return POS_END;
    }
    let width = (POS_END as u128 * take as u128).div_ceil(len as u128) as u64;
    (pos as u64).saturating_add(width).min(POS_END)
}

/// Sweeps `db` from `from` up to (not including) slot `end_slot`, stopping
/// once `want` keys were visited or one large window was read. Pure: expired
/// keys are reported, not removed.
pub fn scan_db(
    db: &Db,
    from: ScanCursor,
    end_slot: u32,
    want: usize,
    filter: &ScanFilter,
    now_ms: u64,
) -> ScanStep {
    let want = want.max(1);
    let mut step = ScanStep::default();
    let mut at = Some(from);
    // Entries read: a budget so that one call never reads much more than
    // Redis's `10 * COUNT` buckets, beyond the first window it must read.
    let mut read = 0usize;
    let budget = want.saturating_mul(10);
    while let Some(cursor) = at {
        if cursor.slot as u32 >= end_slot || step.visited >= want || read >= budget {
            break;
        }
        let Some(table) = db.slot_table(cursor.slot).filter(|t| !t.is_empty()) else {
            at = ScanCursor::at_slot(cursor.slot as u32 + 1);
            continue;
        };
        let end = window_end(cursor.pos, table.len(), want - step.visited);
        read += table.len();
        for entry in table.iter() {
            let pos = key_pos(entry.key()) as u64;
            if pos < cursor.pos as u64 || pos >= end {
                continue;
            }
            step.visited += 1;
            if entry.is_expired(now_ms) {
                step.expired.push(Bytes::copy_from_slice(entry.key()));
            } else if filter.admits(entry) {
                step.keys.push(Bytes::copy_from_slice(entry.key()));
            }
        }
        at = if end >= POS_END {
            ScanCursor::at_slot(cursor.slot as u32 + 1)
        } else {
            Some(ScanCursor { slot: cursor.slot, pos: end as u32 })
        };
    }
    step.next = at;
    step
}

/// One shard's part of a SCAN call in database `db`: sweeps its slots from
/// `from` (which must be one of its slots) and reclaims the expired keys it
/// met, as Redis's SCAN does. `step.next` is past this shard's last slot
/// when it ran out of slots.
pub fn op_scan(
    shard: &mut Shard,
    db: usize,
    from: ScanCursor,
    want: usize,
    filter: &ScanFilter,
    now_ms: u64,
) -> ScanStep {
    let (first, count) = shard.slot_map.slots_of(shard.id);
    let end_slot = first as u32 + count as u32;
    // The server only sends a shard cursors inside its own range; anything
    // else is answered without reading other shards' slots.
    let from =
        if (from.slot as u32) < first as u32 { ScanCursor { slot: first, pos: 0 } } else { from };
    let mut step = scan_db(shard.keyspace.db(db), from, end_slot, want, filter, now_ms);
    let frozen = shard.state.pause.keys_frozen(now_ms);
    for key in std::mem::take(&mut step.expired).into_iter().filter(|_| !frozen) {
        crate::expire::delete_expired(&mut shard.keyspace, &mut shard.state, db, &key);
    }
    step
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::{Keyspace, StrValue, Value};
    use crate::shard::{ShardId, ShardSettings, SlotMap};
    use ringdb_types::slot::key_slot;
    use std::collections::{HashMap, HashSet};

    fn put(db: &mut Db, key: &str) {
        db.insert(Entry::new(key.as_bytes(), Value::Str(StrValue::from_bytes(b"v"))));
    }

    /// Runs a full iteration over `db`, calling `between` after every call.
    /// Returns how often each key was returned.
    fn iterate(
        db: &mut Db,
        count: usize,
        filter: &ScanFilter,
        mut between: impl FnMut(&mut Db, usize),
    ) -> HashMap<Bytes, usize> {
        let mut seen = HashMap::new();
        let mut cursor = 0u64;
        for call in 0.. {
            assert!(call < 10_000_000, "iteration does not end");
            let from = ScanCursor::decode(cursor).expect("cursor we handed out");
            let step = scan_db(db, from, SLOTS as u32, count, filter, 0);
            for k in step.keys {
                *seen.entry(k).or_insert(0) += 1;
            }
            let next = reply_cursor(step.next);
            if next != 0 {
                assert!(next > cursor, "cursor must move forward: {cursor} -> {next}");
            }
            cursor = next;
            if cursor == 0 {
                break;
            }
            between(db, call);
        }
        seen
    }

    #[test]
    fn cursor_round_trips_and_rejects_nonsense() {
        let c = ScanCursor { slot: 16383, pos: u32::MAX };
        assert_eq!(ScanCursor::decode(c.encode()), Some(c));
        assert_eq!(ScanCursor::decode(0), Some(ScanCursor::START));
        assert_eq!(ScanCursor::decode(16384 << 32), None);
        assert_eq!(ScanCursor::decode(u64::MAX), None);
        assert_eq!(ScanCursor::at_slot(16384), None);
        assert_eq!(reply_cursor(None), 0);
    }

    #[test]
    fn cursors_and_options_parse_as_in_redis() {
        assert_eq!(parse_cursor(b"0"), Some(0));
        assert_eq!(parse_cursor(b""), Some(0));
        assert_eq!(parse_cursor(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"18446744073709551616"), None);
        assert_eq!(parse_cursor(b"-1"), Some(u64::MAX));
        for bad in [&b"abc"[..], b" 1", b"1 ", b"-", b"1.5", b"0x10"] {
            assert_eq!(parse_cursor(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
        let a = |s: &str| {
            s.split(' ').map(|x| Bytes::copy_from_slice(x.as_bytes())).collect::<Vec<_>>()
        };
        let parsed = ScanArgs::parse(&a("SCAN 5 COUNT 100 MATCH k* TYPE string")).expect("valid");
        assert_eq!((parsed.cursor, parsed.count), (5, 100));
        assert_eq!(ScanArgs::parse(&a("SCAN x")).unwrap_err().text(), "ERR invalid cursor");
        assert_eq!(ScanArgs::parse(&a("SCAN 0 COUNT 0")).unwrap_err(), SYNTAX);
        assert_eq!(ScanArgs::parse(&a("SCAN 0 COUNT")).unwrap_err(), SYNTAX);
        assert_eq!(ScanArgs::parse(&a("SCAN 0 FOO bar")).unwrap_err(), SYNTAX);
        assert_eq!(
            ScanArgs::parse(&a("SCAN 0 COUNT x")).unwrap_err().text(),
            "ERR value is not an integer or out of range"
        );
    }

    #[test]
    fn a_quiet_iteration_returns_every_key_exactly_once() {
        let mut ks = Keyspace::for_slots(1, 0, SLOTS as u16);
        let db = ks.db_mut(0);
        for i in 0..20_000 {
            put(db, &format!("key:{i}"));
        }
        for count in [1, 10, 1000] {
            let seen = iterate(db, count, &ScanFilter::default(), |_, _| {});
            assert_eq!(seen.len(), 20_000);
            assert!(seen.values().all(|&n| n == 1));
        }
    }

    #[test]
    fn windows_of_a_large_slot_are_about_count_keys() {
        let mut ks = Keyspace::for_slots(1, 0, SLOTS as u16);
        let db = ks.db_mut(0);
        for i in 0..500 {
            put(db, &format!("{{tag}}:{i}"));
        }
        let slot = key_slot(b"{tag}");
        let step =
            scan_db(db, ScanCursor { slot, pos: 0 }, SLOTS as u32, 10, &ScanFilter::default(), 0);
        assert!(step.visited >= 1 && step.visited < 60, "visited {}", step.visited);
        assert_eq!(step.next.map(|c| c.slot), Some(slot));
        let seen = iterate(db, 10, &ScanFilter::default(), |_, _| {});
        assert_eq!(seen.len(), 500);
    }

    #[test]
    fn a_huge_slot_is_split_into_at_most_max_passes_windows() {
        let mut ks = Keyspace::for_slots(1, 0, SLOTS as u16);
        let db = ks.db_mut(0);
        for i in 0..20_000 {
            put(db, &format!("{{big}}:{i}"));
        }
        let mut calls = 0;
        let seen = iterate(db, 1, &ScanFilter::default(), |_, _| calls += 1);
        assert_eq!(seen.len(), 20_000);
        assert!(calls <= MAX_PASSES + 1, "{calls} calls");
    }

    /// The guarantee while one slot's table grows to many times its size and
    /// shrinks again between calls, and other slots churn.
    #[test]
    fn keys_present_throughout_are_returned_while_tables_grow_and_shrink() {
        let mut ks = Keyspace::for_slots(1, 0, SLOTS as u16);
        let db = ks.db_mut(0);
        let stable: Vec<String> = (0..3000).map(|i| format!("{{hot}}:stable:{i}")).collect();
        let mut spread: Vec<String> = (0..3000).map(|i| format!("stable:{i}")).collect();
        // A slot whose table grows a hundredfold and shrinks back.
        spread.extend((0..20).map(|i| format!("{{cold}}:stable:{i}")));
        for k in stable.iter().chain(&spread) {
            put(db, k);
        }
        let mut added = Vec::new();
        let seen = iterate(db, 7, &ScanFilter::default(), |db, call| {
            if call % 40 < 20 {
                // Grow: the hot slot's table resizes several times.
                for j in 0..400 {
                    for tag in ["hot", "cold"] {
                        let k = format!("{{{tag}}}:new:{call}:{j}");
                        put(db, &k);
                        added.push(k);
                    }
                }
                put(db, &format!("churn:{call}"));
            } else {
                // Shrink: remove what was added (the table shrinks too).
                for k in added.drain(..) {
                    db.remove(k.as_bytes());
                }
            }
        });
        for k in stable.iter().chain(&spread) {
            assert!(seen.contains_key(k.as_bytes()), "missed {k}");
        }
        // Nothing that was never there.
        for k in seen.keys() {
            let k = String::from_utf8_lossy(k);
            assert!(k.contains("stable:") || k.contains(":new:") || k.starts_with("churn:"), "{k}");
        }
    }

    #[test]
    fn filters_and_expired_keys() {
        let mut ks = Keyspace::for_slots(1, 0, SLOTS as u16);
        let db = ks.db_mut(0);
        for i in 0..300 {
            put(db, &format!("user:{i}"));
            put(db, &format!("item:{i}"));
        }
        for i in 0..50 {
            let e =
                Entry::new(format!("old:{i}").as_bytes(), Value::Str(StrValue::from_bytes(b"v")))
                    .with_expire(Some(5));
            db.insert(e);
        }
        let users = ScanFilter::new(Some(Bytes::from_static(b"user:*")), None);
        let seen = iterate(db, 10, &users, |_, _| {});
        assert_eq!(seen.len(), 300);
        assert!(seen.keys().all(|k| k.starts_with(b"user:")));
        let strings = ScanFilter::new(None, Some(Bytes::from_static(b"STRING")));
        let lists =
            ScanFilter::new(Some(Bytes::from_static(b"*")), Some(Bytes::from_static(b"list")));
        assert_eq!(iterate(db, 100, &lists, |_, _| {}).len(), 0);
        // At time 10 the `old:` keys have expired: reported, not returned.
        let step = scan_db(db, ScanCursor::START, SLOTS as u32, 100_000, &strings, 10);
        assert_eq!(step.keys.len(), 600);
        assert_eq!(step.expired.len(), 50);
        assert_eq!(step.visited, 650);
        assert_eq!(step.next, None);
    }

    #[test]
    fn shards_cover_their_own_slots_and_reclaim_expired_keys() {
        let map = SlotMap::new(2);
        let mut shards: Vec<Shard> =
            (0..2).map(|i| Shard::new(ShardId(i), map, ShardSettings::default(), 7)).collect();
        let mut all = HashSet::new();
        for i in 0..5000 {
            let key = format!("k{i}");
            let shard = &mut shards[map.shard_of_key(key.as_bytes()).index()];
            let expire = (i % 10 == 0).then_some(1);
            let e = Entry::new(key.as_bytes(), Value::Str(StrValue::from_bytes(b"v")))
                .with_expire(expire);
            shard.keyspace.db_mut(0).insert(e);
            if expire.is_none() {
                all.insert(Bytes::from(key));
            }
        }
        // The server's loop: continue on the next shard when one runs out.
        let mut seen = HashSet::new();
        let mut cursor = ScanCursor::START;
        let filter = ScanFilter::default();
        loop {
            let shard = map.shard_of_slot(cursor.slot);
            let step = op_scan(&mut shards[shard.index()], 0, cursor, 25, &filter, 100);
            seen.extend(step.keys);
            match step.next {
                Some(next) => cursor = next,
                None => break,
            }
        }
        assert_eq!(seen, all);
        let left: usize = shards.iter().map(|s| s.keyspace.db(0).len()).sum();
        assert_eq!(left, all.len());
        assert_eq!(shards.iter().map(|s| s.state.stats.expired_keys).sum::<u64>(), 500);
        // A cursor below a shard's range does not read another shard's slots.
        let step = op_scan(&mut shards[1], 0, ScanCursor::START, 1, &filter, 100);
        assert!(step.next.is_none_or(|c| c.slot >= map.slots_of(ShardId(1)).0));
    }
}
