//! The sorted-set commands that read one key: ZCARD, ZCOUNT, ZLEXCOUNT,
//! ZSCORE, ZMSCORE, ZRANK, ZREVRANK, ZRANGE and its older forms, ZRANGESTORE
//! (which reads like ZRANGE and stores the result), ZRANDMEMBER and ZSCAN.

use super::parse::{self, int_in_range};
use super::{bulk_member, read_zset, reply_members, store_result};
use crate::command::args::{self, is};
use crate::command::error::{CmdError, CmdResult, SYNTAX};
use crate::command::Ctx;
use crate::scan::parse_cursor;
use bytes::Bytes;
use ringdb_protocol::ReplyWriter;
use ringdb_types::glob::glob_match;
use ringdb_types::pack::Item;
use ringdb_types::zset::{LexRange, ScoreRange, ZIter, ZSet};

/// ZCARD key
pub fn zcard(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let len = read_zset(&mut ctx.ks, &args[1])?.map_or(0, ZSet::len);
    ctx.out.int(len as i64);
    Ok(())
}

/// ZCOUNT key min max
pub fn zcount(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let range = parse::score_range(&args[2], &args[3])?;
    let n = read_zset(&mut ctx.ks, &args[1])?.map_or(0, |z| z.count_by_score(&range));
    ctx.out.int(n as i64);
    Ok(())
}

/// ZLEXCOUNT key min max
pub fn zlexcount(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let range = parse::lex_range(&args[2], &args[3])?;
    let n = read_zset(&mut ctx.ks, &args[1])?.map_or(0, |z| z.count_by_lex(&range));
    ctx.out.int(n as i64);
    Ok(())
}

fn reply_score(out: &mut ReplyWriter, score: Option<f64>) {
    match score {
        Some(s) => out.double(s),
        None => out.null(),
    }
}

/// ZSCORE key member
pub fn zscore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let score = read_zset(&mut ctx.ks, &args[1])?.and_then(|z| z.score(&args[2]));
    reply_score(&mut ctx.out, score);
    Ok(())
}

/// ZMSCORE key member [member ...]: a missing key is an empty set.
pub fn zmscore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let z = read_zset(&mut ctx.ks, &args[1])?;
    ctx.out.array(args.len() - 2);
    for member in &args[2..] {
        reply_score(&mut ctx.out, z.and_then(|z| z.score(member)));
    }
    Ok(())
}

/// ZRANK/ZREVRANK key member [WITHSCORE] (Redis 7.2's `zrankGenericCommand`).
fn rank(ctx: &mut Ctx, args: &[Bytes], reverse: bool) -> CmdResult {
    if args.len() > 4 {
        return Err(CmdError::wrong_args(if reverse { "zrevrank" } else { "zrank" }));
    }
    let with_score = match args.get(3) {
        Some(opt) if is(opt, "WITHSCORE") => true,
        Some(_) => return Err(SYNTAX),
        None => false,
    };
    let found = read_zset(&mut ctx.ks, &args[1])?.and_then(|z| z.rank(&args[2], reverse));
    match (found, with_score) {
        (Some((rank, _)), false) => ctx.out.int(rank as i64),
        (Some((rank, score)), true) => {
            ctx.out.array(2);
            ctx.out.int(rank as i64);
            ctx.out.double(score);
        }
        (None, false) => ctx.out.null(),
        (None, true) => ctx.out.null_array(),
    }
    Ok(())
}

pub fn zrank(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    rank(ctx, args, false)
}

pub fn zrevrank(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    rank(ctx, args, true)
}

/// What the range commands select by.
#[derive(Clone, Copy, PartialEq, Eq)]
enum By {
    /// Not fixed by the command: ZRANGE and ZRANGESTORE take BYSCORE/BYLEX.
    Auto,
    Rank,
    Score,
    Lex,
}

/// A parsed range request (Redis's `zrangeGenericCommand`, steps 1 and 2).
enum Selection {
    Rank { start: i64, stop: i64 },
    Score(ScoreRange),
    Lex(LexRange),
}

struct RangeRequest {
    selection: Selection,
    reverse: bool,
    with_scores: bool,
    /// `LIMIT offset count`, as read (`(0, -1)` without it).
    limit: (i64, i64),
}

