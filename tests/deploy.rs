//! Runs as deployed: under a container's locked-memory limit (`ulimit -l
//! 64`, Docker's default), restarted on its port right after `kill -9` (a
//! systemd or Kubernetes restart), with io_uring refused by a seccomp
//! filter (Docker 25+'s default profile), and told it is ready through
//! systemd's notify socket.

mod common;

use common::{keys_on_two_shards, q, temp_dir, Server};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// io_uring charges the locked memory of the user, not the process: two
/// confined servers at once would share one 64 KiB budget.
static CONFINED: Mutex<()> = Mutex::new(());

/// linux/capability.h.
const CAP_IPC_LOCK: libc::c_ulong = 14;

/// The command runs as in a container: `RLIMIT_MEMLOCK` at `kib` KiB (soft
/// and hard) and, when run as root, without `CAP_IPC_LOCK` (which exempts
/// io_uring from the limit; containers do not have it).
fn confine(kib: u64) -> impl Fn(&mut Command) {
    move |command: &mut Command| {
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            command.pre_exec(move || {
                let lim = libc::rlimit { rlim_cur: kib * 1024, rlim_max: kib * 1024 };
                if libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // Not root: the capability is not there to drop (EPERM).
                libc::prctl(libc::PR_CAPBSET_DROP, CAP_IPC_LOCK, 0, 0, 0);
                Ok(())
            });
        }
    }
}

fn log_of(dir: &std::path::Path) -> String {
    std::fs::read_to_string(dir.join("ringdb.log")).unwrap_or_default()
}

#[test]
fn starts_under_a_64_kib_memlock_limit_and_every_shard_serves() {
    let _one = CONFINED.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp_dir("memlock");
    let logfile = dir.join("ringdb.log").display().to_string();
    let dir_arg = dir.display().to_string();
    let server = Server::start_adjusted(
        None,
        &["--shards", "2", "--dir", &dir_arg, "--logfile", &logfile],
        &confine(64),
    );
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    let _: () = q(&mut c, &["MSET", &a, "1", &b, "2"]).unwrap();
    let got: Vec<String> = q(&mut c, &["MGET", &a, &b]).unwrap();
    assert_eq!(got, ["1", "2"]);
    let log = log_of(&dir);
    assert!(
        log.contains("locked memory limit (ulimit -l) 64 KiB for 2 shards")
            && log.contains("no registered I/O buffers"),
        "the log says what the limit allowed: {log}"
    );
    let info: String = q(&mut c, &["INFO", "shards"]).unwrap();
    assert!(info.contains("shards:2"), "{info}");
}

#[test]
fn a_limit_too_small_for_every_shard_runs_the_shards_that_fit() {
    let _one = CONFINED.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp_dir("memlock-few");
    let logfile = dir.join("ringdb.log").display().to_string();
    let dir_arg = dir.display().to_string();
    let server = Server::start_adjusted(
        None,
        &["--shards", "8", "--dir", &dir_arg, "--logfile", &logfile],
        &confine(64),
    );
    let mut c = server.client();
    let info: String = q(&mut c, &["INFO", "shards"]).unwrap();
    assert!(info.contains("shards:2"), "{info}");
    let log = log_of(&dir);
    assert!(log.contains("only 2 of the 8 shards fit"), "{log}");
    let _: () = q(&mut c, &["SET", "k", "v"]).unwrap();
    assert_eq!(q::<String>(&mut c, &["GET", "k"]).unwrap(), "v");
}

#[test]
fn restarts_on_its_port_right_after_kill_9() {
    let _one = CONFINED.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp_dir("restart");
    let dir_arg = dir.display().to_string();
    // appendfsync always: what was acknowledged is on disk when killed.
    let args =
        ["--shards", "2", "--dir", &dir_arg, "--appendonly", "yes", "--appendfsync", "always"];
    let mut server = Server::start_adjusted(None, &args, &confine(64));
    let port = server.port;
    for round in 0..3 {
        let key = format!("round:{round}");
        let _: () = q(&mut server.client(), &["SET", &key, "x"]).unwrap();
        server.signal(libc::SIGKILL);
        assert!(server.exit_code(Duration::from_secs(5)).is_none(), "killed, no exit code");
        drop(server);
        // At once, while the kernel may still be freeing the old rings.
        let started = Instant::now();
        server = Server::start_adjusted(Some(port), &args, &confine(64));
        let mut c = server.client();
        assert_eq!(q::<i64>(&mut c, &["EXISTS", &key]).unwrap(), 1, "round {round}");
        let size: i64 = q(&mut c, &["DBSIZE"]).unwrap();
        assert_eq!(size, round + 1, "every shard serves");
        assert!(started.elapsed() < Duration::from_secs(8), "{:?}", started.elapsed());
    }
}

