//! The append-only log's records, with no I/O: what a shard appends after
//! its writes, how a log is replayed into a shard, and a log's rewrite.
//!
//! The log is physical: after a write, the funnel has recorded which keys
//! changed ([`LogEvent`]), and the shard appends each key's new state as a
//! Redis command: `RESTORE key <abs-ms> <DUMP payload> REPLACE ABSTTL` for
//! a key that exists, `DEL key` for one that does not. A FLUSHDB, FLUSHALL
//! or SWAPDB side records the whole database (`FLUSHDB`, then every key).
//! Logging the state rather than the command makes replay deterministic
//! whatever the command was (SPOP, scripts, relative expiry times, a
//! gathered cross-shard RENAME): replaying a record always gives the state
//! the key had. The cost is that a small change to a big collection logs
//! the whole collection.
//!
//! Records are RESP arrays, as in Redis's AOF, so a log is readable with
//! the usual tools; a rewritten log may start with an RDB file of the shard
//! (`aof-use-rdb-preamble`), as Redis's base file does. Replay stops at a torn last record (the caller decides,
//! with `aof-load-truncated`, whether to cut it off); anything else that
//! does not parse is an error naming the byte.

use super::dump;
use super::rdb::decode::LoadLimits;
use super::rdb::encode::Encoder;
use super::rdb::RdbError;
use crate::keyspace::{Entry, Keyspace};
use crate::shard::ShardState;
use bytes::Bytes;

/// A change the log must record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogEvent {
    /// One key of a database changed (or was deleted).
    Key(usize, Bytes),
    /// A whole database changed (FLUSHDB, FLUSHALL, SWAPDB).
    WholeDb(usize),
    /// The function libraries changed (FUNCTION LOAD, DELETE, FLUSH,
    /// RESTORE): their FUNCTION DUMP payload now, replayed as
    /// `FUNCTION RESTORE <payload> FLUSH`.
    Functions(Bytes),
    /// This shard's part of cross-shard transaction `id` (of `parts`
    /// shards) starts: its records count only if every part's log has its
    /// [`LogEvent::TxEnd`] (see [`committed_parts`]).
    TxBegin(u64, u32),
    TxEnd(u64),
    /// The command that made the next `n` changes (all to its one key),
    /// for the replication stream, which carries it instead of them (an
    /// [`AS_IS`](crate::command::spec::flags::AS_IS) row); the log itself
    /// records the changes.
    AsIs(usize, Vec<Bytes>, u32),
}

/// What a shard has to log: the changes since the last drain, the
/// database the log's last `SELECT` chose, and the changes of transactions
/// still running (MULTI/EXEC), held back until they end.
#[derive(Debug, Default)]
pub struct LogState {
    pub events: Vec<LogEvent>,
    selected: Option<usize>,
    /// The replication stream is fed: [`LogState::mark_as_is`] is worth
    /// its copy of the arguments.
    pub as_is: bool,
    /// Changes made for an EXEC still running, by transaction id: the
    /// EXEC's steps on this shard are separate jobs, and other clients'
    /// writes to other keys run in between; held back, the EXEC's changes
    /// reach the log as one block when it ends ([`LogState::commit`]).
    held: Vec<(u64, Vec<LogEvent>)>,
}

impl LogState {
    /// After a rewrite: the new log starts with no database selected.
    pub fn reset_selected(&mut self) {
        self.selected = None;
    }

    /// Where the changes of what runs next start ([`LogState::wrap_since`],
    /// [`LogState::hold_since`]).
    pub fn mark(&self) -> usize {
        self.events.len()
    }

    /// Makes the changes since `mark` (one command's) a transaction of one
    /// part when there are several: a crash that tears the log in their
    /// middle then loses all of them, never some (a single-shard MSET, a
    /// RENAME, a script). One change is atomic by itself.
    pub fn wrap_since(&mut self, mark: usize, id: u64) {
        if self.several_changes_since(mark) {
            self.events.insert(mark, LogEvent::TxBegin(id, 1));
            self.events.push(LogEvent::TxEnd(id));
        }
    }

    /// Makes the changes since `mark` this shard's part of cross-shard
    /// transaction `id` of `parts` parts (a script run that changed keys on
    /// several shards).
    pub fn wrap_part_since(&mut self, mark: usize, id: u64, parts: u32) {
        let mark = mark.min(self.events.len());
        self.events.insert(mark, LogEvent::TxBegin(id, parts));
        self.events.push(LogEvent::TxEnd(id));
    }

    /// Marks the changes since `mark` as made by `args` on `db`, when they
    /// are all changes of one key (see [`LogEvent::AsIs`]).
    pub fn mark_as_is(&mut self, mark: usize, db: usize, args: &[Bytes]) {
        let changes = &self.events[mark.min(self.events.len())..];
        let one_key = match changes.first() {
            Some(first @ LogEvent::Key(..)) => changes.iter().all(|e| e == first),
            _ => false,
        };
        if one_key {
            let n = changes.len() as u32;
            self.events.insert(mark, LogEvent::AsIs(db, args.to_vec(), n));
        }
    }

    /// Whether anything changed since `mark`.
    pub fn changed_since(&self, mark: usize) -> bool {
        self.events.len() > mark
    }

    /// Forgets the changes since `mark` (an undone script run's).
    pub fn truncate(&mut self, mark: usize) {
        self.events.truncate(mark);
    }

    /// Whether the changes since `mark` are more than one record.
    pub fn several_changes_since(&self, mark: usize) -> bool {
        let changes = &self.events[mark.min(self.events.len())..];
        changes.first().is_some_and(|first| changes.iter().any(|e| e != first))
    }

    /// Holds back the changes since `mark` as part of EXEC `tx`.
    pub fn hold_since(&mut self, mark: usize, tx: u64) {
        let changes = self.events.split_off(mark.min(self.events.len()));
        match self.held.iter_mut().find(|(id, _)| *id == tx) {
            Some((_, held)) => held.extend(changes),
            None => self.held.push((tx, changes)),
        }
    }

