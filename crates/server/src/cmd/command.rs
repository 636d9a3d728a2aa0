//! The COMMAND container: the command table described to clients. Bare
//! COMMAND and COMMAND INFO print rows as Redis 7's `addReplyCommandInfo`
//! does, COMMAND DOCS as `addReplyCommandDocs` (with the argument tree read
//! from each row's syntax), COMMAND LIST the names, COMMAND GETKEYS and
//! GETKEYSANDFLAGS the keys a request would touch, COUNT and HELP.
//!
//! Commands are listed in table order (Redis lists them in hash order).

use crate::net::connection::Connection;
use bytes::Bytes;
use ringdb_engine::command::args::is;
use ringdb_engine::command::docs::{self, Argument};
use ringdb_engine::command::spec::{acl, flags, keyflags, BeginSearch, FindKeys, KeySpec};
use ringdb_engine::command::{table, CmdError, CmdResult, CommandSpec, Registered};
use ringdb_protocol::ReplyWriter;
use ringdb_types::glob::glob_match;

/// COMMAND: every command's information.
pub async fn command(conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    write_all_info(&mut conn.reply());
    Ok(())
}

/// COMMAND COUNT
pub async fn count(conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    conn.reply().int(table().len() as i64);
    Ok(())
}

/// COMMAND INFO [command-name ...]: information on the named commands
/// (`name` or `container|sub`), a null for each unknown name; all commands
/// when none is named.
pub async fn info(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let mut out = conn.reply();
    let names = &args[2..];
    if names.is_empty() {
        write_all_info(&mut out);
        return Ok(());
    }
    out.array(names.len());
    for name in names {
        match table().get_full(name) {
            Some(reg) => write_info(&mut out, reg),
            None => out.null(),
        }
    }
    Ok(())
}

/// COMMAND DOCS [command-name ...]: a map from each known name to its
/// documentation; unknown names are left out. All commands when none is
/// named.
pub async fn docs(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let table = table();
    let found: Vec<&Registered> = if args.len() == 2 {
        table.iter().collect()
    } else {
        args[2..].iter().filter_map(|name| table.get_full(name)).collect()
    };
    let mut out = conn.reply();
    out.map(found.len());
    for reg in found {
        out.bulk(reg.full_name.as_bytes());
        write_docs(&mut out, reg);
    }
    Ok(())
}

/// What COMMAND LIST keeps.
enum ListFilter<'a> {
    All,
    /// ringdb loads no modules, so no command belongs to one.
    Module,
    AclCategory(Option<u32>),
    Pattern(&'a [u8]),
}

impl ListFilter<'_> {
    fn keeps(&self, reg: &Registered) -> bool {
        match self {
            ListFilter::All => true,
            ListFilter::Module => false,
            ListFilter::AclCategory(None) => false,
            ListFilter::AclCategory(Some(cat)) => reg.spec.acl_categories() & cat != 0,
            ListFilter::Pattern(p) => glob_match(p, reg.full_name.as_bytes(), true),
        }
    }
}

/// COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern]:
/// names of commands and subcommands.
pub async fn list(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let filter = parse_list_filter(args)?;
    let names: Vec<&str> = table()
        .all_rows()
        .into_iter()
        .filter(|r| filter.keeps(r))
        .map(|r| r.full_name.as_str())
        .collect();
    let mut out = conn.reply();
    out.array(names.len());
    for name in names {
        out.bulk(name.as_bytes());
    }
    Ok(())
}

/// Redis's `commandListCommand` options: `FILTERBY <type> <value>`, where a
/// later FILTERBY replaces an earlier one.
fn parse_list_filter(args: &[Bytes]) -> Result<ListFilter<'_>, CmdError> {
    let mut filter = ListFilter::All;
    let mut i = 2;
    while i < args.len() {
        if !is(&args[i], "FILTERBY") || args.len() - 1 - i != 2 {
            return Err(crate::cmd::syntax());
        }
        let value = &args[i + 2];
        filter = if is(&args[i + 1], "MODULE") {
            ListFilter::Module
        } else if is(&args[i + 1], "ACLCAT") {
            ListFilter::AclCategory(acl_category(value))
        } else if is(&args[i + 1], "PATTERN") {
            ListFilter::Pattern(value)
        } else {
            return Err(crate::cmd::syntax());
        };
        i += 3;
    }
    Ok(filter)
}

