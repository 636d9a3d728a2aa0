//! The COMMAND container against a real 2-shard server: COUNT, bare
//! COMMAND, INFO, DOCS, LIST with every filter, GETKEYS and
//! GETKEYSANDFLAGS (with keys on both shards), HELP, and their errors.
//! Expected replies are Redis 7's (byte for byte where the row is the same).

mod common;
use common::{keys_on_two_shards, q, Server};
use redis::Value;
use ringdb_engine::command::table;

/// The text of a bulk or status reply.
fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Okay => "OK".into(),
        other => panic!("not text: {other:?}"),
    }
}

fn items(v: &Value) -> &[Value] {
    match v {
        Value::Array(items) | Value::Set(items) => items,
        other => panic!("not an array: {other:?}"),
    }
}

fn texts(v: &Value) -> Vec<String> {
    items(v).iter().map(text).collect()
}

/// A RESP2 map (a flat array of pairs) as pairs.
fn pairs(v: &Value) -> Vec<(String, &Value)> {
    items(v).chunks(2).map(|pair| (text(&pair[0]), &pair[1])).collect()
}

fn field<'a>(map: &'a Value, name: &str) -> &'a Value {
    pairs(map)
        .into_iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no {name} in {map:?}"))
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(n) => *n,
        other => panic!("not an integer: {other:?}"),
    }
}

fn err(con: &mut redis::Connection, args: &[&str]) -> String {
    match q::<Value>(con, args) {
        Err(e) => e.to_string(),
        Ok(v) => panic!("{args:?} should fail, got {v:?}"),
    }
}

#[test]
fn count_and_bare_command() {
    let server = Server::start(2);
    let mut c = server.client();
    let count: i64 = q(&mut c, &["COMMAND", "COUNT"]).unwrap();
    assert_eq!(count as usize, table().len());
    let all: Value = q(&mut c, &["COMMAND"]).unwrap();
    let names: Vec<String> = items(&all).iter().map(|info| text(&items(info)[0])).collect();
    let expected: Vec<String> = table().iter().map(|r| r.full_name.clone()).collect();
    assert_eq!(names, expected);
    assert!(items(&all).iter().all(|info| items(info).len() == 10));
    let info_all: Value = q(&mut c, &["COMMAND", "INFO"]).unwrap();
    assert_eq!(info_all, all, "COMMAND INFO without names is COMMAND");
}

/// `COMMAND INFO get` in RESP2, exactly as redis-server 7 sends it.
#[test]
fn info_bytes_as_redis() {
    let server = Server::start(2);
    let mut raw = server.raw();
    let reply = raw.call(&["COMMAND", "INFO", "get", "nosuch"]);
    let expected = "*2\r\n*10\r\n$3\r\nget\r\n:2\r\n*2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n\
                    *3\r\n+@read\r\n+@string\r\n+@fast\r\n*0\r\n*1\r\n*6\r\n$5\r\nflags\r\n*2\r\n+RO\r\n+access\r\n\
                    $12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n*2\r\n$5\r\nindex\r\n:1\r\n\
                    $9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n*6\r\n$7\r\nlastkey\r\n:0\r\n\
                    $7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n*0\r\n$-1\r\n";
    assert_eq!(reply, expected);
}

