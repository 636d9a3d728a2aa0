//! ACL against a real 2-shard server with the `redis` crate: users' key,
//! channel and command limits (a cross-shard MSET refused when one key is
//! forbidden), scripts calling a forbidden command, MULTI/EXEC after the
//! rules change, the ACL log, ACL SAVE/LOAD round trips, AUTH/HELLO, and
//! the connections closed when their user is deleted.

mod common;
use common::{keys_on_two_shards, q, temp_dir, Server};

fn login(server: &Server, user: &str, pass: &str) -> redis::Connection {
    let mut c = server.client();
    let _: () = q(&mut c, &["AUTH", user, pass]).unwrap();
    c
}

fn err(r: redis::RedisResult<redis::Value>) -> String {
    let e = r.unwrap_err();
    format!("{} {}", e.code().unwrap_or(""), e.detail().unwrap_or("")).trim().to_string()
}

#[test]
fn keys_channels_and_commands_are_limited_per_user_over_two_shards() {
    let server = Server::start_with(&["--shards", "2"]);
    let mut admin = server.client();
    let (a, b) = keys_on_two_shards();
    let (ra, rb) = (format!("r:{a}"), format!("r:{b}"));
    let wb = format!("w:{b}");
    let _: () = q(
        &mut admin,
        &[
            "ACL", "SETUSER", "app", "on", ">pw", "%R~r:*", "%W~w:*", "-@all", "+get", "+set",
            "+mset", "+publish", "&news.*",
        ],
    )
    .unwrap();
    let mut app = login(&server, "app", "pw");
    assert_eq!(q::<Option<String>>(&mut app, &["GET", &ra]).unwrap(), None);
    assert_eq!(
        err(q(&mut app, &["SET", &ra, "v"])),
        "NOPERM this user has no permissions to access one of the keys used as arguments"
    );
    let _: () = q(&mut app, &["SET", &wb, "v"]).unwrap();
    // One forbidden key refuses the whole cross-shard MSET: nothing is set.
    let wa = format!("w:{a}");
    assert!(err(q(&mut app, &["MSET", &wa, "1", &rb, "2"])).starts_with("NOPERM"));
    assert_eq!(q::<Option<String>>(&mut admin, &["GET", &wa]).unwrap(), None);
    let _: () = q(&mut app, &["MSET", &wa, "1", &wb, "2"]).unwrap();
    assert_eq!(
        err(q(&mut app, &["DEL", &wa])),
        "NOPERM this user has no permissions to run the 'del' command"
    );
    assert_eq!(q::<i64>(&mut app, &["PUBLISH", "news.x", "m"]).unwrap(), 0);
    assert_eq!(
        err(q(&mut app, &["PUBLISH", "sport", "m"])),
        "NOPERM this user has no permissions to access one of the channels used as arguments"
    );
    // Each refusal is in the log, newest first.
    let log: Vec<std::collections::HashMap<String, redis::Value>> =
        q(&mut admin, &["ACL", "LOG", "3"]).unwrap();
    let field = |i: usize, k: &str| match &log[i][k] {
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        other => format!("{other:?}"),
    };
    assert_eq!((field(0, "reason"), field(0, "object")), ("channel".into(), "sport".into()));
    assert_eq!((field(1, "reason"), field(1, "object")), ("command".into(), "del".into()));
    assert_eq!(field(2, "reason"), "key");
    assert_eq!(field(0, "username"), "app");
    assert!(field(0, "client-info").contains("user=app"), "{}", field(0, "client-info"));
    let dry: String = q(&mut admin, &["ACL", "DRYRUN", "app", "GET", &wb]).unwrap();
    assert_eq!(dry, format!("This user has no permissions to access the '{wb}' key"));
}

#[test]
fn scripts_exec_and_auth_follow_the_users_rules() {
    let server = Server::start_with(&["--shards", "2"]);
    let mut admin = server.client();
    let _: () =
        q(&mut admin, &["ACL", "SETUSER", "s", "on", ">pw", "~*", "+@all", "-flushall", "-del"])
            .unwrap();
    let mut s = login(&server, "s", "pw");
    let e = err(q(&mut s, &["EVAL", "return redis.call('del', KEYS[1])", "1", "k"]));
    assert!(
        e.starts_with(
            "ERR The user executing the script can't run this command or subcommand script:"
        ),
        "{e}"
    );
    let log: Vec<Vec<redis::Value>> = q(&mut admin, &["ACL", "LOG", "1"]).unwrap();
    assert!(format!("{log:?}").contains("lua"), "{log:?}");
    // Queued while allowed, refused at EXEC after the rules changed.
    let _: () = q(&mut s, &["MULTI"]).unwrap();
    let _: () = q(&mut s, &["SET", "k", "1"]).unwrap();
    let _: () = q(&mut s, &["ACL", "WHOAMI"]).unwrap();
    let _: () = q(&mut admin, &["ACL", "SETUSER", "s", "-set"]).unwrap();
    let replies: redis::RedisResult<redis::Value> = redis::cmd("EXEC").query(&mut s);
    assert!(format!("{replies:?}").contains("ACLs rules changed"), "{replies:?}");
    assert_eq!(q::<Option<String>>(&mut admin, &["GET", "k"]).unwrap(), None);
    // Wrong passwords, disabled users and HELLO AUTH.
    let mut c = server.client();
    assert_eq!(
        err(q(&mut c, &["AUTH", "s", "nope"])),
        "WRONGPASS invalid username-password pair or user is disabled."
    );
    let _: () = q(&mut admin, &["ACL", "SETUSER", "s", "off"]).unwrap();
    assert!(err(q(&mut c, &["AUTH", "s", "pw"])).starts_with("WRONGPASS"));
    let _: () = q(&mut admin, &["ACL", "SETUSER", "s", "on"]).unwrap();
    let hello: redis::Value = q(&mut c, &["HELLO", "2", "AUTH", "s", "pw"]).unwrap();
    assert!(format!("{hello:?}").contains("redis"));
    assert_eq!(q::<String>(&mut c, &["ACL", "WHOAMI"]).unwrap(), "s");
}

