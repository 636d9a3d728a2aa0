//! TLS as Redis 7.0 has it: the TLS port beside the plain one, client
//! certificates (`tls-auth-clients yes|optional|no`), a plaintext client
//! on the TLS port, TLS only (`port 0`), certificate rotation by CONFIG
//! SET under load, a stalled handshake, encrypted keys, and replication
//! over TLS. Clients: redis-cli, redis-py, the `redis` crate and rustls
//! itself (to see which certificate the server presents). Certificates
//! are made here with rcgen (the encrypted keys with the openssl CLI, as
//! Redis's own tests make them).
//!
//! Every test runs on the backend RINGDB_IO_BACKEND names (CI runs both).
//! Under CI=true a missing redis-cli, python3 redis or openssl fails the
//! test; elsewhere it is skipped with a line saying so.

mod common;

use common::{free_port, temp_dir, wait_for, Server, TempDir};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A CA and what it signed, as PEM files in a directory of their own.
struct Pki {
    dir: TempDir,
    ca_cert: rcgen::Certificate,
    ca_key: KeyPair,
}

impl Pki {
    fn new(tag: &str) -> Pki {
        let dir = temp_dir(tag);
        let ca_key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, format!("{tag} CA"));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        let ca_cert = params.self_signed(&ca_key).unwrap();
        std::fs::write(dir.join("ca.crt"), ca_cert.pem()).unwrap();
        Pki { dir, ca_cert, ca_key }
    }

    fn ca(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    /// `<name>.crt` and `<name>.key` signed by this CA, for localhost and
    /// 127.0.0.1 (clients that check the name find it).
    fn issue(&self, name: &str) -> (PathBuf, PathBuf) {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.signed_by(&key, &self.ca_cert, &self.ca_key).unwrap();
        let (crt, keyfile) =
            (self.dir.join(format!("{name}.crt")), self.dir.join(format!("{name}.key")));
        std::fs::write(&crt, cert.pem()).unwrap();
        std::fs::write(&keyfile, key.serialize_pem()).unwrap();
        (crt, keyfile)
    }
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// A ringdb with a TLS port beside its plain one (the harness talks to
/// the plain one), the server certificate `server` of `pki`, and `extra`
/// flags.
fn tls_server(pki: &Pki, extra: &[&str]) -> (Server, u16) {
    let (crt, key) = pki.issue("server");
    let tls_port = free_port();
    let mut args: Vec<String> = vec![
        "--shards".into(),
        "2".into(),
        "--tls-port".into(),
        tls_port.to_string(),
        "--tls-cert-file".into(),
        s(&crt),
        "--tls-key-file".into(),
        s(&key),
        "--tls-ca-cert-file".into(),
        s(&pki.ca()),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    (Server::start_with(&args), tls_port)
}

/// Whether a tool is there; under CI=true its absence fails the test.
fn have(tool: &str, probe: &[&str]) -> bool {
    let found = Command::new(tool)
        .args(probe)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{tool} is required under CI=true (apt install redis-tools python3-redis openssl)"
        );
        eprintln!("SKIPPED: {tool} {} does not work here", probe.join(" "));
    }
    found
}

/// A `redis` crate client over TLS, with a client certificate or none.
fn tls_client(
    port: u16,
    ca: &Path,
    cert: Option<(&Path, &Path)>,
) -> redis::RedisResult<redis::Connection> {
    let certs = redis::TlsCertificates {
        client_tls: cert.map(|(crt, key)| redis::ClientTlsConfig {
            client_cert: std::fs::read(crt).unwrap(),
            client_key: std::fs::read(key).unwrap(),
        }),
        root_cert: Some(std::fs::read(ca).unwrap()),
    };
    let client = redis::Client::build_with_tls(format!("rediss://127.0.0.1:{port}/"), certs)?;
    let con = client.get_connection_with_timeout(Duration::from_secs(10))?;
    con.set_read_timeout(Some(Duration::from_secs(30))).ok();
    Ok(con)
}

/// Whether a TLS client gets PONG: the handshake, then a round trip (a
/// refused client certificate shows at the first read in TLS 1.3).
fn pings(port: u16, ca: &Path, cert: Option<(&Path, &Path)>) -> bool {
    let Ok(mut con) = tls_client(port, ca, cert) else { return false };
    redis::cmd("PING").query::<String>(&mut con).is_ok_and(|p| p == "PONG")
}

