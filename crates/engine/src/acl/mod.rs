//! Access control as Redis 7.0 has it (`acl.c`): users, their selectors of
//! commands, keys and channels, the rule grammar that builds them, the
//! check every command passes, and the ACL log.
//!
//! Users are immutable once built and shared as `Arc<User>`: ACL SETUSER
//! builds a new user and swaps it into the [`Acl`] registry, and bumps its
//! generation. A connection keeps its user's `Arc` and compares one
//! counter per read to notice a change, so the check on the data path
//! takes no lock; for the default user (every command, key and channel)
//! it is a single flag test.

mod log;
mod selector;
mod user;

pub use log::{AclLog, Context, LogEntry, Reason};
pub use selector::{
    access_of, category_by_name, channel_in, KeyPattern, Selector, READ, READ_WRITE, WRITE,
};
pub use user::{hash_password, merge_selector_args, valid_name, User};

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

/// The process's users: one registry, as there is one command table.
pub fn registry() -> &'static Acl {
    static ACL: OnceLock<Acl> = OnceLock::new();
    ACL.get_or_init(Acl::default)
}

fn next_uid() -> u32 {
    static NEXT: AtomicU32 = AtomicU32::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// What the check found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    DeniedCommand,
    /// The argument at this position is a key the user may not use so.
    DeniedKey(usize),
    /// The argument at this position is a channel the user may not use.
    DeniedChannel(usize),
}

impl Verdict {
    /// Redis's `ACL_DENIED_*` numbers, which decide which error is reported
    /// when selectors disagree.
    fn rank(self) -> u8 {
        match self {
            Verdict::Allowed => 0,
            Verdict::DeniedCommand => 1,
            Verdict::DeniedKey(_) => 2,
            Verdict::DeniedChannel(_) => 4,
        }
    }

    fn position(self) -> usize {
        match self {
            Verdict::DeniedKey(p) | Verdict::DeniedChannel(p) => p,
            _ => 0,
        }
    }

    /// The `-NOPERM` error a refused command gets (Redis's
    /// `processCommand`).
    pub fn error(self, full_name: &str) -> String {
        match self {
            Verdict::Allowed => String::new(),
            Verdict::DeniedCommand => {
                format!("NOPERM this user has no permissions to run the '{full_name}' command")
            }
            Verdict::DeniedKey(_) => {
                "NOPERM this user has no permissions to access one of the keys used as arguments".into()
            }
            Verdict::DeniedChannel(_) => {
                "NOPERM this user has no permissions to access one of the channels used as arguments".into()
            }
        }
    }

    /// What a script's `redis.call` gets (Redis's `getAclErrorMessage`).
    pub fn script_error(self) -> String {
        let why = match self {
            Verdict::Allowed => return String::new(),
            Verdict::DeniedCommand => "can't run this command or subcommand",
            Verdict::DeniedKey(_) => {
                "can't access at least one of the keys mentioned in the command arguments"
            }
            Verdict::DeniedChannel(_) => "can't publish to the channel mentioned in the command",
        };
        format!("The user executing the script {why}")
    }

    /// What EXEC answers for a queued command the rules no longer allow.
    pub fn exec_error(self) -> String {
        let why = match self {
            Verdict::Allowed => return String::new(),
            Verdict::DeniedCommand => "no permission to execute the command or subcommand",
            Verdict::DeniedKey(_) => "no permission to touch the specified keys",
            Verdict::DeniedChannel(_) => {
                "no permission to access one of the channels used as arguments"
            }
        };
        format!(
            "NOPERM ACLs rules changed between the moment the transaction was accumulated and the \
             EXEC call. This command is no longer allowed for the following reason: {why}"
        )
    }

    /// The log entry's reason and the argument it names, if any.
    pub fn reason(self) -> (Reason, Option<usize>) {
        match self {
            Verdict::DeniedKey(p) => (Reason::Key, Some(p)),
            Verdict::DeniedChannel(p) => (Reason::Channel, Some(p)),
            _ => (Reason::Command, None),
        }
    }
}

