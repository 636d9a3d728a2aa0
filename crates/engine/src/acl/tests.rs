//! Rules, descriptions and checks compared with what redis-server 7.0.15
//! answers for the same rules.

use super::*;
use crate::command::table::table;
use bytes::Bytes;

fn user(rules: &str) -> User {
    let mut u = User::new("u", false);
    let args: Vec<Bytes> = rules.split(' ').map(|r| Bytes::copy_from_slice(r.as_bytes())).collect();
    u.apply_all(&args, false).unwrap();
    u
}

fn args(line: &str) -> Vec<Bytes> {
    line.split(' ').map(|a| Bytes::copy_from_slice(a.as_bytes())).collect()
}

fn check(u: &User, line: &str) -> Verdict {
    let a = args(line);
    let reg = table().resolve(&a).unwrap();
    u.check(reg, &a)
}

#[test]
fn the_default_user_is_described_as_redis_lists_it() {
    assert_eq!(User::default_user().describe(), "on nopass ~* &* +@all");
    assert!(User::default_user().unrestricted());
}

#[test]
fn categories_and_commands_are_described_as_redis_does() {
    assert_eq!(user("on nopass -@all +@fast").describe(), "on nopass resetchannels -@all +@fast");
    assert_eq!(user("+@all -get").root().describe_commands(), "+@all -get");
    assert_eq!(user("-@all +get +set").root().describe_commands(), "-@all +get +set");
    assert_eq!(user("+config|get").root().describe_commands(), "-@all +config|get");
    assert_eq!(user("+select|0").root().describe_commands(), "-@all +select|0");
    assert_eq!(user("+@all -config").root().describe_commands(), "+@all -config");
    assert_eq!(user("+@read -@all").root().describe_commands(), "-@all");
}

#[test]
fn key_and_channel_patterns_are_kept_as_written() {
    let u = user("%R~read* %W~write* ~both* %RW~rw* &chan*");
    assert_eq!(u.root().describe_keys(), "%R~read* %W~write* ~both* ~rw*");
    assert_eq!(u.root().describe_channels(), "&chan*");
    let u = user("~a ~a %R~b %W~b");
    assert_eq!(u.root().describe_keys(), "~a ~b");
}

#[test]
fn rule_errors_are_redis_texts() {
    let mut u = User::new("u", false);
    let err = |u: &mut User, r: &str| u.apply_all(&args(r), false).unwrap_err();
    assert_eq!(
        err(&mut u, "+nosuch"),
        "ERR Error in ACL SETUSER modifier '+nosuch': Unknown command or category name in ACL"
    );
    assert_eq!(err(&mut u, "bogus"), "ERR Error in ACL SETUSER modifier 'bogus': Syntax error");
    assert!(err(&mut u, "allkeys ~x")
        .contains("Adding a pattern after the * pattern (or the 'allkeys' flag)"));
    assert!(err(&mut u, "<nopw").contains("The password you are trying to remove"));
    assert!(err(&mut u, "#abc").contains("must be exactly 64 characters"));
    assert!(err(&mut u, "%~k").ends_with("Syntax error"));
    assert!(err(&mut u, "%R").ends_with("Syntax error"));
    assert!(err(&mut u, "(\"\" +get)").ends_with("Syntax error"));
    assert!(err(&mut u, "+config|get|x")
        .contains("Allowing first-arg of a subcommand is not supported"));
    assert_eq!(
        err(&mut u, "(~x +get"),
        "ERR Unmatched parenthesis in acl selector starting at '(~x'."
    );
    // Nothing of a refused SETUSER applies.
    assert_eq!(u.describe(), User::new("u", false).describe());
}

#[test]
fn passwords_are_hashed_and_checked() {
    let u = user("on >secret");
    assert!(u.authenticates(b"secret"));
    assert!(!u.authenticates(b"other"));
    assert_eq!(u.passwords(), [hash_password(b"secret")]);
    assert_eq!(hash_password(b"").len(), 64);
    let off = user("off >secret");
    assert!(!off.authenticates(b"secret"));
    let u = user(&format!("on #{}", hash_password(b"pw")));
    assert!(u.authenticates(b"pw"));
}

#[test]
fn commands_keys_and_channels_are_checked() {
    let u = user("on nopass -@all +get +set %R~r:* %W~w:* ~rw:* &news.*");
    assert_eq!(check(&u, "GET r:1"), Verdict::Allowed);
    assert_eq!(check(&u, "GET w:1"), Verdict::DeniedKey(1));
    assert_eq!(check(&u, "SET w:1 v"), Verdict::Allowed);
    assert_eq!(check(&u, "SET r:1 v"), Verdict::DeniedKey(1));
    assert_eq!(check(&u, "SET rw:1 v"), Verdict::Allowed);
    assert_eq!(check(&u, "DEL rw:1"), Verdict::DeniedCommand);
    let u = user("on nopass +@all ~* &news.* &exact");
    assert_eq!(check(&u, "PUBLISH news.x m"), Verdict::Allowed);
    assert_eq!(check(&u, "PUBLISH sport m"), Verdict::DeniedChannel(1));
    assert_eq!(check(&u, "SUBSCRIBE news.a sport"), Verdict::DeniedChannel(2));
    assert_eq!(check(&u, "PSUBSCRIBE news.*"), Verdict::Allowed);
    assert_eq!(check(&u, "PSUBSCRIBE news.a*"), Verdict::DeniedChannel(1));
}

