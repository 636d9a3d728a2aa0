//! A user: on/off, passwords (kept as SHA-256 hex, as Redis keeps them),
//! and its selectors, built by applying rules left to right (Redis's
//! `ACLSetUser`). A built user is never changed in place: ACL SETUSER
//! applies the rules to a copy and replaces the user.

use super::selector::{has_spaces, Selector};
use super::{RuleError, Verdict};
use crate::command::table::Registered;
use bytes::Bytes;
use sha2::{Digest, Sha256};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    name: String,
    /// Unique to this user (a user deleted and made again gets a new one):
    /// how a command sent to a shard names its user ([`super::Acl::by_uid`]).
    uid: u32,
    enabled: bool,
    nopass: bool,
    /// `None` until `sanitize-payload` or `skip-sanitize-payload` is given.
    sanitize_payload: Option<bool>,
    /// SHA-256 of each password, 64 lowercase hex digits.
    passwords: Vec<String>,
    /// The root selector first, then those in parentheses.
    selectors: Vec<Selector>,
}

impl User {
    /// A new user as Redis creates one: off, no password, no permissions.
    pub fn new(name: &str, pubsub_all: bool) -> Self {
        User {
            name: name.to_string(),
            uid: super::next_uid(),
            enabled: false,
            nopass: false,
            sanitize_payload: None,
            passwords: Vec::new(),
            selectors: vec![Selector::new(true, pubsub_all)],
        }
    }

    /// The `default` user as it starts: on, no password, everything.
    pub fn default_user() -> Self {
        let mut user = User::new("default", false);
        for op in ["+@all", "~*", "&*", "on", "nopass"] {
            user.apply(op.as_bytes(), false).expect("the default user's rules are valid");
        }
        user
    }

