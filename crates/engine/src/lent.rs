//! A command that runs with every shard of the node: the other shards are
//! lent to the core it runs on for the length of the command.
//!
//! A script may touch keys it did not declare, on any shard. When it cannot
//! stay on one shard, the server holds every shard for it (the whole-shard
//! lock, taken in shard order, then each other core lends its shard and
//! waits, blocked, until the run gives it back: see the server's
//! `route::script`). The run then calls each command on the shard that owns
//! its keys, through that shard's own state and funnel, as if it ran there;
//! a command whose keys span shards is split or gathered at once, as the
//! cross-shard scheme would do it over the mesh ([`crate::cross`]), with
//! nothing to wait for since every shard is held.
//!
//! The append-only logs get the run as one cross-shard transaction over the
//! shards it changed ([`NodeLog`]).

use crate::command::spec::Exec;
use crate::cross;
use crate::keyspace::Keyspace;
use crate::shard::{call, Caller, Clock, Shard, ShardCommand, ShardId, ShardState, SlotMap};
use bytes::Bytes;

/// The shards lent to a run, and what the run did with them.
pub struct Lent<'a> {
    /// Indexed by shard; `None` at the running shard's own index (its
    /// keyspace and state are the command's own).
    shards: Vec<Option<&'a mut Shard>>,
    slot_map: SlotMap,
    home: ShardId,
    /// Shards on which the run touched a key it did not declare, in shard
    /// order: what the server learns of the script from this run.
    pub undeclared: Vec<ShardId>,
    /// The subscribers of every core, for the script's PUBLISH.
    pub receivers: Option<&'a crate::shard::Receivers<'a>>,
}

/// How a node-wide run's changes reach the append-only logs.
#[derive(Clone, Copy, Debug)]
pub enum NodeLog {
    /// As one transaction `id` over the shards it changed.
    Own(u64),
    /// Held back for EXEC `id`, which logs it when it ends.
    Exec(u64),
}

impl<'a> Lent<'a> {
    /// The lent `others` (every shard but `home`) for a run on `home`.
    pub fn new(
        home: ShardId,
        slot_map: SlotMap,
        others: impl IntoIterator<Item = &'a mut Shard>,
    ) -> Self {
        let mut shards: Vec<Option<&'a mut Shard>> = (0..slot_map.shards()).map(|_| None).collect();
        for shard in others {
            let i = shard.id.index();
            if i < shards.len() && shard.id != home {
                shards[i] = Some(shard);
            }
        }
        Lent { shards, slot_map, home, undeclared: Vec::new(), receivers: None }
    }

    pub fn slot_map(&self) -> &SlotMap {
        &self.slot_map
    }

    pub fn home(&self) -> ShardId {
        self.home
    }

    /// The run touched `key`, which it did not declare.
    pub fn touched_undeclared(&mut self, key: &[u8]) {
        let shard = self.slot_map.shard_of_key(key);
        if let Err(at) = self.undeclared.binary_search(&shard) {
            self.undeclared.insert(at, shard);
        }
    }