/// The certificate the server presents on a new connection (DER), read
/// with rustls itself.
fn presented(port: u16, ca: &Path, cert: (&Path, &Path)) -> Vec<u8> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let chain: Vec<CertificateDer> =
        CertificateDer::pem_file_iter(cert.0).unwrap().map(|c| c.unwrap()).collect();
    let key = PrivateKeyDer::from_pem_file(cert.1).unwrap();
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .unwrap();
    let name = "localhost".try_into().unwrap();
    let mut conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut tls = rustls::Stream::new(&mut conn, &mut tcp);
    tls.write_all(b"PING\r\n").unwrap();
    let mut reply = [0u8; 7];
    tls.read_exact(&mut reply).unwrap();
    assert_eq!(&reply, b"+PONG\r\n");
    conn.peer_certificates().unwrap()[0].to_vec()
}

fn pem_der(path: &Path) -> Vec<u8> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::from_pem_file(path).unwrap().to_vec()
}

#[test]
fn redis_cli_and_the_redis_crate_round_trip_with_a_client_certificate() {
    let pki = Pki::new("cli");
    let (server, tls_port) = tls_server(&pki, &[]);
    let (crt, key) = pki.issue("client");
    let mut con = tls_client(tls_port, &pki.ca(), Some((&crt, &key))).unwrap();
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut con).unwrap();
    let big = "x".repeat(3 << 20);
    let _: () = redis::cmd("SET").arg("big").arg(&big).query(&mut con).unwrap();
    let got: String = redis::cmd("GET").arg("big").query(&mut con).unwrap();
    assert_eq!(got.len(), big.len(), "a value spanning many records");
    // A pipeline of many commands: many requests per record and replies
    // batched into records.
    let mut pipe = redis::pipe();
    for i in 0..500 {
        pipe.cmd("INCR").arg(format!("n{}", i % 7));
    }
    let counts: Vec<i64> = pipe.query(&mut con).unwrap();
    assert_eq!(counts.len(), 500);
    // The plain port still serves alongside.
    let plain: String = redis::cmd("GET").arg("k").query(&mut server.client()).unwrap();
    assert_eq!(plain, "v");
    if !have("redis-cli", &["--version"]) {
        return;
    }
    let cli = |args: &[&str]| {
        let out = Command::new("redis-cli")
            .args(["-p", &tls_port.to_string(), "--tls", "--cacert", &s(&pki.ca())])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let cert = ["--cert", &s(&crt), "--key", &s(&key)];
    assert_eq!(cli(&[&cert[..], &["GET", "k"]].concat()), "v");
    assert_eq!(cli(&[&cert[..], &["SET", "k2", "w"]].concat()), "OK");
    assert_eq!(cli(&["PING"]), "", "no client certificate: refused");
}

