//! A selector: which commands, keys and channels a user may use (Redis's
//! `aclSelector`). A user has a root selector and any number more in
//! parentheses; a command is allowed when one selector allows all of it.
//!
//! Commands are a bitmap over the command table's row ids (subcommands have
//! rows of their own). `+@all` also sets the "future commands" bit, which
//! only `-@all` clears: it is how ACL LIST knows to start from `+@all`.

use super::{RuleError, Verdict};
use crate::command::spec::{acl as category, flags, keyflags, CommandSpec};
use crate::command::table::{table, Registered};
use bytes::Bytes;
use ringdb_types::glob::glob_match;

/// A key pattern's permissions (`%R~`, `%W~`; `~` is both).
pub const READ: u8 = 1;
pub const WRITE: u8 = 2;
pub const READ_WRITE: u8 = READ | WRITE;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPattern {
    pub pattern: Bytes,
    pub perms: u8,
    shape: Shape,
}

/// How a pattern is matched, decided once when the rule is applied: most
/// patterns are a literal or a literal prefix and `*`, compared without
/// the glob matcher.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Exact,
    /// The first `n` bytes, then anything (`app:*`).
    Prefix(usize),
    Glob,
}

impl Shape {
    fn of(pattern: &[u8]) -> Shape {
        let special = |c: &u8| matches!(c, b'*' | b'?' | b'[' | b'\\');
        match pattern.iter().position(special) {
            None => Shape::Exact,
            Some(at) if at == pattern.len() - 1 && pattern[at] == b'*' => Shape::Prefix(at),
            Some(_) => Shape::Glob,
        }
    }
}

impl KeyPattern {
    pub fn new(pattern: &[u8], perms: u8) -> Self {
        KeyPattern { pattern: Bytes::copy_from_slice(pattern), perms, shape: Shape::of(pattern) }
    }

    pub fn matches(&self, key: &[u8]) -> bool {
        match self.shape {
            Shape::Exact => key == &self.pattern[..],
            // As Redis's matcher, `*` never matches an empty key.
            Shape::Prefix(n) => !key.is_empty() && key.starts_with(&self.pattern[..n]),
            Shape::Glob => glob_match(&self.pattern, key, false),
        }
    }

