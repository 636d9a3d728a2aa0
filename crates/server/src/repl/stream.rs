//! The replication stream: every shard's changes merged into one byte
//! stream with one offset (Redis's `master_repl_offset`), and the backlog
//! that partial resyncs and lagging replicas read from.
//!
//! Each shard hands its changes over after its turn, in its own order
//! ([`Stream::push`]). A change goes out once nothing queued before it on
//! its shard touches the same key: a key lives on one shard, so every key's
//! writes keep their order. A transaction's part (between `Begin` and
//! `End`) waits until every part of it has arrived and may go; then the
//! parts go out together as one `MULTI … EXEC`, never interleaved with
//! anything else. Transactions on disjoint keys may run in different orders
//! on different shards (only conflicting ones are ordered), so a part may
//! pass queued changes of other keys; conflicting ones are ordered the same
//! way on every shard, so something can always go. The records are states
//! (`RESTORE … REPLACE ABSTTL`, `DEL`) or commands that change one key as
//! they did here (`AS_IS` rows), so emptied databases (FLUSHDB, FLUSHALL,
//! SWAPDB) are emptied first in a block, then refilled.
//!
//! A full sync cuts the stream ([`Stream::cut`]): every shard pushes the
//! same cut when its snapshot starts, and the cut's offset is taken when
//! the cut is at the head of every queue, so the stream before it is
//! exactly what the snapshot holds.

use bytes::Bytes;
use ringdb_engine::persist::aof::FeedItem;
use std::collections::VecDeque;

/// One record of a shard's change, with what it touches.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rec {
    /// Its database (`None`: every database, FUNCTION RESTORE).
    db: Option<usize>,
    /// The one key it changes (`None`: the whole database, FLUSHDB).
    key: Option<Bytes>,
    /// The command; empty for a FLUSHDB of `db`.
    cmd: Vec<u8>,
}

impl Rec {
    fn conflicts(&self, other: &Rec) -> bool {
        match (self.db, other.db) {
            (Some(a), Some(b)) if a != b => false,
            (Some(_), Some(_)) => match (&self.key, &other.key) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            },
            _ => true,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Plain,
    Tx {
        id: u64,
        parts: u32,
    },
    /// A full sync's cut: nothing passes it.
    Cut(u64),
}

/// What a shard's queue holds.
#[derive(Debug)]
struct Unit {
    kind: Kind,
    recs: Vec<Rec>,
    /// How many [`Stream::release_stale`] sweeps a transaction's part has
    /// waited through.
    sweeps: u8,
}

impl Unit {
    fn conflicts(&self, other: &Unit) -> bool {
        matches!(self.kind, Kind::Cut(_))
            || matches!(other.kind, Kind::Cut(_))
            || self.recs.iter().any(|a| other.recs.iter().any(|b| a.conflicts(b)))
    }
}

/// A part of a transaction that has begun and not yet ended on a shard.
#[derive(Debug, Default)]
struct Open {
    id: u64,
    parts: u32,
    depth: u32,
    recs: Vec<Rec>,
}

/// The merged stream and its backlog.
#[derive(Debug)]
pub struct Stream {
    /// Bytes ever written (Redis's `master_repl_offset`).
    pub offset: u64,
    /// The stream's recent bytes: the last `buf.len()` bytes before
    /// `offset`.
    buf: VecDeque<u8>,
    queues: Vec<VecDeque<Unit>>,
    open: Vec<Option<Open>>,
    /// The database the stream's last SELECT chose.
    selected: Option<usize>,
    /// Cuts that reached every shard: (cut id, offset).
    cuts: Vec<(u64, u64)>,
}

impl Stream {
    /// A stream of `shards` shards whose next byte is `offset + 1`.
    pub fn new(shards: usize, offset: u64) -> Stream {
        Stream {
            offset,
            buf: VecDeque::new(),
            queues: (0..shards).map(|_| VecDeque::new()).collect(),
            open: (0..shards).map(|_| None).collect(),
            selected: None,
            cuts: Vec::new(),
        }
    }