#[test]
fn info_of_named_commands() {
    let server = Server::start(2);
    let mut c = server.client();
    let infos: Value = q(
        &mut c,
        &["COMMAND", "INFO", "SET", "mset", "command|list", "nosuch", "get|key", "client|list"],
    )
    .unwrap();
    let infos = items(&infos);
    assert_eq!(infos.len(), 6);

    let set = items(&infos[0]);
    assert_eq!(text(&set[0]), "set");
    assert_eq!(int(&set[1]), -3);
    assert_eq!(texts(&set[2]), ["write", "denyoom"]);
    assert_eq!((int(&set[3]), int(&set[4]), int(&set[5])), (1, 1, 1));
    assert_eq!(texts(&set[6]), ["@write", "@string", "@slow"]);
    let spec = &items(&set[8])[0];
    assert_eq!(text(field(spec, "notes")), "RW and ACCESS due to the optional `GET` argument");
    assert_eq!(texts(field(spec, "flags")), ["RW", "access", "update", "variable_flags"]);

    let mset = items(&infos[1]);
    assert_eq!((int(&mset[3]), int(&mset[4]), int(&mset[5])), (1, -1, 2));
    assert_eq!(texts(&mset[7]), ["request_policy:multi_shard", "response_policy:all_succeeded"]);
    let find = field(&items(&mset[8])[0], "find_keys");
    assert_eq!(text(field(find, "type")), "range");
    let range: Vec<(String, i64)> =
        pairs(field(find, "spec")).into_iter().map(|(k, v)| (k, int(v))).collect();
    assert_eq!(range, [("lastkey".into(), -1), ("keystep".into(), 2), ("limit".into(), 0)]);

    let list = items(&infos[2]);
    assert_eq!(text(&list[0]), "command|list");
    assert_eq!(int(&list[1]), -2);
    assert_eq!(texts(&list[2]), ["loading", "stale"]);
    assert_eq!(texts(&list[6]), ["@slow", "@connection"]);
    assert_eq!(texts(&list[7]), ["nondeterministic_output_order"]);

    assert_eq!(infos[3], Value::Nil);
    assert_eq!(infos[4], Value::Nil, "GET has no subcommands");
    // CLIENT LIST: described when the table has it, null when not.
    match table().get_full(b"client|list") {
        Some(reg) => {
            assert_eq!(text(&items(&infos[5])[0]), "client|list");
            assert_eq!(int(&items(&infos[5])[1]), reg.spec.arity as i64);
        }
        None => assert_eq!(infos[5], Value::Nil),
    }

    // The container lists its subcommands' information.
    let command: Value = q(&mut c, &["COMMAND", "INFO", "command"]).unwrap();
    let subs = &items(&items(&command)[0])[9];
    let names: Vec<String> = items(subs).iter().map(|s| text(&items(s)[0])).collect();
    assert_eq!(
        names,
        [
            "command|count",
            "command|docs",
            "command|getkeys",
            "command|getkeysandflags",
            "command|help",
            "command|info",
            "command|list"
        ]
    );
}

#[test]
fn docs() {
    let server = Server::start(2);
    let mut c = server.client();
    let docs: Value = q(&mut c, &["COMMAND", "DOCS", "set", "nosuch"]).unwrap();
    let docs = pairs(&docs);
    assert_eq!(docs.len(), 1, "unknown names are left out");
    let (name, set) = &docs[0];
    assert_eq!(name, "set");
    let keys: Vec<String> = pairs(set).into_iter().map(|(k, _)| k).collect();
    assert_eq!(keys, ["summary", "since", "group", "complexity", "history", "arguments"]);
    assert_eq!(text(field(set, "group")), "string");
    assert_eq!(text(field(set, "since")), "1.0.0");
    let history = items(field(set, "history"));
    assert_eq!(
        texts(&history[3]),
        ["7.0.0", "Allowed the `NX` and `GET` options to be used together."]
    );
    let args = items(field(set, "arguments"));
    let names: Vec<String> = args.iter().map(|a| text(field(a, "name"))).collect();
    assert_eq!(names, ["key", "value", "condition", "get", "expiration"]);
    let key = pairs(&args[0]);
    let key: Vec<(String, String)> = key
        .into_iter()
        .map(|(k, v)| (k, if let Value::Int(n) = v { n.to_string() } else { text(v) }))
        .collect();
    assert_eq!(
        key,
        [("name", "key"), ("type", "key"), ("display_text", "key"), ("key_spec_index", "0")]
            .map(|(k, v)| (k.to_string(), v.to_string()))
    );
    let expiration = &args[4];
    assert_eq!(text(field(expiration, "type")), "oneof");
    assert_eq!(texts(field(expiration, "flags")), ["optional"]);
    let ex = &items(field(expiration, "arguments"))[0];
    assert_eq!(
        (text(field(ex, "name")), text(field(ex, "type")), text(field(ex, "token"))),
        ("seconds".into(), "integer".into(), "EX".into())
    );

    let setnx: Value = q(&mut c, &["COMMAND", "DOCS", "SETNX"]).unwrap();
    let setnx = pairs(&setnx)[0].1;
    assert_eq!(texts(field(setnx, "doc_flags")), ["deprecated"]);
    assert_eq!(text(field(setnx, "deprecated_since")), "2.6.12");
    assert_eq!(text(field(setnx, "replaced_by")), "`SET` with the `NX` argument");

    let command: Value = q(&mut c, &["COMMAND", "DOCS", "command", "command|list"]).unwrap();
    let command = pairs(&command);
    let subs: Vec<String> =
        pairs(field(command[0].1, "subcommands")).into_iter().map(|(k, _)| k).collect();
    assert!(subs.contains(&"command|list".to_string()), "{subs:?}");
    assert_eq!(command[1].0, "command|list");
    assert_eq!(text(field(command[1].1, "summary")), "Returns a list of command names.");

    let all: Value = q(&mut c, &["COMMAND", "DOCS"]).unwrap();
    assert_eq!(pairs(&all).len(), table().len());
}

