//! Hot-key detection commands: HOTKEYS RULES SET / GET / DEL, HOTKEYS
//! LIST, HOTKEYS TOP, HOTKEYS HELP, HOTKEYS.WATCH and HOTKEYS.UNWATCH.
//!
//! Rules live in the `hotkeys-rules` setting, so RULES SET and DEL change
//! the setting on every core (each core gives its shard the new rules, see
//! [`crate::node::Core::apply_config`]) and CONFIG REWRITE keeps them. LIST
//! and TOP ask every shard and merge. HOTKEYS.WATCH registers the connection
//! in its core's push hub and counts its core as watching on every shard,
//! which then send it their hot / cold events through the mesh
//! ([`crate::push::hotkeys`]); under RESP2 the connection is then in watch
//! mode, as with the `.WATCH` commands.

use crate::net::connection::Connection;
use bytes::Bytes;
use ringdb_engine::command::args::{is, positive, text};
use ringdb_engine::command::{CmdError, CmdResult};
use ringdb_engine::hotkeys::rule::{self, Rule, MAX_RULES};
use ringdb_engine::hotkeys::HotEntry;

/// Keys HOTKEYS TOP lists when no count is given.
const DEFAULT_TOP: usize = 10;

/// HOTKEYS RULES <SET … | GET [name] | DEL name>.
pub async fn rules(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let action = &args[2];
    if is(action, "set") && args.len() >= 4 {
        let words: Vec<&[u8]> = args[3..].iter().map(|a| &a[..]).collect();
        let new = Rule::parse(&words)?;
        let mut rules = conn.core.config.borrow().hotkeys_rules();
        match rules.iter().position(|r| r.name == new.name) {
            Some(at) => rules[at] = new,
            None if rules.len() >= MAX_RULES => return Err(rule::too_many()),
            None => rules.push(new),
        }
        store(conn, &rules).await?;
        conn.reply().ok();
    } else if is(action, "get") && args.len() <= 4 {
        let rules = conn.core.config.borrow().hotkeys_rules();
        match args.get(3) {
            Some(name) => match rules.iter().find(|r| r.name.as_bytes() == &name[..]) {
                Some(r) => write_rule(conn, r),
                None => conn.reply().null(),
            },
            None => {
                conn.reply().array(rules.len());
                rules.iter().for_each(|r| write_rule(conn, r));
            }
        }
    } else if is(action, "del") && args.len() == 4 {
        let mut rules = conn.core.config.borrow().hotkeys_rules();
        let before = rules.len();
        rules.retain(|r| r.name.as_bytes() != &args[3][..]);
        let deleted = rules.len() < before;
        if deleted {
            store(conn, &rules).await?;
        }
        conn.reply().int(deleted as i64);
    } else {
        return Err(CmdError::owned(format!(
            "ERR unknown subcommand or wrong number of arguments for 'RULES {}'. Try HOTKEYS HELP.",
            text(&action[..action.len().min(128)])
        )));
    }
    Ok(())
}

/// A rule as the words RULES SET takes.
fn write_rule(conn: &mut Connection, rule: &Rule) {
    let words = rule.to_words();
    let mut out = conn.reply();
    out.array(words.len());
    for w in &words {
        out.bulk(w.as_bytes());
    }
}

/// Makes `rules` the `hotkeys-rules` setting on every core.
async fn store(conn: &mut Connection, rules: &[Rule]) -> CmdResult {
    let value = rule::rules_to_text(rules);
    conn.core
        .invoke_on_all(move |core| {
            let mut config = core.config.borrow().clone();
            // The text was made from valid rules: setting it cannot fail.
            let _ = config.set("hotkeys-rules", &value);
            core.apply_config(config);
        })
        .await?;
    Ok(())
}

/// The keys hot now on every shard, hottest first.
async fn hot_now(conn: &Connection) -> Result<Vec<HotEntry>, CmdError> {
    let lists = conn
        .core
        .invoke_on_all(|core| {
            let now = ringdb_engine::shard::now_ms();
            core.shard.borrow_mut().state.hotkeys.list(now)
        })
        .await?;
    // A user who may not read every key sees only the keys it may read.
    let mut all: Vec<HotEntry> =
        lists.into_iter().flatten().filter(|e| conn.state.user.may_read(&e.key)).collect();
    all.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
    Ok(all)
}

/// HOTKEYS LIST: each hot key with its database, rule, count in the
/// window, when it became hot and how long it stays hot without more
/// accesses (milliseconds).
pub async fn list(conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    let hot = hot_now(conn).await?;
    let now = ringdb_engine::shard::now_ms();
    let mut out = conn.reply();
    out.array(hot.len());
    for e in &hot {
        out.map(6);
        out.bulk(b"key");
        out.bulk(&e.key);
        out.bulk(b"db");
        out.int(e.db as i64);
        out.bulk(b"rule");
        out.bulk(e.rule.as_bytes());
        out.bulk(b"count");
        out.int(e.count as i64);
        out.bulk(b"hot-since-ms");
        out.int(e.since_ms as i64);
        out.bulk(b"hot-for-ms");
        out.int(e.until_ms.saturating_sub(now) as i64);
    }
    Ok(())
}