    /// EXEC `tx` ended: its held changes go to the log, as this shard's
    /// part of a transaction of `parts` parts when `parts` is given (the
    /// markers are written even when the part changed nothing, so that
    /// every part is counted), as plain changes otherwise.
    pub fn commit(&mut self, tx: u64, parts: Option<u32>) {
        let held = match self.held.iter().position(|(id, _)| *id == tx) {
            Some(i) => self.held.swap_remove(i).1,
            None => Vec::new(),
        };
        match parts {
            Some(parts) => {
                self.events.push(LogEvent::TxBegin(tx, parts));
                self.events.extend(held);
                self.events.push(LogEvent::TxEnd(tx));
            }
            None => self.events.extend(held),
        }
    }
}

/// Appends a RESP array of `args`.
fn command(out: &mut Vec<u8>, args: &[&[u8]]) {
    ringdb_protocol::encode_command(out, args);
}

fn select_once(out: &mut Vec<u8>, log: &mut LogState, db: usize) {
    if log.selected != Some(db) {
        select(out, db);
        log.selected = Some(db);
    }
}

/// The record choosing database `db` for the records after it.
pub fn select(out: &mut Vec<u8>, db: usize) {
    command(out, &[b"SELECT", db.to_string().as_bytes()]);
}

/// The record of one key's current state.
pub(crate) fn key_record(out: &mut Vec<u8>, key: &[u8], entry: Option<&Entry>, now_ms: u64) {
    match entry.filter(|e| !e.is_expired(now_ms)) {
        Some(e) => {
            let payload = Encoder::default().dump(&e.value);
            let at = e.expire_at().unwrap_or(0).to_string();
            command(out, &[b"RESTORE", key, at.as_bytes(), &payload, b"REPLACE", b"ABSTTL"]);
        }
        None => command(out, &[b"DEL", key]),
    }
}

/// Turns the pending events into records appended to `out`.
pub fn drain(log: &mut LogState, keyspace: &Keyspace, now_ms: u64, out: &mut Vec<u8>) {
    let events = std::mem::take(&mut log.events);
    write_records(&events, log, keyspace, now_ms, out);
}

/// Appends the log records of `events` (taken from `log`) to `out`.
pub fn write_records(
    events: &[LogEvent],
    log: &mut LogState,
    keyspace: &Keyspace,
    now_ms: u64,
    out: &mut Vec<u8>,
) {
    let mut last: Option<&LogEvent> = None;
    for event in events {
        // A key written several times in a row is logged once. (Transaction
        // markers are always written, even around nothing: every part of a
        // cross-shard transaction must be found for it to count.)
        if last == Some(event) {
            continue;
        }
        last = Some(event);
        match event {
            LogEvent::Key(db, key) => {
                select_once(out, log, *db);
                key_record(out, key, keyspace.db(*db).get(key), now_ms);
            }
            LogEvent::WholeDb(db) => {
                select_once(out, log, *db);
                command(out, &[b"FLUSHDB"]);
                db_records(out, keyspace, *db, now_ms);
            }
            LogEvent::TxBegin(id, parts) => {
                command(
                    out,
                    &[b"TXBEGIN", id.to_string().as_bytes(), parts.to_string().as_bytes()],
                );
            }
            LogEvent::TxEnd(id) => command(out, &[b"TXEND", id.to_string().as_bytes()]),
            LogEvent::Functions(payload) => functions_record(out, payload),
            LogEvent::AsIs(..) => {}
        }
    }
}

/// A change as the replication stream carries it: commands tagged with
/// the database they apply to, so that one stream merged from every shard
/// chooses databases itself (a shard's log tracks only its own `SELECT`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FeedItem {
    /// A command (a RESP array) for database `db`, or for any database
    /// (`None`: FUNCTION RESTORE), that changes `key` only.
    Cmd {
        db: Option<usize>,
        key: Option<Bytes>,
        cmd: Vec<u8>,
    },
    /// Database `db` was emptied before the commands that follow.
    Flush(usize),
    /// This shard's part of transaction `id` of `parts` parts starts.
    Begin(u64, u32),
    End(u64),
}

/// Turns `events` into replication items appended to `out`: each key's
/// state now, as the log records it (`RESTORE … REPLACE ABSTTL` or `DEL`).
pub fn feed(events: &[LogEvent], keyspace: &Keyspace, now_ms: u64, out: &mut Vec<FeedItem>) {
    let mut last: Option<&LogEvent> = None;
    let mut skip = 0;
    for (i, event) in events.iter().enumerate() {
        if skip > 0 {
            skip -= 1;
            continue;
        }
        if let LogEvent::AsIs(db, args, n) = event {
            let key = match events.get(i + 1) {
                Some(LogEvent::Key(_, key)) => Some(key.clone()),
                _ => None,
            };
            let mut cmd = Vec::new();
            let args: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
            command(&mut cmd, &args);
            out.push(FeedItem::Cmd { db: Some(*db), key, cmd });
            skip = *n;
            last = None;
            continue;
        }
        if last == Some(event) {
            continue;
        }
        last = Some(event);
        let cmd = |db, key: Option<&[u8]>, f: &dyn Fn(&mut Vec<u8>)| {
            let mut cmd = Vec::new();
            f(&mut cmd);
            FeedItem::Cmd { db, key: key.map(Bytes::copy_from_slice), cmd }
        };
        match event {
            LogEvent::Key(db, key) => {
                let entry = keyspace.db(*db).get(key);
                out.push(FeedItem::Cmd {
                    db: Some(*db),
                    key: Some(key.clone()),
                    cmd: {
                        let mut cmd = Vec::new();
                        key_record(&mut cmd, key, entry, now_ms);
                        cmd
                    },
                });
            }
            LogEvent::WholeDb(db) => {
                out.push(FeedItem::Flush(*db));
                for (_, table) in keyspace.db(*db).slots() {
                    for entry in table.iter().filter(|e| !e.is_expired(now_ms)) {
                        out.push(cmd(Some(*db), Some(entry.key()), &|o| {
                            key_record(o, entry.key(), Some(entry), now_ms)
                        }));
                    }
                }
            }
            LogEvent::Functions(payload) => {
                out.push(cmd(None, None, &|o| functions_record(o, payload)));
            }
            LogEvent::TxBegin(id, parts) => out.push(FeedItem::Begin(*id, *parts)),
            LogEvent::TxEnd(id) => out.push(FeedItem::End(*id)),
            LogEvent::AsIs(..) => {}
        }
    }
}

