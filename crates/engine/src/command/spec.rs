//! One row of the command table: everything ringdb knows about a command.
//!
//! The router reads a row to check arity and find the keys (and so the owning
//! shard) before anything runs; `COMMAND INFO/DOCS/COUNT/LIST/GETKEYS` print
//! rows; the shard calls the row's handler. Rows mirror Redis 7's command JSON
//! (arity, flags, key specs, ACL categories) and a test checks them against it.

use super::ctx::Ctx;
use super::error::CmdResult;
use crate::keyspace::Value;
use crate::shard::SlotMap;
use bytes::Bytes;

/// A shard-side command implementation: reads its arguments, works on the
/// keyspace in `ctx`, writes its reply to `ctx.out` (or returns an error that
/// the caller writes).
pub type Handler = fn(&mut Ctx, &[Bytes]) -> CmdResult;

/// Command flags, as Redis names them in COMMAND INFO.
pub mod flags {
    pub const WRITE: u32 = 1 << 0;
    pub const READONLY: u32 = 1 << 1;
    pub const DENYOOM: u32 = 1 << 2;
    pub const ADMIN: u32 = 1 << 3;
    pub const PUBSUB: u32 = 1 << 4;
    pub const NOSCRIPT: u32 = 1 << 5;
    pub const BLOCKING: u32 = 1 << 6;
    pub const LOADING: u32 = 1 << 7;
    pub const STALE: u32 = 1 << 8;
    pub const SKIP_MONITOR: u32 = 1 << 9;
    pub const SKIP_SLOWLOG: u32 = 1 << 10;
    pub const ASKING: u32 = 1 << 11;
    pub const FAST: u32 = 1 << 12;
    pub const NO_AUTH: u32 = 1 << 13;
    pub const MAY_REPLICATE: u32 = 1 << 14;
    pub const SENTINEL: u32 = 1 << 15;
    pub const ONLY_SENTINEL: u32 = 1 << 16;
    pub const NO_MANDATORY_KEYS: u32 = 1 << 17;
    pub const PROTECTED: u32 = 1 << 18;
    pub const NO_ASYNC_LOADING: u32 = 1 << 19;
    pub const NO_MULTI: u32 = 1 << 20;
    pub const ALLOW_BUSY: u32 = 1 << 21;
    /// ringdb: the command can be subscribed to as `<NAME>.WATCH`.
    pub const WATCHABLE: u32 = 1 << 22;
    /// The command may reach keys it was not given (SCAN, RANDOMKEY); hidden
    /// from COMMAND INFO, as in Redis.
    pub const TOUCHES_ARBITRARY_KEYS: u32 = 1 << 23;
    /// ringdb: the command runs a script (EVAL, FCALL, …), which may touch
    /// keys it did not declare, on any shard. Hidden from COMMAND INFO.
    pub const RUNS_SCRIPT: u32 = 1 << 24;
    /// ringdb: the command may change its key in another database than the
    /// client's (MOVE, COPY … DB): transactions lock, and a script's journal
    /// saves, the key in every database. Hidden from COMMAND INFO.
    pub const OTHER_DBS: u32 = 1 << 25;
    /// ringdb: a hot key's read copy on any core may answer it (GET with
    /// `hotkeys-replicate-reads`), and the owner fills copies from its
    /// reply. Hidden from COMMAND INFO.
    pub const READ_COPY: u32 = 1 << 26;
    /// ringdb, on a container: its subcommands leave CLIENT CACHING for the
    /// command after them (CLIENT, as Redis's `resetClient`). Hidden from
    /// COMMAND INFO.
    pub const KEEPS_CACHING: u32 = 1 << 27;
    /// ringdb: runs in a subscriber's or watcher's push mode under RESP2
    /// (SUBSCRIBE and its kin, the `*.WATCH` rows, PING, QUIT, RESET);
    /// every other row gets Redis's "only … allowed in this context".
    /// Hidden from COMMAND INFO.
    pub const PUSH_MODE: u32 = 1 << 28;
    /// ringdb: runs at once inside MULTI instead of being queued (MULTI,
    /// EXEC, DISCARD, WATCH, QUIT, RESET). Hidden from COMMAND INFO.
    pub const CONTROLS_MULTI: u32 = 1 << 29;
    /// ringdb: its replies are pushes that CLIENT REPLY OFF/SKIP do not
    /// hold back (the (un)subscribe commands, HOTKEYS.WATCH/UNWATCH:
    /// Redis's CLIENT_PUSHING). Hidden from COMMAND INFO.
    pub const PUSH_REPLY: u32 = 1 << 30;
    /// ringdb: a write whose effect is the same wherever it runs on the
    /// same data (LPUSH, HSET, ZADD, INCR …): the replication stream
    /// carries the command as it ran instead of its key's new state, when
    /// it changed only its one key. Hidden from COMMAND INFO.
    pub const AS_IS: u32 = 1 << 31;