    /// The user of a connection nothing is checked for (the link to our
    /// primary), named as Redis's CLIENT LIST shows it.
    pub fn superuser() -> Self {
        User { name: "(superuser)".into(), ..User::default_user() }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn uid(&self) -> u32 {
        self.uid
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    pub fn nopass(&self) -> bool {
        self.nopass
    }

    pub fn passwords(&self) -> &[String] {
        &self.passwords
    }

    pub fn selectors(&self) -> &[Selector] {
        &self.selectors
    }

    pub fn root(&self) -> &Selector {
        &self.selectors[0]
    }

    /// Whether any command on any key and channel is allowed: the check
    /// is skipped for such a user (the default user, usually).
    pub fn unrestricted(&self) -> bool {
        self.selectors[0].unrestricted()
    }

    /// Whether `password` is one of this user's (any is, with `nopass`).
    /// Disabled users never authenticate.
    pub fn authenticates(&self, password: &[u8]) -> bool {
        if !self.enabled {
            return false;
        }
        if self.nopass {
            return true;
        }
        let hashed = hash_password(password);
        // Every stored hash is compared in full, in constant time.
        self.passwords
            .iter()
            .fold(false, |found, p| found | constant_time_eq(p.as_bytes(), hashed.as_bytes()))
    }

    /// Applies one rule. `pubsub_all`: `acl-pubsub-default` is
    /// `allchannels` (what `reset` and new selectors start with).
    pub fn apply(&mut self, op: &[u8], pubsub_all: bool) -> Result<(), RuleError> {
        if op.is_empty() {
            return Ok(());
        }
        let is = |word: &str| op.eq_ignore_ascii_case(word.as_bytes());
        if is("on") {
            self.enabled = true;
        } else if is("off") {
            self.enabled = false;
        } else if is("skip-sanitize-payload") {
            self.sanitize_payload = Some(false);
        } else if is("sanitize-payload") {
            self.sanitize_payload = Some(true);
        } else if is("nopass") {
            self.nopass = true;
            self.passwords.clear();
        } else if is("resetpass") {
            self.nopass = false;
            self.passwords.clear();
        } else if op[0] == b'>' || op[0] == b'#' {
            let hash =
                if op[0] == b'>' { hash_password(&op[1..]) } else { checked_hash(&op[1..])? };
            if !self.passwords.contains(&hash) {
                self.passwords.push(hash);
            }
            self.nopass = false;
        } else if op[0] == b'<' || op[0] == b'!' {
            let hash =
                if op[0] == b'<' { hash_password(&op[1..]) } else { checked_hash(&op[1..])? };
            let at =
                self.passwords.iter().position(|p| *p == hash).ok_or(RuleError::NoSuchPassword)?;
            self.passwords.remove(at);
        } else if op[0] == b'(' && op[op.len() - 1] == b')' {
            let mut selector = Selector::new(false, pubsub_all);
            let rules = ringdb_protocol::parse::split_args(&op[1..op.len() - 1])
                .ok_or(RuleError::Syntax)?;
            for rule in rules {
                selector.apply(&rule)?;
            }
            self.selectors.push(selector);
        } else if is("clearselectors") {
            self.selectors.truncate(1);
        } else if is("reset") {
            self.nopass = false;
            self.passwords.clear();
            let root = &mut self.selectors[0];
            root.apply(b"resetkeys")?;
            root.apply(if pubsub_all { b"allchannels" } else { b"resetchannels" })?;
            root.apply(b"-@all")?;
            self.enabled = false;
            self.sanitize_payload = Some(true);
            self.selectors.truncate(1);
        } else {
            self.selectors[0].apply(op)?;
        }
        Ok(())
    }

    /// Applies a list of rules, all or none: the rules of one ACL SETUSER
    /// (selectors may be spread over several arguments). The error is ACL
    /// SETUSER's text.
    pub fn apply_all(&mut self, rules: &[Bytes], pubsub_all: bool) -> Result<(), String> {
        let merged = merge_selector_args(rules).map_err(|start| {
            format!(
                "ERR Unmatched parenthesis in acl selector starting at '{}'.",
                String::from_utf8_lossy(&rules[start])
            )
        })?;
        let mut staged = self.clone();
        for op in &merged {
            staged.apply(op, pubsub_all).map_err(|e| {
                format!(
                    "ERR Error in ACL SETUSER modifier '{}': {}",
                    String::from_utf8_lossy(op),
                    e.text()
                )
            })?;
        }
        *self = staged;
        Ok(())
    }

    /// The user in the rules that rebuild it (ACL LIST, ACL SAVE), after
    /// `user <name> `.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for flag in self.flags() {
            out.push_str(flag);
            out.push(' ');
        }
        for p in &self.passwords {
            out.push('#');
            out.push_str(p);
            out.push(' ');
        }
        for (i, s) in self.selectors.iter().enumerate() {
            if i == 0 {
                out.push_str(&s.describe());
            } else {
                out.push_str(&format!(" ({})", s.describe()));
            }
        }
        out
    }