/// Reads `<src> <min> <max> [options]` starting at `at` (the source key).
/// `by` and `reverse` are fixed by the older commands; `store` (ZRANGESTORE)
/// refuses WITHSCORES.
fn parse_range(
    args: &[Bytes],
    at: usize,
    store: bool,
    mut by: By,
    mut reverse: Option<bool>,
) -> Result<RangeRequest, CmdError> {
    let mut with_scores = false;
    let mut limit: Option<(i64, i64)> = None;
    let mut j = at + 3;
    while j < args.len() {
        let opt = &args[j];
        let left = args.len() - j - 1;
        if !store && is(opt, "WITHSCORES") {
            with_scores = true;
        } else if is(opt, "LIMIT") && left >= 2 {
            limit = Some((args::int(&args[j + 1])?, args::int(&args[j + 2])?));
            j += 2;
        } else if reverse.is_none() && is(opt, "REV") {
            reverse = Some(true);
        } else if by == By::Auto && is(opt, "BYLEX") {
            by = By::Lex;
        } else if by == By::Auto && is(opt, "BYSCORE") {
            by = By::Score;
        } else {
            return Err(SYNTAX);
        }
        j += 1;
    }
    let reverse = reverse.unwrap_or(false);
    if by == By::Auto {
        by = By::Rank;
    }
    // Redis checks the parsed count, so `LIMIT 0 -1` is no limit at all.
    if limit.is_some_and(|(_, count)| count != -1) && by == By::Rank {
        return Err(CmdError::new(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if with_scores && by == By::Lex {
        return Err(CmdError::new(
            "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    // The reverse forms of the score and lex ranges take `max min`.
    let (min, max) = if reverse && by != By::Rank {
        (&args[at + 2], &args[at + 1])
    } else {
        (&args[at + 1], &args[at + 2])
    };
    let selection = match by {
        By::Score => Selection::Score(parse::score_range(min, max)?),
        By::Lex => Selection::Lex(parse::lex_range(min, max)?),
        _ => Selection::Rank { start: args::int(min)?, stop: args::int(max)? },
    };
    Ok(RangeRequest { selection, reverse, with_scores, limit: limit.unwrap_or((0, -1)) })
}

/// The members a request selects in `z`.
fn select<'a>(z: &'a ZSet, req: &RangeRequest) -> ZIter<'a> {
    let (offset, count) = req.limit;
    let window = parse::window(offset, count);
    match (&req.selection, window) {
        (Selection::Rank { start, stop }, _) => z.range_by_rank(*start, *stop, req.reverse),
        (Selection::Score(range), Some((offset, limit))) => {
            z.range_by_score(range, req.reverse, offset, limit)
        }
        (Selection::Lex(range), Some((offset, limit))) => {
            z.range_by_lex(range, req.reverse, offset, limit)
        }
        // An empty window: nothing from an empty range.
        (_, None) => z.range_by_rank(1, 0, req.reverse),
    }
}

/// ZRANGE and its older forms: `key` at 1.
fn range_reply(ctx: &mut Ctx, args: &[Bytes], by: By, reverse: Option<bool>) -> CmdResult {
    let req = parse_range(args, 1, false, by, reverse)?;
    match read_zset(&mut ctx.ks, &args[1])? {
        Some(z) => reply_members(&mut ctx.out, select(z, &req), req.with_scores),
        None => ctx.out.array(0),
    }
    Ok(())
}

/// ZRANGE key start stop [BYSCORE | BYLEX] [REV] [LIMIT offset count] [WITHSCORES]
pub fn zrange(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    range_reply(ctx, args, By::Auto, None)
}

/// ZREVRANGE key start stop [WITHSCORES]
pub fn zrevrange(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    range_reply(ctx, args, By::Rank, Some(true))
}

/// ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]
pub fn zrangebyscore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    range_reply(ctx, args, By::Score, Some(false))
}

/// ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count]
pub fn zrevrangebyscore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    range_reply(ctx, args, By::Score, Some(true))
}

/// ZRANGEBYLEX key min max [LIMIT offset count]
pub fn zrangebylex(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    range_reply(ctx, args, By::Lex, Some(false))
}

/// ZREVRANGEBYLEX key max min [LIMIT offset count]
pub fn zrevrangebylex(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    range_reply(ctx, args, By::Lex, Some(true))
}

/// ZRANGESTORE dst src min max [BYSCORE | BYLEX] [REV] [LIMIT offset count]
pub fn zrangestore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let req = parse_range(args, 2, true, By::Auto, None)?;
    let members: Vec<(Vec<u8>, f64)> = match read_zset(&mut ctx.ks, &args[2])? {
        Some(z) => select(z, &req).map(|(m, s)| (m.to_vec(), s)).collect(),
        None => Vec::new(),
    };
    store_result(ctx, &args[1], &members, "zrangestore");
    Ok(())
}

/// Random picks are produced (and checked against the reply budget) this
/// many at a time, as Redis samples listpacks 1000 at a time.
const RANDOM_BATCH: usize = 1000;

/// ZRANDMEMBER key [count [WITHSCORES]]
pub fn zrandmember(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if args.len() < 3 {
        let mut rng = ctx.ks.state.generator();
        let pick = read_zset(&mut ctx.ks, &args[1])?.and_then(|z| z.random(&mut rng));
        match pick {
            Some((member, _)) => bulk_member(&mut ctx.out, &member),
            None => ctx.out.null(),
        }
        return Ok(());
    }
    let count = int_in_range(&args[2], -i64::MAX, i64::MAX)?;
    let with_scores = match args.get(3) {
        _ if args.len() > 4 => return Err(SYNTAX),
        Some(opt) if is(opt, "WITHSCORES") => true,
        Some(_) => return Err(SYNTAX),
        None => false,
    };
    if with_scores && !(-i64::MAX / 2..=i64::MAX / 2).contains(&count) {
        return Err(CmdError::new("ERR value is out of range"));
    }
    let mut rng = ctx.ks.state.generator();
    let budget = ctx.ks.state.settings.max_bulk_len;
    let Some(z) = read_zset(&mut ctx.ks, &args[1])? else {
        ctx.out.array(0);
        return Ok(());
    };
    let n = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
    if count == 0 {
        ctx.out.array(0);
    } else if count < 0 || n == 1 {
        random_with_repeats(&mut ctx.out, z, n, with_scores, &mut rng, budget)?;
    } else if n >= z.len() {
        reply_members(&mut ctx.out, z.iter(), with_scores);
    } else {
        reply_members(&mut ctx.out, z.random_distinct(n, &mut rng).into_iter(), with_scores);
    }
    Ok(())
}

/// ZRANDMEMBER with a negative count: `n` independent picks in random
/// order. Redis streams them until the client's output limit; ringdb builds
/// the reply in memory, so it refuses one larger than `proto-max-bulk-len`
/// rather than grow without bound.
fn random_with_repeats(
    out: &mut ReplyWriter,
    z: &ZSet,
    n: usize,
    with_scores: bool,
    rng: &mut impl FnMut() -> u64,
    budget: u64,
) -> CmdResult {
    let pairs = with_scores && out.is_resp3();
    out.array(if with_scores && !pairs { n.saturating_mul(2) } else { n });
    let start = out.buf.len();
    let mut left = n;
    while left > 0 {
        let batch = left.min(RANDOM_BATCH);
        left -= batch;
        for (member, score) in z.random_with_repeats(batch, rng) {
            if pairs {
                out.array(2);
            }
            bulk_member(out, &member);
            if with_scores {
                out.double(score);
            }
        }
        if (out.buf.len() - start) as u64 > budget {
            return Err(CmdError::new(
                "ERR reply exceeds proto-max-bulk-len; ask for fewer random members",
            ));
        }
    }
    Ok(())
}

/// ZSCAN's options (Redis's `scanGenericCommand` for a key: no TYPE).
fn parse_zscan_options(args: &[Bytes]) -> Result<(usize, Option<&Bytes>), CmdError> {
    let mut count = 10usize;
    let mut pattern = None;
    let mut j = 3;
    while j < args.len() {
        let has_value = j + 1 < args.len();
        if is(&args[j], "COUNT") && has_value {
            let n = args::int(&args[j + 1])?;
            if n < 1 {
                return Err(SYNTAX);
            }
            count = usize::try_from(n).unwrap_or(usize::MAX);
        } else if is(&args[j], "MATCH") && has_value {
            // `*` alone matches everything: no filter.
            pattern = Some(&args[j + 1]).filter(|p| p.as_ref() != b"*");
        } else {
            return Err(SYNTAX);
        }
        j += 2;
    }
    Ok((count, pattern))
}

/// ZSCAN key cursor [MATCH pattern] [COUNT count]: a listpack answers whole
/// with cursor 0; a big set walks its member table by hash position, which
/// keeps SCAN's guarantees while members come and go. Scores are bulk
/// strings here, as in Redis, even under RESP3.
pub fn zscan(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let cursor = parse_cursor(&args[2]).ok_or(CmdError::new("ERR invalid cursor"))?;
    let Some(z) = read_zset(&mut ctx.ks, &args[1])? else {
        ctx.out.array(2);
        ctx.out.bulk(b"0");
        ctx.out.array(0);
        return Ok(());
    };
    let (count, pattern) = parse_zscan_options(args)?;
    let mut found: Vec<(Vec<u8>, f64)> = Vec::new();
    let next = z.scan(cursor, count, |member: Item<'_>, score| {
        let mut tmp = [0u8; 24];
        let bytes = member.bytes(&mut tmp);
        if pattern.is_none_or(|p| glob_match(p, bytes, false)) {
            found.push((bytes.to_vec(), score));
        }
    });
    ctx.out.array(2);
    ctx.out.bulk(next.to_string().as_bytes());
    ctx.out.array(found.len() * 2);
    for (member, score) in &found {
        ctx.out.bulk(member);
        let mut text = Vec::with_capacity(24);
        ringdb_protocol::reply::format_double(&mut text, *score);
        ctx.out.bulk(&text);
    }
    Ok(())
}
