//! Test harness: starts the real `ringdb` binary on a free port (two shards
//! by default) and gives tests real clients: the `redis` crate, and raw
//! sockets for protocol edge cases. The server is killed when the handle
//! drops.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Server {
    child: Child,
    pub port: u16,
    /// The server's own `dir` when the test gave none (removed on drop):
    /// no test ever writes a snapshot into the repository.
    own_dir: Option<TempDir>,
}

/// A fresh directory under the system's temp dir, removed when dropped
/// (so a run of the suite leaves nothing behind).
pub fn temp_dir(tag: &str) -> TempDir {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("ringdb-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temp dir");
    TempDir(dir)
}

/// See [`temp_dir`].
pub struct TempDir(std::path::PathBuf);

impl std::ops::Deref for TempDir {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl AsRef<std::path::Path> for TempDir {
    fn as_ref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A port no other server of this test process has used. ringdb listens
/// with SO_REUSEPORT, so two servers given one port would both bind it and
/// share its connections: the kernel's free port is not enough, as it may
/// hand a released port out again.
pub fn free_port() -> u16 {
    static USED: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let mut used = USED.lock().unwrap_or_else(|e| e.into_inner());
        if !used.contains(&port) {
            used.push(port);
            return port;
        }
    }
}

/// The server's reply to INFO `section`, as text, read up to the end of
/// the line that starts with `field` (empty when it cannot be had).
fn info_up_to(port: u16, section: &str, field: &str) -> String {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else { return String::new() };
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    let request = format!("*2\r\n$4\r\nINFO\r\n${}\r\n{section}\r\n", section.len());
    if s.write_all(request.as_bytes()).is_err() {
        return String::new();
    }
    let mut reply = Vec::new();
    let mut chunk = [0u8; 4096];
    while let Ok(n) = s.read(&mut chunk) {
        if n == 0 {
            break;
        }
        reply.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&reply);
        let line_read =
            text.split_once(&format!("\n{field}")).is_some_and(|(_, rest)| rest.contains("\r\n"));
        if text.starts_with('-') || line_read {
            return text.into_owned();
        }
    }
    String::new()
}