    /// Names COMMAND INFO prints, in Redis's order (hidden flags omitted).
    pub const NAMES: &[(u32, &str)] = &[
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (PUBSUB, "pubsub"),
        (NOSCRIPT, "noscript"),
        (BLOCKING, "blocking"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (SKIP_MONITOR, "skip_monitor"),
        (SKIP_SLOWLOG, "skip_slowlog"),
        (ASKING, "asking"),
        (FAST, "fast"),
        (NO_AUTH, "no_auth"),
        (NO_MANDATORY_KEYS, "no_mandatory_keys"),
        (NO_ASYNC_LOADING, "no_async_loading"),
        (NO_MULTI, "no_multi"),
        (ALLOW_BUSY, "allow_busy"),
    ];

    /// Names as written in Redis's command JSON (`command_flags`), for the
    /// conformance test.
    pub const JSON_NAMES: &[(u32, &str)] = &[
        (WRITE, "WRITE"),
        (READONLY, "READONLY"),
        (DENYOOM, "DENYOOM"),
        (ADMIN, "ADMIN"),
        (PUBSUB, "PUBSUB"),
        (NOSCRIPT, "NOSCRIPT"),
        (BLOCKING, "BLOCKING"),
        (LOADING, "LOADING"),
        (STALE, "STALE"),
        (SKIP_MONITOR, "SKIP_MONITOR"),
        (SKIP_SLOWLOG, "SKIP_SLOWLOG"),
        (ASKING, "ASKING"),
        (FAST, "FAST"),
        (NO_AUTH, "NO_AUTH"),
        (MAY_REPLICATE, "MAY_REPLICATE"),
        (SENTINEL, "SENTINEL"),
        (ONLY_SENTINEL, "ONLY_SENTINEL"),
        (NO_MANDATORY_KEYS, "NO_MANDATORY_KEYS"),
        (PROTECTED, "PROTECTED"),
        (NO_ASYNC_LOADING, "NO_ASYNC_LOADING"),
        (NO_MULTI, "NO_MULTI"),
        (ALLOW_BUSY, "ALLOW_BUSY"),
        (TOUCHES_ARBITRARY_KEYS, "TOUCHES_ARBITRARY_KEYS"),
    ];
}

/// ACL categories (`@string`, `@keyspace`, …).
pub mod acl {
    pub const KEYSPACE: u32 = 1 << 0;
    pub const READ: u32 = 1 << 1;
    pub const WRITE: u32 = 1 << 2;
    pub const SET: u32 = 1 << 3;
    pub const SORTEDSET: u32 = 1 << 4;
    pub const LIST: u32 = 1 << 5;
    pub const HASH: u32 = 1 << 6;
    pub const STRING: u32 = 1 << 7;
    pub const BITMAP: u32 = 1 << 8;
    pub const HYPERLOGLOG: u32 = 1 << 9;
    pub const GEO: u32 = 1 << 10;
    pub const STREAM: u32 = 1 << 11;
    pub const PUBSUB: u32 = 1 << 12;
    pub const ADMIN: u32 = 1 << 13;
    pub const FAST: u32 = 1 << 14;
    pub const SLOW: u32 = 1 << 15;
    pub const BLOCKING: u32 = 1 << 16;
    pub const DANGEROUS: u32 = 1 << 17;
    pub const CONNECTION: u32 = 1 << 18;
    pub const TRANSACTION: u32 = 1 << 19;
    pub const SCRIPTING: u32 = 1 << 20;

    pub const NAMES: &[(u32, &str)] = &[
        (KEYSPACE, "keyspace"),
        (READ, "read"),
        (WRITE, "write"),
        (SET, "set"),
        (SORTEDSET, "sortedset"),
        (LIST, "list"),
        (HASH, "hash"),
        (STRING, "string"),
        (BITMAP, "bitmap"),
        (HYPERLOGLOG, "hyperloglog"),
        (GEO, "geo"),
        (STREAM, "stream"),
        (PUBSUB, "pubsub"),
        (ADMIN, "admin"),
        (FAST, "fast"),
        (SLOW, "slow"),
        (BLOCKING, "blocking"),
        (DANGEROUS, "dangerous"),
        (CONNECTION, "connection"),
        (TRANSACTION, "transaction"),
        (SCRIPTING, "scripting"),
    ];
}

/// Key-spec flags (how a command uses the keys a spec finds).
pub mod keyflags {
    pub const RO: u32 = 1 << 0;
    pub const RW: u32 = 1 << 1;
    pub const OW: u32 = 1 << 2;
    pub const RM: u32 = 1 << 3;
    pub const ACCESS: u32 = 1 << 4;
    pub const UPDATE: u32 = 1 << 5;
    pub const INSERT: u32 = 1 << 6;
    pub const DELETE: u32 = 1 << 7;
    pub const NOT_KEY: u32 = 1 << 8;
    pub const INCOMPLETE: u32 = 1 << 9;
    pub const VARIABLE_FLAGS: u32 = 1 << 10;

