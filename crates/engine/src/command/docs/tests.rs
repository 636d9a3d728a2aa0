//! Tests of the syntax reader: chosen shapes, every row of the command table
//! against Redis's command JSON, and every Redis command rendered as redis.io
//! renders it and read back.

use super::*;
use crate::command::spec::{keyflags as kf, BeginSearch, KeySpec};
use crate::command::table;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn parse(syntax: &str, keys: &[KeySpec]) -> Vec<Argument> {
    arguments(syntax, keys).unwrap_or_else(|e| panic!("{syntax}: {e}"))
}

/// `name:type[:key_spec_index][/flags]{token}` per argument, nested in
/// parentheses: a compact picture to assert on.
fn picture(args: &[Argument]) -> String {
    let one = |a: &Argument| {
        let mut s = format!("{}:{}", a.name, a.kind.name());
        if let Some(i) = a.key_spec_index {
            s += &format!(":{i}");
        }
        if let Some(t) = &a.token {
            s += &format!("{{{t}}}");
        }
        let flags: String = [(a.optional, 'o'), (a.multiple, 'm'), (a.multiple_token, 't')]
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, c)| *c)
            .collect();
        if !flags.is_empty() {
            s += &format!("/{flags}");
        }
        if !a.arguments.is_empty() {
            s += &format!("({})", picture(&a.arguments));
        }
        s
    };
    args.iter().map(one).collect::<Vec<_>>().join(" ")
}

const ONE_KEY: &[KeySpec] = &[KeySpec::one(1, kf::RW)];

#[test]
fn set_syntax() {
    let args = parse(
        "key value [NX | XX] [GET] [EX seconds | PX milliseconds | EXAT unix-time-seconds | \
         PXAT unix-time-milliseconds | KEEPTTL]",
        ONE_KEY,
    );
    assert_eq!(
        picture(&args),
        "key:key:0 value:string condition:oneof/o(nx:pure-token{NX} xx:pure-token{XX}) \
         get:pure-token{GET}/o expiration:oneof/o(seconds:integer{EX} milliseconds:integer{PX} \
         unix-time-seconds:unix-time{EXAT} unix-time-milliseconds:unix-time{PXAT} \
         keepttl:pure-token{KEEPTTL})"
    );
    assert_eq!(args[0].display.as_deref(), Some("key"));
    assert_eq!(args[2].display, None);
}

#[test]
fn repetition_keynum_and_tokens() {
    let keys = &[KeySpec::one(1, kf::OW), KeySpec::keynum(2, kf::RO)];
    let args = parse(
        "destination numkeys key [key ...] [WEIGHTS weight [weight ...]] [AGGREGATE <SUM | MIN | MAX>]",
        keys,
    );
    assert_eq!(
        picture(&args),
        "destination:key:0 numkeys:integer key:key:1/m weight:integer{WEIGHTS}/om \
         aggregate:oneof{AGGREGATE}/o(sum:pure-token{SUM} min:pure-token{MIN} max:pure-token{MAX})"
    );
    assert_eq!(
        picture(&parse("key [key ...]", &[KeySpec::range(1, -1, 1, kf::RO)])),
        "key:key:0/m"
    );
}

#[test]
fn blocks_and_repeated_tokens() {
    let mset = parse("key value [key value ...]", &[KeySpec::range(1, -1, 2, kf::OW)]);
    assert_eq!(picture(&mset), "data:block/m(key:key:0 value:string)");
    let sort =
        parse("key [LIMIT offset count] [GET pattern [GET pattern ...]] [ASC | DESC]", ONE_KEY);
    assert_eq!(
        picture(&sort),
        "key:key:0 limit:block{LIMIT}/o(offset:integer count:integer) \
         pattern:pattern{GET}/omt order:oneof/o(asc:pure-token{ASC} desc:pure-token{DESC})"
    );
    let geo = parse("[COUNT count [ANY]] [BYRADIUS radius <m | km | ft | mi>]", &[]);
    assert_eq!(
        picture(&geo),
        "count-any:block/o(count:integer{COUNT} any:pure-token{ANY}/o) \
         byradius-unit:block/o(radius:double{BYRADIUS} unit:oneof(m:pure-token{m} km:pure-token{km} \
         ft:pure-token{ft} mi:pure-token{mi}))"
    );
    let xread = parse("[COUNT count] STREAMS key [key ...] ID [ID ...]", &[]);
    assert_eq!(
        picture(&xread),
        "count:integer{COUNT}/o streams:block{STREAMS}(key:string/m ID:string/m)"
    );
}

