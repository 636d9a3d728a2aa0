//! SORT and SORT_RO: the elements of a list, set or sorted set, sorted as
//! numbers or (ALPHA) as strings, by themselves or by weights read from
//! other keys (`BY pattern`), a LIMIT window of them, each replaced by the
//! values of other keys (`GET pattern`, `#` for the element), and with SORT
//! optionally stored as a list (`STORE`). Semantics, replies and error texts
//! follow Redis 7.0's `sort.c`.
//!
//! **Patterns on several shards.** A pattern (`weight_*`, `obj_*->field`)
//! forms a key from each element, and that key may live on any shard. When
//! every key a SORT names and forms lives on one shard (one shard in all, or
//! a pattern whose hash tag before its `*` maps to the sorted key's shard,
//! `weight_{tag}_*`), it runs there like any command. Otherwise the router
//! gathers the formed keys with the named ones ([`FormedKeys`]): it reads
//! the sorted value, forms the keys, locks and copies them all, checks that
//! the locked value forms no other key, and runs this handler on the
//! copies. Inside MULTI or a script, where that cannot happen, such
//! patterns are refused (Redis in cluster mode refuses them all).

use crate::command::args::{self, is};
use crate::command::error::{CmdError, CmdResult, SYNTAX, WRONG_TYPE};
use crate::command::spec::{acl, flags::*, keyflags as kf, CommandSpec, Exec, FormedKeys, KeySpec};
use crate::command::{Ctx, KeyspaceView};
use crate::funnel::NotifyClass;
use crate::keyspace::Value;
use bytes::Bytes;
use memchr::{memchr, memmem};
use ringdb_types::list::{End, List};
use ringdb_types::number::parse_f64;
use ringdb_types::slot::hash_tag;
use std::cmp::Ordering;

const NOT_DOUBLE: CmdError = CmdError::new("ERR One or more scores can't be converted into double");
const BY_DENIED: CmdError =
    CmdError::new("ERR BY option of SORT denied due to insufficient ACL permissions.");
const GET_DENIED: CmdError =
    CmdError::new("ERR GET option of SORT denied due to insufficient ACL permissions.");
const BY_ELSEWHERE: CmdError = CmdError::new(
    "ERR BY option of SORT denied in MULTI and scripts when the keys the pattern forms may live on another shard",
);
const GET_ELSEWHERE: CmdError = CmdError::new(
    "ERR GET option of SORT denied in MULTI and scripts when the keys the pattern forms may live on another shard",
);

const SORT_KEYS: &[KeySpec] = &[
    KeySpec::one(1, kf::RO | kf::ACCESS),
    KeySpec::unknown(kf::RO | kf::ACCESS).notes("For the optional BY/GET keyword. It is marked 'unknown' because the key names derive from the content of the key we sort"),
    KeySpec::unknown(kf::OW | kf::UPDATE).notes("For the optional STORE keyword. It is marked 'unknown' because the keyword can appear anywhere in the argument array"),
];
const SORT_RO_KEYS: &[KeySpec] = &[
    KeySpec::one(1, kf::RO | kf::ACCESS),
    KeySpec::unknown(kf::RO | kf::ACCESS).notes("For the optional BY/GET keyword. It is marked 'unknown' because the key names derive from the content of the key we sort"),
];
const SORT_COMPLEXITY: &str = "O(N+M*log(M)) where N is the number of elements in the list or set to sort, and M the number of returned elements. When the elements are not sorted, complexity is O(N).";

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("sort", -2, WRITE | DENYOOM, Exec::Shard(sort))
        .keys(SORT_KEYS)
        .get_keys(sort_keys)
        .formed_keys(FormedKeys { forms_elsewhere: sort_forms_elsewhere, from_value: formed_keys })
        .acl(acl::SET | acl::SORTEDSET | acl::LIST | acl::DANGEROUS)
        .doc("generic", "1.0.0", "Sorts the elements in a list, a set, or a sorted set, optionally storing the result.", SORT_COMPLEXITY, "key [BY by-pattern=pattern:pattern] [LIMIT offset count] [GET get-pattern=pattern:pattern [GET get-pattern=pattern:pattern ...]] [ASC | DESC] [ALPHA] [STORE destination]"),
    CommandSpec::new("sort_ro", -2, READONLY, Exec::Shard(sort_ro))
        .keys(SORT_RO_KEYS)
        .get_keys(sort_ro_keys)
        .formed_keys(FormedKeys { forms_elsewhere: sort_ro_forms_elsewhere, from_value: formed_keys })
        .acl(acl::SET | acl::SORTEDSET | acl::LIST | acl::DANGEROUS)
        .doc("generic", "7.0.0", "Returns the sorted elements of a list, a set, or a sorted set.", SORT_COMPLEXITY, "key [BY by-pattern=pattern:pattern] [LIMIT offset count] [GET get-pattern=pattern:pattern [GET get-pattern=pattern:pattern ...]] [ASC | DESC] [ALPHA]"),
];