    /// As ACL LIST writes it.
    pub fn describe(&self) -> String {
        let prefix = match self.perms {
            READ => "%R~",
            WRITE => "%W~",
            _ => "~",
        };
        format!("{prefix}{}", String::from_utf8_lossy(&self.pattern))
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selector {
    pub(super) root: bool,
    all_keys: bool,
    all_channels: bool,
    /// Every command, without looking at the bitmap (cleared as soon as
    /// one command is taken away).
    all_commands: bool,
    /// Set by `+@all`, cleared by `-@all` only (Redis's reserved bit).
    future: bool,
    commands: Vec<u64>,
    /// First arguments allowed for a command otherwise denied
    /// (`+select|0`), by row id.
    first_args: Vec<(usize, Vec<String>)>,
    keys: Vec<KeyPattern>,
    /// `keys` compiled for the check, rebuilt when they change.
    key_index: KeyIndex,
    channels: Vec<Bytes>,
}

impl Selector {
    /// An empty selector: no commands, no keys, and channels as
    /// `acl-pubsub-default` says.
    pub fn new(root: bool, all_channels: bool) -> Self {
        Selector {
            root,
            all_keys: false,
            all_channels,
            all_commands: false,
            future: false,
            commands: vec![0; table().id_count().div_ceil(64)],
            first_args: Vec::new(),
            keys: Vec::new(),
            key_index: KeyIndex::default(),
            channels: Vec::new(),
        }
    }

    /// Whether this selector allows everything: the check is skipped.
    pub fn unrestricted(&self) -> bool {
        self.all_commands && self.all_keys && self.all_channels
    }

    pub fn all_keys(&self) -> bool {
        self.all_keys
    }

    pub fn all_channels(&self) -> bool {
        self.all_channels
    }

    pub fn channels(&self) -> &[Bytes] {
        &self.channels
    }

    fn bit(&self, id: usize) -> bool {
        self.commands.get(id / 64).is_some_and(|w| w & (1 << (id % 64)) != 0)
    }

    fn set_bit(&mut self, id: usize, allow: bool) {
        let Some(word) = self.commands.get_mut(id / 64) else { return };
        if allow {
            *word |= 1 << (id % 64);
        } else {
            *word &= !(1 << (id % 64));
            self.all_commands = false;
        }
    }

    /// Allows or denies a row, and every subcommand of it (Redis's
    /// `ACLChangeSelectorPerm`).
    fn change(&mut self, reg: &Registered, allow: bool) {
        self.set_bit(reg.id, allow);
        self.first_args.retain(|(id, _)| *id != reg.id);
        for sub in reg.subcommands() {
            self.set_bit(sub.id, allow);
        }
    }

    fn change_category(&mut self, cat: u32, allow: bool) {
        for reg in table().iter() {
            if reg.spec.acl_categories() & cat != 0 {
                self.change(reg, allow);
            }
            for sub in reg.subcommands() {
                if sub.spec.acl_categories() & cat != 0 {
                    self.change(sub, allow);
                }
            }
        }
    }

    fn set_all_commands(&mut self, allow: bool) {
        let word = if allow { u64::MAX } else { 0 };
        self.commands.iter_mut().for_each(|w| *w = word);
        self.all_commands = allow;
        self.future = allow;
        self.first_args.clear();
    }

    /// Applies one rule (Redis's `ACLSetSelector`).
    pub fn apply(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let is = |word: &str| op.eq_ignore_ascii_case(word.as_bytes());
        // An empty rule inside a selector (`("" +get)`) is no rule.
        if op.is_empty() {
            return Err(RuleError::Syntax);
        }
        if is("allkeys") || op == b"~*" {
            self.all_keys = true;
            self.keys.clear();
            self.key_index = KeyIndex::default();
        } else if is("resetkeys") {
            self.all_keys = false;
            self.keys.clear();
            self.key_index = KeyIndex::default();
        } else if is("allchannels") || op == b"&*" {
            self.all_channels = true;
            self.channels.clear();
        } else if is("resetchannels") {
            self.all_channels = false;
            self.channels.clear();
        } else if is("allcommands") || is("+@all") {
            self.set_all_commands(true);
        } else if is("nocommands") || is("-@all") {
            self.set_all_commands(false);
        } else if op[0] == b'~' || op[0] == b'%' {
            self.add_key_pattern(op)?;
        } else if op[0] == b'&' {
            if self.all_channels {
                return Err(RuleError::ChannelAfterAll);
            }
            let pattern = &op[1..];
            if has_spaces(pattern) {
                return Err(RuleError::Syntax);
            }
            if !self.channels.iter().any(|c| c == pattern) {
                self.channels.push(Bytes::copy_from_slice(pattern));
            }
            self.all_channels = false;
        } else if op.len() > 1 && op[1] == b'@' && (op[0] == b'+' || op[0] == b'-') {
            let cat = category_by_name(&op[2..]).ok_or(RuleError::Unknown)?;
            self.change_category(cat, op[0] == b'+');
        } else if op[0] == b'+' {
            self.allow_command(&op[1..])?;
        } else if op[0] == b'-' {
            let reg = lookup(&op[1..]).ok_or(RuleError::Unknown)?;
            self.change(reg, false);
        } else {
            return Err(RuleError::Syntax);
        }
        Ok(())
    }

    fn add_key_pattern(&mut self, op: &[u8]) -> Result<(), RuleError> {
        if self.all_keys {
            return Err(RuleError::KeyAfterAll);
        }
        let (perms, pattern) = if op[0] == b'%' {
            let mut perms = 0;
            let mut at = 1;
            loop {
                match op.get(at).map(u8::to_ascii_uppercase) {
                    Some(b'R') if perms & READ == 0 => perms |= READ,
                    Some(b'W') if perms & WRITE == 0 => perms |= WRITE,
                    Some(b'~') => break,
                    // No `~`, or no permission before it (`%~k`): refused,
                    // as later Redis versions do (7.0 takes them and then
                    // cannot describe the user).
                    _ => return Err(RuleError::Syntax),
                }
                at += 1;
            }
            if perms == 0 {
                return Err(RuleError::Syntax);
            }
            (perms, op.get(at + 1..).unwrap_or_default())
        } else {
            (READ_WRITE, &op[1..])
        };
        if has_spaces(pattern) {
            return Err(RuleError::Syntax);
        }
        match self.keys.iter_mut().find(|k| k.pattern == pattern) {
            Some(existing) => existing.perms |= perms,
            None => self.keys.push(KeyPattern::new(pattern, perms)),
        }
        self.key_index = KeyIndex::build(&self.keys);
        self.all_keys = false;
        Ok(())
    }

    /// `+cmd`, `+container|sub`, or `+cmd|first-arg`.
    fn allow_command(&mut self, name: &[u8]) -> Result<(), RuleError> {
        let Some(bar) = name.iter().rposition(|&c| c == b'|') else {
            let reg = lookup(name).ok_or(RuleError::Unknown)?;
            self.change(reg, true);
            return Ok(());
        };
        let reg = lookup(&name[..bar]).ok_or(RuleError::Unknown)?;
        if reg.parent.is_some() {
            return Err(RuleError::FirstArgOfSubcommand);
        }
        let first = &name[bar + 1..];
        if first.is_empty() {
            return Err(RuleError::Syntax);
        }
        if reg.subcommands().next().is_some() {
            let sub = reg.subcommand(first).ok_or(RuleError::Unknown)?;
            self.change(sub, true);
            return Ok(());
        }
        // Redis warns that this is a misuse of ACLs but allows it.
        tracing::warn!(
            "Deprecation warning: Allowing a first arg of an otherwise blocked command is a \
             misuse of ACL and may get disabled in the future (offender: +{})",
            String::from_utf8_lossy(name)
        );
        let first = String::from_utf8_lossy(first).into_owned();
        match self.first_args.iter_mut().find(|(id, _)| *id == reg.id) {
            Some((_, args)) if args.iter().any(|a| a.eq_ignore_ascii_case(&first)) => {}
            Some((_, args)) => args.push(first),
            None => self.first_args.push((reg.id, vec![first])),
        }
        Ok(())
    }

    /// Whether this selector allows `reg` with `args` (Redis's
    /// `ACLSelectorCheckCmd`).
    pub fn check(&self, reg: &Registered, args: &[Bytes]) -> Verdict {
        if !self.command_allowed(reg, args) {
            return Verdict::DeniedCommand;
        }
        let spec = reg.spec;
        if !self.all_keys && has_keys(spec) {
            let mut denied = None;
            let complete = spec.for_each_key_and_flags(args, |pos, flags| {
                if denied.is_none() && !self.key_allowed(&args[pos], access_of(flags)) {
                    denied = Some(pos);
                }
            });
            // Arguments that do not hold the keys their specs promise (a
            // bad numkeys) name no key: the command reports its own error.
            if let (Some(pos), Some(())) = (denied, complete) {
                return Verdict::DeniedKey(pos);
            }
        }
        if let (false, Some(channels)) = (self.all_channels, spec.channels) {
            let mut denied = None;
            channels.for_each(args, |pos, pattern| {
                if denied.is_none() && !self.channel_allowed(&args[pos], pattern) {
                    denied = Some(pos);
                }
            });
            if let Some(pos) = denied {
                return Verdict::DeniedChannel(pos);
            }
        }
        Verdict::Allowed
    }

    fn command_allowed(&self, reg: &Registered, args: &[Bytes]) -> bool {
        if self.all_commands || reg.spec.has(flags::NO_AUTH) || self.bit(reg.id) {
            return true;
        }
        let at = if reg.parent.is_some() { 2 } else { 1 };
        let Some(first) = args.get(at) else { return false };
        self.first_args.iter().find(|(id, _)| *id == reg.id).is_some_and(|(_, allowed)| {
            allowed.iter().any(|a| a.as_bytes().eq_ignore_ascii_case(first))
        })
    }

    /// Whether `key` may be used with `access` (READ, WRITE, both, or 0 for
    /// neither, which any pattern allows).
    pub fn key_allowed(&self, key: &[u8], access: u8) -> bool {
        self.all_keys || self.key_index.allows(&self.keys, key, access)
    }

    /// Whether every key may be used with `access` (`~*`, `%R~*`, …).
    pub fn every_key_allowed(&self, access: u8) -> bool {
        self.all_keys
            || self.keys.iter().any(|k| k.perms & access == access && &k.pattern[..] == b"*")
    }

    /// A channel published or subscribed to matches a pattern; a pattern
    /// subscribed to must be one of them as written.
    pub fn channel_allowed(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.all_channels || channel_in(&self.channels, channel, is_pattern)
    }

    /// The keys, channels and commands, as ACL LIST writes them.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        if self.all_keys {
            out.push_str("~* ");
        } else {
            for k in &self.keys {
                out.push_str(&k.describe());
                out.push(' ');
            }
        }
        if self.all_channels {
            out.push_str("&* ");
        } else {
            out.push_str("resetchannels ");
            for c in &self.channels {
                out.push('&');
                out.push_str(&String::from_utf8_lossy(c));
                out.push(' ');
            }
        }
        out.push_str(&self.describe_commands());
        out
    }