fn db_records(out: &mut Vec<u8>, keyspace: &Keyspace, db: usize, now_ms: u64) {
    for (_, table) in keyspace.db(db).slots() {
        for entry in table.iter() {
            if !entry.is_expired(now_ms) {
                key_record(out, entry.key(), Some(entry), now_ms);
            }
        }
    }
}

/// The record that sets the function libraries to those of a FUNCTION
/// DUMP `payload`.
pub fn functions_record(out: &mut Vec<u8>, payload: &[u8]) {
    command(out, &[b"FUNCTION", b"RESTORE", payload, b"FLUSH"]);
}

/// The record a log gets where a rewrite of every shard's log starts (all
/// at one logical point, when no cross-shard transaction is running): the
/// transactions before it are complete in every log or in a new log's
/// base, so at start-up they count as committed whatever the other logs
/// hold ([`Tally`]). `at_ms` is for people reading the log.
pub fn rewrite_point(out: &mut Vec<u8>, at_ms: u64) {
    command(out, &[b"REWRITEPOINT", at_ms.to_string().as_bytes()]);
}

/// A log that starts with an RDB file of the shard as it is now
/// (`aof-use-rdb-preamble yes`, Redis's default): compact and fast to load.
pub fn rewrite_with_preamble(keyspace: &Keyspace, state: &ShardState, now_ms: u64) -> Vec<u8> {
    let part = super::snapshot::serialize(keyspace, state, now_ms, Encoder::default());
    super::snapshot::assemble(&[("aof-base", "1".into())], &[part], Encoder::default(), true)
}

/// A compact log of the shard as it is now, as records (a log created at
/// start-up with `aof-use-rdb-preamble no`).
pub fn rewrite(keyspace: &Keyspace, state: &ShardState, now_ms: u64) -> Vec<u8> {
    let mut out = Vec::new();
    if state.scripting.libraries().is_some_and(|l| !l.libs.is_empty()) {
        functions_record(&mut out, &state.scripting.function_dump());
    }
    for db in 0..keyspace.db_count() {
        if keyspace.db(db).is_empty() {
            continue;
        }
        select(&mut out, db);
        db_records(&mut out, keyspace, db, now_ms);
    }
    out
}

/// What replaying a log found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ReplayReport {
    pub records: usize,
    /// Bytes of whole records outside unfinished transactions; less than
    /// the log's length when its last record is torn, or when it ends
    /// inside a transaction (whose records were left out).
    pub valid_len: usize,
}

/// The transactions a scan has seen begin and not yet end: (id, offset of
/// the `TXBEGIN`), oldest first.
#[derive(Debug, Default)]
struct OpenTransactions(Vec<(u64, usize)>);

impl OpenTransactions {
    fn begin(&mut self, id: u64, at: usize) {
        self.0.push((id, at));
    }

    /// Whether `id` was open.
    fn end(&mut self, id: u64) -> bool {
        match self.0.iter().rposition(|(open, _)| *open == id) {
            Some(i) => {
                self.0.remove(i);
                true
            }
            None => false,
        }
    }

    /// The oldest unfinished transaction: (id, where it starts).
    fn oldest(&self) -> Option<(u64, usize)> {
        self.0.first().copied()
    }
}

/// A record's arguments and its length in bytes.
type Parsed<'a> = (Vec<&'a [u8]>, usize);

/// One RESP array at the start of `data`; `Ok(None)` when `data` ends
/// inside it.
fn parse_record(data: &[u8]) -> Result<Option<Parsed<'_>>, &'static str> {
    fn line(data: &[u8], at: usize) -> Result<Option<(i64, usize)>, &'static str> {
        let Some(end) = data[at..].windows(2).position(|w| w == b"\r\n") else {
            return if data.len() - at > 32 { Err("line too long") } else { Ok(None) };
        };
        let text = std::str::from_utf8(&data[at + 1..at + end]).map_err(|_| "bad number")?;
        let n: i64 = text.parse().map_err(|_| "bad number")?;
        Ok(Some((n, at + end + 2)))
    }
    if data.first() != Some(&b'*') {
        return Err("a record does not start with '*'");
    }
    let Some((count, mut at)) = line(data, 0)? else { return Ok(None) };
    if !(1..=1024).contains(&count) {
        return Err("bad argument count");
    }
    let mut args = Vec::with_capacity(count as usize);
    for _ in 0..count {
        match data.get(at) {
            None => return Ok(None),
            Some(b'$') => {}
            Some(_) => return Err("an argument does not start with '$'"),
        }
        let Some((len, start)) = line(data, at)? else { return Ok(None) };
        if len < 0 {
            return Err("bad argument length");
        }
        let end = start.saturating_add(len as usize);
        if data.len() < end.saturating_add(2) {
            return Ok(None);
        }
        if &data[end..end + 2] != b"\r\n" {
            return Err("an argument is not followed by CRLF");
        }
        args.push(&data[start..end]);
        at = end + 2;
    }
    Ok(Some((args, at)))
}

/// The number in a marker record (TXBEGIN, TXEND, REWRITEPOINT).
fn number(arg: &[u8]) -> Result<u64, String> {
    std::str::from_utf8(arg)
        .ok()
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| "a marker record with a bad number".to_string())
}