/// Redis's `sortGetKeys`: the sorted key, and the argument after the last
/// STORE that is not the value of LIMIT, GET or BY.
fn sort_keys(args: &[Bytes], found: &mut dyn FnMut(usize, u32)) {
    if args.len() < 2 {
        return;
    }
    found(1, kf::RO | kf::ACCESS);
    let mut store = None;
    let mut i = 2;
    while i < args.len() {
        let a = &args[i];
        if is(a, "LIMIT") {
            i += 2;
        } else if is(a, "GET") || is(a, "BY") {
            i += 1;
        } else if is(a, "STORE") && i + 1 < args.len() {
            store = Some(i + 1);
        }
        i += 1;
    }
    if let Some(i) = store {
        found(i, kf::OW | kf::UPDATE);
    }
}

fn sort_ro_keys(args: &[Bytes], found: &mut dyn FnMut(usize, u32)) {
    if args.len() >= 2 {
        found(1, kf::RO | kf::ACCESS);
    }
}

fn sort(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    sort_generic(ctx, args, false)
}

fn sort_ro(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    sort_generic(ctx, args, true)
}

/// The options, as `sortCommandGeneric` parses them.
struct Options<'a> {
    desc: bool,
    alpha: bool,
    limit: Option<(i64, i64)>,
    by: Option<&'a [u8]>,
    /// BY without `*`: the elements keep their order.
    dont_sort: bool,
    get: Vec<&'a [u8]>,
    store: Option<&'a [u8]>,
}

/// `partial_read`: the user may not read every key, so BY and GET
/// patterns are refused (Redis's `user_has_full_key_access`).
fn parse(args: &[Bytes], read_only: bool, partial_read: bool) -> Result<Options<'_>, CmdError> {
    let mut o = Options {
        desc: false,
        alpha: false,
        limit: None,
        by: None,
        dont_sort: false,
        get: Vec::new(),
        store: None,
    };
    let mut j = 2;
    while j < args.len() {
        let a = &args[j];
        let left = args.len() - j - 1;
        if is(a, "ASC") {
            o.desc = false;
        } else if is(a, "DESC") {
            o.desc = true;
        } else if is(a, "ALPHA") {
            o.alpha = true;
        } else if is(a, "LIMIT") && left >= 2 {
            o.limit = Some((args::int(&args[j + 1])?, args::int(&args[j + 2])?));
            j += 2;
        } else if !read_only && is(a, "STORE") && left >= 1 {
            o.store = Some(&args[j + 1]);
            j += 1;
        } else if is(a, "BY") && left >= 1 {
            let pattern: &[u8] = &args[j + 1];
            o.by = Some(pattern);
            o.dont_sort = memchr(b'*', pattern).is_none();
            if !o.dont_sort && partial_read {
                return Err(BY_DENIED);
            }
            j += 1;
        } else if is(a, "GET") && left >= 1 {
            if partial_read {
                return Err(GET_DENIED);
            }
            o.get.push(&args[j + 1]);
            j += 1;
        } else {
            return Err(SYNTAX);
        }
        j += 1;
    }
    Ok(o)
}

