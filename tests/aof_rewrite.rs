//! Log rewrites without stopping the shards, against a real 2-shard server
//! under `appendfsync always`: writes go on (and are answered) while the
//! logs are rewritten, a kill -9 at any moment of a rewrite (before it,
//! between two shards' swaps, after it) loses no acknowledged write and
//! leaves no cross-shard MSET half applied, and rewrites and background
//! saves take turns with Redis's replies.

mod common;
use common::{keys_on_two_shards, q, temp_dir, Server};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn server_on(dir: &Path, extra: &[&str]) -> Server {
    let mut args = vec![
        "--shards",
        "2",
        "--dir",
        dir.to_str().expect("a UTF-8 path"),
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--save",
        "",
    ];
    args.extend_from_slice(extra);
    Server::start_with(&args)
}

fn info_field(c: &mut redis::Connection, field: &str) -> String {
    common::info_field(c, "persistence", field)
}

fn rewriting(c: &mut redis::Connection) -> bool {
    info_field(c, "aof_rewrite_in_progress") == "1"
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn log_of(dir: &Path, shard: usize) -> PathBuf {
    dir.join("appendonlydir").join(format!("appendonly.aof.{shard}-of-2"))
}

/// Keys `{tag}:0..n` (all on `tag`'s shard) set to `value:i`, pipelined.
fn fill(c: &mut redis::Connection, tag: &str, n: usize, value: &str) {
    for start in (0..n).step_by(5000) {
        let mut pipe = redis::pipe();
        for i in start..(start + 5000).min(n) {
            pipe.cmd("SET").arg(format!("{{{tag}}}:{i}")).arg(format!("{value}:{i}")).ignore();
        }
        pipe.query::<()>(c).unwrap();
    }
}

fn check_filled(c: &mut redis::Connection, tag: &str, n: usize, value: &str) {
    for start in (0..n).step_by(1000) {
        let keys: Vec<String> =
            (start..(start + 1000).min(n)).map(|i| format!("{{{tag}}}:{i}")).collect();
        let got: Vec<Option<String>> = redis::cmd("MGET").arg(&keys).query(c).unwrap();
        for (i, v) in (start..).zip(got) {
            assert_eq!(v, Some(format!("{value}:{i}")), "{{{tag}}}:{i}");
        }
    }
}

/// Writers on both shards until `stop`: INCRs of one counter per shard and
/// cross-shard MSETs of a pair to the same round number. Returns the last
/// acknowledged counter values and round, and how many writes were
/// answered while `rewriting` was set.
struct Writers {
    stop: Arc<AtomicBool>,
    rewriting: Arc<AtomicBool>,
    during: Arc<AtomicU64>,
    threads: Vec<std::thread::JoinHandle<u64>>,
}

impl Writers {
    fn start(server: &Server, a: &str, b: &str) -> Writers {
        let stop = Arc::new(AtomicBool::new(false));
        let rewriting = Arc::new(AtomicBool::new(false));
        let during = Arc::new(AtomicU64::new(0));
        let (ctr_a, ctr_b) = (format!("ctr{{{a}}}"), format!("ctr{{{b}}}"));
        let (pair_a, pair_b) = (format!("pair{{{a}}}"), format!("pair{{{b}}}"));
        let jobs = [
            vec!["INCR".to_string(), ctr_a],
            vec!["INCR".to_string(), ctr_b],
            vec!["MSET".to_string(), pair_a, "#".into(), pair_b, "#".into()],
        ];
        let threads = jobs
            .into_iter()
            .map(|job| {
                let mut c = server.client();
                let (stop, rewriting, during) = (stop.clone(), rewriting.clone(), during.clone());
                std::thread::spawn(move || {
                    let mut done = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let was_rewriting = rewriting.load(Ordering::Relaxed);
                        // "#" is the round: the MSET's value.
                        let round = (done + 1).to_string();
                        let args: Vec<&str> = job
                            .iter()
                            .map(|a| if a == "#" { &round[..] } else { &a[..] })
                            .collect();
                        q::<redis::Value>(&mut c, &args).unwrap();
                        done += 1;
                        if was_rewriting && rewriting.load(Ordering::Relaxed) {
                            during.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    done
                })
            })
            .collect();
        Writers { stop, rewriting, during, threads }
    }

    /// Stops them: (INCRs acknowledged on a, on b, last MSET round).
    fn stop(self) -> (u64, u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        let done: Vec<u64> = self.threads.into_iter().map(|t| t.join().unwrap()).collect();
        (done[0], done[1], done[2])
    }
}

fn check_writes(c: &mut redis::Connection, a: &str, b: &str, acked: (u64, u64, u64)) {
    let counters: Vec<Option<u64>> =
        q(c, &["MGET", &format!("ctr{{{a}}}"), &format!("ctr{{{b}}}")]).unwrap();
    assert_eq!(counters, vec![Some(acked.0), Some(acked.1)]);
    let pair: Vec<Option<u64>> =
        q(c, &["MGET", &format!("pair{{{a}}}"), &format!("pair{{{b}}}")]).unwrap();
    assert_eq!(pair, vec![Some(acked.2), Some(acked.2)]);
}

fn no_leftovers(dir: &Path) {
    let names: Vec<String> = std::fs::read_dir(dir.join("appendonlydir"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.starts_with("temp-")), "{names:?}");
}

#[test]
fn writes_are_served_during_a_rewrite_and_all_survive_kill_9() {
    let dir = temp_dir("aofrw-serve");
    let (a, b) = keys_on_two_shards();
    let acked = {
        let server = server_on(&dir, &["--rdb-key-save-delay", "100"]);
        let mut c = server.client();
        fill(&mut c, &a, 6000, "old");
        fill(&mut c, &b, 6000, "old");
        let writers = Writers::start(&server, &a, &b);
        writers.rewriting.store(true, Ordering::Relaxed);
        assert_eq!(
            q::<String>(&mut c, &["BGREWRITEAOF"]).unwrap(),
            "Background append only file rewriting started"
        );
        // Overwrites and deletes of keys the snapshot has not written yet.
        fill(&mut c, &a, 3000, "new");
        q::<i64>(&mut c, &["DEL", &format!("{{{b}}}:5999")]).unwrap();
        assert!(rewriting(&mut c), "the rewrite takes 0.6 s per shard");
        assert!(info_field(&mut c, "aof_current_rewrite_time_sec").parse::<i64>().unwrap() >= 0);
        wait_until("the rewrite", || !rewriting(&mut c));
        writers.rewriting.store(false, Ordering::Relaxed);
        assert_eq!(info_field(&mut c, "aof_last_bgrewrite_status"), "ok");
        assert_eq!(info_field(&mut c, "aof_rewrites"), "1");
        assert_eq!(info_field(&mut c, "aof_current_rewrite_time_sec"), "-1");
        let during = writers.during.load(Ordering::Relaxed);
        assert!(during > 100, "only {during} writes were answered during the rewrite");
        std::thread::sleep(Duration::from_millis(100));
        let acked = writers.stop();
        for shard in 0..2 {
            let log = std::fs::read(log_of(&dir, shard)).unwrap();
            assert!(log.starts_with(b"REDIS"), "shard {shard}'s log was rewritten");
        }
        no_leftovers(&dir);
        acked
        // Dropped: SIGKILL.
    };
    let server = server_on(&dir, &[]);
    let mut c = server.client();
    check_writes(&mut c, &a, &b, acked);
    check_filled(&mut c, &a, 3000, "new");
    let rest: Vec<String> = (3000..6000).map(|i| format!("{{{a}}}:{i}")).collect();
    let rest: Vec<Option<String>> = redis::cmd("MGET").arg(&rest).query(&mut c).unwrap();
    assert!(rest
        .iter()
        .enumerate()
        .all(|(i, v)| v.as_deref() == Some(&format!("old:{}", i + 3000))));
    check_filled(&mut c, &b, 5999, "old");
    assert_eq!(q::<i64>(&mut c, &["EXISTS", &format!("{{{b}}}:5999")]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]).unwrap(), 6000 + 5999 + 4);
}

#[test]
fn kill_9_between_two_shards_swaps_keeps_whole_transactions() {
    let dir = temp_dir("aofrw-half");
    let (a, b) = keys_on_two_shards();
    let acked = {
        // Logs without preamble first, so that a swapped log shows.
        let server = server_on(&dir, &["--aof-use-rdb-preamble", "no"]);
        let mut c = server.client();
        // Shard 0 has few keys and swaps at once; shard 1's base takes
        // seconds.
        fill(&mut c, &a, 10, "old");
        fill(&mut c, &b, 20_000, "old");
        // The last MSETs of the pair are before the point: after the crash,
        // only shard 1's old log has them marked.
        let writers = Writers::start(&server, &a, &b);
        std::thread::sleep(Duration::from_millis(100));
        let acked = writers.stop();
        q::<String>(&mut c, &["CONFIG", "SET", "aof-use-rdb-preamble", "yes"]).unwrap();
        q::<String>(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "500"]).unwrap();
        q::<String>(&mut c, &["BGREWRITEAOF"]).unwrap();
        let started = Instant::now();
        wait_until("shard 0's swap", || {
            std::fs::read(log_of(&dir, 0)).unwrap().starts_with(b"REDIS")
        });
        // And cross-shard writes after the point, in both logs' tails.
        q::<String>(
            &mut c,
            &["MSET", &format!("later{{{a}}}"), "1", &format!("later{{{b}}}"), "1"],
        )
        .unwrap();
        assert!(rewriting(&mut c), "shard 1 still writes its base");
        assert!(started.elapsed() < Duration::from_secs(5));
        let old = std::fs::read(log_of(&dir, 1)).unwrap();
        assert!(!old.starts_with(b"REDIS") && old.windows(12).any(|w| w == b"REWRITEPOINT"));
        acked
    };
    // Shard 0's log has its parts of the MSETs before the point in its base,
    // without their markers; shard 1's old log has its parts marked, and
    // the point after them: they are replayed whole.
    let server = server_on(&dir, &[]);
    let mut c = server.client();
    check_writes(&mut c, &a, &b, acked);
    let later: Vec<Option<String>> =
        q(&mut c, &["MGET", &format!("later{{{a}}}"), &format!("later{{{b}}}")]).unwrap();
    assert_eq!(later, vec![Some("1".to_string()), Some("1".to_string())]);
    check_filled(&mut c, &a, 10, "old");
    check_filled(&mut c, &b, 20_000, "old");
    no_leftovers(&dir);
    // The next rewrite completes both.
    assert_eq!(
        q::<String>(&mut c, &["BGREWRITEAOF"]).unwrap(),
        "Background append only file rewriting started"
    );
    wait_until("the rewrite", || !rewriting(&mut c));
    drop(server);
    let server = server_on(&dir, &[]);
    let mut c = server.client();
    check_writes(&mut c, &a, &b, acked);
    assert!(std::fs::read(log_of(&dir, 1)).unwrap().starts_with(b"REDIS"));
}