/// Where a log's records start: after its RDB preamble, if it has one.
fn records_start(data: &[u8]) -> Result<usize, RdbError> {
    if !data.starts_with(b"REDIS") {
        return Ok(0);
    }
    let mut reader = super::rdb::file::RdbReader::new(data, false)?;
    while !matches!(reader.next_record()?, super::rdb::file::Record::End) {}
    Ok(reader.position())
}

/// A part of a cross-shard transaction that a log holds whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxPart {
    pub id: u64,
    /// How many shards' logs have a part of the transaction.
    pub parts: u32,
    /// Before a rewrite point in its log: the transaction was complete
    /// there, its other parts may be in other logs' bases now.
    pub settled: bool,
}

/// The cross-shard transaction parts this log holds whole, one per
/// `TXEND`. See [`Tally`] for when a transaction counts as committed.
pub fn committed_parts(data: &[u8]) -> Result<Vec<TxPart>, RdbError> {
    let mut at = records_start(data)?;
    let mut open: Vec<(u64, u32)> = Vec::new();
    let mut done: Vec<TxPart> = Vec::new();
    while let Ok(Some((args, len))) = parse_record(&data[at..]) {
        let fail = |reason: String| RdbError { offset: at, reason };
        match (&args[0].to_ascii_uppercase()[..], args.len()) {
            (b"TXBEGIN", 3) => {
                open.push((number(args[1]).map_err(fail)?, number(args[2]).map_err(fail)? as u32))
            }
            (b"TXEND", 2) => {
                let id = number(args[1]).map_err(fail)?;
                if let Some(i) = open.iter().position(|(o, _)| *o == id) {
                    let (id, parts) = open.swap_remove(i);
                    done.push(TxPart { id, parts, settled: false });
                }
            }
            (b"REWRITEPOINT", 2) => done.iter_mut().for_each(|part| part.settled = true),
            _ => {}
        }
        at += len;
    }
    Ok(done)
}

/// The parts found in every shard's log, by transaction. A transaction is
/// committed when every part is found whole, or when a part is found
/// before a rewrite point (see [`rewrite_point`]); otherwise the process
/// died before all its parts were written, and none is replayed.
#[derive(Debug, Default)]
pub struct Tally(std::collections::HashMap<u64, (u32, usize, bool)>);

impl Tally {
    /// Counts one log's parts.
    pub fn add(&mut self, parts: &[TxPart]) {
        for part in parts {
            let entry = self.0.entry(part.id).or_insert((part.parts, 0, false));
            entry.1 += 1;
            entry.2 |= part.settled;
        }
    }

    pub fn committed(&self) -> std::collections::HashSet<u64> {
        self.0
            .iter()
            .filter(|(_, (parts, found, settled))| *settled || *found >= *parts as usize)
            .map(|(id, _)| *id)
            .collect()
    }

    /// The transactions not committed: (id, parts found, parts expected),
    /// by id.
    pub fn incomplete(&self) -> Vec<(u64, usize, u32)> {
        let committed = self.committed();
        let mut missing: Vec<_> = self
            .0
            .iter()
            .filter(|(id, _)| !committed.contains(id))
            .map(|(id, (parts, found, _))| (*id, *found, *parts))
            .collect();
        missing.sort();
        missing
    }
}

/// Replays a log into a shard's keyspace: every record whose key this
/// shard owns, except the parts of cross-shard transactions that are not
/// `committed` (some part's log lacks its end: the process died before all
/// parts were written). Stops at a torn last record (see [`ReplayReport`]).
pub fn replay(
    data: &[u8],
    keyspace: &mut Keyspace,
    state: &mut ShardState,
    limits: &LoadLimits,
    now_ms: u64,
    committed: &dyn Fn(u64) -> bool,
) -> Result<ReplayReport, RdbError> {
    let mut report = ReplayReport::default();
    let mut db = 0usize;
    let mut at = 0;
    if data.starts_with(b"REDIS") {
        let preamble = super::snapshot::load(data, keyspace, state, limits, now_ms, true)?;
        at = preamble.end;
        report.valid_len = at;
    }
    let mut skipping: Option<u64> = None;
    let mut open = OpenTransactions::default();
    while at < data.len() {
        let fail = |reason: String| RdbError { offset: at, reason };
        let (args, len) = match parse_record(&data[at..]) {
            Ok(Some(record)) => record,
            Ok(None) => break,
            Err(reason) => return Err(fail(reason.into())),
        };
        match (&args[0].to_ascii_uppercase()[..], args.len()) {
            (b"TXBEGIN", 3) => {
                let id = number(args[1]).map_err(fail)?;
                open.begin(id, at);
                if skipping.is_none() && !committed(id) {
                    skipping = Some(id);
                }
            }
            (b"TXEND", 2) => {
                let id = number(args[1]).map_err(fail)?;
                open.end(id);
                if skipping == Some(id) {
                    skipping = None;
                }
            }
            (b"REWRITEPOINT", 2) => {}
            // SELECT still applies inside a skipped part: what follows it
            // may be outside.
            (b"SELECT", _) => {
                apply(&args, &mut db, keyspace, state, limits, now_ms).map_err(fail)?
            }
            _ if skipping.is_some() => {}
            _ => apply(&args, &mut db, keyspace, state, limits, now_ms).map_err(fail)?,
        }
        at += len;
        report.records += 1;
        report.valid_len = at;
    }
    // A transaction the log ends inside was not applied (its end is not
    // here, so it is not committed): the log is whole only up to its start.
    if let Some((_, start)) = open.oldest() {
        report.valid_len = report.valid_len.min(start);
    }
    Ok(report)
}