impl Options<'_> {
    /// The patterns that read keys, each with the error that refuses it.
    fn reading_patterns(&self) -> impl Iterator<Item = (&[u8], CmdError)> + '_ {
        let by = self.by.filter(|_| !self.dont_sort).map(|p| (p, BY_ELSEWHERE));
        let get = self.get.iter().filter(|p| **p != b"#").map(|p| (*p, GET_ELSEWHERE));
        by.into_iter().chain(get).filter(|(p, _)| memchr(b'*', p).is_some())
    }

    /// Whether every key the patterns form lives with the sorted key (and
    /// the STORE target): `at_home` says whether a key lives there.
    fn forms_only_at_home(&self, key: &[u8], at_home: impl Fn(&[u8]) -> bool) -> Option<CmdError> {
        let named_at_home = at_home(key) && self.store.is_none_or(&at_home);
        self.reading_patterns().find_map(|(pattern, refusal)| {
            // The formed key's hash tag is fixed only if it closes before
            // the `*`; then the prefix has the formed key's slot.
            let prefix = &pattern[..memchr(b'*', pattern).unwrap_or(pattern.len())];
            let tag = hash_tag(prefix);
            let fixed = !tag.is_empty() && tag.len() < prefix.len();
            (!(named_at_home && fixed && at_home(prefix))).then_some(refusal)
        })
    }
}

fn sort_forms_elsewhere(args: &[Bytes], here: &dyn Fn(&[u8]) -> bool) -> bool {
    forms_elsewhere(args, here, false)
}

fn sort_ro_forms_elsewhere(args: &[Bytes], here: &dyn Fn(&[u8]) -> bool) -> bool {
    forms_elsewhere(args, here, true)
}

/// For the router ([`FormedKeys::elsewhere`]); a command with bad options
/// runs where its key is and reports them.
fn forms_elsewhere(args: &[Bytes], here: &dyn Fn(&[u8]) -> bool, read_only: bool) -> bool {
    let Some(key) = args.get(1) else { return false };
    parse(args, read_only, false).is_ok_and(|o| o.forms_only_at_home(key, here).is_some())
}

/// The keys the BY and GET patterns form from the elements of `value`
/// ([`FormedKeys::from_value`]).
fn formed_keys(args: &[Bytes], value: Option<&Value>) -> Vec<Bytes> {
    // SORT_RO's options are SORT's without STORE: this parse reads both.
    let Ok(o) = parse(args, false, false) else { return Vec::new() };
    let patterns: Vec<&[u8]> = o.reading_patterns().map(|(p, _)| p).collect();
    let mut keys = Vec::new();
    if patterns.is_empty() {
        return keys;
    }
    for element in value.map(elements_of).unwrap_or_default() {
        for p in &patterns {
            if let Some((key, _)) = formed_key(p, &element) {
                keys.push(Bytes::from(key));
            }
        }
    }
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// Every element of a list, set or sorted set, in its own order (none for
/// other types).
fn elements_of(value: &Value) -> Vec<Vec<u8>> {
    match value {
        Value::List(l) => l.iter().map(|i| i.to_vec()).collect(),
        Value::Set(s) => s.iter().map(|m| m.to_vec()).collect(),
        Value::ZSet(z) => z.iter().map(|(m, _)| m.to_vec()).collect(),
        _ => Vec::new(),
    }
}

/// The patterns may read their keys here when this shard owns them all
/// (and the sorted key and STORE target), or when the router gathered them
/// into these copies. Otherwise (MULTI, scripts) they are refused.
fn may_read_patterns(ks: &KeyspaceView, key: &[u8], o: &Options) -> Result<(), CmdError> {
    let here = ks.keyspace();
    if ks.state.formed_keys_gathered || here.owns_every_slot() {
        return Ok(());
    }
    o.forms_only_at_home(key, |k| here.owns_key(k)).map_or(Ok(()), Err)
}

/// The key `pattern` forms from `element` (its first `*` replaced by it),
/// and the hash field after `->`, if any. None without a `*`.
fn formed_key<'p>(pattern: &'p [u8], element: &[u8]) -> Option<(Vec<u8>, Option<&'p [u8]>)> {
    let star = memchr(b'*', pattern)?;
    let after = &pattern[star + 1..];
    let (postfix, field) = match memmem::find(after, b"->") {
        Some(arrow) if arrow + 2 < after.len() => (&after[..arrow], Some(&after[arrow + 2..])),
        _ => (after, None),
    };
    let mut key = Vec::with_capacity(star + element.len() + postfix.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(element);
    key.extend_from_slice(postfix);
    Some((key, field))
}

/// Redis's `lookupKeyByPattern`: `#` is the element itself; otherwise the
/// key the pattern forms is read: its string value, or with `->field` after
/// the `*`, that field of the hash there.
fn lookup(ks: &mut KeyspaceView, pattern: &[u8], element: &[u8]) -> Option<Vec<u8>> {
    if pattern == b"#" {
        return Some(element.to_vec());
    }
    let (key, field) = formed_key(pattern, element)?;
    let entry = ks.read(&key)?;
    match (&entry.value, field) {
        (Value::Str(s), None) => Some(s.as_bytes(&mut [0; 20]).to_vec()),
        (Value::Hash(h), Some(field)) => h.get(field).map(|v| v.to_vec()),
        _ => None,
    }
}

/// What `strtod` makes of a weight: leading space allowed, nothing after
/// the number, an empty string is 0; NaN and out-of-range values fail.
fn weight(bytes: &[u8]) -> Option<f64> {
    if bytes.is_empty() {
        return Some(0.0);
    }
    let start =
        bytes.iter().position(|c| !matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))?;
    parse_f64(&bytes[start..])
}