    /// The shards that feed it.
    pub fn shards(&self) -> usize {
        self.queues.len()
    }

    /// What waits in each shard's queue (for logs).
    pub fn heads(&self) -> String {
        self.queues
            .iter()
            .map(|q| match q.front() {
                None => "-".to_string(),
                Some(u) => format!("{:?} ({} records) of {}", u.kind, u.recs.len(), q.len()),
            })
            .collect::<Vec<_>>()
            .join(" | ")
    }

    /// Bytes the backlog holds (`repl_backlog_histlen`).
    pub fn histlen(&self) -> u64 {
        self.buf.len() as u64
    }

    /// The offset of the backlog's first byte (`repl_backlog_first_byte_offset`).
    pub fn first_byte(&self) -> u64 {
        self.offset - self.histlen() + 1
    }

    /// Whether a replica that has the stream up to `pos` can go on from
    /// the backlog.
    pub fn has(&self, pos: u64) -> bool {
        pos <= self.offset && pos + self.histlen() >= self.offset
    }

    /// Whether a replica that has the stream up to `pos` may go on from
    /// the backlog's last `size` bytes (PSYNC: bytes kept only for lagging
    /// replicas do not count).
    pub fn has_within(&self, pos: u64, size: u64) -> bool {
        self.has(pos) && self.offset - pos <= size
    }

    /// Up to `max` bytes of the stream after `pos` (which [`Stream::has`]).
    pub fn read(&self, pos: u64, max: usize, out: &mut Vec<u8>) {
        let skip = (self.histlen() - (self.offset - pos)) as usize;
        let end = self.buf.len().min(skip.saturating_add(max));
        let (a, b) = self.buf.as_slices();
        out.extend_from_slice(&a[skip.min(a.len())..end.min(a.len())]);
        out.extend_from_slice(&b[skip.saturating_sub(a.len())..end.saturating_sub(a.len())]);
    }

    /// Forgets backlog bytes up to offset `pos` (nobody needs them).
    pub fn trim_to(&mut self, pos: u64) {
        let first = self.offset - self.histlen();
        if pos > first {
            let drop = (pos - first).min(self.histlen()) as usize;
            self.buf.drain(..drop);
        }
    }

    /// Writes `bytes` to the stream.
    fn emit(&mut self, bytes: &[u8]) {
        self.buf.extend(bytes);
        self.offset += bytes.len() as u64;
    }

    /// Writes a command that needs no database (PING, REPLCONF GETACK).
    pub fn command(&mut self, args: &[&[u8]]) {
        let mut out = Vec::new();
        ringdb_protocol::encode_command(&mut out, args);
        self.emit(&out);
    }

    /// Writes a command of the primary's stream as it came (a replica
    /// relays it to its own replicas, at the same offsets).
    pub fn relay(&mut self, bytes: &[u8]) {
        self.emit(bytes);
    }

    fn select(&mut self, db: usize) {
        if self.selected != Some(db) {
            self.selected = Some(db);
            self.command(&[b"SELECT", db.to_string().as_bytes()]);
        }
    }

    fn emit_rec(&mut self, rec: &Rec) {
        if let Some(db) = rec.db {
            self.select(db);
        }
        if rec.cmd.is_empty() {
            self.command(&[b"FLUSHDB"]);
        } else {
            self.emit(&rec.cmd);
        }
    }