/// An ACL category by name (any case), as `ACLGetCommandCategoryFlagByName`.
fn acl_category(name: &[u8]) -> Option<u32> {
    acl::NAMES.iter().find(|(_, n)| is(name, n)).map(|(bit, _)| *bit)
}

/// COMMAND GETKEYS command [arg ...]
pub async fn getkeys(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let request = &args[2..];
    let keys = keys_of(request)?;
    let mut out = conn.reply();
    out.array(keys.len());
    for (pos, _) in keys {
        out.bulk(&request[pos]);
    }
    Ok(())
}

/// COMMAND GETKEYSANDFLAGS command [arg ...]
pub async fn getkeysandflags(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let request = &args[2..];
    let keys = keys_of(request)?;
    let mut out = conn.reply();
    out.array(keys.len());
    for (pos, key_flags) in keys {
        out.array(2);
        out.bulk(&request[pos]);
        write_flag_set(&mut out, key_flags, keyflags::NAMES);
    }
    Ok(())
}

/// The keys of `request` and their flags, with Redis's errors
/// (`getKeysSubcommandImpl`).
fn keys_of(request: &[Bytes]) -> Result<Vec<(usize, u32)>, CmdError> {
    let Some(reg) = table().lookup(request) else {
        return Err(CmdError::new("ERR Invalid command specified"));
    };
    let spec = reg.spec;
    if !spec.keys.iter().any(|k| k.flags & keyflags::NOT_KEY == 0) {
        return Err(CmdError::new("ERR The command has no key arguments"));
    }
    let argc = request.len() as i64;
    let arity = spec.arity as i64;
    if (arity > 0 && arity != argc) || argc < -arity {
        return Err(CmdError::new("ERR Invalid number of arguments specified for command"));
    }
    match spec.key_positions_and_flags(request) {
        Some(keys) if !keys.is_empty() => Ok(keys),
        _ if spec.has(flags::NO_MANDATORY_KEYS) => Ok(Vec::new()),
        _ => Err(CmdError::new("ERR Invalid arguments specified for command")),
    }
}

const HELP: &[&str] = &[
    "(no subcommand)",
    "    Return details about all Redis commands.",
    "COUNT",
    "    Return the total number of commands in this Redis server.",
    "LIST",
    "    Return a list of all commands in this Redis server.",
    "INFO [<command-name> ...]",
    "    Return details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "DOCS [<command-name> ...]",
    "    Return documentation details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "GETKEYS <full-command>",
    "    Return the keys from a full Redis command.",
    "GETKEYSANDFLAGS <full-command>",
    "    Return the keys and the access flags from a full Redis command.",
];

/// COMMAND HELP
pub async fn help(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    reply_help(&mut conn.reply(), &args[0], HELP);
    Ok(())
}

/// A container's HELP reply, framed as Redis's `addReplyHelp` frames it.
pub fn reply_help(out: &mut ReplyWriter, container: &[u8], lines: &[&str]) {
    let name = String::from_utf8_lossy(container).to_ascii_uppercase();
    out.array(lines.len() + 3);
    out.simple(&format!("{name} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"));
    for line in lines {
        out.simple(line);
    }
    out.simple("HELP");
    out.simple("    Print this help.");
}

// ---- COMMAND INFO -------------------------------------------------------------

fn write_all_info(out: &mut ReplyWriter) {
    let table = table();
    out.array(table.len());
    for reg in table.iter() {
        write_info(out, reg);
    }
}

/// One command as `addReplyCommandInfo`: name, arity, flags, first key, last
/// key, step, ACL categories, tips, key specs, subcommands.
fn write_info(out: &mut ReplyWriter, reg: &Registered) {
    let spec = reg.spec;
    let ((first, last, step), movable) = spec.legacy_range();
    out.array(10);
    out.bulk(reg.full_name.as_bytes());
    out.int(spec.arity as i64);
    write_command_flags(out, spec, movable);
    out.int(first as i64);
    out.int(last as i64);
    out.int(step as i64);
    let categories = spec.acl_categories();
    let names: Vec<&str> =
        acl::NAMES.iter().filter(|(bit, _)| categories & bit != 0).map(|(_, n)| *n).collect();
    out.set(names.len());
    for name in names {
        out.simple(&format!("@{name}"));
    }
    out.set(spec.tips.len());
    for tip in spec.tips {
        out.bulk(tip.as_bytes());
    }
    out.set(spec.keys.len());
    for key_spec in spec.keys {
        write_key_spec(out, key_spec);
    }
    let subs: Vec<&Registered> = reg.subcommands().collect();
    if subs.is_empty() {
        out.set(0);
    } else {
        out.array(subs.len());
        for sub in subs {
            write_info(out, sub);
        }
    }
}