/// Why a rule was refused (Redis's errno values in `ACLSetUser`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleError {
    Syntax,
    Unknown,
    KeyAfterAll,
    ChannelAfterAll,
    NoSuchPassword,
    BadHash,
    Duplicate,
    FirstArgOfSubcommand,
}

impl RuleError {
    /// Redis's `ACLSetUserStringError`.
    pub fn text(self) -> &'static str {
        match self {
            RuleError::Syntax => "Syntax error",
            RuleError::Unknown => "Unknown command or category name in ACL",
            RuleError::KeyAfterAll => {
                "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not \
                 have any effect. Try 'resetkeys' to start with an empty list of patterns"
            }
            RuleError::ChannelAfterAll => {
                "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does \
                 not have any effect. Try 'resetchannels' to start with an empty list of channels"
            }
            RuleError::NoSuchPassword => "The password you are trying to remove from the user does not exist",
            RuleError::BadHash => {
                "The password hash must be exactly 64 characters and contain only lowercase hexadecimal \
                 characters"
            }
            RuleError::Duplicate => "Duplicate user found. A user can only be defined once in config files",
            RuleError::FirstArgOfSubcommand => "Allowing first-arg of a subcommand is not supported",
        }
    }
}

/// Every user by name, in name order (as Redis's radix tree lists them).
#[derive(Clone, Debug)]
pub struct Users {
    by_name: BTreeMap<String, Arc<User>>,
}

impl Default for Users {
    fn default() -> Self {
        let mut by_name = BTreeMap::new();
        by_name.insert("default".to_string(), Arc::new(User::default_user()));
        Users { by_name }
    }
}

impl Users {
    pub fn get(&self, name: &str) -> Option<&Arc<User>> {
        self.by_name.get(name)
    }

