//! The sorted-set commands that change a key in place: ZADD, ZINCRBY, ZREM,
//! ZREMRANGEBYRANK/SCORE/LEX, ZPOPMIN, ZPOPMAX and ZMPOP, and the blocking
//! BZPOPMIN, BZPOPMAX and BZMPOP.

use super::parse::{self, int_in};
use super::{bulk_member, delete_if_emptied, write_zset};
use crate::command::args::{self, is};
use crate::command::error::{CmdError, CmdResult, SYNTAX};
use crate::command::{Ctx, Updater};
use crate::funnel::NotifyClass;
use crate::keyspace::Value;
use bytes::Bytes;
use ringdb_types::pack::Item;
use ringdb_types::zset::{AddFlags, ZSet};

/// ZADD's options, and where its score/member pairs start.
struct ZaddOptions {
    flags: AddFlags,
    ch: bool,
    first_pair: usize,
}

/// Redis reads option words until the first word that is none, so ZINCRBY
/// (which shares the parser) also reads `ZINCRBY key nx member` as options.
fn parse_zadd_options(args: &[Bytes], incr: bool) -> ZaddOptions {
    let mut o =
        ZaddOptions { flags: AddFlags { incr, ..AddFlags::default() }, ch: false, first_pair: 2 };
    while let Some(opt) = args.get(o.first_pair) {
        match () {
            _ if is(opt, "NX") => o.flags.nx = true,
            _ if is(opt, "XX") => o.flags.xx = true,
            _ if is(opt, "CH") => o.ch = true,
            _ if is(opt, "INCR") => o.flags.incr = true,
            _ if is(opt, "GT") => o.flags.gt = true,
            _ if is(opt, "LT") => o.flags.lt = true,
            _ => break,
        }
        o.first_pair += 1;
    }
    o
}

/// ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]
pub fn zadd(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    zadd_generic(ctx, args, false)
}

/// ZINCRBY key increment member: ZADD with INCR.
pub fn zincrby(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    zadd_generic(ctx, args, true)
}

