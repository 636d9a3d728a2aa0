//! CLIENT and the connection commands against a real 2-shard server: LIST
//! and KILL across cores, names and library info, REPLY in pipelines,
//! NO-EVICT/NO-TOUCH, HELLO, AUTH and RESET.

mod common;
use common::{clients_per_shard, keys_on_two_shards, q, raw_on_shard, Raw, Server};
use redis::Value;

fn client_id(raw: &mut Raw) -> String {
    let reply = raw.call(&["CLIENT", "ID"]);
    reply.trim_start_matches(':').trim().to_string()
}

#[test]
fn list_and_kill_span_both_cores() {
    let server = Server::start(2);
    let mut admin = server.client();
    let mut keep = Vec::new();
    let mut on0 = raw_on_shard(&server, &mut admin, 0, &mut keep);
    let mut on1 = raw_on_shard(&server, &mut admin, 1, &mut keep);
    let (id0, id1) = (client_id(&mut on0), client_id(&mut on1));
    assert!(on1.call(&["CLIENT", "SETNAME", "second-core"]).starts_with("+OK"));

    // Every connection of both cores is listed, each once, in id order.
    let list: String = q(&mut admin, &["CLIENT", "LIST"]).unwrap();
    let ids: Vec<u64> =
        list.lines().map(|l| l["id=".len()..l.find(' ').unwrap()].parse().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{list}");
    assert_eq!(ids.len(), keep.len() + 3, "{list}");
    assert!(list.contains(&format!("id={id0} ")) && list.contains(&format!("id={id1} ")));
    assert!(list
        .lines()
        .any(|l| l.contains(&format!("id={id1} ")) && l.contains(" name=second-core ")));
    assert!(
        list.lines().any(|l| l.contains(" cmd=client|list ")),
        "the caller shows its own command"
    );

    // LIST ID keeps the order asked for and skips unknown ids.
    let some: String = q(&mut admin, &["CLIENT", "LIST", "ID", &id1, "999999", &id0]).unwrap();
    let lines: Vec<&str> = some.lines().collect();
    assert_eq!(lines.len(), 2);
    assert!(
        lines[0].starts_with(&format!("id={id1} ")) && lines[1].starts_with(&format!("id={id0} "))
    );
    let normal: String = q(&mut admin, &["CLIENT", "LIST", "TYPE", "normal"]).unwrap();
    assert_eq!(normal.lines().count(), keep.len() + 3);
    let replicas: String = q(&mut admin, &["CLIENT", "LIST", "TYPE", "replica"]).unwrap();
    assert_eq!(replicas, "");
    let err = q::<String>(&mut admin, &["CLIENT", "LIST", "TYPE", "foo"]).unwrap_err();
    assert!(err.to_string().contains("Unknown client type 'foo'"), "{err}");
    let err = q::<String>(&mut admin, &["CLIENT", "LIST", "ID", "x"]).unwrap_err();
    assert!(err.to_string().contains("Invalid client ID"), "{err}");
    let err = q::<String>(&mut admin, &["CLIENT", "LIST", "foo"]).unwrap_err();
    assert!(err.to_string().contains("syntax error"), "{err}");

    // KILL by id closes clients on either core.
    assert_eq!(q::<i64>(&mut admin, &["CLIENT", "KILL", "ID", &id1]).unwrap(), 1);
    assert!(on1.is_closed());
    assert_eq!(q::<i64>(&mut admin, &["CLIENT", "KILL", "ID", &id0]).unwrap(), 1);
    assert!(on0.is_closed());
    assert_eq!(q::<i64>(&mut admin, &["CLIENT", "KILL", "ID", &id0]).unwrap(), 0);

    // The legacy form by address, and the address filters.
    let mut victim = server.raw();
    let line = victim.call(&["CLIENT", "INFO"]);
    let addr = line.split(' ').find_map(|f| f.strip_prefix("addr=")).unwrap().to_string();
    let laddr = line.split(' ').find_map(|f| f.strip_prefix("laddr=")).unwrap().to_string();
    let err = q::<String>(&mut admin, &["CLIENT", "KILL", "127.0.0.1:1"]).unwrap_err();
    assert!(err.to_string().contains("No such client"), "{err}");
    assert_eq!(q::<String>(&mut admin, &["CLIENT", "KILL", &addr]).unwrap(), "OK");
    assert!(victim.is_closed());
    let mut victim = server.raw();
    let line = victim.call(&["CLIENT", "INFO"]);
    let addr = line.split(' ').find_map(|f| f.strip_prefix("addr=")).unwrap().to_string();
    assert_eq!(
        q::<i64>(
            &mut admin,
            &["CLIENT", "KILL", "ADDR", &addr, "LADDR", &laddr, "USER", "default"]
        )
        .unwrap(),
        1
    );
    assert!(victim.is_closed());
}

#[test]
fn kill_skipme_and_errors() {
    let server = Server::start(2);
    let mut admin = server.client();
    let mut others: Vec<Raw> = (0..6).map(|_| server.raw()).collect();
    for o in &mut others {
        assert!(o.call(&["PING"]).starts_with("+PONG"));
    }
    // SKIPME yes (the default) spares the caller.
    assert_eq!(q::<i64>(&mut admin, &["CLIENT", "KILL", "TYPE", "normal"]).unwrap(), 6);
    for o in &mut others {
        assert!(o.is_closed());
    }
    assert_eq!(q::<String>(&mut admin, &["PING"]).unwrap(), "PONG");
    assert_eq!(q::<i64>(&mut admin, &["CLIENT", "KILL", "TYPE", "pubsub"]).unwrap(), 0);
    // SKIPME no includes the caller, which gets its reply and is closed.
    let mut me = server.raw();
    let reply = me.call(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "no"]);
    assert_eq!(reply, ":2\r\n");
    assert!(me.is_closed());

    let mut c = server.client();
    for (args, text) in [
        (vec!["CLIENT", "KILL"], "wrong number of arguments for 'client|kill' command"),
        (vec!["CLIENT", "KILL", "id", "10", "wrong_arg"], "syntax error"),
        (vec!["CLIENT", "KILL", "id", "str"], "client-id should be greater than 0"),
        (vec!["CLIENT", "KILL", "id", "-1"], "client-id should be greater than 0"),
        (vec!["CLIENT", "KILL", "id", "0"], "client-id should be greater than 0"),
        (vec!["CLIENT", "KILL", "type", "wrong_type"], "Unknown client type 'wrong_type'"),
        (vec!["CLIENT", "KILL", "user", "wrong_user"], "No such user 'wrong_user'"),
        (vec!["CLIENT", "KILL", "skipme", "yes_or_no"], "syntax error"),
    ] {
        let err = q::<i64>(&mut c, &args).unwrap_err();
        assert!(err.to_string().contains(text), "{args:?}: {err}");
    }
}

