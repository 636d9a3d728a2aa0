//! Snapshots without fork and without stop, against a real 2-shard server:
//! a BGSAVE holds exactly the data of the moment it started while clients
//! keep writing (overwrites, deletes, new keys, cross-shard MSETs, SWAPDB,
//! FLUSHDB), FLUSHALL stops it as Redis does, commands are answered while it
//! runs, and SHUTDOWN during one still saves the latest data.

mod common;
use common::{keys_on_two_shards, q, temp_dir, Server};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A server on `dir` (2 shards, no save schedule).
fn server_on(dir: &Path) -> Server {
    Server::start_with(&["--shards", "2", "--dir", dir.to_str().expect("a UTF-8 path")])
}

fn info_field(c: &mut redis::Connection, field: &str) -> String {
    common::info_field(c, "persistence", field)
}

fn saving(c: &mut redis::Connection) -> bool {
    info_field(c, "rdb_bgsave_in_progress") == "1"
}

/// Waits until no background save runs; its status.
fn wait_bgsave(c: &mut redis::Connection) -> String {
    let deadline = Instant::now() + Duration::from_secs(120);
    while saving(c) {
        assert!(Instant::now() < deadline, "background save did not finish");
        std::thread::sleep(Duration::from_millis(10));
    }
    info_field(c, "rdb_last_bgsave_status")
}

fn bgsave(c: &mut redis::Connection) -> String {
    q::<String>(c, &["BGSAVE"]).unwrap_or_else(|e| panic!("BGSAVE: {e:?}"))
}

/// A value of about 100 bytes, so that the snapshot takes a while.
fn value(tag: &str, i: usize) -> String {
    format!("{tag}:{i}:{}", "v".repeat(90))
}

/// `n` keys `{prefix}{i}` = value("old", i) in the selected database,
/// pipelined.
fn fill(c: &mut redis::Connection, prefix: &str, n: usize) {
    for start in (0..n).step_by(10_000) {
        let mut pipe = redis::pipe();
        for i in start..(start + 10_000).min(n) {
            pipe.cmd("SET").arg(format!("{prefix}{i}")).arg(value("old", i)).ignore();
        }
        pipe.query::<()>(c).unwrap();
    }
}

/// Checks that the selected database holds exactly `{prefix}0..n` with
/// their "old" values, and `extra` keys besides.
fn check_old(c: &mut redis::Connection, prefix: &str, n: usize, extra: usize) {
    assert_eq!(q::<usize>(c, &["DBSIZE"]).unwrap(), n + extra);
    for start in (0..n).step_by(1000) {
        let keys: Vec<String> =
            (start..(start + 1000).min(n)).map(|i| format!("{prefix}{i}")).collect();
        let mut cmd = redis::cmd("MGET");
        cmd.arg(&keys);
        let got: Vec<Option<String>> = cmd.query(c).unwrap();
        for (i, v) in (start..).zip(got) {
            assert_eq!(v, Some(value("old", i)), "{prefix}{i}");
        }
    }
}

/// Pairs of keys on different shards that cross-shard MSETs keep equal.
fn pairs(n: usize) -> Vec<(String, String)> {
    let (a, b) = keys_on_two_shards();
    (0..n).map(|i| (format!("{a}:pair{i}"), format!("{b}:pair{i}"))).collect()
}

const N: usize = 200_000;