#[test]
fn repeated_choices_both_renderings() {
    let new_style = parse("[GET x | SET x y [GET x | SET x y ...]]", &[]);
    let old_style = parse("<GET x | SET x y> [GET x | SET x y ...]", &[]);
    assert_eq!(
        picture(&new_style),
        "get-set:oneof/om(x:string{GET} set:block{SET}(x:string y:string))"
    );
    assert_eq!(
        picture(&old_style),
        "get-set:oneof/m(x:string{GET} set:block{SET}(x:string y:string))"
    );
}

#[test]
fn explicit_types_and_shared_key_specs() {
    let args = parse("key increment:double", ONE_KEY);
    assert_eq!(picture(&args), "key:key:0 increment:double");
    assert_eq!(args[1].display.as_deref(), Some("increment"));
    // `ip:port` is a name, not a type annotation.
    assert_eq!(picture(&parse("ip:port", &[])), "ip:port:string");
    // LCS: one spec covers both keys.
    let lcs = parse("key1 key2 [LEN]", &[KeySpec::range(1, 1, 1, kf::RO)]);
    assert_eq!(picture(&lcs), "key1:key:0 key2:key:0 len:pure-token{LEN}/o");
    // RENAME: one spec per key.
    let rename = parse("key newkey", &[KeySpec::one(1, kf::RW), KeySpec::one(2, kf::OW)]);
    assert_eq!(picture(&rename), "key:key:0 newkey:key:1");
    // No key spec: a `key` is then just a name.
    assert_eq!(picture(&parse("key", &[])), "key:string");
}

#[test]
fn empty_and_bad_syntax() {
    assert_eq!(arguments("", &[]), Ok(vec![]));
    for bad in ["[key", "key]", "<a | b", "a | b", "[]", "x ...", "a [b ...]", "[a | ]"] {
        assert!(arguments(bad, &[]).is_err(), "{bad} should not parse");
    }
    let deep = "[".repeat(100) + "x" + &"]".repeat(100);
    assert!(arguments(&deep, &[]).is_err());
}

// ---- Against Redis's command JSON -------------------------------------------

/// Redis's command JSON: `RINGDB_REDIS_COMMANDS`, or the copy vendored in
/// the repository (`tests/data/redis-commands`).
pub(crate) fn redis_commands_dir() -> PathBuf {
    let dir = match std::env::var_os("RINGDB_REDIS_COMMANDS") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/redis-commands"),
    };
    assert!(dir.is_dir(), "Redis's command JSON is missing: no directory {}", dir.display());
    dir
}

/// The command object of a JSON file (`{"SET": {...}}` → `{...}`).
fn load(path: &Path) -> Option<Value> {
    let text = std::fs::read_to_string(path).ok()?;
    let doc: Value = serde_json::from_str(&text).ok()?;
    doc.as_object()?.values().next().cloned()
}

fn flag(v: &Value, name: &str) -> bool {
    v.get(name).and_then(Value::as_bool).unwrap_or(false)
}

fn text<'a>(v: &'a Value, name: &str) -> Option<&'a str> {
    v.get(name).and_then(Value::as_str)
}