#[test]
fn requirepass_is_the_default_users_password() {
    let server = Server::start_with(&["--shards", "2", "--requirepass", "top"]);
    let mut c = server.client();
    assert_eq!(err(q(&mut c, &["GET", "x"])), "NOAUTH Authentication required.");
    let _: () = q(&mut c, &["AUTH", "top"]).unwrap();
    let _: () = q(&mut c, &["CONFIG", "SET", "requirepass", ""]).unwrap();
    let list: Vec<String> = q(&mut c, &["ACL", "LIST"]).unwrap();
    assert_eq!(list, ["user default on nopass ~* &* +@all"]);
}

#[test]
fn deleted_users_lose_their_connections_and_acl_files_round_trip() {
    let dir = temp_dir("acl");
    let file = dir.join("users.acl");
    std::fs::write(&file, "user default on nopass ~* &* +@all\nuser bob on >b ~b:* +@read\n")
        .unwrap();
    let path = file.to_str().unwrap().to_string();
    let server = Server::start_with(&["--shards", "2", "--aclfile", &path]);
    let mut admin = server.client();
    let users: Vec<String> = q(&mut admin, &["ACL", "USERS"]).unwrap();
    assert_eq!(users, ["bob", "default"]);
    let mut bob = login(&server, "bob", "b");
    assert_eq!(q::<Option<String>>(&mut bob, &["GET", "b:1"]).unwrap(), None);
    let _: () = q(&mut admin, &["ACL", "SETUSER", "carol", "on", "nopass", "(~c:* +get)"]).unwrap();
    let _: () = q(&mut admin, &["ACL", "SAVE"]).unwrap();
    let saved = std::fs::read_to_string(&file).unwrap();
    assert!(
        saved.contains("user carol on nopass resetchannels -@all (~c:* resetchannels -@all +get)"),
        "{saved}"
    );
    let _: () = q(&mut admin, &["ACL", "LOAD"]).unwrap();
    let users: Vec<String> = q(&mut admin, &["ACL", "USERS"]).unwrap();
    assert_eq!(users, ["bob", "carol", "default"]);
    // ACL LOAD replaced bob: his connection was closed, as Redis does.
    assert!(q::<Option<String>>(&mut bob, &["GET", "b:1"]).is_err());
    let mut bob = login(&server, "bob", "b");
    assert_eq!(q::<i64>(&mut admin, &["ACL", "DELUSER", "bob", "nobody"]).unwrap(), 1);
    assert!(q::<Option<String>>(&mut bob, &["GET", "b:1"]).is_err());
    // A file with errors changes nothing and says why.
    std::fs::write(&file, "user x +nosuch\n").unwrap();
    let e = err(q(&mut admin, &["ACL", "LOAD"]));
    assert!(e.contains("Unknown command or category name in ACL"), "{e}");
    let users: Vec<String> = q(&mut admin, &["ACL", "USERS"]).unwrap();
    assert_eq!(users, ["carol", "default"]);
    let e = err(q(&mut admin, &["CLIENT", "KILL", "USER", "bob"]));
    assert_eq!(e, "ERR No such user 'bob'");
}

#[test]
fn subscribers_that_lose_a_channel_are_closed() {
    let server = Server::start_with(&["--shards", "2"]);
    let mut admin = server.client();
    let _: () =
        q(&mut admin, &["ACL", "SETUSER", "sub", "on", "nopass", "+@all", "&a", "&b"]).unwrap();
    let mut raw = server.raw();
    raw.call(&["AUTH", "sub", "x"]);
    raw.call(&["SUBSCRIBE", "a"]);
    let _: () = q(&mut admin, &["ACL", "SETUSER", "sub", "resetchannels", "&b"]).unwrap();
    assert!(raw.is_closed());
}