/// What is wrong with a log ([`check`]).
#[derive(Debug, PartialEq, Eq)]
pub enum Problem {
    /// Bytes that are not a valid record (or a bad RDB preamble).
    Corrupt(RdbError),
    /// The log ends inside the record that starts at `offset` (a torn
    /// write).
    Torn { offset: usize },
    /// The log ends inside transaction `id`, whose `TXBEGIN` is at
    /// `offset`: its records are never applied.
    Unfinished { id: u64, offset: usize },
}

/// What checking a log found (`ringdb check-aof`).
#[derive(Debug, PartialEq, Eq)]
pub struct CheckReport {
    /// Where the RDB preamble ends, when the log has one.
    pub preamble_end: Option<usize>,
    /// Whole records after the preamble.
    pub records: usize,
    /// Bytes up to the end of the last whole record outside any unfinished
    /// transaction: what a fix keeps.
    pub valid_len: usize,
    /// The first problem; `None` for a sane log.
    pub problem: Option<Problem>,
    /// When the log also ends inside a transaction (besides `problem`):
    /// (id, offset of its `TXBEGIN`).
    pub unfinished: Option<(u64, usize)>,
}

/// Checks a log without loading it: the RDB preamble (structure, values
/// and checksum), then every record (its RESP framing, that it is one of
/// the records ringdb writes, RESTORE payloads and their checksums, the
/// transaction markers' pairing). Stops at the first problem.
pub fn check(data: &[u8]) -> CheckReport {
    let mut report = CheckReport {
        preamble_end: None,
        records: 0,
        valid_len: 0,
        problem: None,
        unfinished: None,
    };
    let mut at = 0;
    if data.starts_with(b"REDIS") {
        match check_preamble(data) {
            Ok(end) => at = end,
            Err(e) => {
                report.problem = Some(Problem::Corrupt(e));
                return report;
            }
        }
        report.preamble_end = Some(at);
        report.valid_len = at;
    }
    let limits = LoadLimits::default();
    let mut open = OpenTransactions::default();
    while at < data.len() {
        let parsed = parse_record(&data[at..]).map_err(String::from);
        let checked = parsed.and_then(|r| match r {
            Some((args, len)) => check_record(&args, &limits, &mut open, at).map(|()| Some(len)),
            None => Ok(None),
        });
        match checked {
            Ok(Some(len)) => {
                at += len;
                report.records += 1;
                if open.oldest().is_none() {
                    report.valid_len = at;
                }
            }
            Ok(None) => {
                report.problem = Some(Problem::Torn { offset: at });
                break;
            }
            Err(reason) => {
                report.problem = Some(Problem::Corrupt(RdbError { offset: at, reason }));
                break;
            }
        }
    }
    report.unfinished = open.oldest();
    if let (None, Some((id, offset))) = (&report.problem, report.unfinished) {
        report.problem = Some(Problem::Unfinished { id, offset });
    }
    report
}

/// Reads the whole RDB preamble, decoding every value; returns where it
/// ends.
fn check_preamble(data: &[u8]) -> Result<usize, RdbError> {
    let limits = LoadLimits::default();
    let mut reader = super::rdb::file::RdbReader::new(data, true)?;
    loop {
        match reader.next_record()? {
            super::rdb::file::Record::End => return Ok(reader.position()),
            super::rdb::file::Record::Key(key) => {
                key.decode(&limits)?;
            }
            _ => {}
        }
    }
}

/// Whether a record is one ringdb writes, well formed.
fn check_record(
    args: &[&[u8]],
    limits: &LoadLimits,
    open: &mut OpenTransactions,
    at: usize,
) -> Result<(), String> {
    let is = |i: usize, word: &[u8]| args[i].eq_ignore_ascii_case(word);
    match (&args[0].to_ascii_uppercase()[..], args.len()) {
        (b"SELECT", 2) => {
            std::str::from_utf8(args[1])
                .ok()
                .and_then(|t| t.parse::<usize>().ok())
                .ok_or("SELECT of a bad database number")?;
        }
        (b"FLUSHDB", 1) | (b"DEL", 2) => {}
        (b"FUNCTION", 4) if is(1, b"RESTORE") && is(3, b"FLUSH") => {
            crate::scripting::functions::parse_dump(args[2])
                .map_err(|e| format!("FUNCTION RESTORE: {e}"))?;
        }
        (b"RESTORE", 6) if is(4, b"REPLACE") && is(5, b"ABSTTL") => {
            std::str::from_utf8(args[2])
                .ok()
                .and_then(|t| t.parse::<u64>().ok())
                .ok_or("RESTORE with a bad expiry")?;
            dump::decode(args[3], limits).map_err(|e| {
                format!("RESTORE of key '{}': {}", String::from_utf8_lossy(args[1]), e.text())
            })?;
        }
        (b"TXBEGIN", 3) => {
            number(args[2])?;
            open.begin(number(args[1])?, at);
        }
        (b"REWRITEPOINT", 2) => {
            number(args[1])?;
            if let Some((id, _)) = open.oldest() {
                return Err(format!("a rewrite point inside transaction {id}"));
            }
        }
        (b"TXEND", 2) => {
            let id = number(args[1])?;
            if !open.end(id) {
                return Err(format!("TXEND of transaction {id}, which did not begin"));
            }
        }
        _ => return Err(format!("unknown record '{}'", String::from_utf8_lossy(args[0]))),
    }
    Ok(())
}