    pub const NAMES: &[(u32, &str)] = &[
        (RO, "RO"),
        (RW, "RW"),
        (OW, "OW"),
        (RM, "RM"),
        (ACCESS, "access"),
        (UPDATE, "update"),
        (INSERT, "insert"),
        (DELETE, "delete"),
        (NOT_KEY, "not_key"),
        (INCOMPLETE, "incomplete"),
        (VARIABLE_FLAGS, "variable_flags"),
    ];
}

/// Where the search for a spec's keys begins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BeginSearch {
    /// At this argument index.
    Index(i32),
    /// After the first argument equal to `keyword`, searching from
    /// `startfrom` (negative: from the end, backwards).
    Keyword { keyword: &'static str, startfrom: i32 },
    /// Only the command's own parsing knows (SORT's STORE and patterns); its
    /// keys come from the row's `get_keys`, as Redis's getkeys functions.
    Unknown,
}

/// How the keys continue from where the search began.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FindKeys {
    /// Up to `lastkey` (relative to the first key; negative counts from the
    /// end of the arguments), every `step`-th argument; `limit` > 1 means
    /// "only 1/limit of the remaining arguments".
    Range { lastkey: i32, step: i32, limit: i32 },
    /// The number of keys is the argument at `keynumidx` (relative to the
    /// begin index); keys start `firstkey` after it, every `step`-th.
    Keynum { keynumidx: i32, firstkey: i32, step: i32 },
    /// See [`BeginSearch::Unknown`].
    Unknown,
}

/// One key spec: where a group of key arguments is and how it is used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeySpec {
    pub flags: u32,
    pub begin: BeginSearch,
    pub find: FindKeys,
    pub notes: Option<&'static str>,
}

impl KeySpec {
    /// Keys at `pos`, through `lastkey` (relative), every `step`-th.
    pub const fn range(pos: i32, lastkey: i32, step: i32, flags: u32) -> Self {
        KeySpec {
            flags,
            begin: BeginSearch::Index(pos),
            find: FindKeys::Range { lastkey, step, limit: 0 },
            notes: None,
        }
    }

    /// The single key at `pos`.
    pub const fn one(pos: i32, flags: u32) -> Self {
        Self::range(pos, 0, 1, flags)
    }

    /// `numkeys key [key ...]` with the count at `pos`.
    pub const fn keynum(pos: i32, flags: u32) -> Self {
        KeySpec {
            flags,
            begin: BeginSearch::Index(pos),
            find: FindKeys::Keynum { keynumidx: 0, firstkey: 1, step: 1 },
            notes: None,
        }
    }

    /// Keys after `keyword`.
    pub const fn keyword(
        keyword: &'static str,
        startfrom: i32,
        find: FindKeys,
        flags: u32,
    ) -> Self {
        KeySpec { flags, begin: BeginSearch::Keyword { keyword, startfrom }, find, notes: None }
    }

    /// Keys only the command's parsing finds (see [`BeginSearch::Unknown`]).
    pub const fn unknown(flags: u32) -> Self {
        KeySpec { flags, begin: BeginSearch::Unknown, find: FindKeys::Unknown, notes: None }
    }

    pub const fn notes(mut self, notes: &'static str) -> Self {
        self.notes = Some(notes);
        self
    }
}

/// How a command runs.
#[derive(Clone, Copy)]
pub enum Exec {
    /// Runs against one keyspace that holds all of its keys: on the shard
    /// that owns them, on the connection's own shard when it has none, or,
    /// when its keys live on several shards, on a scratch copy gathered from
    /// their owners under the cross-shard transaction scheme.
    Shard(Handler),
    /// Splits its keys by shard, runs on each shard with that shard's keys
    /// (and the arguments that follow each key), and merges the replies.
    /// `atomic`: under the cross-shard transaction scheme, so that no client
    /// sees some shards' part done and others not (MGET, MSET).
    Split { handler: Handler, merge: Merge, atomic: bool },
    /// Runs on the connection's core: connection state, administration, and
    /// commands that visit every shard (DBSIZE, KEYS, SCAN, FLUSHALL, INFO).
    Node(NodeCommand),
    /// A container command (CLIENT, CONFIG, …): its subcommands are rows of
    /// their own.
    Container,
}

/// How the per-shard replies of a split command are combined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Merge {
    /// Each shard replies with an array, one element per key it was given;
    /// the result is one array in the original key order (MGET).
    Array,
    /// Each shard replies with an integer; the result is their sum (DEL).
    Sum,
    /// Each shard replies `+OK`; the result is `+OK` (MSET).
    Ok,
}