/// Command flags in Redis's order; `movablekeys` sits between `no_multi` and
/// `allow_busy`.
fn write_command_flags(out: &mut ReplyWriter, spec: &CommandSpec, movable: bool) {
    let mut names: Vec<&str> = Vec::new();
    for (bit, name) in flags::NAMES {
        if *bit == flags::ALLOW_BUSY && movable {
            names.push("movablekeys");
        }
        if spec.has(*bit) {
            names.push(name);
        }
    }
    out.set(names.len());
    for name in names {
        out.simple(name);
    }
}

/// A set of status replies naming the bits of `bits` in `names`' order.
fn write_flag_set(out: &mut ReplyWriter, bits: u32, names: &[(u32, &str)]) {
    let set: Vec<&str> = names.iter().filter(|(bit, _)| bits & bit != 0).map(|(_, n)| *n).collect();
    out.set(set.len());
    for name in set {
        out.simple(name);
    }
}

/// A key spec as `addReplyCommandKeySpecs`.
fn write_key_spec(out: &mut ReplyWriter, spec: &KeySpec) {
    out.map(if spec.notes.is_some() { 4 } else { 3 });
    if let Some(notes) = spec.notes {
        out.bulk(b"notes");
        out.bulk(notes.as_bytes());
    }
    out.bulk(b"flags");
    write_flag_set(out, spec.flags, keyflags::NAMES);
    out.bulk(b"begin_search");
    out.map(2);
    out.bulk(b"type");
    match spec.begin {
        BeginSearch::Index(pos) => {
            out.bulk(b"index");
            out.bulk(b"spec");
            write_int_map(out, &[("index", pos)]);
        }
        BeginSearch::Unknown => {
            out.bulk(b"unknown");
            out.bulk(b"spec");
            out.map(0);
        }
        BeginSearch::Keyword { keyword, startfrom } => {
            out.bulk(b"keyword");
            out.bulk(b"spec");
            out.map(2);
            out.bulk(b"keyword");
            out.bulk(keyword.as_bytes());
            out.bulk(b"startfrom");
            out.int(startfrom as i64);
        }
    }
    out.bulk(b"find_keys");
    out.map(2);
    out.bulk(b"type");
    match spec.find {
        FindKeys::Unknown => {
            out.bulk(b"unknown");
            out.bulk(b"spec");
            out.map(0);
        }
        FindKeys::Range { lastkey, step, limit } => {
            out.bulk(b"range");
            out.bulk(b"spec");
            write_int_map(out, &[("lastkey", lastkey), ("keystep", step), ("limit", limit)]);
        }
        FindKeys::Keynum { keynumidx, firstkey, step } => {
            out.bulk(b"keynum");
            out.bulk(b"spec");
            write_int_map(
                out,
                &[("keynumidx", keynumidx), ("firstkey", firstkey), ("keystep", step)],
            );
        }
    }
}

fn write_int_map(out: &mut ReplyWriter, pairs: &[(&str, i32)]) {
    out.map(pairs.len());
    for (name, value) in pairs {
        out.bulk(name.as_bytes());
        out.int(*value as i64);
    }
}

// ---- COMMAND DOCS -------------------------------------------------------------