#[test]
fn hot_keys_are_shown_only_where_the_user_may_read() {
    let server = Server::start_with(&["--shards", "2"]);
    let mut admin = server.client();
    let mut rule = vec!["HOTKEYS", "RULES", "SET"];
    rule.extend("all PATTERN * INTERVAL 5 THRESHOLD 3 DURATION 30".split(' '));
    let _: () = q(&mut admin, &rule).unwrap();
    for key in ["pub:1", "secret:1"] {
        for _ in 0..10 {
            let _: Option<String> = q(&mut admin, &["GET", key]).unwrap();
        }
    }
    let _: () =
        q(&mut admin, &["ACL", "SETUSER", "viewer", "on", ">v", "+@all", "%R~pub:*"]).unwrap();
    let mut viewer = login(&server, "viewer", "v");
    let keys_of = |c: &mut redis::Connection, args: &[&str]| -> String {
        format!("{:?}", q::<redis::Value>(c, args).unwrap())
    };
    let all = keys_of(&mut admin, &["HOTKEYS", "TOP", "10"]);
    assert!(all.contains("secret:1") && all.contains("pub:1"), "{all}");
    for args in [&["HOTKEYS", "TOP", "10"][..], &["HOTKEYS", "LIST"]] {
        let seen = keys_of(&mut viewer, args);
        assert!(seen.contains("pub:1") && !seen.contains("secret:1"), "{args:?}: {seen}");
    }
}

#[test]
fn a_blocked_command_the_rules_no_longer_allow_is_refused_when_they_change() {
    let server = Server::start_with(&["--shards", "2"]);
    let mut admin = server.client();
    let _: () =
        q(&mut admin, &["ACL", "SETUSER", "w", "on", ">p", "+blpop", "+auth", "~q*"]).unwrap();
    // Waiting on one shard's key, then on keys of both shards.
    let two: Vec<String> = (0..8).map(|i| format!("q{i}")).collect();
    let map = ringdb_engine::SlotMap::new(2);
    assert!(two.iter().any(|k| map.shard_of_key(k.as_bytes()) != map.shard_of_key(b"q0")));
    for keys in [vec!["q0".to_string()], two] {
        let mut raw = server.raw();
        assert_eq!(raw.call(&["AUTH", "w", "p"]), "+OK\r\n");
        let mut blpop: Vec<&[u8]> = vec![b"BLPOP"];
        blpop.extend(keys.iter().map(|k| k.as_bytes()));
        blpop.push(b"0");
        raw.cmd(&blpop);
        // Blocked: a change that keeps BLPOP allowed does not end the wait.
        common::wait_for(10, "the client to block", || {
            common::info_field(&mut admin, "clients", "blocked_clients") == "1"
        });
        let _: () = q(&mut admin, &["ACL", "SETUSER", "w", "+get"]).unwrap();
        let _: () = q(&mut admin, &["ACL", "SETUSER", "w", "-blpop"]).unwrap();
        let reply = String::from_utf8(raw.read_frame()).unwrap();
        assert_eq!(reply, "-NOPERM this user has no permissions to run the 'blpop' command\r\n");
        let _: () = q(&mut admin, &["ACL", "SETUSER", "w", "+blpop"]).unwrap();
    }
}

#[test]
fn a_watch_stops_pushing_what_its_user_may_no_longer_read() {
    let server = Server::start_with(&["--shards", "2"]);
    let mut admin = server.client();
    let _: () = q(&mut admin, &["ACL", "SETUSER", "r", "on", ">p", "+@all", "~pub:*"]).unwrap();
    let mut raw = server.raw();
    assert_eq!(raw.call(&["AUTH", "r", "p"]), "+OK\r\n");
    raw.cmd(&[b"GET.WATCH", b"pub:1"]);
    let first = String::from_utf8_lossy(&raw.read_frame()).into_owned();
    assert!(first.starts_with("*3\r\n$3\r\nGET\r\n"), "{first}");
    // Results carry the watch's fingerprint (the third line of the frame).
    let pub_watch = first.split("\r\n").nth(4).unwrap().to_string();
    let _: () = q(&mut admin, &["SET", "pub:1", "v1"]).unwrap();
    assert!(String::from_utf8_lossy(&raw.read_frame()).contains("v1"));
    // Taken away: no result; given back: the next one.
    let _: () = q(&mut admin, &["ACL", "SETUSER", "r", "resetkeys", "~other:*"]).unwrap();
    let _: () = q(&mut admin, &["SET", "pub:1", "v2"]).unwrap();
    // A result is checked when it reaches the watcher's core, as the user
    // is then. The first result of a watch of a key on pub:1's shard (same
    // hash tag) comes back after the v2 result has reached that core, so
    // the grant below cannot overtake it.
    raw.cmd(&[b"GET.WATCH", b"other:{pub:1}"]);
    loop {
        let frame = String::from_utf8_lossy(&raw.read_frame()).into_owned();
        assert!(!frame.contains("v2"), "{frame}");
        if !frame.contains(&pub_watch) {
            break;
        }
    }
    let _: () = q(&mut admin, &["ACL", "SETUSER", "r", "~pub:*"]).unwrap();
    let _: () = q(&mut admin, &["SET", "pub:1", "v3"]).unwrap();
    let next = String::from_utf8_lossy(&raw.read_frame()).into_owned();
    assert!(next.contains("v3") && !next.contains("v2"), "{next}");
}