/// An argument as Redis's JSON describes it (ignoring `since`, which the
/// syntax cannot carry).
fn from_json(v: &Value) -> Argument {
    let name = text(v, "name").unwrap_or_default().to_string();
    let kind = text(v, "type").and_then(ArgType::from_name).unwrap_or(ArgType::String);
    Argument {
        display: (!kind.is_container()).then(|| text(v, "display").unwrap_or(&name).to_string()),
        key_spec_index: v.get("key_spec_index").and_then(Value::as_u64).map(|i| i as usize),
        token: text(v, "token").map(str::to_string),
        optional: flag(v, "optional"),
        multiple: flag(v, "multiple"),
        multiple_token: flag(v, "multiple_token"),
        arguments: members_json(v),
        name,
        kind,
    }
}

fn members_json(v: &Value) -> Vec<Argument> {
    v.get("arguments")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(from_json).collect())
        .unwrap_or_default()
}

/// Key specs from JSON, as far as the syntax reader needs them (their
/// order, `not_key`, and how many keys a range holds).
fn key_specs_json(cmd: &Value) -> Vec<KeySpec> {
    let specs = cmd.get("key_specs").and_then(Value::as_array).cloned().unwrap_or_default();
    specs
        .iter()
        .map(|spec| {
            let not_key = spec.get("flags").and_then(Value::as_array).is_some_and(|f| {
                f.iter().any(|x| x.as_str().is_some_and(|s| s.eq_ignore_ascii_case("not_key")))
            });
            let range = &spec["find_keys"]["range"];
            let lastkey = range.get("lastkey").and_then(Value::as_i64).unwrap_or(-1) as i32;
            let step = range.get("step").and_then(Value::as_i64).unwrap_or(1) as i32;
            let flags = if not_key { kf::NOT_KEY } else { kf::RO };
            KeySpec {
                flags,
                begin: BeginSearch::Index(1),
                find: FindKeys::Range { lastkey, step, limit: 0 },
                notes: None,
            }
        })
        .collect()
}

/// The first difference between two argument lists, as a path and the two
/// values; `loose` ignores the names of choices, blocks and tokens, which
/// the syntax does not show.
fn first_difference(
    path: &str,
    ours: &[Argument],
    redis: &[Argument],
    loose: bool,
) -> Option<String> {
    if ours.len() != redis.len() {
        return Some(format!("{path}: {} arguments, Redis has {}", ours.len(), redis.len()));
    }
    for (a, b) in ours.iter().zip(redis) {
        let here = format!("{path}/{}", b.name);
        let unnamed = a.kind.is_container() || a.kind == ArgType::PureToken;
        let shallow = |x: &Argument| {
            let hide = loose && unnamed;
            let name = if hide { String::new() } else { x.name.clone() };
            let display =
                if hide && x.kind == ArgType::PureToken { None } else { x.display.clone() };
            (name, x.kind, display, x.key_spec_index, x.token.clone(), x.flag_names())
        };
        if shallow(a) != shallow(b) {
            return Some(format!("{here}: ours {:?}, Redis {:?}", shallow(a), shallow(b)));
        }
        if let Some(d) = first_difference(&here, &a.arguments, &b.arguments, loose) {
            return Some(d);
        }
    }
    None
}

/// Redis's documentation syntax for one JSON argument, as redis.io's
/// generator writes it (with plain spaces).
fn render(v: &Value) -> String {
    let kind = text(v, "type").unwrap_or_default();
    let name = text(v, "name").unwrap_or_default();
    let token = text(v, "token").map(|t| if t.is_empty() { "\"\"" } else { t });
    let members = || v.get("arguments").and_then(Value::as_array).cloned().unwrap_or_default();
    let args = match kind {
        "block" => members().iter().map(render).collect::<Vec<_>>().join(" "),
        "oneof" => members().iter().map(render).collect::<Vec<_>>().join(" | "),
        "pure-token" => String::new(),
        _ => text(v, "display").unwrap_or(name).to_string(),
    };
    let optional = flag(v, "optional");
    let angle = kind == "oneof" && (!optional || token.is_some());
    let mut s = String::new();
    if optional {
        s.push('[');
    }
    if let Some(t) = token {
        s += t;
        if kind != "pure-token" {
            s.push(' ');
        }
    }
    if angle {
        s.push('<');
    }
    if flag(v, "multiple") && flag(v, "multiple_token") {
        s += &format!("{args} [{} {args} ...]", token.unwrap_or_default());
    } else if flag(v, "multiple") {
        s += &format!("{args} [{args} ...]");
    } else {
        s += &args;
    }
    if angle {
        s = format!("{}>", s.trim_end());
    }
    if optional {
        s = format!("{}]", s.trim_end());
    }
    s
}