/// A seccomp filter that answers `io_uring_setup` (425 on every
/// architecture) with EPERM, as Docker 25+'s default profile does.
fn refuse_io_uring(command: &mut Command) {
    // SAFETY: only async-signal-safe calls between fork and exec; the
    // filter program lives on this stack until the prctl returns.
    unsafe {
        command.pre_exec(|| {
            const IO_URING_SETUP: u32 = 425;
            let filter = [
                libc::sock_filter {
                    code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
                    jt: 0,
                    jf: 0,
                    k: 0,
                },
                libc::sock_filter {
                    code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
                    jt: 0,
                    jf: 1,
                    k: IO_URING_SETUP,
                },
                libc::sock_filter {
                    code: (libc::BPF_RET | libc::BPF_K) as u16,
                    jt: 0,
                    jf: 0,
                    k: libc::SECCOMP_RET_ERRNO | libc::EPERM as u32,
                },
                libc::sock_filter {
                    code: (libc::BPF_RET | libc::BPF_K) as u16,
                    jt: 0,
                    jf: 0,
                    k: libc::SECCOMP_RET_ALLOW,
                },
            ];
            let program =
                libc::sock_fprog { len: filter.len() as u16, filter: filter.as_ptr() as *mut _ };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &program as *const _,
                ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[test]
fn io_uring_refused_by_seccomp_is_a_clear_start_up_error() {
    let dir = temp_dir("seccomp");
    let mut command = Command::new(env!("CARGO_BIN_EXE_ringdb"));
    command
        .args(["--port", &common::free_port().to_string(), "--shards", "2", "--save", ""])
        .current_dir(&*dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    refuse_io_uring(&mut command);
    let child = command.spawn().expect("start ringdb");
    let out = child.wait_with_output().expect("ringdb ends");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "it stops: {text}");
    assert!(
        text.contains("io_uring is refused on this system") && text.contains("seccomp-ringdb.json"),
        "names the cause and the fix: {text}"
    );
    assert!(!text.contains("Ready to accept connections"), "{text}");
}

/// The datagrams ringdb sends to `NOTIFY_SOCKET` until `until` is among
/// them (or `within` passes).
fn notifications(
    socket: &std::os::unix::net::UnixDatagram,
    until: &str,
    within: Duration,
) -> String {
    let deadline = Instant::now() + within;
    let mut all = String::new();
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline && !all.contains(until) {
        socket.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        if let Ok(n) = socket.recv(&mut buf) {
            all.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    }
    all
}

#[test]
fn tells_systemd_ready_watchdog_and_stopping() {
    let dir = temp_dir("notify");
    let path = dir.join("notify.sock");
    let socket = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
    let notify = path.display().to_string();
    let mut server =
        Server::start_adjusted(None, &["--shards", "2", "--supervised", "systemd"], &|c| {
            c.env("NOTIFY_SOCKET", &notify)
                .env("WATCHDOG_USEC", "400000")
                .env_remove("WATCHDOG_PID");
        });
    let said = notifications(&socket, "READY=1", Duration::from_secs(10));
    assert!(
        said.contains("READY=1") && said.contains(&format!("MAINPID={}", server.pid())),
        "{said}"
    );
    // Ready means every shard serves.
    let (a, b) = keys_on_two_shards();
    let _: () = q(&mut server.client(), &["MSET", &a, "1", &b, "2"]).unwrap();
    let said = notifications(&socket, "WATCHDOG=1", Duration::from_secs(5));
    assert!(said.contains("WATCHDOG=1"), "every shard answered the watchdog: {said}");
    server.signal(libc::SIGTERM);
    let said = notifications(&socket, "STOPPING=1", Duration::from_secs(10));
    assert!(said.contains("STOPPING=1"), "{said}");
    assert_eq!(server.exit_code(Duration::from_secs(10)), Some(0));
}

/// `systemd-analyze verify` on the shipped unit (its ExecStart pointed at
/// this build). Under CI=true a missing systemd-analyze is a failure.
#[test]
fn the_systemd_unit_verifies() {
    if which("systemd-analyze").is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "systemd-analyze is missing (apt install systemd)"
        );
        eprintln!("skipped: no systemd-analyze");
        return;
    }
    let unit =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/ringdb.service"))
            .unwrap();
    assert!(unit.contains("Type=notify") && unit.contains("--supervised systemd"), "{unit}");
    let dir = temp_dir("unit");
    let path = dir.join("ringdb.service");
    std::fs::write(&path, unit.replace("/usr/local/bin/ringdb", env!("CARGO_BIN_EXE_ringdb")))
        .unwrap();
    let out = Command::new("systemd-analyze").arg("verify").arg(&path).output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && text.trim().is_empty(), "systemd-analyze verify: {text}");
}

fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| std::path::Path::new(d).join(program))
        .find(|p| p.exists())
}

/// The shipped configuration loads and serves (its `dir` replaced by the
/// test's own, as the command line comes after the file).
#[test]
fn the_shipped_configuration_starts() {
    let file = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/ringdb.toml"));
    let server = Server::start_from(file, &["--shards", "2"]);
    let mut c = server.client();
    assert_eq!(q::<String>(&mut c, &["PING"]).unwrap(), "PONG");
    let got: Vec<String> = q(&mut c, &["CONFIG", "GET", "io-memory"]).unwrap();
    assert_eq!(got[1], "1048576", "the file was read");
}