#[test]
fn a_bgsave_holds_exactly_the_data_of_its_start_while_clients_write() {
    let dir = temp_dir("nostop-exact");
    let pairs = Arc::new(pairs(50));
    let (stop, msets) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
    {
        let server = server_on(&dir);
        let mut c = server.client();
        fill(&mut c, "k", N);
        // The file takes at least a second to write (10 µs a key), so that
        // the writers below are answered while it is written however fast
        // this machine saves (on a busy one the save once ended first).
        let _: () = q(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "10"]).unwrap();
        // Cross-shard MSETs run before, during and after BGSAVE starts:
        // whichever side of the snapshot point each falls on, the file
        // must hold every pair equal (never half of an MSET).
        let mset = {
            let (mut m, pairs, stop, msets) =
                (server.client(), pairs.clone(), stop.clone(), msets.clone());
            std::thread::spawn(move || {
                let mut round = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    round += 1;
                    let mut cmd = redis::cmd("MSET");
                    for (a, b) in pairs.iter() {
                        cmd.arg(a).arg(round).arg(b).arg(round);
                    }
                    cmd.query::<()>(&mut m).unwrap();
                    msets.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        while msets.load(Ordering::Relaxed) < 20 {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(bgsave(&mut c), "Background saving started");
        // From here on every change is after the snapshot point. Two
        // writers overwrite, delete and add keys all over both shards.
        let writers: Vec<_> = (0..2)
            .map(|w| {
                let mut wc = server.client();
                std::thread::spawn(move || {
                    let mut during = 0;
                    for start in (w * 1000..N).step_by(2000) {
                        let mut pipe = redis::pipe();
                        for i in start..(start + 1000).min(N) {
                            match i % 4 {
                                0 => pipe.cmd("DEL").arg(format!("k{i}")).ignore(),
                                1 => pipe.cmd("SET").arg(format!("new{i}")).arg(1).ignore(),
                                2 => pipe.cmd("EXPIRE").arg(format!("k{i}")).arg(1000).ignore(),
                                _ => pipe
                                    .cmd("SET")
                                    .arg(format!("k{i}"))
                                    .arg(value("new", i))
                                    .ignore(),
                            };
                        }
                        pipe.query::<()>(&mut wc).unwrap();
                        during += usize::from(saving(&mut wc));
                    }
                    during
                })
            })
            .collect();
        let during: usize = writers.into_iter().map(|w| w.join().unwrap()).sum();
        assert!(during > 0, "no write batch was answered while the snapshot ran");
        assert_eq!(wait_bgsave(&mut c), "ok");
        stop.store(true, Ordering::Relaxed);
        mset.join().unwrap();
        assert!(q::<usize>(&mut c, &["DBSIZE"]).unwrap() > N, "the writes happened");
    }
    // The file, loaded by a fresh server: exactly the data of the start.
    let server = server_on(&dir);
    let mut c = server.client();
    check_old(&mut c, "k", N, 2 * pairs.len());
    assert_eq!(q::<i64>(&mut c, &["TTL", "k2"]).unwrap(), -1, "no expiry from after the start");
    for (a, b) in pairs.iter() {
        let v: Vec<String> = q(&mut c, &["MGET", a, b]).unwrap();
        assert_eq!(v[0], v[1], "half of an MSET in the snapshot");
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn commands_are_answered_while_a_snapshot_runs() {
    let server = Server::start(2);
    let mut c = server.client();
    fill(&mut c, "k", N);
    let mut probe = server.client();
    let (a, b) = keys_on_two_shards();
    q::<String>(&mut probe, &["MSET", &a, "1", &b, "1"]).unwrap();
    assert_eq!(bgsave(&mut c), "Background saving started");
    let (mut answered, mut slowest) = (0, Duration::ZERO);
    while saving(&mut c) {
        let at = Instant::now();
        assert_eq!(q::<String>(&mut probe, &["PING"]).unwrap(), "PONG");
        assert_eq!(q::<i64>(&mut probe, &["INCR", &a]).unwrap(), answered + 2);
        assert_eq!(q::<i64>(&mut probe, &["INCR", &b]).unwrap(), answered + 2);
        assert_eq!(q::<String>(&mut probe, &["GET", "k7"]).unwrap(), value("old", 7));
        slowest = slowest.max(at.elapsed());
        answered += 1;
    }
    eprintln!("{answered} rounds answered during the snapshot, slowest {slowest:?}");
    assert!(answered > 0, "nothing was answered while the snapshot ran");
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    // The writes were counted as changes after the snapshot point.
    let changes: i64 = info_field(&mut c, "rdb_changes_since_last_save").parse().unwrap();
    assert_eq!(changes, 2 * answered);
}

#[test]
fn swapdb_flushdb_and_a_second_save_during_a_snapshot() {
    let dir = temp_dir("nostop-flush");
    {
        let server = server_on(&dir);
        let mut c = server.client();
        fill(&mut c, "zero", 60_000);
        q::<String>(&mut c, &["SELECT", "1"]).unwrap();
        fill(&mut c, "one", 60_000);
        assert_eq!(bgsave(&mut c), "Background saving started");
        let err = q::<String>(&mut c, &["BGSAVE"]).unwrap_err();
        assert!(err.to_string().contains("Background save already in progress"), "{err}");
        let err = q::<String>(&mut c, &["BGSAVE", "SCHEDULE"]).unwrap_err();
        assert!(err.to_string().contains("Background save already in progress"), "{err}");
        let err = q::<String>(&mut c, &["SAVE"]).unwrap_err();
        assert!(err.to_string().contains("Background save already in progress"), "{err}");
        let err = q::<String>(&mut c, &["DEBUG", "RELOAD"]).unwrap_err();
        assert!(err.to_string().contains("Background save already in progress"), "{err}");
        q::<String>(&mut c, &["SWAPDB", "0", "1"]).unwrap();
        q::<String>(&mut c, &["SET", "zero5", "after the swap"]).unwrap();
        // FLUSHDB leaves the save running (FLUSHALL would stop it, as
        // Redis's kills its child: see the test below).
        for db in ["1", "0"] {
            q::<String>(&mut c, &["SELECT", db]).unwrap();
            q::<String>(&mut c, &["FLUSHDB"]).unwrap();
        }
        q::<String>(&mut c, &["SET", "after", "the flush"]).unwrap();
        assert_eq!(wait_bgsave(&mut c), "ok");
    }
    let server = server_on(&dir);
    let mut c = server.client();
    check_old(&mut c, "zero", 60_000, 0);
    q::<String>(&mut c, &["SELECT", "1"]).unwrap();
    check_old(&mut c, "one", 60_000, 0);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// FLUSHALL stops a running background save before it answers, as Redis's
/// `flushAllDataAndResetRDB` kills the saving child, and the stop is not a
/// failed save.
#[test]
fn flushall_stops_a_running_background_save() {
    let dir = temp_dir("nostop-flushall");
    let server = server_on(&dir);
    let mut c = server.client();
    fill(&mut c, "k", N);
    assert_eq!(bgsave(&mut c), "Background saving started");
    q::<String>(&mut c, &["FLUSHALL"]).unwrap();
    assert!(!saving(&mut c), "the background save still runs after FLUSHALL");
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    assert_eq!(q::<usize>(&mut c, &["DBSIZE"]).unwrap(), 0);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The files in `dir`.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().flatten().map(|e| e.path()).collect();
    v.sort();
    v
}

#[test]
fn shutdown_during_a_bgsave_saves_the_latest_data() {
    let dir = temp_dir("nostop-shutdown");
    let (a, b) = keys_on_two_shards();
    {
        let mut server = server_on(&dir);
        let mut c = server.client();
        fill(&mut c, "k", N);
        assert_eq!(bgsave(&mut c), "Background saving started");
        q::<String>(&mut c, &["MSET", &a, "latest", &b, "latest"]).unwrap();
        let _ = q::<String>(&mut c, &["SHUTDOWN", "SAVE"]);
        let deadline = Instant::now() + Duration::from_secs(60);
        while server.is_running() {
            assert!(Instant::now() < deadline, "SHUTDOWN did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    assert_eq!(files(&dir), vec![dir.join("dump.rdb")], "no temporary file left");
    let server = server_on(&dir);
    let mut c = server.client();
    let v: Vec<String> = q(&mut c, &["MGET", &a, &b]).unwrap();
    assert_eq!(v, vec!["latest", "latest"]);
    check_old(&mut c, "k", N, 2);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