#[test]
fn list_with_filters() {
    let server = Server::start(2);
    let mut c = server.client();
    let all: Vec<String> = q(&mut c, &["COMMAND", "LIST"]).unwrap();
    assert_eq!(all.len(), table().all_rows().len());
    assert!(all.contains(&"set".into()) && all.contains(&"command|getkeys".into()));

    let strings: Vec<String> =
        q(&mut c, &["COMMAND", "LIST", "FILTERBY", "ACLCAT", "string"]).unwrap();
    assert!(strings.contains(&"get".into()) && !strings.contains(&"del".into()));
    let connection: Vec<String> =
        q(&mut c, &["command", "list", "filterby", "aclcat", "CONNECTION"]).unwrap();
    assert!(connection.contains(&"command|docs".into()) && connection.contains(&"ping".into()));
    let none: Vec<String> =
        q(&mut c, &["COMMAND", "LIST", "FILTERBY", "ACLCAT", "non_existing_category"]).unwrap();
    assert!(none.is_empty());

    let exact: Vec<String> = q(&mut c, &["COMMAND", "LIST", "FILTERBY", "PATTERN", "set"]).unwrap();
    assert_eq!(exact, ["set"]);
    let mut subs: Vec<String> =
        q(&mut c, &["COMMAND", "LIST", "FILTERBY", "PATTERN", "COMMAND|*KEYS*"]).unwrap();
    subs.sort();
    assert_eq!(subs, ["command|getkeys", "command|getkeysandflags"]);
    let modules: Vec<String> =
        q(&mut c, &["COMMAND", "LIST", "FILTERBY", "MODULE", "non_existing_module"]).unwrap();
    assert!(modules.is_empty());

    for bad in [
        &["COMMAND", "LIST", "bad_arg"][..],
        &["COMMAND", "LIST", "FILTERBY", "bad_arg"],
        &["COMMAND", "LIST", "FILTERBY", "bad_arg", "bad_arg2"],
        &["COMMAND", "LIST", "FILTERBY", "PATTERN", "a", "b"],
    ] {
        assert!(err(&mut c, bad).contains("syntax error"), "{bad:?}");
    }
}

