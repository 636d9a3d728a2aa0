//! MIGRATE: its row, its arguments, and the steps that run on the shards
//! that own its keys (dumping them, deleting them once the target has them).
//! The connection and the talk with the target instance are the server
//! crate's (`cmd::migrate`). Semantics, replies and error texts follow Redis
//! 7.0's `cluster.c` (`migrateCommand`, `migrateGetKeys`).

use crate::command::args::{self, is};
use crate::command::ctx::{ClientInfo, KeyspaceView};
use crate::command::error::{CmdError, SYNTAX};
use crate::command::spec::{
    acl, flags::*, keyflags as kf, CommandSpec, Exec, FindKeys, KeySpec, NodeCommand,
};
use crate::persist::rdb::encode::Encoder;
use crate::shard::Shard;
use bytes::Bytes;

const KEY_FLAGS: u32 = kf::RW | kf::ACCESS | kf::DELETE;

pub static COMMANDS: &[CommandSpec] = &[CommandSpec::new(
    "migrate",
    -6,
    WRITE,
    Exec::Node(NodeCommand::Migrate),
)
.keys(&[
    KeySpec::one(3, KEY_FLAGS),
    KeySpec::keyword(
        "KEYS",
        -2,
        FindKeys::Range { lastkey: -1, step: 1, limit: 0 },
        KEY_FLAGS | kf::INCOMPLETE,
    ),
])
.get_keys(migrate_keys)
.acl(acl::KEYSPACE | acl::DANGEROUS)
.tips(&["nondeterministic_output"])
.history(&[
    ("3.0.0", "Added the `COPY` and `REPLACE` options."),
    ("3.0.6", "Added the `KEYS` option."),
    ("4.0.7", "Added the `AUTH` option."),
    ("6.0.0", "Added the `AUTH2` option."),
])
.doc(
    "generic",
    "2.6.0",
    "Atomically transfers a key from one Redis instance to another.",
    "This command actually executes a DUMP+DEL in the source instance, and a RESTORE in the target instance. See the pages of these commands for time complexity. Also an O(N) data transfer between the two instances is performed.",
    "host port:integer <key | \"\"> destination-db:integer timeout:integer [COPY] [REPLACE] [AUTH auth=password | AUTH2 username password] [KEYS keys=key:key [keys=key:key ...]]",
)];

/// Redis's `migrateGetKeys`: the key argument, or everything after KEYS
/// (skipping the values of AUTH and AUTH2 on the way); nothing when KEYS
/// comes with a non-empty key argument (the command refuses that).
fn migrate_keys(args: &[Bytes], found: &mut dyn FnMut(usize, u32)) {
    if args.len() < 4 {
        return;
    }
    let (mut first, mut num) = (3, 1);
    let mut i = 6;
    while i < args.len() {
        let a = &args[i];
        if is(a, "KEYS") {
            if !args[3].is_empty() {
                return;
            }
            first = i + 1;
            num = args.len() - first;
            break;
        }
        if is(a, "AUTH") {
            i += 1;
        } else if is(a, "AUTH2") {
            i += 2;
        }
        i += 1;
    }
    (first..first + num).for_each(|pos| found(pos, KEY_FLAGS));
}

/// Credentials MIGRATE sends the target first (AUTH or AUTH2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Auth {
    pub username: Option<Bytes>,
    pub password: Bytes,
}

/// MIGRATE's arguments, checked in Redis's order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigrateArgs {
    pub host: Bytes,
    pub port: Bytes,
    pub db: i64,
    /// Milliseconds for each connect, write and read (Redis: 1000 when
    /// not positive).
    pub timeout_ms: u64,
    pub copy: bool,
    pub replace: bool,
    pub auth: Option<Auth>,
    /// In argument order, duplicates kept (Redis sends each).
    pub keys: Vec<Bytes>,
}

