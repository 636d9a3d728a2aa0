//! MONITOR against a real 2-shard server: a monitor sees the commands of
//! clients on both cores, scripts' commands after their EVAL (also when the
//! script runs on the other shard), EXEC's commands before EXEC, quoting
//! and redaction as Redis writes them, no administrative commands, and
//! stops at RESET.

mod common;
use common::{keys_on_two_shards, q, raw_on_shard, Raw, Server};

/// The next MONITOR line, without its timestamp: `[db source] "arg" …`.
fn next(monitor: &mut Raw) -> String {
    let frame = String::from_utf8(monitor.read_frame()).unwrap();
    let line = frame
        .strip_prefix('+')
        .and_then(|l| l.strip_suffix("\r\n"))
        .unwrap_or_else(|| panic!("not a status line: {frame:?}"));
    let (stamp, rest) = line.split_once(' ').unwrap();
    let (secs, micros) = stamp.split_once('.').unwrap();
    assert!(secs.parse::<u64>().is_ok() && micros.len() == 6, "{line}");
    rest.to_string()
}

/// `[db ip:port] args` with the address replaced by `C`.
fn anonymous(line: &str) -> String {
    let (source, args) = line.split_once("] ").unwrap();
    let (db, who) = source.trim_start_matches('[').split_once(' ').unwrap();
    let who = if who == "lua" { "lua" } else { "C" };
    format!("[{db} {who}] {args}")
}

#[test]
fn a_monitor_sees_every_core_in_order() {
    let server = Server::start(2);
    let mut admin = server.client();
    let (on0, on1) = keys_on_two_shards();
    let mut keep = Vec::new();
    let mut monitor = raw_on_shard(&server, &mut admin, 0, &mut keep);
    let mut other = raw_on_shard(&server, &mut admin, 1, &mut keep);
    assert_eq!(monitor.call(&["MONITOR"]), "+OK\r\n");
    let list: String = q(&mut admin, &["CLIENT", "LIST"]).unwrap();
    assert!(list.contains("flags=O "), "{list}");
    // A client on the other core; a script on the other shard.
    other.call(&["SET", &on0, "a \"quoted\"\nvalue"]);
    let script = "return redis.call('incr', KEYS[1])";
    other.call(&["EVAL", script, "1", &on1]);
    other.call(&["SELECT", "2"]);
    other.call(&["MULTI"]);
    other.call(&["SET", "k", "v"]);
    other.call(&["EXEC"]);
    // Administrative commands are not shown; secrets are redacted.
    other.call(&["CONFIG", "GET", "maxmemory"]);
    other.call(&["AUTH", "user", "pass"]);
    other.call(&["PING"]);
    let expected = [
        format!(r#"[0 C] "SET" "{on0}" "a \"quoted\"\nvalue""#),
        format!(r#"[0 C] "EVAL" "{script}" "1" "{on1}""#),
        format!(r#"[0 lua] "incr" "{on1}""#),
        r#"[0 C] "SELECT" "2""#.to_string(),
        r#"[2 C] "MULTI""#.to_string(),
        r#"[2 C] "SET" "k" "v""#.to_string(),
        r#"[2 C] "EXEC""#.to_string(),
        r#"[2 C] "AUTH" "(redacted)" "(redacted)""#.to_string(),
        r#"[2 C] "PING""#.to_string(),
    ];
    for want in expected {
        let want = want.replace('\n', "\\n");
        assert_eq!(anonymous(&next(&mut monitor)), want);
    }
    // The monitor's own address is what CLIENT LIST shows for the client.
    let line = next_after(&mut monitor, &mut admin);
    assert!(
        list.contains(&format!(
            "addr={} ",
            line.trim_start_matches("[0 ").split(']').next().unwrap()
        )),
        "{line}"
    );
    // RESET ends it: nothing more arrives, the connection answers again.
    assert_eq!(monitor.call(&["RESET"]), "+RESET\r\n");
    other.call(&["PING"]);
    assert_eq!(monitor.call(&["PING"]), "+PONG\r\n");
}

/// The line of a command `admin` runs now.
fn next_after(monitor: &mut Raw, admin: &mut redis::Connection) -> String {
    let _: String = q(admin, &["ECHO", "mark"]).unwrap();
    let line = next(monitor);
    assert!(line.ends_with(r#""ECHO" "mark""#), "{line}");
    line
}