/// Redis's `zaddGenericCommand`: every score is read before anything
/// changes, so a bad score changes nothing.
fn zadd_generic(ctx: &mut Ctx, args: &[Bytes], incr: bool) -> CmdResult {
    let key = &args[1];
    let o = parse_zadd_options(args, incr);
    let pairs = &args[o.first_pair..];
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        return Err(SYNTAX);
    }
    let f = o.flags;
    if f.nx && f.xx {
        return Err(CmdError::new("ERR XX and NX options at the same time are not compatible"));
    }
    if (f.nx && (f.gt || f.lt)) || (f.gt && f.lt) {
        return Err(CmdError::new(
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if f.incr && pairs.len() > 2 {
        return Err(CmdError::new("ERR INCR option supports a single increment-element pair"));
    }
    let scores = pairs.chunks(2).map(|p| args::float(&p[0])).collect::<Result<Vec<f64>, _>>()?;
    let limits = ctx.ks.state.settings.limits;
    if f.xx && write_zset(&mut ctx.ks, key)?.is_none() {
        reply_zadd(ctx, &o, 0, 0, None);
        return Ok(());
    }
    // Redis 7.0's `zaddGenericCommand`: a listpack unless the first member
    // is already too long (or listpacks are off); the set then converts as
    // members arrive.
    let mut updater: Updater<ZSet> =
        ctx.ks.write_or_create(key, || Value::ZSet(ZSet::new_for(1, pairs[1].len(), &limits)))?;
    let z = updater.update(NotifyClass::ZSet, if f.incr { "zincr" } else { "zadd" });
    let (mut added, mut updated) = (0, 0);
    let mut last = None;
    let mut result = Ok(());
    for (pair, &score) in pairs.chunks(2).zip(&scores) {
        match z.add(&pair[1], score, f, &limits) {
            Ok(out) => {
                added += out.added as i64;
                updated += out.updated as i64;
                last = out.score;
            }
            Err(_) => {
                result = Err(CmdError::new("ERR resulting score is not a number (NaN)"));
                break;
            }
        }
    }
    if added + updated == 0 {
        updater.unchanged();
    }
    drop(updater);
    result?;
    reply_zadd(ctx, &o, added, updated, last);
    Ok(())
}

/// ZADD replies with a count (of changed members with CH); with INCR, the
/// new score, or nil when an option stopped the change.
fn reply_zadd(ctx: &mut Ctx, o: &ZaddOptions, added: i64, updated: i64, score: Option<f64>) {
    if o.flags.incr {
        match score {
            Some(s) => ctx.out.double(s),
            None => ctx.out.null(),
        }
    } else {
        ctx.out.int(if o.ch { added + updated } else { added });
    }
}

/// ZREM key member [member ...]
pub fn zrem(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let key = &args[1];
    let Some(mut updater) = write_zset(&mut ctx.ks, key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let z = updater.update(NotifyClass::ZSet, "zrem");
    let mut deleted = 0;
    for member in &args[2..] {
        deleted += z.remove(member) as i64;
        if z.is_empty() {
            break;
        }
    }
    if deleted == 0 {
        updater.unchanged();
    }
    drop(updater);
    delete_if_emptied(&mut ctx.ks, key);
    ctx.out.int(deleted);
    Ok(())
}

/// The range of a ZREMRANGEBY* command, parsed before the key is read.
enum Removal {
    Rank(i64, i64),
    Score(ringdb_types::zset::ScoreRange),
    Lex(ringdb_types::zset::LexRange),
}

/// Redis's `zremrangeGenericCommand`.
fn zremrange(ctx: &mut Ctx, key: &[u8], removal: Removal, event: &'static str) -> CmdResult {
    let Some(mut updater) = write_zset(&mut ctx.ks, key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let z = updater.update(NotifyClass::ZSet, event);
    let deleted = match &removal {
        Removal::Rank(start, stop) => z.remove_range_by_rank(*start, *stop),
        Removal::Score(range) => z.remove_range_by_score(range),
        Removal::Lex(range) => z.remove_range_by_lex(range),
    };
    if deleted == 0 {
        updater.unchanged();
    }
    drop(updater);
    delete_if_emptied(&mut ctx.ks, key);
    ctx.out.int(deleted as i64);
    Ok(())
}

/// ZREMRANGEBYRANK key start stop
pub fn zremrangebyrank(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let removal = Removal::Rank(args::int(&args[2])?, args::int(&args[3])?);
    zremrange(ctx, &args[1], removal, "zremrangebyrank")
}

/// ZREMRANGEBYSCORE key min max
pub fn zremrangebyscore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let removal = Removal::Score(parse::score_range(&args[2], &args[3])?);
    zremrange(ctx, &args[1], removal, "zremrangebyscore")
}

/// ZREMRANGEBYLEX key min max
pub fn zremrangebylex(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let removal = Removal::Lex(parse::lex_range(&args[2], &args[3])?);
    zremrange(ctx, &args[1], removal, "zremrangebylex")
}

/// How a pop replies (Redis's `genericZpopCommand` flags).
#[derive(Clone, Copy, PartialEq, Eq)]
enum PopReply {
    /// `[member, score, member, score, ...]`: ZPOPMIN/ZPOPMAX in RESP2, or
    /// without a count.
    Flat,
    /// `[[member, score], ...]`: ZPOPMIN/ZPOPMAX with a count in RESP3.
    Pairs,
    /// `[key, [[member, score], ...]]`, or a null array when every key is
    /// missing: ZMPOP.
    Keyed,
    /// `[key, member, score]`, or a null array when every key is missing:
    /// BZPOPMIN/BZPOPMAX.
    KeyFlat,
}

/// Pops up to `count` members from the first of `keys` that exists.
fn pop(ctx: &mut Ctx, keys: &[Bytes], max: bool, count: usize, shape: PopReply) -> CmdResult {
    let mut found = None;
    for key in keys {
        if write_zset(&mut ctx.ks, key)?.is_some() {
            found = Some(key);
            break;
        }
    }
    let Some(key) = found else {
        match shape {
            PopReply::Keyed | PopReply::KeyFlat => {
                ctx.ks.found_nothing();
                ctx.out.null_array();
            }
            _ => ctx.out.array(0),
        }
        return Ok(());
    };
    if count == 0 {
        ctx.out.array(0);
        return Ok(());
    }
    let Some(mut updater) = write_zset(&mut ctx.ks, key)? else { return Ok(()) };
    let popped =
        updater.update(NotifyClass::ZSet, if max { "zpopmax" } else { "zpopmin" }).pop(max, count);
    drop(updater);
    match shape {
        PopReply::Flat => ctx.out.array(popped.len() * 2),
        PopReply::Pairs => ctx.out.array(popped.len()),
        PopReply::Keyed => {
            ctx.out.array(2);
            ctx.out.bulk(key);
            ctx.out.array(popped.len());
        }
        PopReply::KeyFlat => {
            ctx.out.array(1 + popped.len() * 2);
            ctx.out.bulk(key);
        }
    }
    for (member, score) in &popped {
        if matches!(shape, PopReply::Pairs | PopReply::Keyed) {
            ctx.out.array(2);
        }
        bulk_member(&mut ctx.out, &Item::Str(member));
        ctx.out.double(*score);
    }
    delete_if_emptied(&mut ctx.ks, key);
    Ok(())
}

/// ZPOPMIN/ZPOPMAX key [count]
fn zpop(ctx: &mut Ctx, args: &[Bytes], max: bool) -> CmdResult {
    if args.len() > 3 {
        return Err(SYNTAX);
    }
    let count = args.get(2).map(|c| parse::positive_count(c)).transpose()?;
    // RESP3 nests the pairs only when a count was given.
    let shape =
        if count.is_some() && ctx.out.is_resp3() { PopReply::Pairs } else { PopReply::Flat };
    pop(ctx, &args[1..2], max, count.unwrap_or(1), shape)
}

pub fn zpopmin(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    zpop(ctx, args, false)
}

pub fn zpopmax(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    zpop(ctx, args, true)
}

/// BZPOPMIN/BZPOPMAX key [key ...] timeout
fn bzpop(ctx: &mut Ctx, args: &[Bytes], max: bool) -> CmdResult {
    crate::blocking::parse_timeout(&args[args.len() - 1], crate::blocking::Unit::Seconds)?;
    pop(ctx, &args[1..args.len() - 1], max, 1, PopReply::KeyFlat)
}

pub fn bzpopmin(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    bzpop(ctx, args, false)
}

pub fn bzpopmax(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    bzpop(ctx, args, true)
}

/// BZMPOP timeout numkeys key [key ...] <MIN | MAX> [COUNT count]
pub fn bzmpop(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    crate::blocking::parse_timeout(&args[1], crate::blocking::Unit::Seconds)?;
    zmpop(ctx, &args[1..])
}

/// ZMPOP numkeys key [key ...] <MIN | MAX> [COUNT count]
pub fn zmpop(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let numkeys =
        int_in(&args[1], 1, i64::MAX, CmdError::new("ERR numkeys should be greater than 0"))?;
    let where_at = usize::try_from(numkeys).ok().and_then(|n| n.checked_add(2));
    let Some(where_at) = where_at.filter(|&w| w < args.len()) else { return Err(SYNTAX) };
    let max = match &args[where_at] {
        w if is(w, "MIN") => false,
        w if is(w, "MAX") => true,
        _ => return Err(SYNTAX),
    };
    let mut count = None;
    let mut j = where_at + 1;
    while j < args.len() {
        if count.is_none() && is(&args[j], "COUNT") && j + 1 < args.len() {
            let err = CmdError::new("ERR count should be greater than 0");
            count = Some(int_in(&args[j + 1], 1, i64::MAX, err)?);
            j += 2;
        } else {
            return Err(SYNTAX);
        }
    }
    let count = usize::try_from(count.unwrap_or(1)).unwrap_or(usize::MAX);
    pop(ctx, &args[2..where_at], max, count, PopReply::Keyed)
}