#[test]
fn names_info_and_flags() {
    let server = Server::start(2);
    let mut c = server.client();
    assert_eq!(q::<Option<String>>(&mut c, &["CLIENT", "GETNAME"]).unwrap(), None);
    let info: String = q(&mut c, &["CLIENT", "INFO"]).unwrap();
    assert!(
        info.contains(" name= ") && info.contains(" cmd=client|info ") && info.ends_with('\n'),
        "{info}"
    );
    let err = q::<String>(&mut c, &["CLIENT", "SETNAME", "foo bar"]).unwrap_err();
    assert!(err
        .to_string()
        .contains("Client names cannot contain spaces, newlines or special characters."));
    assert_eq!(q::<String>(&mut c, &["CLIENT", "SETNAME", "myname"]).unwrap(), "OK");
    assert_eq!(q::<String>(&mut c, &["CLIENT", "GETNAME"]).unwrap(), "myname");
    assert_eq!(q::<String>(&mut c, &["CLIENT", "SETNAME", ""]).unwrap(), "OK");
    assert_eq!(q::<Option<String>>(&mut c, &["CLIENT", "GETNAME"]).unwrap(), None);

    assert_eq!(q::<String>(&mut c, &["CLIENT", "SETINFO", "LIB-NAME", "mylib"]).unwrap(), "OK");
    assert_eq!(q::<String>(&mut c, &["CLIENT", "SETINFO", "lib-ver", "1.2.3"]).unwrap(), "OK");
    let err = q::<String>(&mut c, &["CLIENT", "SETINFO", "lib-name", "my lib"]).unwrap_err();
    assert!(
        err.to_string().contains("lib-name cannot contain spaces, newlines or special characters."),
        "{err}"
    );
    let err = q::<String>(&mut c, &["CLIENT", "SETINFO", "badger", "x"]).unwrap_err();
    assert!(err.to_string().contains("Unrecognized option 'badger'"), "{err}");

    assert_eq!(q::<String>(&mut c, &["CLIENT", "NO-EVICT", "on"]).unwrap(), "OK");
    assert_eq!(q::<String>(&mut c, &["CLIENT", "NO-TOUCH", "ON"]).unwrap(), "OK");
    assert_eq!(q::<String>(&mut c, &["SELECT", "3"]).unwrap(), "OK");
    let info: String = q(&mut c, &["CLIENT", "INFO"]).unwrap();
    assert!(info.contains(" flags=eT ") && info.contains(" db=3 "), "{info}");
    assert!(info.contains(" lib-name=mylib lib-ver=1.2.3"), "{info}");
    let err = q::<String>(&mut c, &["CLIENT", "NO-EVICT", "maybe"]).unwrap_err();
    assert!(err.to_string().contains("syntax error"), "{err}");
    let err = q::<String>(&mut c, &["CLIENT", "NO-TOUCH", "maybe"]).unwrap_err();
    assert!(err.to_string().contains("syntax error"), "{err}");
    assert_eq!(q::<String>(&mut c, &["CLIENT", "NO-EVICT", "off"]).unwrap(), "OK");
    assert_eq!(q::<String>(&mut c, &["CLIENT", "NO-TOUCH", "off"]).unwrap(), "OK");
    let info: String = q(&mut c, &["CLIENT", "INFO"]).unwrap();
    assert!(info.contains(" flags=N "), "{info}");

    let id: i64 = q(&mut c, &["CLIENT", "ID"]).unwrap();
    assert!(info.starts_with(&format!("id={id} ")), "{info}");
    let help: Vec<String> = q(&mut c, &["client", "help"]).unwrap();
    assert_eq!(help[0], "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:");
    assert!(help.iter().any(|l| l == "NO-TOUCH (ON|OFF)"));
    assert_eq!(help.last().map(String::as_str), Some("    Print this help."));
    let err = q::<String>(&mut c, &["CLIENT", "NOPE"]).unwrap_err();
    assert!(err.to_string().contains("unknown subcommand 'NOPE'. Try CLIENT HELP."), "{err}");
}

