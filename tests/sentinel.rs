//! redis-sentinel (Debian's, started here) runs a ringdb primary with a
//! ringdb replica: it finds the replica through INFO, fails over when the
//! primary is killed with SIGKILL (its MULTI / SLAVEOF NO ONE / CONFIG
//! REWRITE / CLIENT KILL / EXEC transaction runs on ringdb), turns the old
//! primary into a replica when it comes back, and a redis-py writer that
//! follows `Sentinel.master_for()` loses none of the writes that `WAIT 1`
//! acknowledged.

mod common;

use common::{free_port, info_field, q, temp_dir, wait_for, Server};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A redis-sentinel child process, killed on drop.
struct Sentinel {
    child: Child,
    port: u16,
}

impl Sentinel {
    /// Monitors `mymaster` at `127.0.0.1:primary` with quorum 1 and
    /// `down-after-milliseconds` 3000, the issue's setting (with 1000 the
    /// glommio pass sometimes saw Sentinel make the returning old primary
    /// the master again). `None` (after saying so) without redis-sentinel,
    /// unless CI=true.
    fn start(dir: &std::path::Path, primary: u16) -> Option<Sentinel> {
        let port = free_port();
        let conf = dir.join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {}\nsentinel monitor mymaster 127.0.0.1 {primary} 1\n\
                 sentinel down-after-milliseconds mymaster 3000\nsentinel failover-timeout mymaster 10000\n",
                dir.display()
            ),
        )
        .unwrap();
        let spawned = Command::new("redis-sentinel")
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let child = match spawned {
            Ok(child) => child,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if std::env::var("CI").as_deref() == Ok("true") {
                    panic!("redis-sentinel is not installed, and CI=true: it is required");
                }
                eprintln!("SKIPPED: redis-sentinel is not installed (apt install redis-sentinel)");
                return None;
            }
            Err(e) => panic!("could not start redis-sentinel: {e}"),
        };
        let sentinel = Sentinel { child, port };
        wait_for(10, "sentinel to answer", || sentinel.primary().is_some());
        Some(sentinel)
    }

    fn client(&self) -> redis::Connection {
        let url = format!("redis://127.0.0.1:{}/", self.port);
        redis::Client::open(url).unwrap().get_connection().unwrap()
    }

    /// The primary's port, as Sentinel says.
    fn primary(&self) -> Option<u16> {
        let url = format!("redis://127.0.0.1:{}/", self.port);
        let mut c = redis::Client::open(url).ok()?.get_connection().ok()?;
        let addr: Vec<String> =
            q(&mut c, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"]).ok()?;
        addr.get(1)?.parse().ok()
    }

    fn replicas(&self) -> usize {
        let replicas: Vec<redis::Value> =
            q(&mut self.client(), &["SENTINEL", "REPLICAS", "mymaster"]).unwrap();
        replicas.len()
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// INFO replication of `server` on a new connection; `None` when that
/// connection fails (Sentinel kills clients as it reconfigures a node).
fn replication(server: &Server) -> Option<String> {
    q(&mut connect(server)?, &["INFO", "replication"]).ok()
}

/// A new connection, or none: Sentinel's failover kills the normal clients
/// of the promoted replica, one being made included.
fn connect(server: &Server) -> Option<redis::Connection> {
    redis::Client::open(server.url()).ok()?.get_connection().ok()
}

/// The writer: SET w:<i> then WAIT 1 1000 through `Sentinel.master_for()`,
/// retrying a write whose connection failed; prints the acknowledged i's.
const WRITER: &str = r#"
import sys, time
from redis.sentinel import Sentinel
port, n, secs = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
sentinel = Sentinel([("127.0.0.1", port)], socket_timeout=0.5)
primary = sentinel.master_for("mymaster", socket_timeout=0.5)
deadline = time.time() + secs
acked, i = [], 0
while i < n and time.time() < deadline:
    try:
        primary.set("w:%d" % i, i)
        if primary.execute_command("WAIT", 1, 1000) == 1:
            acked.append(i)
        i += 1
    except Exception:
        time.sleep(0.05)
print(" ".join(map(str, acked)))
sys.stderr.write("writer: %d acked of %d in %.1fs\n" % (len(acked), i, time.time() - deadline + secs))
"#;

#[test]
fn sentinel_fails_over_to_a_ringdb_replica_without_losing_acknowledged_writes() {
    let dir = temp_dir("sentinel");
    let primary = Server::start_with(&["--shards", "2", "--repl-diskless-sync-delay", "0"]);
    let old_port = primary.port;
    // Promoted, it serves the old primary a snapshot at once.
    let port = old_port.to_string();
    let replica = Server::start_with(&[
        "--shards",
        "2",
        "--repl-diskless-sync-delay",
        "0",
        "--replicaof",
        "127.0.0.1",
        &port,
    ]);
    let mut r = replica.client();
    wait_for(10, "the replica's link", || {
        info_field(&mut r, "replication", "master_link_status") == "up"
    });
    let Some(sentinel) = Sentinel::start(&dir, old_port) else { return };
    wait_for(20, "sentinel to find the replica", || sentinel.replicas() == 1);
    let writer = Command::new("python3")
        .args(["-c", WRITER, &sentinel.port.to_string(), "2000", "20"])
        .stdout(Stdio::piped())
        .spawn();
    let writer = match writer {
        Ok(w) => w,
        Err(e) => panic!("python3 (with redis-py) is needed: {e}"),
    };
    std::thread::sleep(Duration::from_millis(1000));
    drop(primary); // SIGKILL
    let killed = Instant::now();
    // Sentinel's failover kills the promoted replica's normal clients (as
    // Redis's does): each look takes a new connection.
    wait_for(30, "the replica's promotion", || {
        replication(&replica).is_some_and(|i| i.contains("role:master"))
            && connect(&replica)
                .is_some_and(|mut c| q::<()>(&mut c, &["SET", "probe", "1"]).is_ok())
    });
    let writable = killed.elapsed();
    wait_for(30, "sentinel to switch", || sentinel.primary() == Some(replica.port));
    eprintln!(
        "failover: writable {writable:?} after SIGKILL, switched after {:?}",
        killed.elapsed()
    );
    // The old primary comes back and is made a replica of the new one.
    let old = Server::start_on(old_port, &["--shards", "2"]);
    // Sentinel looks at an instance it holds down every 10 s, and converts
    // one that has said it is a primary for 8 s; under a loaded machine
    // that has taken over 30 s (see the stop note of 2026-12-07).
    let deadline = Instant::now() + Duration::from_secs(120);
    while !replication(&old)
        .is_some_and(|i| i.contains("role:slave") && i.contains("master_link_status:up"))
    {
        if Instant::now() > deadline {
            let seen: redis::Value =
                q(&mut sentinel.client(), &["SENTINEL", "REPLICAS", "mymaster"])
                    .unwrap_or(redis::Value::Nil);
            panic!(
                "the old primary does not follow: it says {:?}; the new one says {:?}; Sentinel sees {seen:?}",
                replication(&old),
                replication(&replica)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut o = old.client();
    assert_eq!(info_field(&mut o, "replication", "master_port"), replica.port.to_string());
    let out = writer.wait_with_output().unwrap();
    assert!(out.status.success(), "the writer failed");
    let acked: Vec<u64> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(|w| w.parse().unwrap())
        .collect();
    assert!(acked.len() > 20, "too few acknowledged writes: {acked:?}");
    let mut r = replica.client();
    for i in &acked {
        let got: Option<u64> = q(&mut r, &["GET", &format!("w:{i}")]).unwrap();
        assert_eq!(got, Some(*i), "acknowledged write w:{i} was lost");
    }
    // Writes acknowledged after the failover reached the old primary too.
    let last = acked.last().unwrap();
    wait_for(10, "the old primary to catch up", || {
        q::<Option<u64>>(&mut o, &["GET", &format!("w:{last}")]).unwrap() == Some(*last)
    });
}
