//! DUMP and RESTORE: a value as Redis's serialisation (an RDB value, the
//! RDB version and a CRC64), so that values move between Redis and ringdb
//! both ways. Semantics and error texts follow Redis 7.0's `cluster.c`
//! (`dumpCommand`, `restoreCommand`).

use crate::command::args::{self, is};
use crate::command::error::{CmdError, CmdResult, SYNTAX};
use crate::command::spec::{acl, flags::*, keyflags as kf, CommandSpec, Exec, KeySpec};
use crate::command::Ctx;
use crate::persist::dump;
use crate::persist::rdb::decode::LoadLimits;
use crate::persist::rdb::encode::Encoder;
use crate::shard::ShardSettings;
use bytes::Bytes;

const BUSY_KEY: CmdError = CmdError::new("BUSYKEY Target key name already exists.");

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("dump", 2, READONLY, Exec::Shard(dump_cmd))
        .keys(&[KeySpec::one(1, kf::RO | kf::ACCESS)])
        .acl(acl::KEYSPACE)
        .tips(&["nondeterministic_output"])
        .doc("generic", "2.6.0", "Returns a serialized representation of the value stored at a key.", "O(1) to access the key and additional O(N*M) to serialize it, where N is the number of Redis objects composing the value and M their average size. For small string values the time complexity is thus O(1)+O(1*M) where M is small, so simply O(1).", "key"),
    CommandSpec::new("restore", -4, WRITE | DENYOOM, Exec::Shard(restore))
        .keys(&[KeySpec::one(1, kf::OW | kf::UPDATE)])
        .acl(acl::KEYSPACE | acl::DANGEROUS)
        .doc("generic", "2.6.0", "Creates a key from the serialized representation of a value.", "O(1) to create the new key and additional O(N*M) to reconstruct the serialized value, where N is the number of Redis objects composing the value and M their average size. For small string values the time complexity is thus O(1)+O(1*M) where M is small, so simply O(1). However for sorted set values the complexity is O(N*M*log(N)) because inserting values into sorted sets is O(log(N)).", "key ttl:integer serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds:integer] [FREQ frequency:integer]"),
];

/// What loading a value may build under these settings: the collections'
/// encoding limits, and `proto-max-bulk-len` bounding both a Bloom filter
/// and what LZF may expand to (a payload is client input).
pub fn load_limits(settings: &ShardSettings) -> LoadLimits {
    LoadLimits {
        collections: settings.limits,
        max_bloom_bytes: settings.max_bulk_len,
        max_expanded_bytes: usize::try_from(settings.max_bulk_len).unwrap_or(usize::MAX),
    }
}

fn dump_cmd(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    match ctx.ks.read(&args[1]) {
        Some(entry) => {
            let payload = Encoder::default().dump(&entry.value);
            ctx.out.bulk(&payload);
        }
        None => ctx.out.null(),
    }
    Ok(())
}

/// RESTORE's options after the payload.
#[derive(Default)]
struct RestoreOptions {
    replace: bool,
    absttl: bool,
    idle: Option<u64>,
    freq: Option<u8>,
}

fn restore_options(args: &[Bytes]) -> Result<RestoreOptions, CmdError> {
    let mut o = RestoreOptions::default();
    let mut j = 4;
    while j < args.len() {
        let more = j + 1 < args.len();
        if is(&args[j], "REPLACE") {
            o.replace = true;
        } else if is(&args[j], "ABSTTL") {
            o.absttl = true;
        } else if is(&args[j], "IDLETIME") && more && o.freq.is_none() {
            let idle = args::int(&args[j + 1])?;
            if idle < 0 {
                return Err(CmdError::new("ERR Invalid IDLETIME value, must be >= 0"));
            }
            o.idle = Some(idle as u64);
            j += 1;
        } else if is(&args[j], "FREQ") && more && o.idle.is_none() {
            let freq = args::int(&args[j + 1])?;
            if !(0..=255).contains(&freq) {
                return Err(CmdError::new("ERR Invalid FREQ value, must be >= 0 and <= 255"));
            }
            o.freq = Some(freq as u8);
            j += 1;
        } else {
            return Err(SYNTAX);
        }
        j += 1;
    }
    Ok(o)
}

/// RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f].
/// Checks run in Redis's order: options, existing key, TTL, payload.
fn restore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let o = restore_options(args)?;
    let key = &args[1];
    if !o.replace && ctx.ks.write(key).is_some() {
        return Err(BUSY_KEY);
    }
    let ttl = args::int(&args[2])?;
    if ttl < 0 {
        return Err(CmdError::new("ERR Invalid TTL value, must be >= 0"));
    }
    let value = dump::decode(&args[3], &load_limits(&ctx.ks.state.settings))
        .map_err(|e| CmdError::new(e.text()))?;
    let now = ctx.ks.now_ms;
    let expire_at = match ttl {
        0 => None,
        t if o.absttl => Some(t as u64),
        t => Some(now.saturating_add(t as u64)),
    };
    if expire_at.is_some_and(|at| at <= now) {
        // Already expired: the key is gone (Redis propagates a DEL).
        if o.replace {
            ctx.ks.delete(key);
        }
        ctx.out.ok();
        return Ok(());
    }
    if o.replace {
        // Replaced: the event is restore.
        ctx.ks.discard(key);
    }
    let access = ctx.ks.state.restored_access(now, o.idle, o.freq);
    ctx.ks.set_restored(key, value, expire_at, access, "restore");
    ctx.out.ok();
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::command::ClientInfo;
    use crate::keyspace::Keyspace;
    use crate::shard::{test_call, ShardSettings, ShardState};
    use bytes::Bytes;

    /// A one-shard keyspace driven command by command.
    struct Harness {
        keyspace: Keyspace,
        state: ShardState,
    }

    impl Harness {
        fn new() -> Self {
            Harness {
                keyspace: Keyspace::for_slots(16, 0, 16384),
                state: ShardState::recording(ShardSettings::default()),
            }
        }

        fn args(&mut self, args: &[&[u8]]) -> Vec<u8> {
            let args: Vec<Bytes> = args.iter().map(|a| Bytes::copy_from_slice(a)).collect();
            test_call(&mut self.keyspace, &mut self.state, args, ClientInfo::default(), 1_000_000)
        }

        fn run(&mut self, line: &str) -> String {
            let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
            String::from_utf8_lossy(&self.args(&args)).into_owned()
        }

        fn restore(&mut self, key: &str, ttl: &str, payload: &[u8], options: &str) -> String {
            let mut args: Vec<&[u8]> = vec![b"RESTORE", key.as_bytes(), ttl.as_bytes(), payload];
            args.extend(options.split(' ').filter(|o| !o.is_empty()).map(str::as_bytes));
            String::from_utf8_lossy(&self.args(&args)).into_owned()
        }
    }

    /// The payload of a bulk reply.
    fn bulk(reply: &[u8]) -> Vec<u8> {
        let start = reply.iter().position(|&b| b == b'\n').expect("a header") + 1;
        reply[start..reply.len() - 2].to_vec()
    }

    #[test]
    fn dump_and_restore_round_trip_with_options() {
        let mut h = Harness::new();
        h.run("RPUSH l a b 1");
        let payload = bulk(&h.args(&[b"DUMP", b"l"]));
        assert_eq!(h.run("DUMP missing"), "$-1\r\n");
        assert_eq!(
            h.restore("l", "0", &payload, ""),
            "-BUSYKEY Target key name already exists.\r\n"
        );
        assert_eq!(h.restore("l2", "0", &payload, ""), "+OK\r\n");
        assert_eq!(h.run("LRANGE l2 0 -1"), "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\n1\r\n");
        assert_eq!(h.restore("l", "0", &payload, "REPLACE IDLETIME 100"), "+OK\r\n");
        assert_eq!(h.run("OBJECT IDLETIME l"), ":100\r\n");
        assert_eq!(h.restore("t", "5000", &payload, ""), "+OK\r\n");
        assert_eq!(h.run("PTTL t"), ":5000\r\n");
        assert_eq!(h.restore("t", "2000000", &payload, "ABSTTL REPLACE"), "+OK\r\n");
        assert_eq!(h.run("PTTL t"), ":1000000\r\n");
        // An absolute TTL in the past: nothing is created, REPLACE deletes.
        h.state.funnel.take_events();
        assert_eq!(h.restore("t", "1", &payload, "ABSTTL REPLACE"), "+OK\r\n");
        assert_eq!(h.run("EXISTS t"), ":0\r\n");
        let events: Vec<&str> = h.state.funnel.take_events().iter().map(|e| e.event).collect();
        assert_eq!(events, vec!["del"]);
        assert_eq!(h.restore("n", "0", &payload, "FREQ 5"), "+OK\r\n");
        let events: Vec<&str> = h.state.funnel.take_events().iter().map(|e| e.event).collect();
        assert_eq!(events.last(), Some(&"restore"));
    }

    #[test]
    fn restore_errors_in_redis_order() {
        let mut h = Harness::new();
        h.run("SET s v");
        let payload = bulk(&h.args(&[b"DUMP", b"s"]));
        let mut bad = payload.clone();
        bad[0] ^= 1;
        let cases = [
            ("x", "0", &bad[..], "", "-ERR DUMP payload version or checksum are wrong\r\n"),
            ("x", "-1", &payload[..], "", "-ERR Invalid TTL value, must be >= 0\r\n"),
            ("x", "a", &payload[..], "", "-ERR value is not an integer or out of range\r\n"),
            (
                "x",
                "0",
                &payload[..],
                "IDLETIME -1",
                "-ERR Invalid IDLETIME value, must be >= 0\r\n",
            ),
            (
                "x",
                "0",
                &payload[..],
                "IDLETIME x",
                "-ERR value is not an integer or out of range\r\n",
            ),
            (
                "x",
                "0",
                &payload[..],
                "FREQ 256",
                "-ERR Invalid FREQ value, must be >= 0 and <= 255\r\n",
            ),
            ("x", "0", &payload[..], "FREQ 1 IDLETIME 1", "-ERR syntax error\r\n"),
            ("x", "0", &payload[..], "IDLETIME", "-ERR syntax error\r\n"),
            ("x", "0", &payload[..], "BOGUS", "-ERR syntax error\r\n"),
            // Options are checked before the key, the key before the TTL.
            ("s", "-1", &payload[..], "BOGUS", "-ERR syntax error\r\n"),
            ("s", "-1", &payload[..], "", "-BUSYKEY Target key name already exists.\r\n"),
        ];
        for (key, ttl, payload, options, expected) in cases {
            assert_eq!(h.restore(key, ttl, payload, options), expected, "{key} {ttl} {options}");
        }
        // A signed payload whose body is not an RDB value.
        let mut body = vec![crate::persist::rdb::opcode::EOF, 10, 0];
        let crc = crate::persist::crc64::crc64(&body);
        body.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(h.restore("x", "0", &body, ""), "-ERR Bad data format\r\n");
        assert_eq!(h.run("EXISTS x"), ":0\r\n");
    }
}