#[test]
fn reply_off_and_skip_in_pipelines() {
    let server = Server::start(2);
    let (a, b) = keys_on_two_shards();
    let mut c = server.client();
    q::<String>(&mut c, &["MSET", &a, "va", &b, "vb"]).unwrap();

    let mut raw = server.raw();
    // SKIP drops exactly the next reply, whichever shard runs it.
    let mut pipeline = Vec::new();
    for args in [
        vec!["CLIENT", "REPLY", "SKIP"],
        vec!["GET", &a],
        vec!["GET", &b],
        vec!["CLIENT", "REPLY", "SKIP"],
        vec!["GET", &b],
        vec!["GET", &a],
        vec!["PING", "last"],
    ] {
        pipeline.extend(resp(&args));
    }
    raw.send(&pipeline);
    assert_eq!(raw.read_frame(), b"$2\r\nvb\r\n");
    assert_eq!(raw.read_frame(), b"$2\r\nva\r\n");
    assert_eq!(raw.read_frame(), b"$4\r\nlast\r\n");

    // OFF silences everything, errors included, until ON (which replies).
    let mut pipeline = Vec::new();
    for args in [
        vec!["CLIENT", "REPLY", "OFF"],
        vec!["GET", &a],
        vec!["GET", &b],
        vec!["NOSUCHCOMMAND"],
        vec!["CLIENT", "REPLY", "SKIP"],
        vec!["PING"],
        vec!["CLIENT", "REPLY", "ON"],
        vec!["GET", &b],
    ] {
        pipeline.extend(resp(&args));
    }
    raw.send(&pipeline);
    assert_eq!(raw.read_frame(), b"+OK\r\n");
    assert_eq!(raw.read_frame(), b"$2\r\nvb\r\n");

    // ON right after SKIP is not the skipped reply.
    let mut pipeline = resp(&["CLIENT", "REPLY", "SKIP"]);
    pipeline.extend(resp(&["CLIENT", "REPLY", "ON"]));
    pipeline.extend(resp(&["PING"]));
    raw.send(&pipeline);
    assert_eq!(raw.read_frame(), b"+OK\r\n");
    assert_eq!(raw.read_frame(), b"+PONG\r\n");
    assert!(raw.call(&["CLIENT", "REPLY", "MAYBE"]).starts_with("-ERR syntax error"));
}