/// Commands the connection's core runs itself. The server implements each;
/// the table only names them, so that there is still one table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NodeCommand {
    Replconf,
    Sync,
    Replicaof,
    Subscribe,
    Unsubscribe,
    PSubscribe,
    PUnsubscribe,
    SSubscribe,
    SUnsubscribe,
    Publish,
    SPublish,
    PubSubChannels,
    PubSubNumSub,
    PubSubNumPat,
    PubSubShardChannels,
    PubSubShardNumSub,
    PubSubHelp,
    Multi,
    Exec,
    Discard,
    Watch,
    Unwatch,
    Ping,
    Echo,
    Hello,
    Auth,
    Select,
    Quit,
    Reset,
    SwapDb,
    DbSize,
    FlushDb,
    FlushAll,
    Keys,
    Scan,
    RandomKey,
    Info,
    Time,
    LastSave,
    Save,
    BgSave,
    BgRewriteAof,
    Shutdown,
    Debug,
    ScriptLoad,
    ScriptExists,
    ScriptFlush,
    ScriptKill,
    ScriptHelp,
    ScriptDebug,
    FunctionLoad,
    FunctionDelete,
    FunctionFlush,
    FunctionList,
    FunctionDump,
    FunctionRestore,
    FunctionStats,
    FunctionKill,
    FunctionHelp,
    ClientId,
    ClientSetName,
    ClientGetName,
    ClientSetInfo,
    ClientList,
    ClientInfo,
    ClientKill,
    ClientReply,
    ClientNoEvict,
    ClientNoTouch,
    ClientTracking,
    ClientCaching,
    ClientGetRedir,
    ClientTrackingInfo,
    ClientHelp,
    ClientUnblock,
    ClientPause,
    ClientUnpause,
    Command,
    CommandCount,
    CommandInfo,
    CommandDocs,
    CommandList,
    CommandGetKeys,
    CommandGetKeysAndFlags,
    CommandHelp,
    ConfigGet,
    ConfigSet,
    ConfigResetStat,
    ConfigRewrite,
    ConfigHelp,
    Monitor,
    Role,
    Wait,
    ClusterDisabled,
    SlowlogGet,
    SlowlogLen,
    SlowlogReset,
    SlowlogHelp,
    LatencyDoctor,
    LatencyGraph,
    LatencyHistogram,
    LatencyHistory,
    LatencyLatest,
    LatencyReset,
    LatencyHelp,
    MemoryStats,
    MemoryDoctor,
    MemoryMallocStats,
    MemoryPurge,
    /// MIGRATE: keys read on their shards, sent to another instance from
    /// this core.
    Migrate,
    /// `<NAME>.WATCH …`: a reactive query (rows made from each watchable
    /// row; see [`super::table`](mod@super::table)).
    QueryWatch,
    /// `<NAME>.UNWATCH fingerprint`.
    QueryUnwatch,
    HotkeysRules,
    HotkeysList,
    HotkeysTop,
    HotkeysHelp,
    HotkeysWatch,
    HotkeysUnwatch,
    AclCat,
    AclDelUser,
    AclDryRun,
    AclGenPass,
    AclGetUser,
    AclHelp,
    AclList,
    AclLoad,
    AclLog,
    AclSave,
    AclSetUser,
    AclUsers,
    AclWhoAmI,
}

/// Documentation (COMMAND DOCS, the README's command list, `redis-cli` hints).
#[derive(Clone, Copy, Debug)]
pub struct Doc {
    pub summary: &'static str,
    pub since: &'static str,
    pub group: &'static str,
    pub complexity: &'static str,
    /// The argument syntax as Redis's documentation writes it
    /// (`key value [NX | XX] [GET] [EX seconds | PX milliseconds]`);
    /// COMMAND DOCS derives its argument tree from it (see
    /// [`super::docs`]); where a value's name does not tell its type, write
    /// `name:type` (`increment:double`).
    pub syntax: &'static str,
    /// `Some((since, replaced_by))` for deprecated commands.
    pub deprecated: Option<(&'static str, &'static str)>,
    /// `(version, change)` pairs, oldest first (COMMAND DOCS `history`).
    pub history: &'static [(&'static str, &'static str)],
}

/// Redis's `getkeys_proc`: calls back with each key argument's position
/// and key flags.
pub type GetKeys = fn(&[Bytes], &mut dyn FnMut(usize, u32));

/// Whether a key lives on the shard a command runs on.
pub type KeyIsHere<'a> = dyn Fn(&[u8]) -> bool + 'a;