    /// The keyspace and state of `shard`: `own` for the running shard.
    fn parts<'s>(
        &'s mut self,
        shard: ShardId,
        own: (&'s mut Keyspace, &'s mut ShardState),
    ) -> (&'s mut Keyspace, &'s mut ShardState) {
        match self.shards.get_mut(shard.index()).and_then(|s| s.as_deref_mut()) {
            Some(lent) => (&mut lent.keyspace, &mut lent.state),
            None => own,
        }
    }

    /// The shard that runs `cmd` whole, or `None` when its keys span
    /// shards (keys it forms from data included: SORT … GET).
    fn target(&self, cmd: &ShardCommand) -> Option<ShardId> {
        let mut first = None;
        let mut many = false;
        cmd.spec.for_each_key(&cmd.args, |i| {
            let shard = self.slot_map.shard_of_key(&cmd.args[i]);
            match first {
                None => first = Some(shard),
                Some(f) => many |= f != shard,
            }
        });
        let formed =
            cmd.spec.formed_keys.is_some_and(|f| f.elsewhere(cmd.spec, &cmd.args, &self.slot_map));
        match first {
            _ if many || formed => None,
            Some(shard) => Some(shard),
            None => Some(self.home),
        }
    }

    /// Runs one command of the script: on the shard that owns its keys, or
    /// across the shards when they span several. `own` is the running
    /// shard's keyspace and state.
    pub fn run(
        &mut self,
        own: (&mut Keyspace, &mut ShardState),
        cmd: &ShardCommand,
        out: &mut Vec<u8>,
        clock: &mut Clock,
    ) {
        let (own_keyspace, own_state) = own;
        match self.target(cmd) {
            Some(shard) => {
                let (keyspace, state) = self.parts(shard, (&mut *own_keyspace, &mut *own_state));
                call(keyspace, state, cmd, out, clock, Caller::Client);
            }
            None => match cmd.spec.exec {
                Exec::Split { merge, .. } => {
                    self.split((&mut *own_keyspace, &mut *own_state), cmd, merge, out, clock)
                }
                _ => self.gather((&mut *own_keyspace, &mut *own_state), cmd, out, clock),
            },
        }
        // Keyspace notifications leave from the running shard, in the
        // order the script's commands caused them.
        for other in self.others() {
            own_state.funnel.out.events.append(&mut other.state.funnel.out.events);
        }
    }

    /// A split command: each shard runs its part, the replies merge.
    fn split(
        &mut self,
        own: (&mut Keyspace, &mut ShardState),
        cmd: &ShardCommand,
        merge: crate::command::Merge,
        out: &mut Vec<u8>,
        clock: &mut Clock,
    ) {
        // An odd MSET fails whole, before any shard sets anything.
        if merge == crate::command::Merge::Ok && cmd.args.len().is_multiple_of(2) {
            let e = crate::command::CmdError::wrong_args(cmd.spec.name);
            ringdb_protocol::ReplyWriter::new(out, cmd.client.resp).error(e.text());
            return;
        }
        let (own_keyspace, own_state) = own;
        let parts = cross::split_by_shard(&self.slot_map, cmd);
        let mut replies = Vec::with_capacity(parts.len());
        for part in &parts {
            let mut reply = Vec::new();
            let (keyspace, state) = self.parts(part.shard, (&mut *own_keyspace, &mut *own_state));
            call(keyspace, state, &part.command, &mut reply, clock, Caller::Client);
            replies.push(reply);
        }
        if cross::merge_replies(merge, &parts, &replies, cmd.client.resp, out).is_none() {
            ringdb_protocol::ReplyWriter::new(out, cmd.client.resp)
                .error("ERR internal error: a part of a split command replied unexpectedly");
        }
    }

    /// Any other command whose keys span shards: copies of its keys (and of
    /// those it forms from data) run the ordinary handler in a scratch
    /// keyspace, and each changed key goes back to its owner through the
    /// owner's funnel.
    fn gather(
        &mut self,
        own: (&mut Keyspace, &mut ShardState),
        cmd: &ShardCommand,
        out: &mut Vec<u8>,
        clock: &mut Clock,
    ) {
        let (own_keyspace, own_state) = own;
        let mut keys: Vec<Bytes> = Vec::new();
        cmd.spec.for_each_key(&cmd.args, |i| keys.push(cmd.args[i].clone()));
        let formed =
            cmd.spec.formed_keys.filter(|f| f.elsewhere(cmd.spec, &cmd.args, &self.slot_map));
        if let (Some(formed), Some(first)) = (formed, keys.first().cloned()) {
            let owner = self.slot_map.shard_of_key(&first);
            let (keyspace, _) = self.parts(owner, (&mut *own_keyspace, &mut *own_state));
            let value = keyspace
                .db(cmd.client.db)
                .get(&first)
                .filter(|e| !e.is_expired(clock.now_ms))
                .map(|e| &e.value);
            let extra = (formed.from_value)(&cmd.args, value);
            keys.extend(extra);
        }
        keys.sort_unstable();
        keys.dedup();
        let databases = own_keyspace.db_count();
        let mut copies = Vec::new();
        for key in &keys {
            let owner = self.slot_map.shard_of_key(key);
            let (keyspace, _) = self.parts(owner, (&mut *own_keyspace, &mut *own_state));
            let dbs = cmd.databases(databases);
            copies.extend(cross::copy_keys(keyspace, std::slice::from_ref(key), dbs, clock.now_ms));
        }
        let mut scratch = Keyspace::scratch(databases).filled(copies);
        let mut settings = own_state.settings.clone();
        settings.latency = Default::default();
        let mut state = ShardState::recording(settings);
        state.formed_keys_gathered = formed.is_some();
        state.monitored = own_state.monitored;
        state.slowlog_ids = own_state.slowlog_ids.clone();
        call(&mut scratch, &mut state, cmd, out, clock, Caller::Client);
        // Its statistics are the running shard's.
        own_state.stats.add(&state.stats);
        own_state.funnel.out.monitor.append(&mut state.funnel.out.monitor);
        for (key, readers) in state.funnel.tracking.take_remembered() {
            let (_, owner) =
                self.parts(self.slot_map.shard_of_key(&key), (&mut *own_keyspace, &mut *own_state));
            readers.into_iter().for_each(|reader| owner.funnel.tracking.remember(&key, reader));
        }
        let events = state.funnel.take_events();
        for (owner, changes) in cross::changes_by_owner(&self.slot_map, events, &mut scratch) {
            let (keyspace, state) = self.parts(owner, (&mut *own_keyspace, &mut *own_state));
            cross::apply_changes(keyspace, state, changes);
        }
    }

    /// The keyspaces of the lent shards (not the running one's).
    pub fn keyspaces(&self) -> impl Iterator<Item = &Keyspace> + use<'_, 'a> {
        self.shards.iter().filter_map(|s| s.as_deref()).map(|s| &s.keyspace)
    }

    /// The lent shards (not the running one), in shard order.
    pub fn others(&mut self) -> impl Iterator<Item = &mut Shard> + use<'_, 'a> {
        self.shards.iter_mut().filter_map(|s| s.as_deref_mut())
    }
}