/// One element to sort and what it sorts by.
struct Sorted {
    element: Vec<u8>,
    score: f64,
    /// ALPHA BY: the weight read (None when the key was missing).
    by: Option<Vec<u8>>,
}

fn sort_generic(ctx: &mut Ctx, args: &[Bytes], read_only: bool) -> CmdResult {
    let mut o = parse(args, read_only, ctx.client.partial_key_read)?;
    may_read_patterns(&ctx.ks, &args[1], &o)?;
    let Some(entry) = ctx.ks.read_to_reshape(&args[1]) else {
        return finish(ctx, &o, Vec::new(), 0, -1);
    };
    let len = match &entry.value {
        Value::List(l) => l.len(),
        Value::Set(s) => s.len(),
        Value::ZSet(z) => z.len(),
        _ => return Err(WRONG_TYPE),
    };
    // A set has no order of its own: unsorted output is made deterministic
    // when stored or read by a script (Redis sorts it as strings).
    if o.dont_sort
        && matches!(entry.value, Value::Set(_))
        && (o.store.is_some() || ctx.client.script)
    {
        o.dont_sort = false;
        o.alpha = true;
        o.by = None;
    }
    // `sortCommandGeneric`'s LIMIT arithmetic, on the object's size.
    let (limit_start, limit_count) = o.limit.unwrap_or((0, -1));
    let n = len as i64;
    let mut start = limit_start.max(0).min(n);
    let count = limit_count.max(-1).min(n);
    let mut end = if count < 0 { n - 1 } else { start + count - 1 };
    if start >= n {
        start = n - 1;
        end = n - 2;
    }
    end = end.min(n - 1);
    // Lists and sorted sets in their own order load only the window.
    let window = o.dont_sort && !matches!(entry.value, Value::Set(_));
    let elements: Vec<Vec<u8>> = match &entry.value {
        Value::List(l) if window && end >= start => {
            let first = if o.desc { l.len() - 1 - start as usize } else { start as usize };
            let want = (end - start + 1) as usize;
            l.iter_range(first, want, o.desc).map(|i| i.to_vec()).collect()
        }
        Value::ZSet(z) if window && end >= start => {
            z.range_by_rank(start, end, o.desc).map(|(m, _)| m.to_vec()).collect()
        }
        _ if window => Vec::new(),
        value => elements_of(value),
    };
    if let Value::List(l) = &mut entry.value {
        l.close();
    }
    if window {
        // The window was loaded directly; the output is all of it.
        let loaded = elements.len() as i64;
        return finish(ctx, &o, elements, 0, loaded - 1);
    }
    if o.dont_sort {
        return finish(ctx, &o, elements, start, end);
    }
    let mut vector: Vec<Sorted> =
        elements.into_iter().map(|element| Sorted { element, score: 0.0, by: None }).collect();
    let mut bad_weight = false;
    for item in &mut vector {
        let by = match o.by {
            Some(pattern) => match lookup(&mut ctx.ks, pattern, &item.element) {
                Some(v) => v,
                None => continue,
            },
            None => {
                if !o.alpha {
                    item.score = weight(&item.element).unwrap_or_else(|| {
                        bad_weight = true;
                        0.0
                    });
                }
                continue;
            }
        };
        if o.alpha {
            item.by = Some(by);
        } else {
            item.score = weight(&by).unwrap_or_else(|| {
                bad_weight = true;
                0.0
            });
        }
    }
    if bad_weight {
        return Err(NOT_DOUBLE);
    }
    let by_pattern = o.by.is_some();
    let (alpha, desc) = (o.alpha, o.desc);
    vector.sort_by(|a, b| {
        let cmp = if !alpha {
            a.score
                .partial_cmp(&b.score)
                .unwrap_or(Ordering::Equal)
                .then_with(|| a.element.cmp(&b.element))
        } else if by_pattern {
            // A missing weight sorts first.
            a.by.cmp(&b.by)
        } else {
            a.element.cmp(&b.element)
        };
        if desc {
            cmp.reverse()
        } else {
            cmp
        }
    });
    let elements = vector.into_iter().map(|s| s.element).collect();
    finish(ctx, &o, elements, start, end)
}