/// Keys a command reads that its arguments do not name but that it forms
/// from the data (SORT's BY and GET patterns). The router gathers them with
/// the named keys when they may live on another shard.
#[derive(Clone, Copy)]
pub struct FormedKeys {
    /// Whether the command may form a key for which `here` (is this key on
    /// the shard the command runs on?) says no, judged from its arguments
    /// alone. Only asked on a node of several shards.
    pub forms_elsewhere: fn(&[Bytes], here: &KeyIsHere<'_>) -> bool,
    /// The keys formed from the value of the command's first key.
    pub from_value: fn(&[Bytes], Option<&Value>) -> Vec<Bytes>,
}

impl FormedKeys {
    /// Whether `spec`'s command with `args` may form a key that does not live
    /// on the shard of its named keys (never with one shard).
    pub fn elsewhere(&self, spec: &CommandSpec, args: &[Bytes], slot_map: &SlotMap) -> bool {
        if slot_map.shards() == 1 {
            return false;
        }
        let mut first = None;
        spec.for_each_key(args, |i| {
            first.get_or_insert(i);
        });
        let Some(home) = first.and_then(|i| args.get(i)).map(|k| slot_map.shard_of_key(k)) else {
            return false;
        };
        (self.forms_elsewhere)(args, &|k| slot_map.shard_of_key(k) == home)
    }
}

/// A row of the command table.
#[derive(Clone, Copy)]
pub struct CommandSpec {
    /// Lower case; a subcommand's name is just its own word (`list`).
    pub name: &'static str,
    /// Redis's convention: n = exactly n arguments including the name,
    /// -n = at least n.
    pub arity: i32,
    pub flags: u32,
    /// ACL categories given explicitly; `@read`, `@write`, `@fast`, `@slow`,
    /// `@admin`, `@dangerous`, `@pubsub` and `@blocking` are implied by the
    /// flags, as in Redis.
    pub acl: u32,
    pub keys: &'static [KeySpec],
    pub exec: Exec,
    pub doc: Doc,
    /// Command tips (`nondeterministic_output`, `request_policy:all_shards`, …).
    pub tips: &'static [&'static str],
    pub subcommands: &'static [CommandSpec],
    /// For rows whose key specs say `VARIABLE_FLAGS`: the key flags these
    /// arguments really imply (what Redis's getkeys function reports; SET's
    /// key is `OW update`, or `RW access update` with GET).
    pub variable_key_flags: Option<fn(&[Bytes]) -> u32>,
    /// For rows with `unknown` key specs: every key argument and its flags,
    /// found by parsing the arguments (Redis's `getkeys_proc`).
    pub get_keys: Option<GetKeys>,
    pub formed_keys: Option<FormedKeys>,
    /// For rows that run a script: the flags the script of these arguments
    /// declared (its shebang or its function's), when this core knows it;
    /// the router derives the request's real flags from them (Redis's
    /// `evalGetCommandFlags`), as CLIENT PAUSE WRITE needs.
    pub script_flags: Option<ScriptFlagsOf>,
    /// What the row does for a client that turned the Lua debugger on
    /// (`SCRIPT DEBUG YES|SYNC`).
    pub debugs: Debugs,
    /// How a BLOCKING row waits: where its timeout is and what it waits
    /// for (`None` for every other row).
    pub blocks: Option<Blocks>,
    /// For an [`AS_IS`](flags::AS_IS) row whose arguments may make it
    /// depend on where it runs (SET … EX counts from the local clock):
    /// whether these arguments replicate as they are.
    pub as_is_when: Option<fn(&[Bytes]) -> bool>,
    /// The Pub/Sub channels its arguments name, for ACL channel rules
    /// (Redis's `getChannelsFromCommand`); `None` for rows that name none
    /// the ACL checks (UNSUBSCRIBE needs no permission).
    pub channels: Option<ChannelArgs>,
}

/// See [`CommandSpec::channels`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChannelArgs {
    /// The first argument is a channel published to (PUBLISH, SPUBLISH).
    Publish,
    /// Every argument is a channel subscribed to (SUBSCRIBE, SSUBSCRIBE).
    Subscribe,
    /// Every argument is a pattern subscribed to (PSUBSCRIBE): it must be
    /// one of the user's channel patterns as written.
    SubscribePattern,
}

impl ChannelArgs {
    /// Calls `f` with each channel argument's position and whether it is a
    /// pattern.
    pub fn for_each(self, args: &[Bytes], mut f: impl FnMut(usize, bool)) {
        match self {
            ChannelArgs::Publish => {
                if args.len() > 1 {
                    f(1, false)
                }
            }
            ChannelArgs::Subscribe => (1..args.len()).for_each(|i| f(i, false)),
            ChannelArgs::SubscribePattern => (1..args.len()).for_each(|i| f(i, true)),
        }
    }
}

/// See [`CommandSpec::blocks`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Blocks {
    pub timeout: TimeoutAt,
    pub waits: Waits,
}

/// Where a blocking command's timeout is, and so its unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeoutAt {
    /// The last argument, in seconds (BLPOP, BLMOVE, …).
    Last,
    /// The first argument after the name, in seconds (BLMPOP, BZMPOP).
    First,
    /// After `BLOCK`, before `STREAMS`, in milliseconds (XREAD,
    /// XREADGROUP); without it the command does not block.
    AfterBlock,
}

/// What a blocked client waits for, and which errors end its wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waits {
    /// An element in any of its keys (BLPOP, BZPOPMIN, BLMPOP, …).
    Pop,
    /// An element in its source, the first key (BLMOVE, BRPOPLPUSH): a
    /// failure on the destination while the source is a list is its reply.
    Move,
    /// New entries in its streams; `$` means the last id when it started
    /// waiting (XREAD).
    Entries,
    /// New entries for its consumer group; a stream or group that goes
    /// away ends the wait with an error (XREADGROUP).
    GroupEntries,
}