impl MigrateArgs {
    /// `host port key|"" destination-db timeout [COPY] [REPLACE]
    /// [AUTH password | AUTH2 username password] [KEYS key [key ...]]`.
    pub fn parse(args: &[Bytes]) -> Result<MigrateArgs, CmdError> {
        if args.len() < 6 {
            return Err(CmdError::wrong_args("migrate"));
        }
        let (mut copy, mut replace, mut auth) = (false, false, None);
        let mut keys = vec![args[3].clone()];
        let mut j = 6;
        while j < args.len() {
            let more = args.len() - 1 - j;
            let a = &args[j];
            if is(a, "COPY") {
                copy = true;
            } else if is(a, "REPLACE") {
                replace = true;
            } else if is(a, "AUTH") {
                if more < 1 {
                    return Err(SYNTAX);
                }
                auth = Some(Auth { username: None, password: args[j + 1].clone() });
                j += 1;
            } else if is(a, "AUTH2") {
                if more < 2 {
                    return Err(SYNTAX);
                }
                let (username, password) = (args[j + 1].clone(), args[j + 2].clone());
                auth = Some(Auth { username: Some(username), password });
                j += 2;
            } else if is(a, "KEYS") {
                if !args[3].is_empty() {
                    return Err(CmdError::new(
                        "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string",
                    ));
                }
                keys = args[j + 1..].to_vec();
                break;
            } else {
                return Err(SYNTAX);
            }
            j += 1;
        }
        // Redis reads the timeout before the database.
        let timeout = args::int(&args[5])?;
        let db = args::int(&args[4])?;
        let timeout_ms = if timeout <= 0 { 1000 } else { timeout as u64 };
        Ok(MigrateArgs {
            host: args[1].clone(),
            port: args[2].clone(),
            db,
            timeout_ms,
            copy,
            replace,
            auth,
            keys,
        })
    }
}

/// A key read for MIGRATE: its DUMP payload and when it expires.
#[derive(Clone, Debug)]
pub struct Dumped {
    pub key: Bytes,
    pub payload: Vec<u8>,
    pub expire_at: Option<u64>,
}

/// On the owning shard: each of `keys` (with its position among MIGRATE's
/// keys) that exists, looked up as Redis's `lookupKeyRead` does (expiring
/// it if due, counting a hit or a miss), dumped.
pub fn op_dump_keys(
    shard: &mut Shard,
    client: &ClientInfo,
    keys: &[(usize, Bytes)],
    now_ms: u64,
) -> Vec<(usize, Dumped)> {
    let mut ks = KeyspaceView::new(
        &mut shard.keyspace,
        &mut shard.state,
        client.db,
        now_ms,
        client.no_touch,
    );
    let encoder = Encoder::default();
    keys.iter()
        .filter_map(|(i, key)| {
            let entry = ks.read(key)?;
            let dumped = Dumped {
                key: key.clone(),
                payload: encoder.dump(&entry.value),
                expire_at: entry.expire_at(),
            };
            Some((*i, dumped))
        })
        .collect()
}

/// On the owning shard: deletes the keys the target acknowledged, through
/// the write funnel as DEL does (a `del` event each, watchers and trackers
/// told, the append-only log written).
pub fn op_delete_migrated(shard: &mut Shard, db: usize, keys: &[Bytes], now_ms: u64) {
    let mut ks = KeyspaceView::new(&mut shard.keyspace, &mut shard.state, db, now_ms, true);
    for key in keys {
        // The lookup reclaims an expired key first (its own event).
        if ks.exists(key) {
            ks.delete(key);
        }
    }
}

fn bulk(out: &mut Vec<u8>, arg: &[u8]) {
    out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
    out.extend_from_slice(arg);
    out.extend_from_slice(b"\r\n");
}

fn command(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    args.iter().for_each(|a| bulk(out, a));
}

