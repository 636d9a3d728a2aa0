//! The registry: every family's rows, looked up by name.
//!
//! Built once per process from [`crate::families::ALL`] and shared read-only
//! by every shard. Duplicate names are refused at start-up. Lookup is
//! case-insensitive and resolves container commands (CLIENT, CONFIG, …) to
//! their subcommand rows, with Redis's errors for unknown names and wrong
//! arities.

use super::error::CmdError;
use super::spec::{flags, CommandSpec, Exec, NodeCommand};
use bytes::Bytes;
use hashbrown::HashMap;
use std::sync::OnceLock;

/// A row as registered: its id (for statistics) and full name.
pub struct Registered {
    pub id: usize,
    pub spec: &'static CommandSpec,
    /// `get`, or `client|list` for a subcommand.
    pub full_name: String,
    pub parent: Option<&'static CommandSpec>,
    subcommands: HashMap<&'static str, Registered>,
}

impl Registered {
    /// A subcommand by name (any case).
    pub fn subcommand(&self, name: &[u8]) -> Option<&Registered> {
        let mut lower = [0u8; 64];
        self.subcommands.get(lowercase(name, &mut lower)?)
    }

    /// Subcommands in table order.
    pub fn subcommands(&self) -> impl Iterator<Item = &Registered> {
        let mut subs: Vec<&Registered> = self.subcommands.values().collect();
        subs.sort_by_key(|r| r.id);
        subs.into_iter()
    }
}

pub struct CommandTable {
    by_name: HashMap<&'static str, Registered>,
    count: usize,
}

static TABLE: OnceLock<CommandTable> = OnceLock::new();

/// The process-wide command table.
pub fn table() -> &'static CommandTable {
    TABLE.get_or_init(|| CommandTable::build(crate::families::ALL))
}

/// Builds the process-wide table with `rename-command` applied, in order,
/// with Redis's errors. Called once at start-up, before the first lookup.
pub fn init(renames: &[(String, String)]) -> Result<(), String> {
    let mut built = CommandTable::build(crate::families::ALL);
    for (from, to) in renames {
        built.rename(from, to)?;
    }
    TABLE.set(built).map_err(|_| "the command table is already in use".to_string())
}

impl CommandTable {
    /// `rename-command from to`: `to` empty removes the command.
    pub fn rename(&mut self, from: &str, to: &str) -> Result<(), String> {
        let key = self
            .by_name
            .keys()
            .copied()
            .find(|k| k.eq_ignore_ascii_case(from))
            .ok_or("No such command in rename-command")?;
        let to = to.to_ascii_lowercase();
        if !to.is_empty() && self.by_name.contains_key(to.as_str()) {
            return Err("Target command name already exists".into());
        }
        let Some(row) = self.by_name.remove(key) else {
            return Err("No such command in rename-command".into());
        };
        if !to.is_empty() {
            // The table lives as long as the process.
            self.by_name.insert(Box::leak(to.into_boxed_str()), row);
        }
        Ok(())
    }
}