/// See [`CommandSpec::debugs`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Debugs {
    /// Runs as it always does.
    No,
    /// Runs its script (`args[1]`) in a debugging session (EVAL).
    Body,
    /// Is refused: the debugger needs the script's source (EVALSHA).
    Refuses,
}

/// See [`CommandSpec::script_flags`].
pub type ScriptFlagsOf = fn(&crate::scripting::Scripting, &[Bytes]) -> Option<u32>;

impl CommandSpec {
    pub const fn new(name: &'static str, arity: i32, flags: u32, exec: Exec) -> Self {
        CommandSpec {
            name,
            arity,
            flags,
            acl: 0,
            keys: &[],
            exec,
            doc: Doc {
                summary: "",
                since: "1.0.0",
                group: "generic",
                complexity: "",
                syntax: "",
                deprecated: None,
                history: &[],
            },
            tips: &[],
            subcommands: &[],
            variable_key_flags: None,
            as_is_when: None,
            get_keys: None,
            formed_keys: None,
            script_flags: None,
            debugs: Debugs::No,
            blocks: None,
            channels: None,
        }
    }

    /// The Pub/Sub channels its arguments name ([`CommandSpec::channels`]).
    pub const fn channels(mut self, channels: ChannelArgs) -> Self {
        self.channels = Some(channels);
        self
    }

    /// A container command whose subcommands are `subs`.
    pub const fn container(name: &'static str, subs: &'static [CommandSpec]) -> Self {
        let mut spec = Self::new(name, -2, 0, Exec::Container);
        spec.subcommands = subs;
        spec
    }

    /// Adds command flags (a container's own, such as ACL's `sentinel`).
    pub const fn flag(mut self, flags: u32) -> Self {
        self.flags |= flags;
        self
    }

    /// A command that runs by itself and also has subcommands (COMMAND).
    pub const fn subcommands(mut self, subs: &'static [CommandSpec]) -> Self {
        self.subcommands = subs;
        self
    }

    pub const fn keys(mut self, keys: &'static [KeySpec]) -> Self {
        self.keys = keys;
        self
    }

    pub const fn acl(mut self, acl: u32) -> Self {
        self.acl = acl;
        self
    }