    /// ACL GETUSER's `keys` field.
    pub fn describe_keys(&self) -> String {
        if self.all_keys {
            return "~*".into();
        }
        self.keys.iter().map(KeyPattern::describe).collect::<Vec<_>>().join(" ")
    }

    /// ACL GETUSER's `channels` field.
    pub fn describe_channels(&self) -> String {
        if self.all_channels {
            return "&*".into();
        }
        let named: Vec<String> =
            self.channels.iter().map(|c| format!("&{}", String::from_utf8_lossy(c))).collect();
        named.join(" ")
    }

    /// The command rules that rebuild this bitmap: `+@all` or `-@all`, then
    /// the categories that fit best, then single commands (Redis's
    /// `ACLDescribeSelectorCommandRules`, same choices in the same order).
    pub fn describe_commands(&self) -> String {
        let additive = !self.future;
        let mut rules = String::from(if additive { "-@all " } else { "+@all " });
        let mut fake = Selector::new(false, false);
        fake.set_all_commands(!additive);
        // What is left to explain: categories are applied to it inverted.
        let mut left = self.clone();
        let mut applied = [false; category::NAMES.len()];
        loop {
            let mut best: Option<(usize, usize, usize)> = None;
            for (j, &(cat, _)) in category::NAMES.iter().enumerate() {
                if applied[j] {
                    continue;
                }
                let (on, off) = left.count_category(cat);
                let (diff, same) = if additive { (off, on) } else { (on, off) };
                let better = match best {
                    None => true,
                    Some((_, mindiff, maxsame)) => {
                        diff < mindiff || (diff == mindiff && same > maxsame)
                    }
                };
                if same > diff && better {
                    best = Some((j, diff, same));
                }
            }
            let Some((j, _, _)) = best else { break };
            let (cat, name) = category::NAMES[j];
            fake.change_category(cat, additive);
            left.change_category(cat, !additive);
            rules.push_str(if additive { "+@" } else { "-@" });
            rules.push_str(name);
            rules.push(' ');
            applied[j] = true;
        }
        for reg in table().iter() {
            self.describe_single(&mut fake, reg, &mut rules);
            for sub in reg.subcommands() {
                self.describe_single(&mut fake, sub, &mut rules);
            }
        }
        rules.pop();
        debug_assert_eq!(
            fake.commands, self.commands,
            "ACL description does not rebuild the bitmap: {rules}"
        );
        rules
    }