fn resp(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    out
}

#[test]
fn auth_hello_reset_with_requirepass() {
    let server = Server::start(2);
    let mut admin = server.client();
    let mut keep = Vec::new();
    let err = q::<String>(&mut admin, &["AUTH", "foo"]).unwrap_err();
    assert!(
        err.to_string().contains("AUTH <password> called without any password configured"),
        "{err}"
    );
    assert_eq!(q::<String>(&mut admin, &["AUTH", "default", "anything"]).unwrap(), "OK");
    let err = q::<String>(&mut admin, &["AUTH", "a", "b", "c"]).unwrap_err();
    assert!(err.to_string().contains("syntax error"), "{err}");

    assert_eq!(q::<String>(&mut admin, &["CONFIG", "SET", "requirepass", "s3cret"]).unwrap(), "OK");
    // Already connected clients stay authenticated, as in Redis.
    assert_eq!(q::<String>(&mut admin, &["PING"]).unwrap(), "PONG");
    for shard in [0, 1] {
        // New connections on either core need the password.
        let mut raw = raw_on_shard_auth(&server, shard, &mut keep);
        assert!(raw.call(&["GET", "x"]).starts_with("-NOAUTH Authentication required."));
        assert!(raw
            .call(&["AUTH", "wrong"])
            .starts_with("-WRONGPASS invalid username-password pair"));
        assert!(raw.call(&["AUTH", "nobody", "s3cret"]).starts_with("-WRONGPASS"));
        assert!(raw
            .call(&["HELLO", "3"])
            .starts_with("-NOAUTH HELLO must be called with the client already authenticated"));
        assert!(raw
            .call(&["HELLO", "3", "AUTH", "default", "s3cret", "BADOPT"])
            .starts_with("-ERR Syntax error in HELLO option 'BADOPT'"));
        assert!(
            raw.call(&["GET", "x"]).starts_with("-NOAUTH"),
            "a refused HELLO authenticates nothing"
        );
        let hello = raw.call(&["HELLO", "3", "AUTH", "default", "s3cret", "SETNAME", "h3"]);
        assert!(hello.starts_with("%7\r\n") && hello.contains("proto\r\n:3\r\n"), "{hello}");
        assert!(raw.call(&["CLIENT", "GETNAME"]).contains("h3"));
        assert_eq!(raw.call(&["GET", "x"]), "_\r\n");
        // RESET: back to RESP2, no name, not authenticated.
        assert_eq!(raw.call(&["RESET"]), "+RESET\r\n");
        assert!(raw.call(&["GET", "x"]).starts_with("-NOAUTH"));
        assert_eq!(raw.call(&["AUTH", "s3cret"]), "+OK\r\n");
        assert_eq!(raw.call(&["GET", "x"]), "$-1\r\n");
        assert_eq!(raw.call(&["CLIENT", "GETNAME"]), "$-1\r\n");
        // After CLIENT REPLY SKIP, RESET's own reply is dropped (Redis
        // clears the skip of the next command only); the next is answered.
        raw.send(b"CLIENT REPLY SKIP\r\nRESET\r\n");
        assert_eq!(raw.call(&["AUTH", "s3cret"]), "+OK\r\n");
    }
    let mut raw = server.raw();
    assert!(raw.call(&["HELLO", "4"]).starts_with("-NOPROTO unsupported protocol version"));
    assert!(raw
        .call(&["HELLO", "x"])
        .starts_with("-ERR Protocol version is not an integer or out of range"));
    let err = q::<Value>(&mut admin, &["HELLO", "2", "SETNAME", "a b"]).unwrap_err();
    assert!(err.to_string().contains("Client names cannot contain spaces"), "{err}");
    assert_eq!(q::<String>(&mut admin, &["CONFIG", "SET", "requirepass", ""]).unwrap(), "OK");
    let mut raw = server.raw();
    assert_eq!(raw.call(&["GET", "x"]), "$-1\r\n");
}