    pub const fn tips(mut self, tips: &'static [&'static str]) -> Self {
        self.tips = tips;
        self
    }

    /// Group, version it appeared in, summary, complexity and syntax.
    pub const fn doc(
        mut self,
        group: &'static str,
        since: &'static str,
        summary: &'static str,
        complexity: &'static str,
        syntax: &'static str,
    ) -> Self {
        self.doc.group = group;
        self.doc.since = since;
        self.doc.summary = summary;
        self.doc.complexity = complexity;
        self.doc.syntax = syntax;
        self
    }

    pub const fn deprecated(mut self, since: &'static str, replaced_by: &'static str) -> Self {
        self.doc.deprecated = Some((since, replaced_by));
        self
    }

    /// An [`AS_IS`](flags::AS_IS) row, when `as_is` says so of its
    /// arguments.
    pub const fn as_is_when(mut self, as_is: fn(&[Bytes]) -> bool) -> Self {
        self.flags |= flags::AS_IS;
        self.as_is_when = Some(as_is);
        self
    }

    /// Whether these arguments replicate as the command ran
    /// ([`flags::AS_IS`]).
    pub fn replicates_as_is(&self, args: &[Bytes]) -> bool {
        self.has(flags::AS_IS) && self.as_is_when.is_none_or(|as_is| as_is(args))
    }

    pub const fn variable_key_flags(mut self, flags_for: fn(&[Bytes]) -> u32) -> Self {
        self.variable_key_flags = Some(flags_for);
        self
    }

    pub const fn formed_keys(mut self, formed: FormedKeys) -> Self {
        self.formed_keys = Some(formed);
        self
    }

    pub const fn blocks(mut self, timeout: TimeoutAt, waits: Waits) -> Self {
        self.blocks = Some(Blocks { timeout, waits });
        self
    }

    pub const fn debugs(mut self, debugs: Debugs) -> Self {
        self.debugs = debugs;
        self
    }

    pub const fn script_flags(mut self, of: ScriptFlagsOf) -> Self {
        self.script_flags = Some(of);
        self
    }

    /// The flags this request runs with: the row's, or for a script whose
    /// flags are known, the row's with the script's declared behaviour
    /// (Redis's `scriptFlagsToCmdFlags`).
    pub fn request_flags(&self, scripting: &crate::scripting::Scripting, args: &[Bytes]) -> u32 {
        match self.script_flags.and_then(|of| of(scripting, args)) {
            Some(script) => crate::scripting::command_flags(self.flags, script),
            None => self.flags,
        }
    }

    pub const fn get_keys(mut self, find: GetKeys) -> Self {
        self.get_keys = Some(find);
        self
    }

    pub const fn history(mut self, history: &'static [(&'static str, &'static str)]) -> Self {
        self.doc.history = history;
        self
    }

    pub fn has(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }

    pub fn is_write(&self) -> bool {
        self.has(flags::WRITE)
    }

    /// Whether the command takes its keys' locks exclusively: writes, and
    /// commands that may write through what they run (EVAL, FCALL are
    /// `may_replicate`, not `write`, in Redis's table).
    pub fn locks_exclusively(&self) -> bool {
        self.has(flags::WRITE | flags::MAY_REPLICATE)
    }

    /// ACL categories including those Redis implies from the flags
    /// (`setImplicitACLCategories`).
    pub fn acl_categories(&self) -> u32 {
        let mut cats = self.acl;
        if self.has(flags::WRITE) {
            cats |= acl::WRITE;
        }
        // Redis: read-only commands are @read unless they are @scripting.
        if self.has(flags::READONLY) && cats & acl::SCRIPTING == 0 {
            cats |= acl::READ;
        }
        if self.has(flags::ADMIN) {
            cats |= acl::ADMIN | acl::DANGEROUS;
        }
        if self.has(flags::PUBSUB) {
            cats |= acl::PUBSUB;
        }
        if self.has(flags::FAST) {
            cats |= acl::FAST;
        }
        if self.has(flags::BLOCKING) {
            cats |= acl::BLOCKING;
        }
        if cats & acl::FAST == 0 {
            cats |= acl::SLOW;
        }
        cats
    }

    /// Whether the keys cannot be found from a plain index range (Redis's
    /// `movablekeys`), computed as Redis's `populateCommandLegacyRangeSpec`.
    pub fn movable_keys(&self) -> bool {
        self.legacy_range().1
    }

    /// The legacy `(first, last, step)` key positions of COMMAND INFO, and
    /// whether the keys are movable.
    pub fn legacy_range(&self) -> ((i32, i32, i32), bool) {
        let specs = self.keys;
        if specs.is_empty() {
            return ((0, 0, 0), false);
        }
        if let [KeySpec {
            flags,
            begin: BeginSearch::Index(pos),
            find: FindKeys::Range { lastkey, step, .. },
            ..
        }] = specs
        {
            let last = if *lastkey < 0 { *lastkey } else { pos + lastkey };
            return ((*pos, last, *step), flags & keyflags::INCOMPLETE != 0);
        }
        let mut movable = false;
        let mut first = i32::MAX;
        let mut last: u32 = 0;
        let mut prev_last: u32 = 0;
        for spec in specs {
            let (BeginSearch::Index(pos), FindKeys::Range { lastkey, step, .. }) =
                (spec.begin, spec.find)
            else {
                movable = true;
                continue;
            };
            if step != 1 || (prev_last != 0 && prev_last != (pos - 1) as u32) {
                movable = true;
                continue;
            }
            if spec.flags & keyflags::INCOMPLETE != 0 {
                movable = true;
            }
            first = first.min(pos);
            let abs = if lastkey >= 0 { lastkey + pos } else { lastkey };
            last = last.max(abs as u32);
            prev_last = last;
        }
        if first == i32::MAX {
            return ((0, 0, 0), true);
        }
        ((first, last as i32, 1), movable)
    }

    /// Positions of the key arguments in `args` (Redis's
    /// `getKeysUsingKeySpecs`). `None` when the arguments do not hold the keys
    /// the specs promise (a bad `numkeys`, too few arguments): the command
    /// then runs on the connection's own shard and reports its own error.
    pub fn key_positions(&self, args: &[Bytes]) -> Option<Vec<usize>> {
        let mut out = Vec::new();
        self.for_each_key(args, |i| out.push(i))?;
        Some(out)
    }

    /// Calls `f` with the position of each key argument, without allocating
    /// (the router does this for every command). `None` as for
    /// [`key_positions`](Self::key_positions).
    pub fn for_each_key(&self, args: &[Bytes], mut f: impl FnMut(usize)) -> Option<()> {
        if let Some(find) = self.get_keys {
            find(args, &mut |i, _| f(i));
            return Some(());
        }
        for spec in self.keys {
            if spec.flags & keyflags::NOT_KEY != 0 {
                continue;
            }
            find_spec_keys(spec, args, &mut f)?;
        }
        Some(())
    }

    /// The key positions with the flags of the spec that found each key
    /// (COMMAND GETKEYSANDFLAGS); `None` as for
    /// [`key_positions`](Self::key_positions).
    pub fn key_positions_and_flags(&self, args: &[Bytes]) -> Option<Vec<(usize, u32)>> {
        let mut out = Vec::new();
        self.for_each_key_and_flags(args, |i, flags| out.push((i, flags)))?;
        Some(out)
    }

    /// Calls `f` with each key argument's position and flags, without
    /// allocating (the ACL check does this for restricted users). `None` as
    /// for [`key_positions`](Self::key_positions).
    pub fn for_each_key_and_flags(
        &self,
        args: &[Bytes],
        mut f: impl FnMut(usize, u32),
    ) -> Option<()> {
        if let Some(find) = self.get_keys {
            find(args, &mut f);
            return Some(());
        }
        for spec in self.keys {
            if spec.flags & keyflags::NOT_KEY != 0 {
                continue;
            }
            let flags = match self.variable_key_flags {
                Some(flags_for) if spec.flags & keyflags::VARIABLE_FLAGS != 0 => flags_for(args),
                _ => spec.flags,
            };
            find_spec_keys(spec, args, &mut |i| f(i, flags))?;
        }
        Some(())
    }
}