#[test]
fn redis_py_with_ssl() {
    let pki = Pki::new("py");
    let (_server, tls_port) = tls_server(&pki, &[]);
    let (crt, key) = pki.issue("client");
    if !have("python3", &["-c", "import redis"]) {
        return;
    }
    let script = format!(
        "import redis\n\
         r = redis.Redis(host='127.0.0.1', port={tls_port}, ssl=True, ssl_ca_certs='{}', \
         ssl_certfile='{}', ssl_keyfile='{}')\n\
         assert r.ping()\n\
         r.set('py', 'x' * 100000)\n\
         assert len(r.get('py')) == 100000\n\
         print('ok')\n",
        s(&pki.ca()),
        s(&crt),
        s(&key)
    );
    let out = Command::new("python3").args(["-c", &script]).output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "ok",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn client_certificates_as_tls_auth_clients_says() {
    let pki = Pki::new("mtls");
    let other = Pki::new("other");
    let (server, tls_port) = tls_server(&pki, &[]);
    let (crt, key) = pki.issue("client");
    let (stranger, stranger_key) = other.issue("stranger");
    let ca = pki.ca();
    assert!(pings(tls_port, &ca, Some((&crt, &key))), "a certificate of the CA");
    assert!(!pings(tls_port, &ca, None), "yes (the default): none is refused");
    assert!(!pings(tls_port, &ca, Some((&stranger, &stranger_key))), "another CA's is refused");
    let mut c = server.client();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("tls-auth-clients")
        .arg("optional")
        .query(&mut c)
        .unwrap();
    assert!(pings(tls_port, &ca, None), "optional: none is fine");
    assert!(pings(tls_port, &ca, Some((&crt, &key))));
    assert!(!pings(tls_port, &ca, Some((&stranger, &stranger_key))), "optional still checks one");
    let _: () =
        redis::cmd("CONFIG").arg("SET").arg("tls-auth-clients").arg("no").query(&mut c).unwrap();
    assert!(pings(tls_port, &ca, None), "no: not asked for");
    let got: Vec<String> =
        redis::cmd("CONFIG").arg("GET").arg("tls-auth-clients").query(&mut c).unwrap();
    assert_eq!(got, ["tls-auth-clients", "no"]);
}

#[test]
fn a_plaintext_client_on_the_tls_port_is_closed_and_garbage_never_hurts() {
    let pki = Pki::new("plain");
    let (mut server, tls_port) = tls_server(&pki, &[]);
    let read_all = |bytes: &[u8]| {
        let mut tcp = TcpStream::connect(("127.0.0.1", tls_port)).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        let _ = tcp.write_all(bytes);
        let mut got = Vec::new();
        let _ = tcp.read_to_end(&mut got);
        got
    };
    assert!(read_all(b"PING\r\n").is_empty(), "closed with nothing said (as OpenSSL)");
    assert!(read_all(b"*1\r\n$4\r\nPING\r\n").is_empty());
    // A handshake record claiming far more than TLS allows, records of
    // every content type with random bodies, and a huge stream of junk.
    let huge = [0x16, 0x03, 0x03, 0xff, 0xff];
    let closed = read_all(&huge);
    assert!(closed.len() < 64, "at most an alert: {closed:?}");
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for typ in [0x14u8, 0x15, 0x16, 0x17, 0x18] {
        let mut record = vec![typ, 0x03, 0x03, 0x01, 0x00];
        record.extend((0..256).map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        }));
        read_all(&record);
    }
    read_all(&vec![0x16; 4 << 20]);
    assert!(server.is_running());
    assert!(pings(
        tls_port,
        &pki.ca(),
        Some((&pki.issue("client").0, &pki.dir.join("client.key")))
    ));
}

#[test]
fn a_stalled_handshake_is_closed_after_the_timeout() {
    let pki = Pki::new("stall");
    let (_server, tls_port) = tls_server(&pki, &[]);
    let started = Instant::now();
    let mut tcp = TcpStream::connect(("127.0.0.1", tls_port)).unwrap();
    // The start of a ClientHello record, and nothing more.
    tcp.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01]).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut got = Vec::new();
    let _ = tcp.read_to_end(&mut got);
    let waited = started.elapsed();
    assert!(waited >= Duration::from_secs(9) && waited < Duration::from_secs(20), "{waited:?}");
}