/// Waits until the server on `port` has loaded its data (INFO
/// `loading:0`): until then it answers most commands with -LOADING.
fn wait_loaded(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let info = info_up_to(port, "persistence", "loading:");
        if info.starts_with('-') || info.lines().any(|l| l.trim() == "loading:0") {
            return;
        }
        assert!(Instant::now() < deadline, "the server on port {port} does not end loading");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether the server answering on `port` is the process `pid` (another
/// process may share the port through SO_REUSEPORT). A server that wants a
/// password cannot say: taken as yes.
fn answers_as(port: u16, pid: u32) -> bool {
    let info = info_up_to(port, "server", "process_id:");
    info.starts_with('-') || info.lines().any(|l| l.trim() == format!("process_id:{pid}"))
}

impl Server {
    /// A server with `shards` shards and default settings.
    pub fn start(shards: usize) -> Server {
        Self::start_with(&["--shards", &shards.to_string()])
    }

    /// A server started with these extra flags (add `--shards` yourself).
    /// Unless they say otherwise, it never saves on its own (`save ""`) and
    /// its `dir` is a temporary directory of its own.
    pub fn start_with(args: &[&str]) -> Server {
        let server = Self::launch(None, args);
        wait_loaded(server.port);
        server
    }

    /// As [`Server::start_with`], but returned as soon as it listens, while
    /// it may still be loading its data.
    pub fn start_loading(args: &[&str]) -> Server {
        Self::launch(None, args)
    }

    /// A server started as redis-server is: its configuration file first
    /// (either format), then these options.
    pub fn start_from(file: &std::path::Path, args: &[&str]) -> Server {
        let server = Self::launch(Some(file), args);
        wait_loaded(server.port);
        server
    }

    /// As [`Server::start_with`], on `port` (a restart where it was).
    pub fn start_on(port: u16, args: &[&str]) -> Server {
        let server = Self::launch_at(None, args, Some(port), &|_| {});
        wait_loaded(server.port);
        server
    }

    /// As [`Server::start_with`] (on `port` if given), the command changed
    /// first by `adjust` (limits set in `pre_exec`, as a container's).
    pub fn start_adjusted(
        port: Option<u16>,
        args: &[&str],
        adjust: &dyn Fn(&mut Command),
    ) -> Server {
        let server = Self::launch_at(None, args, port, adjust);
        wait_loaded(server.port);
        server
    }

    fn launch(file: Option<&std::path::Path>, args: &[&str]) -> Server {
        Self::launch_at(file, args, None, &|_| {})
    }

    fn launch_at(
        file: Option<&std::path::Path>,
        args: &[&str],
        fixed: Option<u16>,
        adjust: &dyn Fn(&mut Command),
    ) -> Server {
        let own_dir = (!args.contains(&"--dir")).then(|| temp_dir("server"));
        let mut defaults: Vec<String> = Vec::new();
        if let Some(dir) = &own_dir {
            defaults.extend(["--dir".to_string(), dir.display().to_string()]);
        }
        if !args.contains(&"--save") {
            defaults.extend(["--save".to_string(), String::new()]);
        }
        // maxmemory as given, not adapted to the machine's cgroup (where a
        // memory limit would give it a default of its own).
        if file.is_none() && !args.contains(&"--maxmemory") {
            defaults.extend(["--maxmemory".to_string(), "0".to_string()]);
        }
        // The tests use DEBUG and CONFIG SET dir, which Redis (and ringdb)
        // refuse by default, as Redis's own test suite turns them on.
        for action in ["--enable-debug-command", "--enable-protected-configs"] {
            if !args.contains(&action) {
                defaults.extend([action.to_string(), "yes".to_string()]);
            }
        }
        // CI runs every test on each socket backend.
        if let Ok(backend) = std::env::var("RINGDB_IO_BACKEND") {
            if !args.contains(&"--io-backend") {
                defaults.extend(["--io-backend".to_string(), backend]);
            }
        }
        for _attempt in 0..20 {
            let port = fixed.unwrap_or_else(free_port);
            let mut command = Command::new(env!("CARGO_BIN_EXE_ringdb"));
            command
                .args(file)
                .args(["--port", &port.to_string(), "--pin-cpus", "no", "--loglevel", "warning"])
                .args(&defaults)
                .args(args)
                .stdout(Stdio::null())
                .stderr(Stdio::inherit());
            adjust(&mut command);
            let mut child = command.spawn().expect("start ringdb");
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break; // port taken meanwhile: try another
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    if answers_as(port, child.id()) {
                        return Server { child, port, own_dir };
                    }
                    break; // another process's server: try another port
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("could not start ringdb");
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A RESP2 connection through the `redis` crate.
    pub fn client(&self) -> redis::Connection {
        let client = redis::Client::open(self.url()).expect("client");
        let con = client.get_connection().expect("connect");
        con.set_read_timeout(Some(Duration::from_secs(30))).ok();
        con
    }

    /// A raw socket for protocol-level tests.
    pub fn raw(&self) -> Raw {
        Raw::connect(std::net::Ipv4Addr::LOCALHOST.into(), self.port)
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends the process a signal (`libc::SIGINT` …).
    #[allow(dead_code)]
    pub fn signal(&self, sig: i32) {
        // SAFETY: plain syscall to our own child, still unreaped.
        unsafe { libc::kill(self.child.id() as i32, sig) };
    }

    /// The exit code once the process has ended, waiting up to `within`.
    #[allow(dead_code)]
    pub fn exit_code(&mut self, within: Duration) -> Option<i32> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // own_dir goes after the process: removed as it drops.
    }
}

/// A raw connection: send bytes, read reply frames.
pub struct Raw {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl Raw {
    /// A raw connection to `ip:port`.
    pub fn connect(ip: std::net::IpAddr, port: u16) -> Raw {
        let s = TcpStream::connect((ip, port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).ok();
        s.set_nodelay(true).ok();
        Raw { stream: s, buf: Vec::new() }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write");
    }

    /// Sends a command as a RESP multibulk.
    pub fn cmd(&mut self, args: &[&[u8]]) {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        self.send(&out);
    }

    /// Reads one complete reply frame (RESP2 or RESP3) and returns its bytes.
    pub fn read_frame(&mut self) -> Vec<u8> {
        loop {
            if let Some(n) = ringdb_protocol::frame::frame_len(&self.buf, ringdb_protocol::Resp::V3)
            {
                return self.buf.drain(..n).collect();
            }
            if let Some(n) = ringdb_protocol::frame::frame_len(&self.buf, ringdb_protocol::Resp::V2)
            {
                return self.buf.drain(..n).collect();
            }
            let mut chunk = [0u8; 65536];
            let n = self.stream.read(&mut chunk).expect("read");
            assert!(
                n > 0,
                "connection closed while waiting for a reply; got so far: {:?}",
                String::from_utf8_lossy(&self.buf)
            );
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Sends a command and returns its reply as text.
    pub fn call(&mut self, args: &[&str]) -> String {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.cmd(&args);
        String::from_utf8_lossy(&self.read_frame()).into_owned()
    }

    /// Whether the server closed the connection (reads EOF within a while,
    /// or a reset: a server that closes a socket with unread input left in
    /// it resets the connection, as Redis does).
    pub fn is_closed(&mut self) -> bool {
        use std::io::ErrorKind;
        let mut chunk = [0u8; 1024];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return true,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) => {
                    return matches!(
                        e.kind(),
                        ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted
                    )
                }
            }
        }
    }
}

/// Waits until `cond` holds, for up to `secs` seconds; fails the test
/// naming `what` otherwise.
pub fn wait_for(secs: u64, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `redis::cmd(name).arg(..)...` shorthand: runs a command and converts.
pub fn q<T: redis::FromRedisValue>(
    con: &mut redis::Connection,
    args: &[&str],
) -> redis::RedisResult<T> {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(con)
}

/// The value of `field` in INFO `section`.
pub fn info_field(c: &mut redis::Connection, section: &str, field: &str) -> String {
    let info: String = q(c, &["INFO", section]).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("INFO {section} has no {field}: {info}"))
        .trim()
        .to_string()
}

/// Two keys that live on different shards of a 2-shard server.
pub fn keys_on_two_shards() -> (String, String) {
    let map = ringdb_engine::SlotMap::new(2);
    let mut a = None;
    let mut b = None;
    for i in 0.. {
        let k = format!("key:{i}");
        match map.shard_of_key(k.as_bytes()).0 {
            0 if a.is_none() => a = Some(k),
            1 if b.is_none() => b = Some(k),
            _ => {}
        }
        if a.is_some() && b.is_some() {
            break;
        }
    }
    (a.unwrap(), b.unwrap())
}

/// Connected clients per shard, from INFO shards.
pub fn clients_per_shard(c: &mut redis::Connection) -> Vec<usize> {
    let info: String = q(c, &["INFO", "shards"]).unwrap();
    info.lines()
        .filter(|l| l.starts_with("shard") && !l.starts_with("shards:"))
        .map(|l| l.split(',').find_map(|f| f.strip_prefix("clients=")).unwrap().parse().unwrap())
        .collect()
}

/// A raw connection that landed on `shard` (the kernel spreads connections
/// over the cores; keep connecting until one lands there). The others stay
/// open in `keep`, so that the counts stay meaningful.
pub fn raw_on_shard(
    server: &Server,
    admin: &mut redis::Connection,
    shard: usize,
    keep: &mut Vec<Raw>,
) -> Raw {
    for _ in 0..200 {
        let before = clients_per_shard(admin);
        let mut raw = server.raw();
        assert!(raw.call(&["PING"]).starts_with("+PONG"));
        if clients_per_shard(admin)[shard] > before[shard] {
            return raw;
        }
        keep.push(raw);
    }
    panic!("no connection landed on shard {shard}");
}

/// A real `redis-server` child process for differential tests, killed on
/// drop. Without redis-server installed, [`RedisServer::start`] gives `None`
/// after saying the test is skipped, except under `CI=true`, where a missing
/// dependency fails the test instead of passing it silently.
pub struct RedisServer {
    child: Child,
    pub port: u16,
    /// The server's `dir` when the caller gave none (removed on drop).
    own_dir: Option<TempDir>,
}

impl RedisServer {
    /// A redis-server with no persistence, its `dir` a temporary directory.
    pub fn start_default() -> Option<RedisServer> {
        Self::start_args(&[])
    }

    /// A redis-server whose files are `dir/dbfilename` (loaded when there).
    pub fn start(dir: &std::path::Path, dbfilename: &str) -> Option<RedisServer> {
        let dir = dir.to_str().expect("a UTF-8 dir");
        Self::start_args(&["--dir", dir, "--dbfilename", dbfilename])
    }

    /// A redis-server with these extra arguments; it never saves on its own
    /// and keeps no log. `None` (after saying so) when it is not installed
    /// and `CI` is not `true`.
    pub fn start_args(args: &[&str]) -> Option<RedisServer> {
        let own_dir = (!args.contains(&"--dir")).then(|| temp_dir("redis"));
        let mut defaults: Vec<String> = Vec::new();
        if let Some(dir) = &own_dir {
            defaults.extend(["--dir".to_string(), dir.display().to_string()]);
        }
        for _attempt in 0..20 {
            let port = free_port();
            let spawned = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", ""])
                .args(["--appendonly", "no"])
                .args(&defaults)
                .args(args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn();
            let mut child = match spawned {
                Ok(child) => child,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    if std::env::var("CI").as_deref() == Ok("true") {
                        panic!("redis-server is not installed, and CI=true: it is required");
                    }
                    eprintln!("SKIPPED: redis-server is not installed (apt install redis-server)");
                    return None;
                }
                Err(e) => panic!("could not start redis-server: {e}"),
            };
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut ours = false;
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break; // port taken meanwhile: try another
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    ours = answers_as(port, child.id());
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            if !ours {
                let _ = child.kill();
                let _ = child.wait();
                continue;
            }
            let redis = RedisServer { child, port, own_dir };
            // While it loads a file it answers -LOADING: wait for PONG.
            while Instant::now() < deadline {
                if redis.raw().call(&["PING"]).starts_with("+PONG") {
                    return Some(redis);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            panic!("redis-server did not finish loading");
        }
        panic!("could not start redis-server");
    }

    /// A RESP2 connection through the `redis` crate.
    pub fn client(&self) -> redis::Connection {
        let url = format!("redis://127.0.0.1:{}/", self.port);
        let con = redis::Client::open(url).and_then(|c| c.get_connection());
        let con = con.expect("connect to redis-server");
        con.set_read_timeout(Some(Duration::from_secs(30))).ok();
        con
    }

    /// A raw socket.
    pub fn raw(&self) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect to redis-server");
        s.set_read_timeout(Some(Duration::from_secs(10))).ok();
        s.set_nodelay(true).ok();
        Raw { stream: s, buf: Vec::new() }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // own_dir goes after the process: removed as it drops.
    }
}
