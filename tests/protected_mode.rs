//! Where ringdb listens and whom it serves, as Redis 7.0: the default bind
//! `* -::*`, optional addresses (`-addr`), and protected mode, which turns
//! away clients of other hosts while there is no password, whatever `bind`
//! says.

mod common;
use common::{q, Raw, Server};
use std::net::{IpAddr, UdpSocket};
use std::process::{Command, Stdio};

/// This host's address on its default route (no packet is sent). A test
/// machine always has one; its absence fails the test under CI.
fn non_loopback_address() -> Option<IpAddr> {
    let probe = UdpSocket::bind("0.0.0.0:0").ok()?;
    probe.connect("198.51.100.1:9").ok()?;
    let ip = probe.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

#[test]
fn protected_mode_turns_away_other_hosts_until_a_password_is_set() {
    let Some(ip) = non_loopback_address() else {
        assert!(std::env::var("CI").is_err(), "CI: this machine has no non-loopback address");
        eprintln!("skipped: no non-loopback address");
        return;
    };
    let server = Server::start(2);
    let mut local = server.client();
    let bind: Vec<String> = q(&mut local, &["CONFIG", "GET", "bind"]).unwrap();
    assert_eq!(bind, ["bind", "* -::*"]);

    // Redis's reply, then the connection is closed.
    let mut remote = Raw::connect(ip, server.port);
    remote.send(b"PING\r\n");
    let reply = String::from_utf8_lossy(&remote.read_frame()).into_owned();
    assert!(reply.starts_with("-DENIED Redis is running in protected mode"), "{reply}");
    assert!(remote.is_closed());

    // A password lets them in, with it.
    let _: () = q(&mut local, &["CONFIG", "SET", "requirepass", "secret"]).unwrap();
    let mut remote = Raw::connect(ip, server.port);
    assert_eq!(remote.call(&["PING"]), "-NOAUTH Authentication required.\r\n");
    assert_eq!(remote.call(&["AUTH", "secret"]), "+OK\r\n");
    assert_eq!(remote.call(&["PING"]), "+PONG\r\n");

    // No password again: turned away again; protected-mode no: served.
    let mut local = server.raw();
    assert_eq!(local.call(&["AUTH", "secret"]), "+OK\r\n");
    assert_eq!(local.call(&["CONFIG", "SET", "requirepass", ""]), "+OK\r\n");
    let mut remote = Raw::connect(ip, server.port);
    assert!(remote.call(&["PING"]).starts_with("-DENIED"));
    assert_eq!(local.call(&["CONFIG", "SET", "protected-mode", "no"]), "+OK\r\n");
    let mut remote = Raw::connect(ip, server.port);
    assert_eq!(remote.call(&["PING"]), "+PONG\r\n");
}

#[test]
fn an_optional_address_this_host_lacks_is_skipped() {
    // 198.51.100.77 (TEST-NET-2) is on no interface here.
    let server = Server::start_with(&["--shards", "2", "--bind", "127.0.0.1 -198.51.100.77"]);
    let mut c = server.client();
    let pong: String = q(&mut c, &["PING"]).unwrap();
    assert_eq!(pong, "PONG");
}

#[test]
fn a_missing_address_stops_start_up_with_redis_words() {
    let out = Command::new(env!("CARGO_BIN_EXE_ringdb"))
        .args(["--port", "0", "--shards", "2", "--save", "", "--bind", "127.0.0.1 198.51.100.77"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("run ringdb");
    assert!(!out.status.success());
    let log =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains("Could not create server TCP listening socket 198.51.100.77:")
            && log.contains("Cannot assign requested address"),
        "{log}"
    );
}