/// One command's documentation as `addReplyCommandDocs`: only the fields it
/// has, in Redis's order.
fn write_docs(out: &mut ReplyWriter, reg: &Registered) {
    let doc = &reg.spec.doc;
    // A syntax the reader cannot follow leaves the arguments out rather
    // than failing the reply; a unit test keeps every row readable.
    let arguments = docs::arguments(doc.syntax, reg.spec.keys).unwrap_or_default();
    let subs: Vec<&Registered> = reg.subcommands().collect();
    let mut fields = 2; // since, group
    fields += !doc.summary.is_empty() as usize;
    fields += !doc.complexity.is_empty() as usize;
    fields += doc.deprecated.map_or(0, |_| 3);
    fields += !doc.history.is_empty() as usize;
    fields += !arguments.is_empty() as usize;
    fields += !subs.is_empty() as usize;
    out.map(fields);
    if !doc.summary.is_empty() {
        field(out, "summary", doc.summary);
    }
    field(out, "since", doc.since);
    field(out, "group", doc.group);
    if !doc.complexity.is_empty() {
        field(out, "complexity", doc.complexity);
    }
    if let Some((since, replaced_by)) = doc.deprecated {
        out.bulk(b"doc_flags");
        out.set(1);
        out.simple("deprecated");
        field(out, "deprecated_since", since);
        field(out, "replaced_by", replaced_by);
    }
    if !doc.history.is_empty() {
        out.bulk(b"history");
        out.set(doc.history.len());
        for (version, change) in doc.history {
            out.array(2);
            out.bulk(version.as_bytes());
            out.bulk(change.as_bytes());
        }
    }
    if !arguments.is_empty() {
        out.bulk(b"arguments");
        write_arguments(out, &arguments);
    }
    if !subs.is_empty() {
        out.bulk(b"subcommands");
        out.map(subs.len());
        for sub in subs {
            out.bulk(sub.full_name.as_bytes());
            write_docs(out, sub);
        }
    }
}

fn field(out: &mut ReplyWriter, name: &str, value: &str) {
    out.bulk(name.as_bytes());
    out.bulk(value.as_bytes());
}