    /// Takes a shard's changes (in its order) and writes what can go out.
    pub fn push(&mut self, shard: usize, items: Vec<FeedItem>) {
        for item in items {
            let rec = match item {
                FeedItem::Begin(id, parts) => {
                    match &mut self.open[shard] {
                        Some(open) => open.depth += 1,
                        None => {
                            self.open[shard] = Some(Open { id, parts, depth: 1, recs: Vec::new() })
                        }
                    }
                    continue;
                }
                FeedItem::End(_) => {
                    let Some(open) = &mut self.open[shard] else { continue };
                    open.depth -= 1;
                    if open.depth == 0 {
                        let Open { id, parts, recs, .. } =
                            self.open[shard].take().unwrap_or_default();
                        self.queues[shard].push_back(Unit {
                            kind: Kind::Tx { id, parts },
                            recs,
                            sweeps: 0,
                        });
                    }
                    continue;
                }
                FeedItem::Cmd { db, key, cmd } => Rec { db, key, cmd },
                FeedItem::Flush(db) => Rec { db: Some(db), key: None, cmd: Vec::new() },
            };
            match &mut self.open[shard] {
                Some(open) => open.recs.push(rec),
                None => match self.queues[shard].back_mut() {
                    Some(Unit { kind: Kind::Plain, recs, .. }) => recs.push(rec),
                    _ => self.queues[shard].push_back(Unit {
                        kind: Kind::Plain,
                        recs: vec![rec],
                        sweeps: 0,
                    }),
                },
            }
        }
        self.merge();
    }

    /// Once a second: a transaction's part that has waited through two
    /// sweeps (1–2 s) for parts that have not come is written without them.
    pub fn release_stale(&mut self) {
        for unit in self.queues.iter_mut().flatten() {
            if let Kind::Tx { .. } = unit.kind {
                unit.sweeps = unit.sweeps.saturating_add(1);
            }
        }
        self.merge();
    }

    /// Marks a full sync's cut `id` on `shard` (its snapshot starts now).
    pub fn cut(&mut self, shard: usize, id: u64) {
        self.queues[shard].push_back(Unit { kind: Kind::Cut(id), recs: Vec::new(), sweeps: 0 });
        self.merge();
    }

    /// The offset of cut `id` once every shard has reached it.
    pub fn cut_offset(&mut self, id: u64) -> Option<u64> {
        let i = self.cuts.iter().position(|(c, _)| *c == id)?;
        Some(self.cuts.swap_remove(i).1)
    }

    /// Whether unit `i` of shard `s` may go: nothing before it conflicts
    /// (other parts of its own transaction aside).
    fn free(&self, s: usize, i: usize) -> bool {
        let q = &self.queues[s];
        let unit = &q[i];
        q.iter().take(i).all(|before| {
            before.kind == unit.kind && unit.kind != Kind::Plain || !before.conflicts(unit)
        })
    }

    /// Writes out every queued unit that may go now.
    fn merge(&mut self) {
        while self.merge_one() {}
    }

    /// Writes out one unit (or transaction) that may go; whether there was
    /// one.
    fn merge_one(&mut self) -> bool {
        for s in 0..self.queues.len() {
            for i in 0..self.queues[s].len() {
                let kind = self.queues[s][i].kind;
                match kind {
                    Kind::Plain if self.free(s, i) => {
                        if let Some(unit) = self.queues[s].remove(i) {
                            unit.recs.iter().for_each(|r| self.emit_rec(r));
                        }
                        return true;
                    }
                    Kind::Tx { id, parts } if self.merge_transaction(id, parts) => return true,
                    Kind::Cut(id) if i == 0 && self.merge_cut(id) => return true,
                    _ => {}
                }
            }
        }
        false
    }

    /// Writes transaction `id` as one block, if all its parts are here and
    /// free.
    fn merge_transaction(&mut self, id: u64, parts: u32) -> bool {
        let mut found = Vec::new();
        for (s, q) in self.queues.iter().enumerate() {
            if let Some(i) = q.iter().position(|u| u.kind == (Kind::Tx { id, parts })) {
                found.push((s, i));
            }
        }
        // Parts that waited through two sweeps for the rest go as they are
        // (never expected: a stream that stalls on one would stall whole).
        let stale = found.iter().all(|&(s, i)| self.queues[s][i].sweeps >= 2);
        if (found.len() as u32) < parts && !stale || !found.iter().all(|&(s, i)| self.free(s, i)) {
            return false;
        }
        if (found.len() as u32) < parts {
            tracing::warn!(
                "Replication stream: transaction {id} sent with {} of its {parts} parts",
                found.len()
            );
        }
        let mut recs = Vec::new();
        for (s, i) in found {
            if let Some(unit) = self.queues[s].remove(i) {
                recs.extend(unit.recs);
            }
        }
        // Emptied databases first, once each: the other records are states
        // after them, or commands on keys they emptied.
        let flushed: std::collections::BTreeSet<usize> =
            recs.iter().filter(|r| r.cmd.is_empty()).filter_map(|r| r.db).collect();
        let block: Vec<Rec> = flushed
            .into_iter()
            .map(|db| Rec { db: Some(db), key: None, cmd: Vec::new() })
            .chain(recs.into_iter().filter(|r| !r.cmd.is_empty()))
            .collect();
        let wrap = block.len() > 1;
        if wrap {
            self.command(&[b"MULTI"]);
        }
        block.iter().for_each(|r| self.emit_rec(r));
        if wrap {
            self.command(&[b"EXEC"]);
        }
        true
    }