/// HOTKEYS TOP [count]: the heaviest keys of all shards with their
/// estimated access counts (a flat list: key, count, key, count, …).
pub async fn top(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    if args.len() > 3 {
        return Err(ringdb_engine::command::error::SYNTAX);
    }
    let n = match args.get(2) {
        Some(arg) => positive(arg)?.clamp(0, ringdb_engine::hotkeys::topk::K as i64) as usize,
        None => DEFAULT_TOP,
    };
    let lists =
        conn.core.invoke_on_all(move |core| core.shard.borrow().state.hotkeys.top(n)).await?;
    let mut all: Vec<_> =
        lists.into_iter().flatten().filter(|e| conn.state.user.may_read(&e.key)).collect();
    all.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
    all.truncate(n);
    let mut out = conn.reply();
    out.array(all.len() * 2);
    for e in &all {
        out.bulk(&e.key);
        out.int(e.count as i64);
    }
    Ok(())
}

const HELP: &[&str] = &[
    "RULES SET <name> <PATTERN glob|PREFIX prefix> INTERVAL <seconds> THRESHOLD <n> DURATION <seconds> [COUNT reads|writes|both]",
    "    Set (add or replace) a rule: a key matching it with <n> accesses within",
    "    <seconds> of INTERVAL is hot, and stays hot for DURATION seconds after",
    "    the last such access. Seconds may be fractional.",
    "RULES GET [<name>]",
    "    Return one rule, or all of them, as RULES SET takes them.",
    "RULES DEL <name>",
    "    Delete a rule; return 1 if it existed.",
    "LIST",
    "    Return the keys hot now, with their rule and count in the window.",
    "TOP [<count>]",
    "    Return the most accessed keys right now, with estimated counts.",
];

pub fn help(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    crate::cmd::help(conn, args, HELP);
    Ok(())
}

/// HOTKEYS.WATCH [pattern ...]: replies `["hotkeys.watch", n]`, then the
/// `n` keys hot now (matching the patterns) as `hotkey` pushes; after that,
/// every key that becomes hot or cools down is pushed.
pub async fn watch(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let patterns = &args[1..];
    let (home, client) = (conn.core.id.0, conn.state.id);
    let first = conn.state.hotkey_watch.is_none();
    conn.ensure_mailbox();
    // Registered here before the shards hear of it, so no event they send
    // afterwards finds this core without the watcher.
    let acl_user = conn.state.info().acl_user;
    conn.core.push.borrow_mut().hotkeys.add(client, patterns, acl_user);
    {
        let watched = conn.state.hotkey_watch.get_or_insert_with(|| patterns.to_vec());
        if !first && !watched.is_empty() {
            if patterns.is_empty() {
                watched.clear();
            } else {
                for p in patterns {
                    if !watched.contains(p) {
                        watched.push(p.clone());
                    }
                }
            }
        }
    }
    let lists = conn
        .core
        .invoke_on_all(move |core| {
            let mut shard = core.shard.borrow_mut();
            if first {
                shard.state.hotkeys.watch(home, 1);
            }
            shard.state.hotkeys.list(ringdb_engine::shard::now_ms())
        })
        .await?;
    let hot: Vec<HotEntry> = {
        let hub = conn.core.push.borrow();
        lists.into_iter().flatten().filter(|e| hub.hotkeys.wants(client, &e.key)).collect()
    };
    let mut out = conn.reply();
    out.push(2);
    out.bulk(b"hotkeys.watch");
    out.int(hot.len() as i64);
    for e in hot {
        let event = ringdb_engine::hotkeys::HotEvent::Hot {
            db: e.db,
            key: e.key,
            count: e.count,
            rule: Bytes::from(e.rule),
        };
        crate::push::hotkeys::encode(&event, &mut out);
    }
    conn.update_view();
    Ok(())
}

/// HOTKEYS.UNWATCH.
pub async fn unwatch_command(conn: &mut Connection) -> CmdResult {
    unwatch(conn).await;
    conn.reply().ok();
    conn.update_view();
    Ok(())
}

/// Ends the connection's HOTKEYS.WATCH, if any (also on disconnect and
/// RESET): no more deliveries on this core at once, then every shard stops
/// counting its core as watching.
pub async fn unwatch(conn: &mut Connection) {
    if conn.state.hotkey_watch.take().is_none() {
        return;
    }
    let (home, client) = (conn.core.id.0, conn.state.id);
    conn.core.push.borrow_mut().hotkeys.remove(client);
    let _ = conn
        .core
        .invoke_on_all(move |core| core.shard.borrow_mut().state.hotkeys.watch(home, -1))
        .await;
}