    pub fn default_user(&self) -> &Arc<User> {
        self.by_name.get("default").expect("the default user always exists")
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<User>> {
        self.by_name.values()
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// ACL SETUSER: creates or changes a user, all rules or none. Returns
    /// the user as it was (if it existed) and as it is now.
    pub fn set_user(
        &mut self,
        name: &str,
        rules: &[bytes::Bytes],
        pubsub_all: bool,
    ) -> Result<(Option<Arc<User>>, Arc<User>), String> {
        let old = self.by_name.get(name).cloned();
        let mut user = old.as_deref().cloned().unwrap_or_else(|| User::new(name, pubsub_all));
        user.apply_all(rules, pubsub_all)?;
        let user = Arc::new(user);
        self.by_name.insert(name.to_string(), user.clone());
        Ok((old, user))
    }

    /// Removes a user (never `default`).
    pub fn remove(&mut self, name: &str) -> Option<Arc<User>> {
        if name == "default" {
            return None;
        }
        self.by_name.remove(name)
    }

    /// The ACL file's text (ACL SAVE), also ACL LIST's lines.
    pub fn describe(&self) -> Vec<String> {
        self.by_name.values().map(|u| format!("user {} {}", u.name(), u.describe())).collect()
    }

    /// Users from `user …` lines: an ACL file (ACL LOAD, `aclfile`), with
    /// Redis's per-line errors, all collected; nothing is kept when any
    /// line fails. `file` names the file in the errors.
    pub fn from_acl_file(text: &[u8], file: &str, pubsub_all: bool) -> Result<Users, String> {
        let mut users = BTreeMap::new();
        let mut errors = String::new();
        for (i, line) in text.split(|&c| c == b'\n').enumerate() {
            let line = trim(line);
            let linenum = i + 1;
            if line.is_empty() {
                continue;
            }
            // Redis splits on single spaces here (no quoting in ACL files).
            let argv: Vec<&[u8]> = line.split(|&c| c == b' ').collect();
            if argv[0] != b"user" || argv.len() < 2 {
                errors.push_str(&format!(
                    "{file}:{linenum} should start with user keyword followed by the username. "
                ));
                continue;
            }
            if !valid_name(argv[1]) {
                errors.push_str(&format!(
                    "'{file}:{linenum}: username '{}' contains invalid characters. ",
                    String::from_utf8_lossy(argv[1])
                ));
                continue;
            }
            let name = String::from_utf8_lossy(argv[1]).into_owned();
            if users.contains_key(&name) {
                errors.push_str(&format!(
                    "WARNING: Duplicate user '{name}' found on line {linenum}. "
                ));
                continue;
            }
            let rules: Vec<bytes::Bytes> =
                argv[2..].iter().map(|r| bytes::Bytes::copy_from_slice(r)).collect();
            let Ok(merged) = merge_selector_args(&rules) else {
                errors.push_str(&format!(
                    "{file}:{linenum}: Unmatched parenthesis in selector definition."
                ));
                continue;
            };
            let mut user = User::new(&name, pubsub_all);
            let mut syntax_error = false;
            for op in merged {
                let op = trim(&op).to_vec();
                if let Err(e) = user.apply(&op, pubsub_all) {
                    if e == RuleError::Unknown {
                        errors.push_str(&format!(
                            "{file}:{linenum}: Error in applying operation '{}': {}. ",
                            String::from_utf8_lossy(&op),
                            e.text()
                        ));
                    } else if !syntax_error {
                        errors.push_str(&format!("{file}:{linenum}: {}. ", e.text()));
                        syntax_error = true;
                    }
                }
            }
            users.insert(name, Arc::new(user));
        }
        if !errors.is_empty() {
            errors.push_str(
                "WARNING: ACL errors detected, no change to the previously active ACL rules was performed",
            );
            return Err(errors);
        }
        users.entry("default".to_string()).or_insert_with(|| Arc::new(User::default_user()));
        Ok(Users { by_name: users })
    }

    /// Users from the configuration's `user` lines, applied in order at
    /// start-up (Redis's `ACLLoadConfiguredUsers`): `default` may be
    /// redefined (from a reset), any other name only once.
    pub fn from_config_lines(
        lines: &[Vec<bytes::Bytes>],
        default: Arc<User>,
        pubsub_all: bool,
    ) -> Result<Users, String> {
        let mut users = Users::default();
        users.by_name.insert("default".into(), default);
        let mut seen = std::collections::HashSet::new();
        for line in lines {
            let Some(name) = line.first() else { continue };
            let name_text = String::from_utf8_lossy(name).into_owned();
            if !valid_name(name) {
                return Err("Spaces not allowed in ACL usernames".into());
            }
            if !seen.insert(name_text.clone()) {
                return Err(format!(
                    "Error in user declaration '{name_text}': {}",
                    RuleError::Duplicate.text()
                ));
            }
            let mut user = match name_text.as_str() {
                "default" => {
                    let mut u = (**users.default_user()).clone();
                    u.apply(b"reset", pubsub_all).expect("reset is valid");
                    u
                }
                _ => User::new(&name_text, pubsub_all),
            };
            let merged = merge_selector_args(&line[1..]).map_err(|_| {
                format!("Unmatched parenthesis in acl selector of user '{name_text}'")
            })?;
            for op in merged {
                user.apply(&op, pubsub_all).map_err(|e| {
                    format!(
                        "Error loading ACL rule '{}' for the user named '{name_text}': {}",
                        String::from_utf8_lossy(&op),
                        e.text()
                    )
                })?;
            }
            if !user.enabled() {
                tracing::info!(
                    "The user '{name_text}' is disabled (there is no 'on' modifier in the user \
                     description). Make sure this is not a configuration error."
                );
            }
            users.by_name.insert(name_text, Arc::new(user));
        }
        Ok(users)
    }
}

fn trim(s: &[u8]) -> &[u8] {
    let is_ws = |c: &u8| matches!(c, b' ' | b'\t' | b'\r' | b'\n');
    let start = s.iter().position(|c| !is_ws(c)).unwrap_or(s.len());
    let end = s.iter().rposition(|c| !is_ws(c)).map_or(start, |e| e + 1);
    &s[start..end]
}

/// The ACL's generation, read by every command of every core: on a cache
/// line of its own, away from the users' lock, which AUTH and new
/// connections write when they take it.
#[derive(Debug)]
#[repr(align(64))]
struct Generation(AtomicU64);

/// The process's users, their generation, and the ACL log: shared by every
/// core. Locks are taken by ACL commands, AUTH, and a connection whose
/// user changed, never by a command's check.
#[derive(Debug)]
pub struct Acl {
    users: RwLock<Users>,
    generation: Generation,
    pub log: Mutex<AclLog>,
    /// `acllog-max-len`.
    log_max_len: std::sync::atomic::AtomicUsize,
}

impl Default for Acl {
    fn default() -> Self {
        Acl {
            users: Default::default(),
            generation: Generation(AtomicU64::new(0)),
            log: Default::default(),
            log_max_len: std::sync::atomic::AtomicUsize::new(128),
        }
    }
}

impl Acl {
    /// Bumped on every change; connections compare it to their copy.
    pub fn generation(&self) -> u64 {
        self.generation.0.load(Ordering::Acquire)
    }

    /// Reads the users.
    pub fn read<R>(&self, f: impl FnOnce(&Users) -> R) -> R {
        f(&self.users.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Changes the users and bumps the generation.
    pub fn change<R>(&self, f: impl FnOnce(&mut Users) -> R) -> R {
        let mut users = self.users.write().unwrap_or_else(|e| e.into_inner());
        let out = f(&mut users);
        self.generation.0.fetch_add(1, Ordering::AcqRel);
        out
    }

    /// A user by name (the current version).
    pub fn user(&self, name: &str) -> Option<Arc<User>> {
        self.read(|u| u.get(name).cloned())
    }

    /// The current version of the user with this uid, if it still exists.
    pub fn by_uid(&self, uid: u32) -> Option<Arc<User>> {
        self.read(|u| u.iter().find(|u| u.uid() == uid).cloned())
    }

    /// Records a refusal or a failed authentication.
    pub fn log(&self, entry: LogEntry) {
        let max_len = self.log_max_len.load(Ordering::Relaxed);
        self.log.lock().unwrap_or_else(|e| e.into_inner()).add(entry, max_len);
    }

    /// `acllog-max-len`: the oldest entries past it go.
    pub fn set_log_max_len(&self, max_len: usize) {
        self.log_max_len.store(max_len, Ordering::Relaxed);
        self.log.lock().unwrap_or_else(|e| e.into_inner()).trim(max_len);
    }

    pub fn default_user(&self) -> Arc<User> {
        self.read(|u| u.default_user().clone())
    }

    /// Whether a new connection must authenticate (Redis's
    /// `authRequired`): the default user has a password or is off.
    pub fn auth_required(&self) -> bool {
        self.read(|u| {
            let d = u.default_user();
            !d.nopass() || !d.enabled()
        })
    }

    /// `requirepass`: the default user's password (`None`: nopass).
    pub fn set_default_password(&self, password: Option<&[u8]>) {
        self.change(|users| {
            let mut d = (**users.default_user()).clone();
            d.apply(b"resetpass", false).expect("valid");
            match password {
                Some(p) => {
                    let mut op = vec![b'>'];
                    op.extend_from_slice(p);
                    d.apply(&op, false).expect("a password is always valid");
                }
                None => d.apply(b"nopass", false).expect("valid"),
            }
            users.by_name.insert("default".into(), Arc::new(d));
        })
    }

    /// Replaces every user (ACL LOAD, start-up); returns the old set.
    pub fn replace(&self, new: Users) -> Users {
        self.change(|users| std::mem::replace(users, new))
    }
}

#[cfg(test)]
mod tests;