    /// Takes a cut's offset once it is at the head of every queue.
    fn merge_cut(&mut self, id: u64) -> bool {
        if !self.queues.iter().all(|q| q.front().is_some_and(|u| u.kind == Kind::Cut(id))) {
            return false;
        }
        self.queues.iter_mut().for_each(|q| {
            q.pop_front();
        });
        // A replica starting here has no database selected yet.
        self.selected = None;
        self.cuts.push((id, self.offset));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(db: usize, text: &str) -> FeedItem {
        let key = text.split(';').next().map(|k| Bytes::copy_from_slice(k.as_bytes()));
        FeedItem::Cmd { db: Some(db), key, cmd: text.as_bytes().to_vec() }
    }

    fn text(s: &Stream) -> String {
        let mut out = Vec::new();
        s.read(s.offset - s.histlen(), usize::MAX, &mut out);
        String::from_utf8(out).unwrap().replace("\r\n", " ")
    }

    #[test]
    fn plain_changes_go_out_in_shard_order_with_selects() {
        let mut s = Stream::new(2, 0);
        s.push(0, vec![cmd(0, "a;"), cmd(1, "b;")]);
        s.push(1, vec![cmd(1, "c;")]);
        assert_eq!(text(&s), "*2 $6 SELECT $1 0 a;*2 $6 SELECT $1 1 b;c;");
        assert_eq!(s.offset, s.histlen());
    }

    #[test]
    fn a_transaction_waits_for_all_parts_and_changes_of_other_keys_pass_it() {
        let mut s = Stream::new(2, 0);
        s.push(0, vec![FeedItem::Begin(7, 2), cmd(0, "x;"), FeedItem::End(7), cmd(0, "later;")]);
        assert_eq!(text(&s), "*2 $6 SELECT $1 0 later;");
        s.push(1, vec![FeedItem::Begin(7, 2), cmd(0, "y;"), FeedItem::End(7)]);
        assert_eq!(text(&s), "*2 $6 SELECT $1 0 later;*1 $5 MULTI x;y;*1 $4 EXEC ");
    }

    #[test]
    fn transactions_in_other_orders_on_other_shards_do_not_wait_for_each_other() {
        let mut s = Stream::new(2, 0);
        s.push(0, vec![FeedItem::Begin(1, 2), cmd(0, "a;"), FeedItem::End(1)]);
        s.push(0, vec![FeedItem::Begin(2, 2), cmd(0, "b;"), FeedItem::End(2)]);
        s.push(1, vec![FeedItem::Begin(2, 2), cmd(0, "c;"), FeedItem::End(2)]);
        s.push(1, vec![FeedItem::Begin(1, 2), cmd(0, "d;"), FeedItem::End(1)]);
        let out = text(&s);
        assert!(out.contains("0 b;c;*1 $4 EXEC") && out.contains("MULTI a;d;"), "{out}");
    }

    #[test]
    fn a_change_never_passes_an_earlier_one_of_its_key() {
        let mut s = Stream::new(2, 0);
        s.push(0, vec![FeedItem::Begin(1, 2), cmd(0, "k;1"), FeedItem::End(1), cmd(0, "k;2")]);
        s.push(0, vec![FeedItem::Begin(3, 1), cmd(0, "j;"), FeedItem::End(3)]);
        assert_eq!(text(&s), "*2 $6 SELECT $1 0 j;", "j passes the waiting part, k does not");
        s.push(1, vec![FeedItem::Begin(1, 2), cmd(0, "x;"), FeedItem::End(1)]);
        assert!(text(&s).ends_with("*1 $5 MULTI k;1x;*1 $4 EXEC k;2"));
    }

    #[test]
    fn a_part_whose_partner_never_comes_goes_alone_after_two_sweeps() {
        let mut s = Stream::new(2, 0);
        s.push(0, vec![FeedItem::Begin(5, 2), cmd(0, "x;"), FeedItem::End(5), cmd(0, "x;2")]);
        s.release_stale();
        assert_eq!(text(&s), "", "one sweep marks it");
        s.release_stale();
        assert_eq!(text(&s), "*2 $6 SELECT $1 0 x;x;2");
    }

    #[test]
    fn flushes_come_first_in_a_block_once_per_database() {
        let mut s = Stream::new(2, 0);
        s.push(0, vec![FeedItem::Begin(1, 2), FeedItem::Flush(0), cmd(0, "k;"), FeedItem::End(1)]);
        s.push(1, vec![FeedItem::Begin(1, 2), FeedItem::Flush(0), FeedItem::End(1)]);
        assert_eq!(text(&s), "*1 $5 MULTI *2 $6 SELECT $1 0 *1 $7 FLUSHDB k;*1 $4 EXEC ");
    }

    #[test]
    fn nested_parts_are_one_part_and_one_record_needs_no_multi() {
        let mut s = Stream::new(1, 0);
        let items = vec![
            FeedItem::Begin(2, 1),
            FeedItem::Begin(3, 1),
            cmd(0, "a;"),
            FeedItem::End(3),
            FeedItem::End(2),
        ];
        s.push(0, items);
        assert_eq!(text(&s), "*2 $6 SELECT $1 0 a;");
    }

    #[test]
    fn a_cut_is_taken_when_every_shard_reaches_it() {
        let mut s = Stream::new(2, 100);
        s.push(0, vec![cmd(0, "a;")]);
        s.cut(0, 9);
        s.push(0, vec![cmd(0, "after;")]);
        assert_eq!(s.cut_offset(9), None);
        s.push(1, vec![cmd(0, "b;")]);
        let before = s.offset;
        s.cut(1, 9);
        assert_eq!(s.cut_offset(9), Some(before));
        // The stream after a cut selects its database again.
        assert!(text(&s).ends_with("b;*2 $6 SELECT $1 0 after;"));
    }

    #[test]
    fn the_backlog_reads_and_trims_by_offset() {
        let mut s = Stream::new(1, 10);
        s.command(&[b"PING"]);
        assert_eq!((s.first_byte(), s.histlen(), s.offset), (11, 14, 24));
        assert!(s.has(10) && s.has(24) && !s.has(9) && !s.has(25));
        let mut out = Vec::new();
        s.read(20, 100, &mut out);
        assert_eq!(out, b"NG\r\n");
        s.trim_to(20);
        assert_eq!((s.first_byte(), s.histlen()), (21, 4));
        assert!(!s.has(19) && s.has(20));
    }

    #[test]
    fn reads_across_the_backlog_ring_wrapping() {
        let mut s = Stream::new(1, 0);
        let mut all = Vec::new();
        for i in 0..200u32 {
            let arg = i.to_string();
            s.command(&[b"PING", arg.as_bytes()]);
            ringdb_protocol::encode_command(&mut all, &[b"PING", arg.as_bytes()]);
            // Trimming from the front makes the ring wrap as it grows.
            s.trim_to(s.offset.saturating_sub(100));
            let from = s.offset - s.histlen();
            for (pos, max) in [(from, usize::MAX), (from + 3, 50), (s.offset - 7, 5)] {
                let mut out = Vec::new();
                s.read(pos, max, &mut out);
                let start = pos as usize;
                assert_eq!(out, &all[start..all.len().min(start.saturating_add(max))]);
            }
        }
    }
}
