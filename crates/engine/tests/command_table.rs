//! Conformance of the command table with Redis's command JSON: for every row
//! (and subcommand) that Redis also has, arity, command flags, key specs
//! (begin search, find keys, flags) and explicit ACL categories must be
//! Redis's. Every mismatch is reported in one failure message.
//!
//! The JSON is vendored in the repository (`tests/data/redis-commands`,
//! Valkey's files under its BSD licence), or where `RINGDB_REDIS_COMMANDS`
//! points.

use ringdb_engine::command::spec::{acl, flags, keyflags, BeginSearch, FindKeys, KeySpec};
use ringdb_engine::command::{table, CommandSpec};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn redis_commands_dir() -> PathBuf {
    let dir = match std::env::var_os("RINGDB_REDIS_COMMANDS") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/redis-commands"),
    };
    assert!(dir.is_dir(), "Redis's command JSON is missing: no directory {}", dir.display());
    dir
}

/// The command object of `client-list.json` for `client|list`.
fn redis_command(dir: &Path, full_name: &str) -> Option<Value> {
    let path = dir.join(format!("{}.json", full_name.replace('|', "-")));
    let text = std::fs::read_to_string(path).ok()?;
    let doc: Value = serde_json::from_str(&text).ok()?;
    doc.as_object()?.values().next().cloned()
}

/// Upper-case names of the bits set in `bits`.
fn names_of(bits: u32, names: &[(u32, &str)]) -> BTreeSet<String> {
    names.iter().filter(|(bit, _)| bits & bit != 0).map(|(_, n)| n.to_ascii_uppercase()).collect()
}

/// A JSON array of names, upper-cased.
fn json_names(v: Option<&Value>) -> BTreeSet<String> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_ascii_uppercase).collect())
        .unwrap_or_default()
}

fn int(v: &Value, field: &str) -> Option<i64> {
    v.get(field).and_then(Value::as_i64)
}

/// A key spec in a form both sides can be written in.
fn describe_spec(spec: &KeySpec) -> String {
    let begin = match spec.begin {
        BeginSearch::Index(pos) => format!("index {pos}"),
        BeginSearch::Keyword { keyword, startfrom } => {
            format!("keyword {keyword} from {startfrom}")
        }
        BeginSearch::Unknown => "unknown".to_string(),
    };
    let find = match spec.find {
        FindKeys::Range { lastkey, step, limit } => {
            format!("range {lastkey} step {step} limit {limit}")
        }
        FindKeys::Keynum { keynumidx, firstkey, step } => {
            format!("keynum {keynumidx} first {firstkey} step {step}")
        }
        FindKeys::Unknown => "unknown".to_string(),
    };
    let flags: Vec<String> = names_of(spec.flags, keyflags::NAMES).into_iter().collect();
    format!("{begin}; {find}; [{}]", flags.join(" "))
}

fn describe_json_spec(spec: &Value) -> String {
    let begin = &spec["begin_search"];
    let begin = if let Some(index) = begin.get("index") {
        format!("index {}", int(index, "pos").unwrap_or(-999))
    } else if let Some(keyword) = begin.get("keyword") {
        let word = keyword.get("keyword").and_then(Value::as_str).unwrap_or("?");
        format!("keyword {word} from {}", int(keyword, "startfrom").unwrap_or(-999))
    } else if begin.get("unknown").is_some() {
        "unknown".to_string()
    } else {
        format!("{begin}")
    };
    let find = &spec["find_keys"];
    let find = if let Some(range) = find.get("range") {
        let (last, step, limit) = (
            int(range, "lastkey").unwrap_or(-999),
            int(range, "step").unwrap_or(-999),
            int(range, "limit").unwrap_or(-999),
        );
        format!("range {last} step {step} limit {limit}")
    } else if let Some(keynum) = find.get("keynum") {
        let (idx, first, step) = (
            int(keynum, "keynumidx").unwrap_or(-999),
            int(keynum, "firstkey").unwrap_or(-999),
            int(keynum, "step").unwrap_or(-999),
        );
        format!("keynum {idx} first {first} step {step}")
    } else if find.get("unknown").is_some() {
        "unknown".to_string()
    } else {
        format!("{find}")
    };
    let flags: Vec<String> = json_names(spec.get("flags")).into_iter().collect();
    format!("{begin}; {find}; [{}]", flags.join(" "))
}