#[test]
fn rewrites_and_background_saves_take_turns() {
    let dir = temp_dir("aofrw-turns");
    let (a, b) = keys_on_two_shards();
    let server = server_on(&dir, &["--rdb-key-save-delay", "200"]);
    let mut c = server.client();
    fill(&mut c, &a, 2000, "v");
    fill(&mut c, &b, 2000, "v");
    q::<String>(&mut c, &["BGREWRITEAOF"]).unwrap();
    let err = q::<String>(&mut c, &["BGREWRITEAOF"]).unwrap_err();
    assert!(err.to_string().contains("Background append only file rewriting already in progress"));
    let err = q::<String>(&mut c, &["BGSAVE"]).unwrap_err();
    assert!(err.to_string().contains("Another child process is active (AOF?)"), "{err}");
    assert_eq!(
        q::<String>(&mut c, &["BGSAVE", "SCHEDULE"]).unwrap(),
        "Background saving scheduled"
    );
    wait_until("the rewrite", || !rewriting(&mut c));
    // The scheduled save starts once the rewrite is over; a rewrite asked
    // for during it is scheduled in turn.
    wait_until("the scheduled save", || info_field(&mut c, "rdb_bgsave_in_progress") == "1");
    assert_eq!(
        q::<String>(&mut c, &["BGREWRITEAOF"]).unwrap(),
        "Background append only file rewriting scheduled"
    );
    assert_eq!(info_field(&mut c, "aof_rewrite_scheduled"), "1");
    wait_until("both", || {
        info_field(&mut c, "aof_rewrites") == "2" && info_field(&mut c, "rdb_saves") == "1"
    });
    // Inside MULTI it is scheduled, as in Redis.
    let replies: Vec<String> = redis::pipe().atomic().cmd("BGREWRITEAOF").query(&mut c).unwrap();
    assert_eq!(replies, vec!["Background append only file rewriting scheduled"]);
    wait_until("the scheduled rewrite", || info_field(&mut c, "aof_rewrites") == "3");
    wait_until("its end", || !rewriting(&mut c));
    // Turning the log off stops a running rewrite; that is not a failure.
    q::<String>(&mut c, &["BGREWRITEAOF"]).unwrap();
    q::<String>(&mut c, &["CONFIG", "SET", "appendonly", "no"]).unwrap();
    wait_until("the stop", || !rewriting(&mut c));
    assert_eq!(info_field(&mut c, "aof_rewrites"), "3");
    assert_eq!(info_field(&mut c, "aof_last_bgrewrite_status"), "ok");
    no_leftovers(&dir);
    // Turning it on again writes the logs from the data, while it is served.
    q::<String>(&mut c, &["CONFIG", "SET", "appendonly", "yes"]).unwrap();
    q::<String>(&mut c, &["SET", "during", "1"]).unwrap();
    wait_until("the log", || info_field(&mut c, "aof_rewrites") == "4");
    q::<String>(&mut c, &["SET", "after", "1"]).unwrap();
    drop(server);
    let server = server_on(&dir, &[]);
    let mut c = server.client();
    check_filled(&mut c, &a, 2000, "v");
    check_filled(&mut c, &b, 2000, "v");
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "during", "after"]).unwrap(), 2);
}

#[test]
fn shutdown_during_a_rewrite_stops_it_and_keeps_the_old_logs() {
    let dir = temp_dir("aofrw-shutdown");
    let (a, b) = keys_on_two_shards();
    {
        let server = server_on(&dir, &["--rdb-key-save-delay", "1000"]);
        let mut c = server.client();
        fill(&mut c, &a, 3000, "v");
        fill(&mut c, &b, 3000, "v");
        q::<String>(&mut c, &["BGREWRITEAOF"]).unwrap();
        q::<String>(&mut c, &["SET", &a, "during"]).unwrap();
        let started = Instant::now();
        let _ = q::<String>(&mut c, &["SHUTDOWN", "NOSAVE"]);
        let mut server = server;
        wait_until("the exit", || !server.is_running());
        assert!(started.elapsed() < Duration::from_secs(2), "the rewrite would take 3 s");
    }
    no_leftovers(&dir);
    let server = server_on(&dir, &[]);
    let mut c = server.client();
    check_filled(&mut c, &a, 3000, "v");
    check_filled(&mut c, &b, 3000, "v");
    assert_eq!(q::<String>(&mut c, &["GET", &a]).unwrap(), "during");
}