/// Replies with (or stores) `elements[start..=end]`, each replaced by its
/// GET values if any.
fn finish(ctx: &mut Ctx, o: &Options, elements: Vec<Vec<u8>>, start: i64, end: i64) -> CmdResult {
    let picked: &[Vec<u8>] = match (usize::try_from(start), usize::try_from(end)) {
        (Ok(start), Ok(end)) => elements.get(start..=end).unwrap_or(&[]),
        _ => &[],
    };
    let per = o.get.len().max(1);
    let outputlen = picked.len() * per;
    let Some(dst) = o.store else {
        ctx.out.array(outputlen);
        for element in picked {
            if o.get.is_empty() {
                ctx.out.bulk(element);
            }
            for pattern in &o.get {
                match lookup(&mut ctx.ks, pattern, element) {
                    Some(v) => ctx.out.bulk(&v),
                    None => ctx.out.null(),
                }
            }
        }
        return Ok(());
    };
    let limits = ctx.ks.state.settings.limits;
    let mut list = List::new();
    for element in picked {
        if o.get.is_empty() {
            list.push(End::Tail, &[element], &limits);
        }
        for pattern in &o.get {
            let v = lookup(&mut ctx.ks, pattern, element).unwrap_or_default();
            list.push(End::Tail, &[&v], &limits);
        }
    }
    if outputlen > 0 {
        ctx.ks.set(dst, Value::List(list), false, NotifyClass::List, "sortstore");
    } else {
        ctx.ks.delete(dst);
    }
    ctx.out.int(outputlen as i64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(args: &[&str], find: fn(&[Bytes], &mut dyn FnMut(usize, u32))) -> Vec<usize> {
        let args: Vec<Bytes> = args.iter().map(|a| Bytes::copy_from_slice(a.as_bytes())).collect();
        let mut out = Vec::new();
        find(&args, &mut |i, _| out.push(i));
        out
    }

    #[test]
    fn keys_skip_option_values_and_take_the_last_store() {
        assert_eq!(keys(&["SORT", "k"], sort_keys), [1]);
        assert_eq!(keys(&["SORT", "k", "STORE", "d"], sort_keys), [1, 3]);
        assert_eq!(keys(&["SORT", "k", "GET", "store", "STORE", "d"], sort_keys), [1, 5]);
        assert_eq!(keys(&["SORT", "k", "STORE", "d", "GET", "store"], sort_keys), [1, 3]);
        assert_eq!(keys(&["SORT", "k", "STORE", "a", "STORE", "b"], sort_keys), [1, 5]);
        assert_eq!(keys(&["SORT", "k", "LIMIT", "store", "1", "BY", "store"], sort_keys), [1]);
        assert_eq!(keys(&["SORT", "k", "STORE"], sort_keys), [1]);
        assert_eq!(keys(&["SORT_RO", "k", "STORE", "d"], sort_ro_keys), [1]);
    }

    #[test]
    fn weights_read_as_strtod_does() {
        assert_eq!(weight(b""), Some(0.0));
        assert_eq!(weight(b"  1.5"), Some(1.5));
        assert_eq!(weight(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(weight(b"1e3"), Some(1000.0));
        for bad in [&b"   "[..], b"1.5 ", b"abc", b"nan", b"1e400"] {
            assert_eq!(weight(bad), None, "{:?}", std::str::from_utf8(bad));
        }
    }
}