fn render_command(cmd: &Value) -> String {
    let args = cmd.get("arguments").and_then(Value::as_array).cloned().unwrap_or_default();
    args.iter().map(render).collect::<Vec<_>>().join(" ")
}

/// Every row with a JSON file: its argument tree against Redis's. Every row
/// must match in shape (types, tokens, flags, key spec indexes, nesting and
/// the names the syntax shows); how many also match in every name is
/// printed.
#[test]
fn rows_match_redis_arguments() {
    let dir = redis_commands_dir();
    let (mut compared, mut exact) = (0, 0);
    let mut failures = Vec::new();
    let mut inexact = Vec::new();
    for reg in table().all_rows() {
        let Some(cmd) = load(&dir.join(format!("{}.json", reg.full_name.replace('|', "-")))) else {
            continue;
        };
        compared += 1;
        let redis = members_json(&cmd);
        let ours = match arguments(reg.spec.doc.syntax, reg.spec.keys) {
            Ok(ours) => ours,
            Err(e) => {
                failures.push(format!("{}: {e}", reg.full_name));
                continue;
            }
        };
        if let Some(d) = first_difference(&reg.full_name, &ours, &redis, true) {
            failures.push(format!(
                "{d}\n    ours:  {}\n    Redis: {}",
                picture(&ours),
                picture(&redis)
            ));
        } else if let Some(d) = first_difference(&reg.full_name, &ours, &redis, false) {
            inexact.push(d);
        } else {
            exact += 1;
        }
    }
    eprintln!(
        "COMMAND DOCS arguments: {compared} rows with Redis JSON, {exact} identical to Redis's"
    );
    for d in &inexact {
        eprintln!("  names differ: {d}");
    }
    assert!(
        failures.is_empty(),
        "argument trees that differ from Redis's:\n{}",
        failures.join("\n")
    );
}

/// Every command Redis has, rendered as its documentation and read back:
/// the reader handles the whole range of Redis's syntax, not only the rows
/// ringdb has so far.
#[test]
fn all_redis_syntax_reads_back() {
    let dir = redis_commands_dir();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    paths.retain(|p| p.extension().is_some_and(|e| e == "json"));
    paths.sort();
    let (mut total, mut shape, mut exact) = (0, 0, 0);
    let mut misses = Vec::new();
    for path in &paths {
        let Some(cmd) = load(path) else { continue };
        total += 1;
        let syntax = render_command(&cmd);
        let redis = members_json(&cmd);
        let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        match arguments(&syntax, &key_specs_json(&cmd)) {
            Err(e) => misses.push(format!("{name}: `{syntax}`: {e}")),
            Ok(ours) => match first_difference(&name, &ours, &redis, true) {
                Some(d) => misses.push(format!("{d}  [{syntax}]")),
                None => {
                    shape += 1;
                    exact += first_difference(&name, &ours, &redis, false).is_none() as usize;
                }
            },
        }
    }
    eprintln!("{total} Redis commands: {shape} read back in shape, {exact} identically");
    for m in &misses {
        eprintln!("  {m}");
    }
    // The misses are types a name cannot tell (rows say `name:type`) and
    // groupings the rendering loses (XTRIM's unbracketed `trim` block).
    assert!(total == 0 || shape * 10 >= total * 9, "only {shape} of {total} read back in shape");
}