/// Rows Redis 7.0 (ringdb's reference) flags `noscript` and the JSON in
/// `tests/data/redis-commands` (Valkey's, which lets scripts run them without
/// blocking) does not: Redis's `unit/scripting` expects scripts to be
/// refused them.
const REDIS_7_0_NOSCRIPT: &[&str] =
    &["blpop", "brpop", "brpoplpush", "blmove", "bzpopmin", "bzpopmax"];

/// Every way `spec` differs from Redis's `json`.
fn mismatches(full_name: &str, spec: &CommandSpec, json: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let arity = int(json, "arity");
    if arity != Some(spec.arity as i64) {
        out.push(format!("{full_name}: arity {} (Redis {arity:?})", spec.arity));
    }
    let ours = names_of(spec.flags, flags::JSON_NAMES);
    let mut redis = json_names(json.get("command_flags"));
    if REDIS_7_0_NOSCRIPT.contains(&full_name) {
        redis.insert("NOSCRIPT".to_string());
    }
    if ours != redis {
        out.push(format!("{full_name}: flags {ours:?} (Redis {redis:?})"));
    }
    let ours = names_of(spec.acl, acl::NAMES);
    let redis = json_names(json.get("acl_categories"));
    if ours != redis {
        out.push(format!("{full_name}: ACL categories {ours:?} (Redis {redis:?})"));
    }
    let ours: Vec<String> = spec.keys.iter().map(describe_spec).collect();
    let redis: Vec<String> = json
        .get("key_specs")
        .and_then(Value::as_array)
        .map(|specs| specs.iter().map(describe_json_spec).collect())
        .unwrap_or_default();
    if ours.len() != redis.len() {
        out.push(format!(
            "{full_name}: {} key specs (Redis {}): {ours:?} (Redis {redis:?})",
            ours.len(),
            redis.len()
        ));
    } else {
        for (i, (a, b)) in ours.iter().zip(&redis).enumerate() {
            if a != b {
                out.push(format!("{full_name}: key spec {i}: {a} (Redis {b})"));
            }
        }
    }
    out
}

#[test]
fn rows_match_redis_command_json() {
    let dir = redis_commands_dir();
    let mut compared = 0;
    let mut ringdb_only = Vec::new();
    let mut problems = Vec::new();
    for reg in table().all_rows() {
        match redis_command(&dir, &reg.full_name) {
            Some(json) => {
                compared += 1;
                problems.extend(mismatches(&reg.full_name, reg.spec, &json));
            }
            None => ringdb_only.push(reg.full_name.as_str()),
        }
    }
    eprintln!(
        "compared {compared} rows with Redis's JSON; without JSON (ringdb's own): {ringdb_only:?}"
    );
    assert!(compared > 0, "no row has a JSON file in {}", dir.display());
    assert!(
        problems.is_empty(),
        "{} mismatches with Redis's command JSON:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// The comparison itself catches each kind of difference (so a passing run
/// means something).
#[test]
fn mismatches_are_reported() {
    let Some(get) = table().get(b"get") else { panic!("GET is in the table") };
    let json: Value = serde_json::from_str(
        r#"{"arity": 3, "command_flags": ["WRITE"], "acl_categories": ["HASH"],
            "key_specs": [{"flags": ["RW"], "begin_search": {"index": {"pos": 2}},
                           "find_keys": {"range": {"lastkey": 0, "step": 1, "limit": 0}}}]}"#,
    )
    .unwrap_or_default();
    let found = mismatches("get", get.spec, &json);
    let kinds = ["arity", "flags", "ACL categories", "key spec 0"];
    for kind in kinds {
        assert!(
            found.iter().any(|m| m.starts_with(&format!("get: {kind}"))),
            "{kind} not reported: {found:?}"
        );
    }
    let same: Value = serde_json::from_str(
        r#"{"arity": 2, "command_flags": ["READONLY", "FAST"], "acl_categories": ["STRING"],
            "key_specs": [{"flags": ["RO", "ACCESS"], "begin_search": {"index": {"pos": 1}},
                           "find_keys": {"range": {"lastkey": 0, "step": 1, "limit": 0}}}]}"#,
    )
    .unwrap_or_default();
    assert_eq!(mismatches("get", get.spec, &same), Vec::<String>::new());
}