/// An argument list as Redis 7.2's `addReplyCommandArgList`.
fn write_arguments(out: &mut ReplyWriter, args: &[Argument]) {
    out.array(args.len());
    for arg in args {
        let flag_names = arg.flag_names();
        let fields = 2
            + arg.display.is_some() as usize
            + arg.key_spec_index.is_some() as usize
            + arg.token.is_some() as usize
            + !flag_names.is_empty() as usize
            + arg.kind.is_container() as usize;
        out.map(fields);
        field(out, "name", &arg.name);
        field(out, "type", arg.kind.name());
        if let Some(display) = &arg.display {
            field(out, "display_text", display);
        }
        if let Some(index) = arg.key_spec_index {
            out.bulk(b"key_spec_index");
            out.int(index as i64);
        }
        if let Some(token) = &arg.token {
            field(out, "token", token);
        }
        if !flag_names.is_empty() {
            out.bulk(b"flags");
            out.set(flag_names.len());
            for name in flag_names {
                out.simple(name);
            }
        }
        if arg.kind.is_container() {
            out.bulk(b"arguments");
            write_arguments(out, &arg.arguments);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringdb_protocol::Resp;

    fn render(resp: Resp, write: impl FnOnce(&mut ReplyWriter)) -> String {
        let mut buf = Vec::new();
        write(&mut ReplyWriter::new(&mut buf, resp));
        String::from_utf8_lossy(&buf).replace("\r\n", " ")
    }

    fn row(name: &str) -> &'static Registered {
        table().get_full(name.as_bytes()).unwrap_or_else(|| panic!("{name} is in the table"))
    }

    /// Byte for byte what redis-server 7 sends for `COMMAND INFO get mset`
    /// under RESP3 (sets and maps), one element per command.
    #[test]
    fn info_matches_redis_resp3() {
        let get = "*10 $3 get :2 ~2 +readonly +fast :1 :1 :1 ~3 +@read +@string +@fast ~0 ~1 \
                   %3 $5 flags ~2 +RO +access $12 begin_search %2 $4 type $5 index $4 spec %1 $5 index :1 \
                   $9 find_keys %2 $4 type $5 range $4 spec %3 $7 lastkey :0 $7 keystep :1 $5 limit :0 ~0 ";
        assert_eq!(render(Resp::V3, |out| write_info(out, row("get"))), get);
        let mset = "*10 $4 mset :-3 ~2 +write +denyoom :1 :-1 :2 ~3 +@write +@string +@slow \
                    ~2 $26 request_policy:multi_shard $29 response_policy:all_succeeded ~1 \
                    %3 $5 flags ~2 +OW +update $12 begin_search %2 $4 type $5 index $4 spec %1 $5 index :1 \
                    $9 find_keys %2 $4 type $5 range $4 spec %3 $7 lastkey :-1 $7 keystep :2 $5 limit :0 ~0 ";
        assert_eq!(render(Resp::V3, |out| write_info(out, row("mset"))), mset);
    }

    #[test]
    fn info_resp2_flattens_maps_and_sets() {
        let get = render(Resp::V2, |out| write_info(out, row("get")));
        assert!(get.starts_with(
            "*10 $3 get :2 *2 +readonly +fast :1 :1 :1 *3 +@read +@string +@fast *0 *1 *6 "
        ));
        assert!(get.ends_with(" *0 "), "no subcommands: an empty set: {get}");
    }

    #[test]
    fn info_of_a_command_with_subcommands() {
        let info = render(Resp::V3, |out| write_info(out, row("command")));
        assert!(
            info.starts_with(
                "*10 $7 command :-1 ~2 +loading +stale :0 :0 :0 ~2 +@slow +@connection "
            ),
            "{info}"
        );
        assert!(
            info.contains("~1 $29 nondeterministic_output_order ~0 *7 *10 $13 command|count :2 "),
            "{info}"
        );
    }

    #[test]
    fn movablekeys_sits_before_allow_busy() {
        static KEYS: &[KeySpec] = &[KeySpec::keynum(1, keyflags::RO)];
        let spec = CommandSpec::new(
            "x",
            -2,
            flags::READONLY | flags::ALLOW_BUSY,
            ringdb_engine::command::Exec::Container,
        )
        .keys(KEYS);
        let flags = render(Resp::V3, |out| write_command_flags(out, &spec, spec.movable_keys()));
        assert_eq!(flags, "~3 +readonly +movablekeys +allow_busy ");
    }

    #[test]
    fn docs_fields_in_redis_order() {
        let count = render(Resp::V3, |out| write_docs(out, row("command|count")));
        assert_eq!(
            count,
            "%4 $7 summary $28 Returns a count of commands. $5 since $6 2.8.13 $5 group $6 server \
             $10 complexity $4 O(1) "
        );
        let setnx = render(Resp::V3, |out| write_docs(out, row("setnx")));
        assert!(
            setnx.contains(
                "$9 doc_flags ~1 +deprecated $16 deprecated_since $6 2.6.12 \
                 $11 replaced_by $28 `SET` with the `NX` argument $9 arguments *2 "
            ),
            "{setnx}"
        );
        let set = render(Resp::V3, |out| write_docs(out, row("set")));
        assert!(set.contains("$7 history ~4 *2 $6 2.6.12 "), "{set}");
    }

    /// COMMAND LIST's argument, as Redis 7.2 prints it.
    #[test]
    fn docs_arguments_as_redis() {
        let list = render(Resp::V3, |out| write_docs(out, row("command|list")));
        let arguments = "$9 arguments *1 %5 $4 name $8 filterby $4 type $5 oneof $5 token $8 FILTERBY \
                         $5 flags ~1 +optional $9 arguments *3 \
                         %4 $4 name $11 module-name $4 type $6 string $12 display_text $11 module-name $5 token $6 MODULE \
                         %4 $4 name $8 category $4 type $6 string $12 display_text $8 category $5 token $6 ACLCAT \
                         %4 $4 name $7 pattern $4 type $7 pattern $12 display_text $7 pattern $5 token $7 PATTERN ";
        assert!(list.ends_with(arguments), "{list}");
    }

    #[test]
    fn list_filters() {
        let args = |s: &str| {
            s.split(' ').map(|a| Bytes::copy_from_slice(a.as_bytes())).collect::<Vec<_>>()
        };
        assert!(matches!(parse_list_filter(&args("command list")), Ok(ListFilter::All)));
        let a = args("command list filterby aclcat STRING");
        let Ok(filter) = parse_list_filter(&a) else { panic!("ACLCAT parses") };
        assert!(filter.keeps(row("get")) && !filter.keeps(row("del")));
        let a = args("command list filterby pattern command|*s");
        let Ok(filter) = parse_list_filter(&a) else { panic!("PATTERN parses") };
        assert!(filter.keeps(row("command|docs")) && !filter.keeps(row("command")));
        let a = args("command list filterby aclcat nosuch");
        let Ok(filter) = parse_list_filter(&a) else { panic!("unknown categories parse") };
        assert!(!filter.keeps(row("get")));
        for bad in [
            "command list x",
            "command list filterby",
            "command list filterby x y",
            "command list filterby pattern",
        ] {
            assert!(parse_list_filter(&args(bad)).is_err(), "{bad}");
        }
    }
}
