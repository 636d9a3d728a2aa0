//! Memory as a user watches it, the server's RSS (`/proc/PID/status`):
//! what an idle connection costs, and that memory freed by closed
//! connections or a FLUSHALL goes back to the OS once the shards are quiet.

mod common;

use common::{q, Server};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Waits up to `secs` for the RSS to drop to `at_most` KiB; returns it.
fn settles_to(pid: u32, at_most: u64, secs: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let rss = rss_kib(pid);
        if rss <= at_most || Instant::now() > deadline {
            return rss;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Opens `n` connections and has each answer a PING (so the server has
/// set each one up and replied on it).
fn idle_clients(port: u16, n: usize) -> Vec<TcpStream> {
    use std::io::{Read, Write};
    // This test process needs a descriptor per client.
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: plain syscalls on a local struct.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        lim.rlim_cur = lim.rlim_max.min(n as u64 + 1024).max(lim.rlim_cur);
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
    }
    let mut all: Vec<TcpStream> =
        (0..n).map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap()).collect();
    for s in &mut all {
        s.write_all(b"PING\r\n").unwrap();
    }
    for s in &mut all {
        let mut buf = [0u8; 7];
        s.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"+PONG\r\n");
    }
    all
}

#[test]
fn idle_connections_are_small_and_give_their_memory_back() {
    const N: usize = 2000;
    let server = Server::start_with(&["--shards", "2", "--maxclients", "10000"]);
    let pid = server.pid();
    let before = rss_kib(pid);
    let clients = idle_clients(server.port, N);
    std::thread::sleep(Duration::from_millis(500));
    let during = rss_kib(pid);
    let each = (during.saturating_sub(before)) * 1024 / N as u64;
    // 42 KB each before the buffers were made lazy and the router's state
    // boxed; about 4.5 KB now in a release build (the task, the connection,
    // its records), 8.4 KB in the tests' debug build, whose futures are
    // bigger.
    let mut bound = if cfg!(debug_assertions) { 12 * 1024 } else { 6 * 1024 };
    if std::env::var("RINGDB_IO_BACKEND").as_deref() == Ok("glommio") {
        // glommio's sockets read into a buffer of the connection's own
        // (16 KiB), held while the read waits.
        bound += 16 * 1024;
    }
    assert!(each < bound, "{each} bytes per idle connection ({before} -> {during} KiB)");
    drop(clients);
    // The shards purge once quiet for a second.
    let bound = before + (during - before) / 2;
    let after = settles_to(pid, bound, 10);
    assert!(after <= bound, "RSS {before} -> {during} -> {after} KiB after the clients left");
}

#[test]
fn memory_of_a_flushed_dataset_goes_back_to_the_os() {
    let server = Server::start(2);
    let pid = server.pid();
    let mut c = server.client();
    let before = rss_kib(pid);
    let _: () = q(&mut c, &["DEBUG", "POPULATE", "300000", "key", "16"]).unwrap();
    let loaded = rss_kib(pid);
    assert!(loaded > before + 20 * 1024, "300,000 keys took {before} -> {loaded} KiB");
    let _: () = q(&mut c, &["FLUSHALL"]).unwrap();
    drop(c);
    let bound = before + (loaded - before) / 3;
    let after = settles_to(pid, bound, 10);
    assert!(after <= bound, "RSS {before} -> {loaded} -> {after} KiB after FLUSHALL");
}

/// The heap holds little more than the server counts: 300,000 small keys
/// grow INFO's `allocator_resident` (the process's anonymous resident
/// bytes) by at most 1.2 times what they grow `used_memory` (1.13 measured).
/// It was 1.37 while every block went through mimalloc's aligned entry
/// point, which moved each size class to the next one up once a page
/// filled (48-byte entries took 56 bytes).
#[test]
fn the_heap_holds_little_more_than_it_counts() {
    let server = Server::start(2);
    let mut c = server.client();
    let memory = |c: &mut redis::Connection| -> (f64, f64) {
        let info: String = q(c, &["INFO", "memory"]).unwrap();
        let field = |name: &str| -> f64 {
            let line = info.lines().find(|l| l.starts_with(name)).unwrap();
            line[name.len()..].trim().parse().unwrap()
        };
        (field("used_memory:"), field("allocator_resident:"))
    };
    let (used0, resident0) = memory(&mut c);
    let _: () = q(&mut c, &["DEBUG", "POPULATE", "300000", "key", "16"]).unwrap();
    // The shards give back what the load freed once quiet for a second.
    std::thread::sleep(Duration::from_millis(3000));
    let (used, resident) = memory(&mut c);
    let ratio = (resident - resident0) / (used - used0);
    assert!(ratio <= 1.2, "resident {resident0} -> {resident}, used {used0} -> {used}: {ratio}");
}

/// A subscriber that never reads: the server's memory stays within its
/// pubsub output limit (+10 %) until it is cut off, and comes back after.
/// Before, messages left the mailbox (where the limit counts them) faster
/// than the client took them, and each kept its publisher's whole input
/// buffer: the peak was 1.6 times the limit.
#[test]
fn a_subscriber_that_never_reads_stays_within_its_limit() {
    use std::io::Write;
    const LIMIT: u64 = 8 << 20;
    let server = Server::start(2);
    let mut c = server.client();
    let _: () =
        q(&mut c, &["CONFIG", "SET", "client-output-buffer-limit", "pubsub 8mb 0 0"]).unwrap();
    let mut sub = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    sub.write_all(b"SUBSCRIBE news\r\n").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while q::<(String, i64)>(&mut c, &["PUBSUB", "NUMSUB", "news"]).unwrap().1 != 1 {
        assert!(Instant::now() < deadline, "the subscriber never subscribed");
        std::thread::sleep(Duration::from_millis(20));
    }
    let used = |c: &mut redis::Connection| -> u64 {
        let info: String = q(c, &["INFO", "memory"]).unwrap();
        let line = info.lines().find(|l| l.starts_with("used_memory:")).unwrap();
        line["used_memory:".len()..].trim().parse().unwrap()
    };
    let base = used(&mut c);
    let message = "m".repeat(1024);
    let (mut peak, deadline) = (base, Instant::now() + Duration::from_secs(60));
    loop {
        let mut pipe = redis::pipe();
        for _ in 0..100 {
            pipe.cmd("PUBLISH").arg("news").arg(&message);
        }
        let receivers: Vec<i64> = pipe.query(&mut c).unwrap();
        peak = peak.max(used(&mut c));
        if receivers.last() == Some(&0) {
            break;
        }
        assert!(Instant::now() < deadline, "the subscriber was never cut off");
    }
    let over = peak - base;
    assert!(over <= LIMIT + LIMIT / 10, "peak {over} bytes over the start, limit {LIMIT}");
    let stats: String = q(&mut c, &["INFO", "stats"]).unwrap();
    assert!(stats.contains("client_output_buffer_limit_disconnections:1\r\n"), "{stats}");
    let _: () = q(&mut c, &["CONFIG", "RESETSTAT"]).unwrap();
    let stats: String = q(&mut c, &["INFO", "stats"]).unwrap();
    assert!(stats.contains("client_output_buffer_limit_disconnections:0\r\n"), "{stats}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while used(&mut c) > base + (1 << 20) {
        assert!(Instant::now() < deadline, "memory came back: {} over", used(&mut c) - base);
        std::thread::sleep(Duration::from_millis(100));
    }
}