/// What MIGRATE sends the target in one go: AUTH when given, SELECT when
/// `select`, then a RESTORE (with REPLACE when asked) of each key with its
/// TTL left at `now_ms`. Returns the request and the positions in `keys`
/// of the keys it restores: one that expired since it was read is left out,
/// as Redis leaves it.
pub fn request(
    m: &MigrateArgs,
    keys: &[Dumped],
    select: bool,
    now_ms: u64,
) -> (Vec<u8>, Vec<usize>) {
    let mut out = Vec::new();
    if let Some(auth) = &m.auth {
        match &auth.username {
            Some(user) => command(&mut out, &[b"AUTH", user, &auth.password]),
            None => command(&mut out, &[b"AUTH", &auth.password]),
        }
    }
    if select {
        command(&mut out, &[b"SELECT", m.db.to_string().as_bytes()]);
    }
    let mut sent = Vec::with_capacity(keys.len());
    for (i, k) in keys.iter().enumerate() {
        let ttl = match k.expire_at {
            None => 0,
            Some(at) if at < now_ms => continue,
            // Redis sends at least 1: 0 would mean "no TTL".
            Some(at) => (at - now_ms).max(1),
        };
        let ttl = ttl.to_string();
        if m.replace {
            command(&mut out, &[b"RESTORE", &k.key, ttl.as_bytes(), &k.payload, b"REPLACE"]);
        } else {
            command(&mut out, &[b"RESTORE", &k.key, ttl.as_bytes(), &k.payload]);
        }
        sent.push(i);
    }
    (out, sent)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<Bytes> {
        line.split(' ').map(|a| Bytes::copy_from_slice(a.replace("''", "").as_bytes())).collect()
    }

    fn keys_of(line: &str) -> Vec<usize> {
        let mut found = Vec::new();
        migrate_keys(&args(line), &mut |i, _| found.push(i));
        found
    }

    #[test]
    fn keys_as_redis_finds_them() {
        assert_eq!(keys_of("MIGRATE h 1 k 0 5"), vec![3]);
        assert_eq!(keys_of("MIGRATE h 1 '' 0 5 COPY KEYS a b"), vec![8, 9]);
        assert_eq!(keys_of("MIGRATE h 1 '' 0 5 AUTH KEYS KEYS a"), vec![9]);
        assert_eq!(keys_of("MIGRATE h 1 '' 0 5 AUTH2 KEYS KEYS KEYS a"), vec![10]);
        assert_eq!(keys_of("MIGRATE h 1 k 0 5 KEYS a"), Vec::<usize>::new());
    }

    #[test]
    fn parse_in_redis_order() {
        let m = MigrateArgs::parse(&args("MIGRATE h 7 '' 3 0 copy REPLACE AUTH2 u p KEYS a b"))
            .unwrap();
        assert_eq!((m.db, m.timeout_ms, m.copy, m.replace), (3, 1000, true, true));
        assert_eq!(m.auth.as_ref().and_then(|a| a.username.clone()), Some(Bytes::from("u")));
        assert_eq!(m.keys, vec![Bytes::from("a"), Bytes::from("b")]);
        let err = |line: &str| MigrateArgs::parse(&args(line)).unwrap_err().text().to_string();
        assert_eq!(err("MIGRATE h 7 k 0 5 BOGUS"), "ERR syntax error");
        assert_eq!(err("MIGRATE h 7 k 0 5 AUTH"), "ERR syntax error");
        assert_eq!(err("MIGRATE h 7 k 0 5 AUTH2 u"), "ERR syntax error");
        assert!(err("MIGRATE h 7 k 0 5 KEYS a").contains("must be set to the empty string"));
        assert_eq!(err("MIGRATE h 7 k x y"), "ERR value is not an integer or out of range");
        // Options are checked before the numbers.
        assert_eq!(err("MIGRATE h 7 k x y BOGUS"), "ERR syntax error");
    }

    #[test]
    fn request_pipelines_auth_select_and_restores() {
        let m = MigrateArgs::parse(&args("MIGRATE h 7 '' 2 5 REPLACE AUTH pw KEYS a b c")).unwrap();
        let keys = [
            Dumped { key: "a".into(), payload: b"P".to_vec(), expire_at: None },
            Dumped { key: "b".into(), payload: b"Q".to_vec(), expire_at: Some(50) },
            Dumped { key: "c".into(), payload: b"R".to_vec(), expire_at: Some(1000) },
        ];
        let (out, sent) = request(&m, &keys, true, 100);
        assert_eq!(sent, vec![0, 2]);
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n*2\r\n$6\r\nSELECT\r\n$1\r\n2\r\n\
             *5\r\n$7\r\nRESTORE\r\n$1\r\na\r\n$1\r\n0\r\n$1\r\nP\r\n$7\r\nREPLACE\r\n\
             *5\r\n$7\r\nRESTORE\r\n$1\r\nc\r\n$3\r\n900\r\n$1\r\nR\r\n$7\r\nREPLACE\r\n"
        );
        let (out, _) = request(&m, &keys[2..], false, 1000);
        assert!(String::from_utf8(out).unwrap().contains("$1\r\nc\r\n$1\r\n1\r\n"));
    }
}