impl CommandTable {
    /// Builds the table from families of rows. Panics on a duplicate name:
    /// that is a programming error caught by the first test run.
    pub fn build(families: &[&'static [CommandSpec]]) -> Self {
        let mut by_name = HashMap::new();
        let mut next_id = 0;
        for family in families {
            for spec in family.iter() {
                let reg = register(spec, None, &mut next_id);
                assert!(
                    by_name.insert(spec.name, reg).is_none(),
                    "command {} registered twice",
                    spec.name
                );
            }
        }
        for spec in reactive_rows(families) {
            let reg = register(spec, None, &mut next_id);
            assert!(by_name.insert(spec.name, reg).is_none(), "command {} twice", spec.name);
        }
        CommandTable { by_name, count: next_id }
    }

    /// Number of ids handed out (rows including subcommands).
    pub fn id_count(&self) -> usize {
        self.count
    }

    /// Top-level commands (COMMAND COUNT counts these).
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Top-level rows in id order.
    pub fn iter(&self) -> impl Iterator<Item = &Registered> {
        let mut all: Vec<&Registered> = self.by_name.values().collect();
        all.sort_by_key(|r| r.id);
        all.into_iter()
    }

    /// Every row including subcommands, in id order.
    pub fn all_rows(&self) -> Vec<&Registered> {
        let mut all = Vec::new();
        for r in self.iter() {
            all.push(r);
            all.extend(r.subcommands());
        }
        all
    }

    /// A top-level command by name (any case).
    pub fn get(&self, name: &[u8]) -> Option<&Registered> {
        let mut lower = [0u8; 64];
        self.by_name.get(lowercase(name, &mut lower)?)
    }

    /// A row by `name` or `container|sub` (COMMAND INFO, COMMAND DOCS).
    pub fn get_full(&self, full: &[u8]) -> Option<&Registered> {
        match full.iter().position(|&c| c == b'|') {
            None => self.get(full),
            Some(bar) => self.get(&full[..bar])?.subcommand(&full[bar + 1..]),
        }
    }

    /// The row a request names, as Redis's `lookupCommand` finds it: the
    /// command, or its subcommand when it has subcommands and the request
    /// names one (CONFIG GET; bare COMMAND is the command itself). No arity
    /// check.
    pub fn lookup(&self, args: &[Bytes]) -> Option<&Registered> {
        let base = self.get(args.first()?)?;
        match args.get(1) {
            Some(sub) if !base.subcommands.is_empty() => base.subcommand(sub),
            _ => Some(base),
        }
    }

    /// Finds the row for a request and checks its arity, with Redis's errors
    /// (`unknown command`, `unknown subcommand`, `wrong number of arguments`).
    /// A container named alone (`CLIENT`) fails its own arity.
    pub fn resolve(&self, args: &[Bytes]) -> Result<&Registered, CmdError> {
        let Some(name) = args.first() else {
            return Err(CmdError::new("ERR empty command"));
        };
        let Some(base) = self.get(name) else {
            return Err(unknown_command(args));
        };
        let reg = match args.get(1) {
            Some(sub) if !base.subcommands.is_empty() => base
                .subcommand(sub)
                .ok_or_else(|| CmdError::unknown_subcommand(sub, base.spec.name))?,
            _ => base,
        };
        let arity = reg.spec.arity;
        let argc = args.len() as i32;
        if (arity > 0 && argc != arity) || (arity < 0 && argc < -arity) {
            return Err(CmdError::wrong_args(&reg.full_name));
        }
        Ok(reg)
    }
}

/// The reactive-query rows: `<name>.watch` and `<name>.unwatch` for every
/// row flagged watchable, made once when the table is built (and leaked, as
/// the table lives as long as the process) so that the watchable flag on a
/// read command is all it takes.
fn reactive_rows(families: &[&'static [CommandSpec]]) -> Vec<&'static CommandSpec> {
    fn leak(s: String) -> &'static str {
        Box::leak(s.into_boxed_str())
    }
    let mut rows = Vec::new();
    for spec in families.iter().flat_map(|f| f.iter()) {
        if !spec.has(flags::WATCHABLE) {
            continue;
        }
        let upper = spec.name.to_ascii_uppercase();
        let watch = CommandSpec::new(
            leak(format!("{}.watch", spec.name)),
            spec.arity,
            flags::READONLY
                | flags::PUBSUB
                | flags::NOSCRIPT
                | flags::NO_MULTI
                | flags::LOADING
                | flags::STALE
                | flags::PUSH_MODE,
            Exec::Node(NodeCommand::QueryWatch),
        )
        .keys(spec.keys)
        .acl(spec.acl)
        .doc(
            "reactive",
            "0.1.0",
            leak(format!(
                "Replies with the result of {upper} and pushes it again whenever the key changes."
            )),
            spec.doc.complexity,
            spec.doc.syntax,
        );
        let unwatch = CommandSpec::new(
            leak(format!("{}.unwatch", spec.name)),
            2,
            flags::PUBSUB
                | flags::NOSCRIPT
                | flags::NO_MULTI
                | flags::LOADING
                | flags::STALE
                | flags::PUSH_MODE,
            Exec::Node(NodeCommand::QueryUnwatch),
        )
        .acl(spec.acl)
        .doc(
            "reactive",
            "0.1.0",
            leak(format!("Ends this connection's {upper}.WATCH subscription.")),
            "O(1)",
            "fingerprint",
        );
        rows.push(&*Box::leak(Box::new(watch)));
        rows.push(&*Box::leak(Box::new(unwatch)));
    }
    rows
}

/// `name` in lower case in `buf`; `None` if it is longer than any command
/// name or not text.
fn lowercase<'b>(name: &[u8], buf: &'b mut [u8; 64]) -> Option<&'b str> {
    let lower = buf.get_mut(..name.len())?;
    for (d, s) in lower.iter_mut().zip(name) {
        *d = s.to_ascii_lowercase();
    }
    std::str::from_utf8(lower).ok()
}

fn register(
    spec: &'static CommandSpec,
    parent: Option<&'static CommandSpec>,
    next_id: &mut usize,
) -> Registered {
    let id = *next_id;
    *next_id += 1;
    let full_name = match parent {
        Some(p) => format!("{}|{}", p.name, spec.name),
        None => spec.name.to_string(),
    };
    let mut subcommands = HashMap::new();
    for sub in spec.subcommands {
        let reg = register(sub, Some(spec), next_id);
        assert!(subcommands.insert(sub.name, reg).is_none(), "subcommand {} twice", sub.name);
    }
    Registered { id, spec, full_name, parent, subcommands }
}

/// `ERR unknown command 'foo', with args beginning with: 'a' 'b' `, built as
/// Redis builds it (arguments quoted and followed by a space, at most about
/// 128 bytes of them).
pub fn unknown_command(args: &[Bytes]) -> CmdError {
    let name = String::from_utf8_lossy(&args[0][..args[0].len().min(128)]).into_owned();
    let mut shown = String::new();
    for arg in &args[1..] {
        if shown.len() >= 128 {
            break;
        }
        let room = 128 - shown.len();
        let text = String::from_utf8_lossy(&arg[..arg.len().min(room)]).into_owned();
        shown.push('\'');
        shown.push_str(&text);
        shown.push_str("' ");
    }
    CmdError::owned(format!("ERR unknown command '{name}', with args beginning with: {shown}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rename_command_as_redis() {
        let mut t = CommandTable::build(crate::families::ALL);
        t.rename("FLUSHALL", "").unwrap();
        assert!(t.get(b"flushall").is_none());
        t.rename("config", "MyConfig").unwrap();
        assert!(t.get(b"config").is_none());
        let sub = t.lookup(&[Bytes::from("myconfig"), Bytes::from("get")]).unwrap();
        assert_eq!(sub.full_name, "config|get");
        assert_eq!(t.rename("nosuch", "x").unwrap_err(), "No such command in rename-command");
        assert_eq!(t.rename("get", "set").unwrap_err(), "Target command name already exists");
    }
}
