//! The ACL log (ACL LOG): refused commands, keys, channels and failed
//! authentications, newest first. An event like one of the last ten within
//! a minute bumps that entry's count instead of adding one (Redis's
//! `addACLLogEntry`); the length is capped by `acllog-max-len`.

use std::collections::VecDeque;

/// How close in time two like events must be to share an entry.
const GROUPING_MS: u64 = 60_000;
/// How many recent entries are searched for a like one.
const SCAN: usize = 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    Command,
    Key,
    Channel,
    Auth,
}

impl Reason {
    pub fn name(self) -> &'static str {
        match self {
            Reason::Command => "command",
            Reason::Key => "key",
            Reason::Channel => "channel",
            Reason::Auth => "auth",
        }
    }
}

/// Where the refused command came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Context {
    Toplevel,
    Multi,
    Lua,
}

impl Context {
    pub fn name(self) -> &'static str {
        match self {
            Context::Toplevel => "toplevel",
            Context::Multi => "multi",
            Context::Lua => "lua",
        }
    }
}

#[derive(Clone, Debug)]
pub struct LogEntry {
    pub count: u64,
    pub reason: Reason,
    pub context: Context,
    /// The command, key or channel refused, or AUTH's command name.
    pub object: String,
    pub username: String,
    /// Unix milliseconds of the last such event.
    pub at_ms: u64,
    /// CLIENT INFO of the client of the last such event.
    pub client_info: String,
}

impl LogEntry {
    /// An event now, counted once.
    pub fn new(
        reason: Reason,
        context: Context,
        object: String,
        username: String,
        client_info: String,
    ) -> Self {
        let at_ms = crate::shard::now_ms();
        LogEntry { count: 1, reason, context, object, username, at_ms, client_info }
    }
}

#[derive(Debug, Default)]
pub struct AclLog {
    entries: VecDeque<LogEntry>,
}

impl AclLog {
    /// Records an event; `max_len` is `acllog-max-len`.
    pub fn add(&mut self, entry: LogEntry, max_len: usize) {
        let like = |e: &LogEntry| {
            e.reason == entry.reason
                && e.context == entry.context
                && e.at_ms.abs_diff(entry.at_ms) <= GROUPING_MS
                && e.object == entry.object
                && e.username == entry.username
        };
        if let Some(i) = self.entries.iter().take(SCAN).position(like) {
            let mut found = self.entries.remove(i).expect("found");
            found.count += 1;
            found.at_ms = entry.at_ms;
            found.client_info = entry.client_info;
            self.entries.push_front(found);
            return;
        }
        self.entries.push_front(entry);
        self.entries.truncate(max_len);
    }

    /// The newest `count` entries.
    pub fn newest(&self, count: usize) -> impl Iterator<Item = &LogEntry> {
        self.entries.iter().take(count)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn reset(&mut self) {
        self.entries.clear();
    }

    /// `acllog-max-len` lowered: the oldest entries go.
    pub fn trim(&mut self, max_len: usize) {
        self.entries.truncate(max_len);
    }
}