    fn describe_single(&self, fake: &mut Selector, reg: &Registered, rules: &mut String) {
        let mine = self.bit(reg.id);
        if mine != fake.bit(reg.id) {
            rules.push(if mine { '+' } else { '-' });
            rules.push_str(&reg.full_name);
            rules.push(' ');
            fake.change(reg, mine);
        }
        if !mine {
            if let Some((_, args)) = self.first_args.iter().find(|(id, _)| *id == reg.id) {
                for a in args {
                    rules.push_str(&format!("+{}|{a} ", reg.full_name));
                }
            }
        }
    }

    /// Rows of `cat` allowed and denied (Redis's
    /// `ACLCountCategoryBitsForCommands`).
    fn count_category(&self, cat: u32) -> (usize, usize) {
        let (mut on, mut off) = (0, 0);
        for reg in table().all_rows() {
            if reg.spec.acl_categories() & cat != 0 {
                if self.bit(reg.id) {
                    on += 1;
                } else {
                    off += 1;
                }
            }
        }
        (on, off)
    }
}

/// Key patterns compiled for the check: literal and literal-prefix
/// patterns (most are) in a byte trie walked once along the key, so that
/// a user with many patterns pays for the key's length, not for the
/// patterns; the rest are globbed one by one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct KeyIndex {
    nodes: Vec<TrieNode>,
    /// Positions in the selector's patterns of those matched by glob.
    globs: Vec<usize>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct TrieNode {
    next: Vec<(u8, u32)>,
    /// Permissions of the prefix patterns ending here (`…*`).
    prefix: u8,
    /// Permissions of the literal patterns ending here.
    exact: u8,
}