#[test]
fn tls_only_with_port_0() {
    let pki = Pki::new("only");
    let (crt, key) = pki.issue("server");
    let (client, client_key) = pki.issue("client");
    let tls_port = free_port();
    let dir = temp_dir("only-dir");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ringdb"))
        .args(["--port", "0", "--tls-port", &tls_port.to_string(), "--shards", "2"])
        .args(["--tls-cert-file", &s(&crt), "--tls-key-file", &s(&key)])
        .args(["--tls-ca-cert-file", &s(&pki.ca()), "--pin-cpus", "no", "--save", ""])
        .args(["--dir", &s(&dir), "--loglevel", "warning"])
        .args(
            std::env::var("RINGDB_IO_BACKEND")
                .map(|b| vec!["--io-backend".to_string(), b])
                .unwrap_or_default(),
        )
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut con = loop {
        match tls_client(tls_port, &pki.ca(), Some((&client, &client_key))) {
            Ok(con) => break con,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => panic!("no TLS port: {e}"),
        }
    };
    let port: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("port").query(&mut con).unwrap();
    assert_eq!(port, ["port", "0"]);
    let info: String = redis::cmd("INFO").arg("server").query(&mut con).unwrap();
    assert!(info.contains("tcp_port:0"), "{info}");
    // Switching ports as Redis's test does: plain on, TLS off, and back.
    let plain = free_port();
    let _: () = redis::cmd("CONFIG").arg("SET").arg("port").arg(plain).query(&mut con).unwrap();
    let mut raw = common::Raw::connect(std::net::Ipv4Addr::LOCALHOST.into(), plain);
    assert_eq!(raw.call(&["PING"]), "+PONG\r\n");
    assert_eq!(raw.call(&["CONFIG", "SET", "tls-port", "0"]), "+OK\r\n");
    wait_for(5, "the TLS port to close", || TcpStream::connect(("127.0.0.1", tls_port)).is_err());
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn certificates_rotate_under_load_without_dropping_a_connection() {
    let pki = Pki::new("rotate");
    let (server, tls_port) = tls_server(&pki, &[]);
    let (client, client_key) = pki.issue("client");
    let ca = pki.ca();
    assert_eq!(
        presented(tls_port, &ca, (&client, &client_key)),
        pem_der(&pki.dir.join("server.crt"))
    );
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let (stop, done) = (stop.clone(), done.clone());
            let mut con = tls_client(tls_port, &ca, Some((&client, &client_key))).unwrap();
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let reply: redis::RedisResult<()> =
                        redis::cmd("SET").arg(format!("w{w}:{n}")).arg(n).query(&mut con);
                    reply.unwrap_or_else(|e| panic!("SET {n} failed during rotation: {e}"));
                    n += 1;
                    done.fetch_add(1, Ordering::Relaxed);
                }
                let last: u64 =
                    redis::cmd("GET").arg(format!("w{w}:{}", n - 1)).query(&mut con).unwrap();
                assert_eq!(last, n - 1);
                n
            })
        })
        .collect();
    let mut admin = server.client();
    let mut set = |pairs: &[(&str, String)]| {
        let mut cmd = redis::cmd("CONFIG");
        cmd.arg("SET");
        for (n, v) in pairs {
            cmd.arg(*n).arg(v);
        }
        cmd.query::<()>(&mut admin)
    };
    for round in 0..4 {
        let (crt, key) = pki.issue(&format!("server{round}"));
        set(&[("tls-cert-file", s(&crt)), ("tls-key-file", s(&key))]).unwrap();
        assert_eq!(
            presented(tls_port, &ca, (&client, &client_key)),
            pem_der(&crt),
            "new handshakes use it"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // A file that cannot be used: Redis's error, the last good one stays.
    let bad = pki.dir.join("bad.crt");
    std::fs::write(&bad, "not a certificate").unwrap();
    let err = set(&[("tls-cert-file", s(&bad))]).unwrap_err();
    assert!(
        err.to_string().contains("Unable to update TLS configuration. Check server logs."),
        "{err}"
    );
    let mismatch = set(&[("tls-key-file", s(&client_key))]).unwrap_err();
    assert!(mismatch.to_string().contains("Unable to update TLS"), "a key of another certificate");
    assert_eq!(
        presented(tls_port, &ca, (&client, &client_key)),
        pem_der(&pki.dir.join("server3.crt"))
    );
    let got: Vec<String> =
        redis::cmd("CONFIG").arg("GET").arg("tls-cert-file").query(&mut server.client()).unwrap();
    assert_eq!(got[1], s(&pki.dir.join("server3.crt")), "the setting is not changed either");
    // The same file name again reloads what is in it now.
    std::fs::copy(pki.dir.join("server1.crt"), pki.dir.join("server3.crt")).unwrap();
    std::fs::copy(pki.dir.join("server1.key"), pki.dir.join("server3.key")).unwrap();
    set(&[("tls-cert-file", s(&pki.dir.join("server3.crt")))]).unwrap();
    assert_eq!(
        presented(tls_port, &ca, (&client, &client_key)),
        pem_der(&pki.dir.join("server1.crt"))
    );
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        assert!(w.join().unwrap() > 0);
    }
    assert!(done.load(Ordering::Relaxed) > 100, "the writers kept writing");
}