#[test]
fn getkeys_and_flags() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    let keys: Vec<String> = q(&mut c, &["COMMAND", "GETKEYS", "SET", &a, "v"]).unwrap();
    assert_eq!(keys, [a.as_str()]);
    let keys: Vec<String> = q(&mut c, &["COMMAND", "GETKEYS", "mset", &a, "1", &b, "2"]).unwrap();
    assert_eq!(keys, [a.as_str(), b.as_str()]);

    let flags: Value = q(&mut c, &["COMMAND", "GETKEYSANDFLAGS", "set", "k1", "v1"]).unwrap();
    assert_eq!(text(&items(&items(&flags)[0])[0]), "k1");
    assert_eq!(texts(&items(&items(&flags)[0])[1]), ["OW", "update"]);
    let flags: Value =
        q(&mut c, &["COMMAND", "GETKEYSANDFLAGS", "set", "k1", "v1", "get"]).unwrap();
    assert_eq!(texts(&items(&items(&flags)[0])[1]), ["RW", "access", "update"]);
    let flags: Value =
        q(&mut c, &["COMMAND", "GETKEYSANDFLAGS", "mset", &a, "1", &b, "2"]).unwrap();
    let pairs: Vec<(String, Vec<String>)> =
        items(&flags).iter().map(|p| (text(&items(p)[0]), texts(&items(p)[1]))).collect();
    let ow = vec!["OW".to_string(), "update".to_string()];
    assert_eq!(pairs, [(a.clone(), ow.clone()), (b.clone(), ow)]);
    let keys: Vec<String> = q(&mut c, &["COMMAND", "GETKEYS", "DEL", &b, &a]).unwrap();
    assert_eq!(keys, [b.as_str(), a.as_str()]);

    // Rows whose keys follow a count (`numkeys key [key ...]`), when the
    // table has them.
    if table().get(b"zunionstore").is_some() {
        let keys: Vec<String> = q(
            &mut c,
            &["COMMAND", "GETKEYS", "ZUNIONSTORE", "d", "2", &a, &b, "WEIGHTS", "1", "2"],
        )
        .unwrap();
        assert_eq!(keys, ["d", a.as_str(), b.as_str()]);
        let e = err(&mut c, &["COMMAND", "GETKEYS", "ZUNIONSTORE", "d", "3", &a, &b]);
        assert!(e.contains("Invalid arguments specified for command"), "{e}");
        let e = err(&mut c, &["COMMAND", "GETKEYS", "ZUNIONSTORE", "d", "x", &a]);
        assert!(e.contains("Invalid arguments specified for command"), "{e}");
    }
    if table().get(b"eval").is_some() {
        let keys: Vec<String> =
            q(&mut c, &["COMMAND", "GETKEYS", "EVAL", "return 1", "1", &a]).unwrap();
        assert_eq!(keys, [a.as_str()]);
        let keys: Vec<String> =
            q(&mut c, &["COMMAND", "GETKEYS", "EVAL", "return 1", "0"]).unwrap();
        assert!(keys.is_empty(), "EVAL may have no keys");
    }

    let e = err(&mut c, &["COMMAND", "GETKEYS", "nosuch", "x"]);
    assert!(e.contains("Invalid command specified"), "{e}");
    let e = err(&mut c, &["COMMAND", "GETKEYS", "command", "nosuch"]);
    assert!(e.contains("Invalid command specified"), "{e}");
    let e = err(&mut c, &["COMMAND", "GETKEYS", "ping", "x"]);
    assert!(e.contains("The command has no key arguments"), "{e}");
    let e = err(&mut c, &["COMMAND", "GETKEYSANDFLAGS", "command", "count"]);
    assert!(e.contains("The command has no key arguments"), "{e}");
    let e = err(&mut c, &["COMMAND", "GETKEYS", "get"]);
    assert!(e.contains("Invalid number of arguments specified for command"), "{e}");
    let e = err(&mut c, &["COMMAND", "GETKEYS", "get", "a", "b"]);
    assert!(e.contains("Invalid number of arguments specified for command"), "{e}");
    let e = err(&mut c, &["COMMAND", "GETKEYS"]);
    assert!(e.contains("wrong number of arguments for 'command|getkeys' command"), "{e}");
}

#[test]
fn help_and_errors() {
    let server = Server::start(2);
    let mut c = server.client();
    let help: Vec<String> = q(&mut c, &["command", "help"]).unwrap();
    assert_eq!(help[0], "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:");
    assert_eq!(help[1], "(no subcommand)");
    assert!(help.contains(&"GETKEYSANDFLAGS <full-command>".to_string()));
    assert_eq!(help[help.len() - 2..], ["HELP".to_string(), "    Print this help.".to_string()]);
    assert_eq!(help.len(), 21);

    let e = err(&mut c, &["COMMAND", "FOO"]);
    assert!(e.contains("unknown subcommand 'FOO'. Try COMMAND HELP."), "{e}");
    let e = err(&mut c, &["COMMAND", "COUNT", "x"]);
    assert!(e.contains("wrong number of arguments for 'command|count' command"), "{e}");
    let e = err(&mut c, &["COMMAND", "HELP", "x"]);
    assert!(e.contains("wrong number of arguments for 'command|help' command"), "{e}");
    // The connection is still usable after the errors.
    let count: i64 = q(&mut c, &["COMMAND", "COUNT"]).unwrap();
    assert!(count > 0);
}