fn apply(
    args: &[&[u8]],
    db: &mut usize,
    keyspace: &mut Keyspace,
    state: &mut ShardState,
    limits: &LoadLimits,
    now_ms: u64,
) -> Result<(), String> {
    let name = args[0].to_ascii_uppercase();
    match (&name[..], args.len()) {
        (b"SELECT", 2) => {
            let n = std::str::from_utf8(args[1]).ok().and_then(|t| t.parse::<usize>().ok());
            match n.filter(|n| *n < keyspace.db_count()) {
                Some(n) => *db = n,
                None => {
                    return Err(format!(
                        "SELECT of a database this server does not have ({})",
                        String::from_utf8_lossy(args[1])
                    ))
                }
            }
        }
        (b"FLUSHDB", 1) => keyspace.db_mut(*db).clear(),
        (b"FUNCTION", 4) if args[1].eq_ignore_ascii_case(b"RESTORE") => {
            let policy = crate::scripting::RestorePolicy::Flush;
            state.scripting.function_restore(args[2], policy).map_err(|e| e.text().to_string())?;
        }
        (b"DEL", 2) => {
            keyspace.db_mut(*db).remove(args[1]);
        }
        (b"RESTORE", 6) => {
            let key = args[1];
            if !keyspace.owns_key(key) {
                return Err("a key of another shard".into());
            }
            let at: u64 = std::str::from_utf8(args[2])
                .ok()
                .and_then(|t| t.parse().ok())
                .ok_or("bad expiry")?;
            let value = dump::decode(args[3], limits).map_err(|e| e.text().to_string())?;
            keyspace.db_mut(*db).remove(key);
            if at == 0 || at > now_ms {
                let mut entry = Entry::new(key, value).with_expire((at != 0).then_some(at));
                entry.access = state.new_access(now_ms);
                keyspace.db_mut(*db).insert(entry);
            }
        }
        _ => return Err(format!("unknown record '{}'", String::from_utf8_lossy(args[0]))),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::{StrValue, Value};
    use crate::shard::ShardSettings;

    fn put(ks: &mut Keyspace, db: usize, key: &str, value: &str, expire: Option<u64>) {
        let e = Entry::new(key.as_bytes(), Value::Str(StrValue::from_bytes(value.as_bytes())));
        ks.db_mut(db).remove(key.as_bytes());
        ks.db_mut(db).insert(e.with_expire(expire));
    }

    fn get(ks: &Keyspace, db: usize, key: &str) -> Option<String> {
        ks.db(db).get(key.as_bytes()).map(|e| match &e.value {
            Value::Str(s) => {
                let mut tmp = [0u8; 20];
                String::from_utf8_lossy(s.as_bytes(&mut tmp)).into_owned()
            }
            _ => "?".into(),
        })
    }

    fn key(db: usize, k: &str) -> LogEvent {
        LogEvent::Key(db, Bytes::copy_from_slice(k.as_bytes()))
    }

    #[test]
    fn logged_changes_replay_to_the_same_state() {
        let mut state = ShardState::new(ShardSettings::default(), 1);
        let mut ks = Keyspace::for_slots(16, 0, 16384);
        let mut log = LogState::default();
        let mut out = Vec::new();
        put(&mut ks, 0, "a", "1", None);
        put(&mut ks, 2, "b", "2", Some(5_000));
        log.events = vec![key(0, "a"), key(0, "a"), key(2, "b")];
        drain(&mut log, &ks, 1000, &mut out);
        ks.db_mut(0).remove(b"a");
        put(&mut ks, 0, "c", "3", None);
        log.events = vec![key(0, "a"), key(0, "c")];
        drain(&mut log, &ks, 1000, &mut out);
        ks.db_mut(2).clear();
        log.events = vec![LogEvent::WholeDb(2)];
        drain(&mut log, &ks, 1000, &mut out);
        put(&mut ks, 2, "d", "4", None);
        log.events = vec![key(2, "d")];
        drain(&mut log, &ks, 1000, &mut out);

        let mut back = Keyspace::for_slots(16, 0, 16384);
        let report =
            replay(&out, &mut back, &mut state, &LoadLimits::default(), 1000, &|_| true).unwrap();
        assert_eq!(report.valid_len, out.len());
        assert_eq!(get(&back, 0, "a"), None);
        assert_eq!(get(&back, 0, "c").as_deref(), Some("3"));
        assert_eq!(get(&back, 2, "b"), None);
        assert_eq!(get(&back, 2, "d").as_deref(), Some("4"));
        // Expired by the time of the replay: not loaded.
        let mut late = Keyspace::for_slots(16, 0, 16384);
        let first = {
            let mut o = Vec::new();
            let mut l = LogState::default();
            put(&mut ks, 1, "t", "x", Some(5_000));
            l.events = vec![key(1, "t")];
            drain(&mut l, &ks, 1000, &mut o);
            o
        };
        replay(&first, &mut late, &mut state, &LoadLimits::default(), 6000, &|_| true).unwrap();
        assert_eq!(get(&late, 1, "t"), None);
        // A rewrite replays to the same state, with or without an RDB
        // preamble, and records appended after the preamble count too.
        for mut compact in [rewrite(&ks, &state, 1000), rewrite_with_preamble(&ks, &state, 1000)] {
            command(&mut compact, &[b"SELECT", b"0"]);
            command(&mut compact, &[b"DEL", b"c"]);
            let mut again = Keyspace::for_slots(16, 0, 16384);
            let report =
                replay(&compact, &mut again, &mut state, &LoadLimits::default(), 1000, &|_| true)
                    .unwrap();
            assert_eq!(report.valid_len, compact.len());
            for (db, k) in [(2, "d"), (1, "t")] {
                assert_eq!(get(&again, db, k), get(&ks, db, k));
            }
            assert_eq!(get(&again, 0, "c"), None);
        }
    }

    #[test]
    fn torn_tails_stop_replay_and_corruption_is_an_error() {
        let mut state = ShardState::new(ShardSettings::default(), 1);
        let mut ks = Keyspace::for_slots(16, 0, 16384);
        put(&mut ks, 0, "a", "1", None);
        put(&mut ks, 0, "b", "2", None);
        let log = rewrite(&ks, &state, 0);
        let first_end = parse_record(&log).unwrap().unwrap().1;
        for cut in first_end..log.len() {
            let mut back = Keyspace::for_slots(16, 0, 16384);
            let report =
                replay(&log[..cut], &mut back, &mut state, &LoadLimits::default(), 0, &|_| true)
                    .unwrap();
            assert!(report.valid_len <= cut && report.valid_len >= first_end, "cut {cut}");
        }
        let mut bad = log.clone();
        bad[first_end] = b'x';
        let err = replay(
            &bad,
            &mut Keyspace::for_slots(16, 0, 16384),
            &mut state,
            &LoadLimits::default(),
            0,
            &|_| true,
        )
        .unwrap_err();
        assert_eq!(err.offset, first_end);
        let mut unknown = Vec::new();
        command(&mut unknown, &[b"SET", b"a", b"b"]);
        assert!(
            replay(&unknown, &mut ks, &mut state, &LoadLimits::default(), 0, &|_| true).is_err()
        );
    }

    #[test]
    fn parts_of_uncommitted_transactions_are_skipped() {
        let mut state = ShardState::new(ShardSettings::default(), 1);
        let mut ks = Keyspace::for_slots(16, 0, 16384);
        put(&mut ks, 0, "a", "1", None);
        put(&mut ks, 0, "b", "2", None);
        let mut log = LogState::default();
        let mut out = rewrite_with_preamble(&Keyspace::for_slots(16, 0, 16384), &state, 0);
        log.events = vec![
            LogEvent::TxBegin(7, 2),
            key(0, "a"),
            LogEvent::TxEnd(7),
            LogEvent::TxBegin(8, 2),
            key(0, "b"),
        ];
        drain(&mut log, &ks, 0, &mut out);
        assert_eq!(
            committed_parts(&out).unwrap(),
            vec![TxPart { id: 7, parts: 2, settled: false }]
        );
        let mut back = Keyspace::for_slots(16, 0, 16384);
        replay(&out, &mut back, &mut state, &LoadLimits::default(), 0, &|id| id == 7).unwrap();
        assert_eq!(get(&back, 0, "a").as_deref(), Some("1"));
        assert_eq!(get(&back, 0, "b"), None, "transaction 8 never ended here");
        let mut back = Keyspace::for_slots(16, 0, 16384);
        replay(&out, &mut back, &mut state, &LoadLimits::default(), 0, &|_| false).unwrap();
        assert_eq!(get(&back, 0, "a"), None, "transaction 7 did not end on its other shard");
        // A part that changed nothing is still marked: its transaction
        // counts it among its parts.
        let mut empty = Vec::new();
        log.events = vec![LogEvent::TxBegin(9, 2), LogEvent::TxEnd(9)];
        drain(&mut log, &ks, 0, &mut empty);
        assert_eq!(
            committed_parts(&empty).unwrap(),
            vec![TxPart { id: 9, parts: 2, settled: false }]
        );
    }

    #[test]
    fn transactions_before_a_rewrite_point_are_committed_without_their_other_parts() {
        let ks = Keyspace::for_slots(16, 0, 16384);
        let mut log = LogState::default();
        // Shard 1's log: transaction 7 (of 2 parts), a rewrite point, then
        // transaction 8 (of 2 parts).
        let mut b = Vec::new();
        log.events = vec![LogEvent::TxBegin(7, 2), key(0, "x"), LogEvent::TxEnd(7)];
        drain(&mut log, &ks, 0, &mut b);
        rewrite_point(&mut b, 123);
        log.events = vec![LogEvent::TxBegin(8, 2), key(0, "y"), LogEvent::TxEnd(8)];
        drain(&mut log, &ks, 0, &mut b);
        // Shard 0's log was rewritten from the point: its part of 7 is in
        // its base, its part of 8 was never written (the crash).
        let state = ShardState::new(ShardSettings::default(), 1);
        let a = rewrite(&ks, &state, 0);
        let mut tally = Tally::default();
        tally.add(&committed_parts(&a).unwrap());
        tally.add(&committed_parts(&b).unwrap());
        assert_eq!(tally.committed(), [7].into_iter().collect());
        assert_eq!(tally.incomplete(), vec![(8, 1, 2)]);
        assert_eq!(check(&b).problem, None, "the point is a record check-aof knows");
        let mut inside = Vec::new();
        command(&mut inside, &[b"TXBEGIN", b"9", b"2"]);
        rewrite_point(&mut inside, 1);
        assert!(matches!(check(&inside).problem, Some(Problem::Corrupt(_))));
    }

    /// Values of "a" and "b" after replaying `log`, all transactions
    /// whose end is in it committed.
    fn replay_ab(log: &[u8]) -> (ReplayReport, Option<String>, Option<String>) {
        let mut state = ShardState::new(ShardSettings::default(), 1);
        let done: Vec<u64> = committed_parts(log).unwrap().into_iter().map(|p| p.id).collect();
        let mut back = Keyspace::for_slots(16, 0, 16384);
        let report =
            replay(log, &mut back, &mut state, &LoadLimits::default(), 0, &|id| done.contains(&id))
                .unwrap();
        (report, get(&back, 0, "a"), get(&back, 0, "b"))
    }

    #[test]
    fn a_command_changing_several_keys_is_one_transaction() {
        let mut ks = Keyspace::for_slots(16, 0, 16384);
        put(&mut ks, 0, "a", "1", None);
        put(&mut ks, 0, "b", "2", None);
        let mut log = LogState { events: vec![key(0, "x")], ..Default::default() };
        let mark = log.mark();
        log.events.push(key(0, "a"));
        log.events.push(key(0, "a"));
        log.wrap_since(mark, 5);
        assert_eq!(log.events, vec![key(0, "x"), key(0, "a"), key(0, "a")], "one key: as it is");
        log.events.push(key(0, "b"));
        log.wrap_since(mark, 5);
        assert_eq!(
            log.events,
            vec![
                key(0, "x"),
                LogEvent::TxBegin(5, 1),
                key(0, "a"),
                key(0, "a"),
                key(0, "b"),
                LogEvent::TxEnd(5)
            ]
        );
        log.events.remove(0);
        let mut out = Vec::new();
        drain(&mut log, &ks, 0, &mut out);
        let (report, a, b) = replay_ab(&out);
        assert_eq!(
            (report.valid_len, a.as_deref(), b.as_deref()),
            (out.len(), Some("1"), Some("2"))
        );
        // Cut anywhere inside: both keys or neither, and the log is whole
        // only up to the transaction's start.
        assert!(out.starts_with(b"*3\r\n$7\r\nTXBEGIN"));
        for cut in 1..out.len() {
            let (report, a, b) = replay_ab(&out[..cut]);
            assert_eq!((a, b, report.valid_len), (None, None, 0), "cut at {cut}");
        }
    }

    #[test]
    fn exec_changes_are_held_back_and_logged_as_one_block() {
        let mut ks = Keyspace::for_slots(16, 0, 16384);
        put(&mut ks, 0, "a", "1", None);
        put(&mut ks, 0, "b", "2", None);
        put(&mut ks, 0, "other", "3", None);
        let mut log = LogState::default();
        // EXEC 7's first step writes a; another client then writes other;
        // EXEC 7's second step writes b.
        let mark = log.mark();
        log.events.push(key(0, "a"));
        log.hold_since(mark, 7);
        log.events.push(key(0, "other"));
        let mark = log.mark();
        log.events.push(key(0, "b"));
        log.hold_since(mark, 7);
        assert_eq!(log.events, vec![key(0, "other")]);
        log.commit(7, Some(2));
        assert_eq!(
            log.events,
            vec![
                key(0, "other"),
                LogEvent::TxBegin(7, 2),
                key(0, "a"),
                key(0, "b"),
                LogEvent::TxEnd(7)
            ]
        );
        // Nothing held and no part: nothing; nothing held, a part: markers.
        log.events.clear();
        log.commit(8, None);
        assert!(log.events.is_empty());
        log.commit(8, Some(3));
        assert_eq!(log.events, vec![LogEvent::TxBegin(8, 3), LogEvent::TxEnd(8)]);
        // A shard it only read logs what it held as plain changes.
        log.events.clear();
        log.events.push(key(0, "a"));
        log.hold_since(0, 9);
        log.commit(9, None);
        assert_eq!(log.events, vec![key(0, "a")]);
    }

    #[test]
    fn checks_name_the_first_problem_and_what_a_fix_keeps() {
        let state = ShardState::new(ShardSettings::default(), 1);
        let mut ks = Keyspace::for_slots(16, 0, 16384);
        put(&mut ks, 0, "a", "1", None);
        put(&mut ks, 0, "b", "2", None);
        let mut log = rewrite_with_preamble(&ks, &state, 0);
        let preamble = log.len();
        let events = vec![
            LogEvent::TxBegin(3, 1),
            key(0, "a"),
            key(0, "b"),
            LogEvent::TxEnd(3),
            key(0, "a"),
        ];
        let mut pending = LogState { events, ..Default::default() };
        drain(&mut pending, &ks, 0, &mut log);
        let sane = check(&log);
        assert_eq!(
            sane,
            CheckReport {
                preamble_end: Some(preamble),
                records: 6,
                valid_len: log.len(),
                problem: None,
                unfinished: None
            }
        );
        // Torn last record.
        let torn = check(&log[..log.len() - 3]);
        let last = log.len() - key_len(&log, "a");
        assert_eq!(torn.problem, Some(Problem::Torn { offset: last }));
        assert_eq!(torn.valid_len, last);
        // Torn inside the transaction: a fix keeps what precedes it.
        let begin = preamble;
        let cut = check(&log[..begin + 40]);
        assert_eq!(cut.valid_len, begin);
        assert_eq!(cut.unfinished, Some((3, begin)));
        assert!(matches!(cut.problem, Some(Problem::Torn { .. })));
        let whole_records = check(&log[..last - tx_end_len(3)]);
        assert_eq!(whole_records.problem, Some(Problem::Unfinished { id: 3, offset: begin }));
        assert_eq!(whole_records.valid_len, begin);
        // A flipped byte in a RESTORE payload fails its checksum.
        let mut flipped = log.clone();
        let at = log.len() - 28;
        flipped[at] ^= 0x55;
        match check(&flipped).problem {
            Some(Problem::Corrupt(e)) => {
                assert_eq!(e.offset, last);
                assert!(e.reason.contains("RESTORE of key 'a'"), "{}", e.reason);
            }
            other => panic!("{other:?}"),
        }
        // Bytes that are no record at all.
        let mut garbage = log.clone();
        garbage.extend_from_slice(b"hello\r\n");
        let report = check(&garbage);
        assert_eq!(report.valid_len, log.len());
        assert!(matches!(&report.problem, Some(Problem::Corrupt(e)) if e.offset == log.len()));
        // An unpaired TXEND, an unknown record.
        for bad in [&[&b"TXEND"[..], b"4"][..], &[b"SET", b"a", b"b"]] {
            let mut extra = log.clone();
            command(&mut extra, bad);
            assert!(matches!(check(&extra).problem, Some(Problem::Corrupt(_))));
        }
        // A damaged preamble.
        let mut rdb = log.clone();
        rdb[preamble - 3] ^= 1;
        assert!(matches!(check(&rdb).problem, Some(Problem::Corrupt(_))));
        assert!(check(b"").problem.is_none());
    }

    fn key_len(_log: &[u8], key: &str) -> usize {
        let ks = {
            let mut ks = Keyspace::for_slots(16, 0, 16384);
            put(&mut ks, 0, key, "1", None);
            ks
        };
        let mut out = Vec::new();
        key_record(&mut out, key.as_bytes(), ks.db(0).get(key.as_bytes()), 0);
        out.len()
    }

    fn tx_end_len(id: u64) -> usize {
        let mut out = Vec::new();
        command(&mut out, &[b"TXEND", id.to_string().as_bytes()]);
        out.len()
    }
}