impl Shard {
    /// Runs `cmd` (a script) with the other shards of the node `lent` to
    /// it, appending its reply to `out`; the run's changes reach the logs as
    /// `log` says. Over `maxmemory` a script is judged where it starts (its
    /// own shard's state): the lent shards do not refuse its commands.
    pub fn call_on_node(
        &mut self,
        lent: &mut Lent,
        cmd: &ShardCommand,
        out: &mut Vec<u8>,
        log: NodeLog,
    ) {
        let mut clock = Clock::start();
        crate::evict::make_room(self, clock.now_ms);
        // Every shard's tracking table sees the run as one script: a
        // read-only call anywhere makes its declared keys tracked, on their
        // owners (Redis's rule for scripts).
        let own_writer = self.state.funnel.tracking.enter(&cmd.client);
        let own_mark = self.state.funnel.log.as_ref().map(|l| l.mark());
        let mut marks = Vec::new();
        for other in lent.others() {
            let mark = other.state.funnel.log.as_ref().map(|l| l.mark());
            let writer = other.state.funnel.tracking.enter(&cmd.client);
            marks.push((other.id, mark, std::mem::take(&mut other.state.oom), writer));
        }
        call(&mut self.keyspace, &mut self.state, cmd, out, &mut clock, Caller::Node(lent));
        // Which shards changed, for the transaction's part count.
        let mut changed = Vec::new();
        let mut read = self.state.funnel.tracking.leave_node_run(own_writer);
        if let (Some(mark), Some(l)) = (own_mark, self.state.funnel.log.as_ref()) {
            if l.changed_since(mark) {
                changed.push(self.id);
            }
        }
        for other in lent.others() {
            let Some(&(_, mark, oom, writer)) = marks.iter().find(|m| m.0 == other.id) else {
                continue;
            };
            other.state.oom = oom;
            read |= other.state.funnel.tracking.leave_node_run(writer);
            if let (Some(mark), Some(l)) = (mark, other.state.funnel.log.as_ref()) {
                if l.changed_since(mark) {
                    changed.push(other.id);
                }
            }
        }
        if read && cmd.client.track {
            let reader = crate::tracking::Reader { core: cmd.client.home, id: cmd.client.id };
            let _ = cmd.spec.for_each_key(&cmd.args, |i| {
                let key = &cmd.args[i];
                let owner = lent.slot_map.shard_of_key(key);
                let table = match lent.shards.get_mut(owner.index()).and_then(|s| s.as_deref_mut())
                {
                    Some(shard) => &mut shard.state.funnel.tracking,
                    None => &mut self.state.funnel.tracking,
                };
                table.remember(key, reader);
            });
            self.state.funnel.limit_tracked();
            lent.others().for_each(|s| s.state.funnel.limit_tracked());
        }
        let parts = changed.len() as u32;
        let wrap = |state: &mut ShardState, mark: Option<usize>| {
            let (Some(mark), Some(l)) = (mark, state.funnel.log.as_mut()) else { return };
            match log {
                NodeLog::Exec(id) => l.hold_since(mark, id),
                NodeLog::Own(id) if parts > 1 && l.changed_since(mark) => {
                    l.wrap_part_since(mark, id, parts)
                }
                NodeLog::Own(id) => l.wrap_since(mark, id),
            }
        };
        wrap(&mut self.state, own_mark);
        for other in lent.others() {
            let mark = marks.iter().find(|m| m.0 == other.id).and_then(|m| m.1);
            wrap(&mut other.state, mark);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::{table, ClientInfo};
    use crate::persist::aof::LogEvent;
    use crate::shard::{ShardId, ShardSettings};

    fn node() -> (Vec<Shard>, String, String) {
        let map = SlotMap::new(2);
        let shards: Vec<Shard> = (0..2)
            .map(|i| {
                let mut s = Shard::new(ShardId(i), map, ShardSettings::default(), 7);
                s.state.funnel.log = Some(Default::default());
                s
            })
            .collect();
        let on = |s: u16| {
            (0..).map(|i| format!("k{i}")).find(|k| map.shard_of_key(k.as_bytes()) == ShardId(s))
        };
        (shards, on(0).unwrap(), on(1).unwrap())
    }

    fn command(args: &[&str]) -> ShardCommand {
        let args: Vec<Bytes> = args.iter().map(|a| Bytes::copy_from_slice(a.as_bytes())).collect();
        let reg = table().resolve(&args).unwrap();
        ShardCommand { id: reg.id, spec: reg.spec, args, client: ClientInfo::default() }
    }

    /// Runs `args` on shard 0 with shard 1 lent; the reply and the report.
    fn on_node(shards: &mut [Shard], args: &[&str], log: NodeLog) -> (String, Vec<ShardId>) {
        let (home, others) = shards.split_at_mut(1);
        let map = home[0].slot_map;
        let mut lent = Lent::new(ShardId(0), map, others.iter_mut());
        let mut out = Vec::new();
        home[0].call_on_node(&mut lent, &command(args), &mut out, log);
        let report = home[0].state.scripting.take_report();
        (String::from_utf8_lossy(&out).into_owned(), report.undeclared)
    }

    #[test]
    fn a_script_runs_where_each_key_lives() {
        let (mut shards, a, b) = node();
        let mut out = Vec::new();
        shards[1].call(&command(&["SET", &b, "10"]), &mut out, &mut Clock::start(), Caller::Client);
        shards[1].state.funnel.log.as_mut().unwrap().events.clear();
        let script = "redis.call('incrby', ARGV[1], 5) redis.call('decrby', ARGV[2], 5) \
                      return redis.call('mget', ARGV[1], ARGV[2])";
        let (reply, undeclared) =
            on_node(&mut shards, &["EVAL", script, "0", &a, &b], NodeLog::Own(9));
        assert_eq!(reply, "*2\r\n$1\r\n5\r\n$1\r\n5\r\n");
        assert_eq!(undeclared, vec![ShardId(0), ShardId(1)]);
        // One transaction of two parts in the logs.
        for shard in &shards {
            let events = &shard.state.funnel.log.as_ref().unwrap().events;
            assert_eq!(events.first(), Some(&LogEvent::TxBegin(9, 2)), "{events:?}");
            assert_eq!(events.last(), Some(&LogEvent::TxEnd(9)));
        }
        // A command whose keys span shards is gathered at once.
        let (reply, _) = on_node(
            &mut shards,
            &["EVAL", "return redis.call('rename', ARGV[1], ARGV[2])", "0", &a, &b],
            NodeLog::Own(10),
        );
        assert_eq!(reply, "+OK\r\n");
        let mut out = Vec::new();
        shards[1].call(&command(&["GET", &b]), &mut out, &mut Clock::start(), Caller::Client);
        assert_eq!(out, b"$1\r\n5\r\n");
        let mut out = Vec::new();
        shards[0].call(&command(&["EXISTS", &a]), &mut out, &mut Clock::start(), Caller::Client);
        assert_eq!(out, b":0\r\n");
    }

    #[test]
    fn inside_exec_the_changes_are_held_back() {
        let (mut shards, a, b) = node();
        let script = "redis.call('set', ARGV[1], 1) redis.call('set', ARGV[2], 2) return 1";
        on_node(&mut shards, &["EVAL", script, "0", &a, &b], NodeLog::Exec(4));
        for shard in &mut shards {
            let log = shard.state.funnel.log.as_mut().unwrap();
            assert!(log.events.is_empty());
            log.commit(4, Some(2));
            assert_eq!(log.events.first(), Some(&LogEvent::TxBegin(4, 2)));
        }
    }
}