    /// ACL GETUSER's `flags`, in Redis's order.
    pub fn flags(&self) -> Vec<&'static str> {
        let mut flags = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            flags.push("nopass");
        }
        match self.sanitize_payload {
            Some(false) => flags.push("skip-sanitize-payload"),
            Some(true) => flags.push("sanitize-payload"),
            None => {}
        }
        flags
    }

    /// Whether the user may run `reg` with `args`: allowed when one
    /// selector allows it; otherwise the error Redis would pick (Redis's
    /// `ACLCheckAllUserCommandPerm`: a key or channel beats the command,
    /// and the furthest argument wins).
    pub fn check(&self, reg: &Registered, args: &[Bytes]) -> Verdict {
        if self.unrestricted() {
            return Verdict::Allowed;
        }
        let mut relevant = Verdict::DeniedCommand;
        for s in &self.selectors {
            let verdict = s.check(reg, args);
            if verdict == Verdict::Allowed {
                return verdict;
            }
            if verdict.rank() > relevant.rank()
                || (verdict.rank() == relevant.rank() && verdict.position() > relevant.position())
            {
                relevant = verdict;
            }
        }
        relevant
    }

    /// Whether the user may read `key` (what it is shown of hot keys).
    pub fn may_read(&self, key: &[u8]) -> bool {
        self.unrestricted() || self.key_allowed(key, super::READ)
    }

    /// Whether `key` may be used with `access` by some selector.
    pub fn key_allowed(&self, key: &[u8], access: u8) -> bool {
        self.selectors.iter().any(|s| s.key_allowed(key, access))
    }

    /// Whether some selector allows `reg` and every key with `access`
    /// (Redis's `ACLUserCheckCmdWithUnrestrictedKeyAccess`: SCAN-like
    /// commands in scripts, KEYS, …).
    pub fn every_key_allowed(&self, reg: &Registered, args: &[Bytes], access: u8) -> bool {
        self.selectors
            .iter()
            .any(|s| s.check(reg, args) == Verdict::Allowed && s.every_key_allowed(access))
    }

    /// Whether a channel may be used by some selector.
    pub fn channel_allowed(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.selectors.iter().any(|s| s.channel_allowed(channel, is_pattern))
    }

    /// Whether a subscriber of the old rules keeps every subscription under
    /// `self` (Redis's `ACLKillPubsubClientsIfNeeded` fast paths): when
    /// this is false, the old user's subscribers must be checked one by
    /// one.
    pub fn keeps_channels_of(&self, old: &User) -> bool {
        if self.selectors.iter().any(|s| s.all_channels()) {
            return true;
        }
        if old.selectors.iter().any(|s| s.all_channels()) {
            return false;
        }
        let upcoming: Vec<&Bytes> = self.selectors.iter().flat_map(|s| s.channels()).collect();
        old.selectors.iter().flat_map(|s| s.channels()).all(|c| upcoming.contains(&c))
    }

    /// The channel patterns of every selector (what a subscriber is
    /// checked against after a change that takes channels away).
    pub fn all_channel_patterns(&self) -> Option<Vec<Bytes>> {
        if self.selectors.iter().any(|s| s.all_channels()) {
            return None;
        }
        Some(self.selectors.iter().flat_map(|s| s.channels().iter().cloned()).collect())
    }
}

/// SHA-256 of a password in lowercase hex (Redis's `ACLHashPassword`).
pub fn hash_password(password: &[u8]) -> String {
    let digest = Sha256::digest(password);
    let mut hex = String::with_capacity(64);
    for b in digest {
        hex.push_str(&format!("{b:02x}"));
    }
    hex
}

fn checked_hash(hash: &[u8]) -> Result<String, RuleError> {
    if hash.len() != 64 || !hash.iter().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c)) {
        return Err(RuleError::BadHash);
    }
    Ok(String::from_utf8_lossy(hash).into_owned())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0, |d, (x, y)| d | (x ^ y)) == 0
}

/// Joins a selector written over several arguments (`(~a` `+get)`) into one
/// (Redis's `ACLMergeSelectorArguments`); `Err(i)`: the argument where an
/// unclosed selector starts.
pub fn merge_selector_args(args: &[Bytes]) -> Result<Vec<Vec<u8>>, usize> {
    let mut out = Vec::with_capacity(args.len());
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (i, op) in args.iter().enumerate() {
        if let Some((_, selector)) = open.as_mut() {
            selector.push(b' ');
            selector.extend_from_slice(op);
            if op.last() == Some(&b')') {
                out.push(open.take().expect("open").1);
            }
            continue;
        }
        if op.first() == Some(&b'(') && op.last() != Some(&b')') {
            open = Some((i, op.to_vec()));
            continue;
        }
        out.push(op.to_vec());
    }
    match open {
        Some((start, _)) => Err(start),
        None => Ok(out),
    }
}

/// Whether a user name may be used (no spaces or NULs).
pub fn valid_name(name: &[u8]) -> bool {
    !has_spaces(name)
}