#[test]
fn encrypted_private_keys_with_tls_key_file_pass() {
    let pki = Pki::new("enc");
    let (server, tls_port) = tls_server(&pki, &[]);
    let (client, client_key) = pki.issue("client");
    if !have("openssl", &["version"]) {
        return;
    }
    let (crt, key) = pki.issue("server-enc");
    let pkcs8 = pki.dir.join("pkcs8.key");
    let legacy = pki.dir.join("legacy.key");
    let run = |args: &[&str]| {
        let st = Command::new("openssl").args(args).stderr(Stdio::null()).status().unwrap();
        assert!(st.success(), "openssl {args:?}");
    };
    run(&[
        "pkcs8",
        "-topk8",
        "-v2",
        "aes-256-cbc",
        "-in",
        &s(&key),
        "-out",
        &s(&pkcs8),
        "-passout",
        "pass:1234",
    ]);
    run(&["ec", "-aes256", "-in", &s(&key), "-out", &s(&legacy), "-passout", "pass:1234"]);
    assert!(std::fs::read_to_string(&legacy).unwrap().contains("DEK-Info: AES-256-CBC"));
    let mut c = server.client();
    let mut set = |pairs: &[(&str, &str)]| {
        let mut cmd = redis::cmd("CONFIG");
        cmd.arg("SET");
        for (n, v) in pairs {
            cmd.arg(*n).arg(*v);
        }
        cmd.query::<()>(&mut c)
    };
    let (crt, plain) = (s(&crt), s(&key));
    for file in [s(&pkcs8), s(&legacy)] {
        let err = set(&[("tls-cert-file", &crt), ("tls-key-file", &file)]).unwrap_err();
        assert!(err.to_string().contains("Unable to update TLS"), "without the password: {err}");
        let wrong = [("tls-cert-file", &*crt), ("tls-key-file", &file), ("tls-key-file-pass", "x")];
        set(&wrong).unwrap_err();
        set(&[("tls-cert-file", &crt), ("tls-key-file", &file), ("tls-key-file-pass", "1234")])
            .unwrap();
        assert_eq!(
            presented(tls_port, &pki.ca(), (&client, &client_key)),
            pem_der(Path::new(&crt))
        );
        set(&[("tls-key-file-pass", "")]).unwrap_err();
        set(&[("tls-key-file", &plain), ("tls-key-file-pass", "")]).unwrap();
    }
}

#[test]
fn a_replica_follows_its_primary_over_tls() {
    let pki = Pki::new("repl");
    let (primary, primary_tls) = tls_server(&pki, &[]);
    let (client, client_key) = pki.issue("replica-client");
    // Once with a client certificate of its own, once with its server one.
    for own_client_cert in [true, false] {
        let mut extra = vec!["--tls-replication", "yes"];
        let (c, k) = (s(&client), s(&client_key));
        if own_client_cert {
            extra.extend(["--tls-client-cert-file", &c, "--tls-client-key-file", &k]);
        }
        let (replica, _) = tls_server(&pki, &extra);
        let mut p = primary.client();
        let _: () = redis::cmd("SET").arg("before").arg("1").query(&mut p).unwrap();
        let mut r = replica.client();
        let _: () =
            redis::cmd("REPLICAOF").arg("127.0.0.1").arg(primary_tls).query(&mut r).unwrap();
        wait_for(20, "the replica's link to come up", || {
            common::info_field(&mut r, "replication", "master_link_status") == "up"
        });
        let _: () = redis::cmd("SET").arg("after").arg("2").query(&mut p).unwrap();
        wait_for(10, "the write to reach the replica", || {
            redis::cmd("GET").arg("after").query::<Option<String>>(&mut r).ok().flatten().as_deref()
                == Some("2")
        });
        let before: String = redis::cmd("GET").arg("before").query(&mut r).unwrap();
        assert_eq!(before, "1");
    }
}

#[test]
fn tls_settings_as_redis_has_them() {
    let server = Server::start(2);
    let mut c = server.client();
    let got: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("tls-*").query(&mut c).unwrap();
    let map: std::collections::HashMap<_, _> =
        got.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect();
    for (name, default) in [
        ("tls-port", "0"),
        ("tls-auth-clients", "yes"),
        ("tls-session-caching", "yes"),
        ("tls-session-cache-size", "20480"),
        ("tls-session-cache-timeout", "300"),
        ("tls-replication", "no"),
        ("tls-cluster", "no"),
        ("tls-prefer-server-ciphers", "no"),
        ("tls-cert-file", ""),
        ("tls-protocols", ""),
    ] {
        assert_eq!(map.get(name).map(String::as_str), Some(default), "{name}");
    }
    // Without TLS on, file settings are only stored (Redis configures TLS
    // when a TLS port, replication or cluster asks for it).
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("tls-cert-file")
        .arg("/nonexistent")
        .query(&mut c)
        .unwrap();
    let err = redis::cmd("CONFIG")
        .arg("SET")
        .arg("tls-port")
        .arg(free_port())
        .query::<()>(&mut c)
        .unwrap_err();
    assert!(err.to_string().contains("Unable to update TLS configuration"), "{err}");
    let err = redis::cmd("CONFIG")
        .arg("SET")
        .arg("tls-auth-clients")
        .arg("maybe")
        .query::<()>(&mut c)
        .unwrap_err();
    assert!(
        err.to_string().contains("argument(s) must be one of the following: no, yes, optional"),
        "{err}"
    );
}