fn find_spec_keys(spec: &KeySpec, args: &[Bytes], out: &mut impl FnMut(usize)) -> Option<()> {
    let argc = args.len() as i64;
    let first: i64 = match spec.begin {
        BeginSearch::Index(pos) => {
            if pos as i64 >= argc {
                return Some(());
            }
            pos as i64
        }
        BeginSearch::Unknown => return Some(()),
        BeginSearch::Keyword { keyword, startfrom } => {
            let (mut i, end, incr) = if startfrom >= 0 {
                (startfrom as i64, argc - 1, 1)
            } else {
                (argc + startfrom as i64, 0, -1)
            };
            let mut found = None;
            while i >= 0 && i < argc && (if incr > 0 { i <= end } else { i >= end }) {
                if args[i as usize].eq_ignore_ascii_case(keyword.as_bytes()) {
                    found = Some(i + 1);
                    break;
                }
                i += incr;
            }
            match found {
                Some(f) => f,
                None => return Some(()),
            }
        }
    };
    let (last, step) = match spec.find {
        FindKeys::Unknown => return Some(()),
        FindKeys::Range { lastkey, step, limit } => {
            let last = if lastkey >= 0 {
                first + lastkey as i64
            } else if limit <= 1 {
                argc + lastkey as i64
            } else {
                first + ((argc - first) / limit as i64 + lastkey as i64)
            };
            (last, step as i64)
        }
        FindKeys::Keynum { keynumidx, firstkey, step } => {
            let idx = first + keynumidx as i64;
            if idx >= argc {
                return None;
            }
            let numkeys = ringdb_types::number::parse_i64(&args[idx as usize])?;
            // More keys than arguments cannot be right; checking here also
            // keeps the arithmetic below from overflowing.
            if numkeys < 0 || numkeys > argc {
                return None;
            }
            let start = first + firstkey as i64;
            let last = start + (numkeys - 1) * step as i64;
            if numkeys == 0 {
                return Some(());
            }
            let mut i = start;
            while i <= last {
                if i >= argc {
                    return None;
                }
                out(i as usize);
                i += step as i64;
            }
            return Some(());
        }
    };
    if step <= 0 {
        return Some(());
    }
    let mut i = first;
    while i <= last {
        if i >= argc || i < 0 {
            return None;
        }
        out(i as usize);
        i += step;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<Bytes> {
        s.split(' ').map(|a| Bytes::copy_from_slice(a.as_bytes())).collect()
    }

    fn noop(_: &mut Ctx, _: &[Bytes]) -> CmdResult {
        Ok(())
    }

    #[test]
    fn key_positions_follow_specs() {
        static MSET: &[KeySpec] = &[KeySpec::range(1, -1, 2, keyflags::OW)];
        let mset = CommandSpec::new("mset", -3, flags::WRITE, Exec::Shard(noop)).keys(MSET);
        assert_eq!(mset.key_positions(&args("MSET a 1 b 2")), Some(vec![1, 3]));
        assert_eq!(mset.legacy_range(), ((1, -1, 2), false));

        static ZUNION: &[KeySpec] =
            &[KeySpec::one(1, keyflags::OW), KeySpec::keynum(2, keyflags::RO)];
        let z = CommandSpec::new("zunionstore", -4, flags::WRITE, Exec::Shard(noop)).keys(ZUNION);
        assert_eq!(z.key_positions(&args("ZUNIONSTORE d 2 a b WEIGHTS 1 2")), Some(vec![1, 3, 4]));
        assert_eq!(z.key_positions(&args("ZUNIONSTORE d x a")), None);
        assert_eq!(z.key_positions(&args("ZUNIONSTORE d 9223372036854775807 a")), None);
        assert!(z.movable_keys());

        static XREAD: &[KeySpec] = &[KeySpec::keyword(
            "STREAMS",
            1,
            FindKeys::Range { lastkey: -1, step: 1, limit: 2 },
            keyflags::RO,
        )];
        let x = CommandSpec::new("xread", -4, flags::READONLY, Exec::Shard(noop)).keys(XREAD);
        assert_eq!(x.key_positions(&args("XREAD COUNT 2 STREAMS a b 0 0")), Some(vec![4, 5]));
    }
}