#[test]
fn a_selector_allows_what_the_root_does_not() {
    let u = user("on nopass -@all +get ~a* (+set ~b*)");
    assert_eq!(check(&u, "GET a1"), Verdict::Allowed);
    assert_eq!(check(&u, "SET b1 v"), Verdict::Allowed);
    assert_eq!(check(&u, "SET a1 v"), Verdict::DeniedKey(1));
    assert_eq!(check(&u, "GET b1"), Verdict::DeniedKey(1));
    assert_eq!(
        u.describe(),
        "on nopass ~a* resetchannels -@all +get (~b* resetchannels -@all +set)"
    );
}

#[test]
fn first_args_and_subcommands_are_allowed_alone() {
    let u = user("on nopass -@all +select|0 +config|get");
    assert_eq!(check(&u, "SELECT 0"), Verdict::Allowed);
    assert_eq!(check(&u, "SELECT 1"), Verdict::DeniedCommand);
    assert_eq!(check(&u, "CONFIG GET maxmemory"), Verdict::Allowed);
    assert_eq!(check(&u, "CONFIG SET maxmemory 1"), Verdict::DeniedCommand);
}

#[test]
fn acl_files_load_with_every_error_reported() {
    let users =
        Users::from_acl_file(b"user alice on >p ~* +@all\n\nuser bob off\n", "users.acl", false)
            .unwrap();
    assert_eq!(users.len(), 3);
    assert_eq!(
        users.describe()[0],
        format!("user alice on #{} ~* resetchannels +@all", hash_password(b"p"))
    );
    let err = Users::from_acl_file(b"user a +nosuch\nfoo\nuser a on\n", "f", false).unwrap_err();
    assert_eq!(
        err,
        "f:1: Error in applying operation '+nosuch': Unknown command or category name in ACL. \
         f:2 should start with user keyword followed by the username. \
         WARNING: Duplicate user 'a' found on line 3. \
         WARNING: ACL errors detected, no change to the previously active ACL rules was performed"
    );
}

#[test]
fn the_log_groups_like_events() {
    let mut log = AclLog::default();
    let entry = |object: &str, at_ms| LogEntry {
        count: 1,
        reason: Reason::Command,
        context: Context::Toplevel,
        object: object.into(),
        username: "u".into(),
        at_ms,
        client_info: String::new(),
    };
    log.add(entry("get", 1000), 128);
    log.add(entry("get", 2000), 128);
    log.add(entry("set", 3000), 128);
    log.add(entry("get", 100_000), 128);
    let counts: Vec<(String, u64)> = log.newest(10).map(|e| (e.object.clone(), e.count)).collect();
    assert_eq!(counts, [("get".into(), 1), ("set".into(), 1), ("get".into(), 2)]);
    log.add(entry("x", 0), 2);
    assert_eq!(log.len(), 2);
}

#[test]
fn literal_and_prefix_patterns_match_as_the_glob_does() {
    let keys: &[&[u8]] = &[b"", b"a", b"app", b"app:", b"app:1", b"apq:1", b"x*", b"x?"];
    for pattern in ["app:*", "app", "*", "app:1", "a?p*", "x\\*", "[ab]pp*", "app:**"] {
        let p = KeyPattern::new(pattern.as_bytes(), READ_WRITE);
        for key in keys {
            let glob = ringdb_types::glob::glob_match(pattern.as_bytes(), key, false);
            assert_eq!(p.matches(key), glob, "{pattern} on {:?}", String::from_utf8_lossy(key));
        }
    }
}

#[test]
fn the_key_index_answers_as_matching_every_pattern_would() {
    let rules = "%R~app:* %W~app:1 ~log:*:x ~b[ab]* %RW~* %W~c* %R~";
    let sets: Vec<&str> = vec![rules, "~a* ~ab* %R~abc ~x", "~exact ~exact2 %W~pre*", "resetkeys"];
    let keys: &[&[u8]] = &[
        b"", b"a", b"ab", b"abc", b"app:", b"app:1", b"app:2", b"log:1:x", b"tmp", b"baa", b"c",
        b"exact", b"pre", b"x",
    ];
    for rules in sets {
        let mut s = Selector::new(true, false);
        for r in rules.split(' ') {
            s.apply(r.as_bytes()).unwrap();
        }
        let patterns: Vec<(String, u8)> = s
            .describe_keys()
            .split(' ')
            .filter(|p| !p.is_empty())
            .map(|p| match p.as_bytes() {
                [b'%', b'R', b'~', ..] => (p[3..].to_string(), READ),
                [b'%', b'W', b'~', ..] => (p[3..].to_string(), WRITE),
                _ => (p[1..].to_string(), READ_WRITE),
            })
            .collect();
        for key in keys {
            for access in [0, READ, WRITE, READ_WRITE] {
                let naive = patterns.iter().any(|(p, perms)| {
                    perms & access == access
                        && ringdb_types::glob::glob_match(p.as_bytes(), key, false)
                });
                assert_eq!(
                    s.key_allowed(key, access),
                    naive,
                    "{rules} / {:?} / {access}",
                    String::from_utf8_lossy(key)
                );
            }
        }
    }
}