impl KeyIndex {
    fn build(keys: &[KeyPattern]) -> Self {
        let mut index = KeyIndex { nodes: vec![TrieNode::default()], globs: Vec::new() };
        for (i, k) in keys.iter().enumerate() {
            match k.shape {
                Shape::Exact => {
                    let node = index.path(&k.pattern);
                    index.nodes[node].exact |= k.perms | PRESENT;
                }
                Shape::Prefix(n) => {
                    let node = index.path(&k.pattern[..n]);
                    index.nodes[node].prefix |= k.perms | PRESENT;
                }
                Shape::Glob => index.globs.push(i),
            }
        }
        index
    }

    /// The node for `bytes`, made as needed.
    fn path(&mut self, bytes: &[u8]) -> usize {
        let mut node = 0;
        for &b in bytes {
            node = match self.nodes[node].next.iter().find(|(c, _)| *c == b) {
                Some(&(_, n)) => n as usize,
                None => {
                    self.nodes.push(TrieNode::default());
                    let n = self.nodes.len() - 1;
                    self.nodes[node].next.push((b, n as u32));
                    n
                }
            };
        }
        node
    }

    fn allows(&self, keys: &[KeyPattern], key: &[u8], access: u8) -> bool {
        let fits = |perms: u8| perms & PRESENT != 0 && perms & access == access;
        // No pattern at all (a new selector, or after `resetkeys`).
        let mut node = (!self.nodes.is_empty()).then_some(0);
        for b in key {
            let Some(at) = node else { break };
            let here = &self.nodes[at];
            if fits(here.prefix) {
                return true;
            }
            node = here.next.iter().find(|(c, _)| c == b).map(|&(_, n)| n as usize);
            if node.is_none() {
                break;
            }
        }
        // As Redis's matcher, `*` never matches an empty key.
        let at_end = node.map(|n| &self.nodes[n]);
        if at_end.is_some_and(|end| fits(end.exact) || (!key.is_empty() && fits(end.prefix))) {
            return true;
        }
        self.globs.iter().any(|&i| keys[i].perms & access == access && keys[i].matches(key))
    }
}

/// Marks a trie node where a pattern ends.
const PRESENT: u8 = 0x80;

/// Whether `channel` is allowed by `patterns` (Redis's
/// `ACLCheckChannelAgainstList`).
pub fn channel_in(patterns: &[Bytes], channel: &[u8], is_pattern: bool) -> bool {
    patterns.iter().any(|p| if is_pattern { p == channel } else { glob_match(p, channel, false) })
}

/// The access a key's flags need (Redis's `ACLSelectorCheckKey`): reading
/// its value needs R; inserting, deleting or updating needs W.
pub fn access_of(key_flags: u32) -> u8 {
    let mut access = 0;
    if key_flags & keyflags::ACCESS != 0 {
        access |= READ;
    }
    if key_flags & (keyflags::INSERT | keyflags::DELETE | keyflags::UPDATE) != 0 {
        access |= WRITE;
    }
    access
}

fn has_keys(spec: &CommandSpec) -> bool {
    spec.get_keys.is_some() || spec.keys.iter().any(|k| k.flags & keyflags::NOT_KEY == 0)
}

/// A row by name or `container|sub`, any case.
fn lookup(name: &[u8]) -> Option<&'static Registered> {
    if name.iter().filter(|&&c| c == b'|').count() > 1 {
        return None;
    }
    table().get_full(name)
}

pub fn category_by_name(name: &[u8]) -> Option<u32> {
    category::NAMES.iter().find(|(_, n)| n.as_bytes().eq_ignore_ascii_case(name)).map(|(c, _)| *c)
}

/// Redis's `ACLStringHasSpaces`: spaces and NULs are refused in names and
/// patterns.
pub fn has_spaces(s: &[u8]) -> bool {
    s.iter().any(|&c| c.is_ascii_whitespace() || c == 0 || c == 0x0b)
}