/// Like [`raw_on_shard`], for a server that requires a password: the
/// connection is identified by the shard's connection counter in INFO
/// stats... which needs authentication, so an authenticated admin asks.
fn raw_on_shard_auth(server: &Server, shard: usize, keep: &mut Vec<Raw>) -> Raw {
    let mut admin = server.client();
    assert_eq!(q::<String>(&mut admin, &["AUTH", "s3cret"]).unwrap(), "OK");
    for _ in 0..200 {
        let before = clients_per_shard(&mut admin);
        let mut raw = server.raw();
        assert!(raw.call(&["PING"]).starts_with("-NOAUTH"));
        let after = clients_per_shard(&mut admin);
        if after[shard] > before[shard] {
            return raw;
        }
        keep.push(raw);
    }
    panic!("no connection landed on shard {shard}");
}

#[test]
fn no_touch_leaves_access_data_alone_on_both_shards() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    q::<String>(&mut c, &["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"]).unwrap();
    q::<String>(&mut c, &["MSET", &a, "1", &b, "2"]).unwrap();
    let freq =
        |c: &mut redis::Connection, key: &str| q::<i64>(c, &["OBJECT", "FREQ", key]).unwrap();
    let start: Vec<i64> = [&a, &b].iter().map(|k| freq(&mut c, k)).collect();
    assert_eq!(q::<String>(&mut c, &["CLIENT", "NO-TOUCH", "ON"]).unwrap(), "OK");
    for _ in 0..20 {
        q::<Vec<String>>(&mut c, &["MGET", &a, &b]).unwrap();
    }
    for (key, before) in [&a, &b].iter().zip(&start) {
        // Untouched: at most decayed, never counted up.
        assert!(freq(&mut c, key) <= *before, "{key}");
    }
    assert_eq!(q::<String>(&mut c, &["CLIENT", "NO-TOUCH", "OFF"]).unwrap(), "OK");
    for _ in 0..20 {
        q::<Vec<String>>(&mut c, &["MGET", &a, &b]).unwrap();
    }
    for (key, before) in [&a, &b].iter().zip(&start) {
        // The first access from the initial counter always counts.
        assert!(freq(&mut c, key) > *before, "{key}");
    }
}
