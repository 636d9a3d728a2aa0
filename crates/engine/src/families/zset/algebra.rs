//! Sorted-set algebra: ZUNION, ZINTER, ZDIFF, ZUNIONSTORE, ZINTERSTORE,
//! ZDIFFSTORE and ZINTERCARD (Redis's `zunionInterDiffGenericCommand`).
//!
//! Inputs may be sorted sets or plain sets (every member of a set scores 1);
//! a missing key is an empty input. Scores are multiplied by the input's
//! weight and combined with SUM, MIN or MAX; where that makes NaN (`inf * 0`,
//! `inf + -inf`) the score is 0, as in Redis. Results are ordered by score,
//! then member, as a sorted set orders them.

use super::{reply_members, store_result};
use crate::command::args::{self, is};
use crate::command::error::{CmdError, CmdResult, SYNTAX, WRONG_TYPE};
use crate::command::Ctx;
use crate::keyspace::Value;
use bytes::Bytes;
use ringdb_types::number::parse_f64;
use ringdb_types::pack::Item;
use ringdb_types::set::Set;
use ringdb_types::zset::ZSet;
use std::cmp::Ordering;
use std::collections::HashMap;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

impl Aggregate {
    /// Redis's `zunionInterAggregate`: a NaN sum becomes 0; MIN and MAX
    /// compare as C does, so a NaN value never replaces the target.
    fn apply(self, target: &mut f64, value: f64) {
        match self {
            Aggregate::Sum => {
                *target += value;
                if target.is_nan() {
                    *target = 0.0;
                }
            }
            Aggregate::Min => {
                if value < *target {
                    *target = value;
                }
            }
            Aggregate::Max => {
                if value > *target {
                    *target = value;
                }
            }
        }
    }
}

/// One input.
#[derive(Clone, Copy)]
enum Source<'a> {
    Missing,
    Sorted(&'a ZSet),
    Plain(&'a Set),
}

impl Source<'_> {
    fn len(&self) -> usize {
        match self {
            Source::Missing => 0,
            Source::Sorted(z) => z.len(),
            Source::Plain(s) => s.len(),
        }
    }

    fn score(&self, member: &[u8]) -> Option<f64> {
        match self {
            Source::Missing => None,
            Source::Sorted(z) => z.score(member),
            Source::Plain(s) => s.contains(member).then_some(1.0),
        }
    }

    /// Calls `f` with each member and score until it returns false.
    fn each(&self, mut f: impl FnMut(&[u8], f64) -> bool) {
        let mut tmp = [0u8; 24];
        match self {
            Source::Missing => {}
            Source::Sorted(z) => {
                for (member, score) in z.iter() {
                    if !f(member.bytes(&mut tmp), score) {
                        return;
                    }
                }
            }
            Source::Plain(s) => {
                for member in s.iter() {
                    if !f(member.bytes(&mut tmp), 1.0) {
                        return;
                    }
                }
            }
        }
    }
}

/// The options after the keys.
struct Options {
    weights: Vec<f64>,
    aggregate: Aggregate,
    with_scores: bool,
    /// ZINTERCARD's LIMIT; 0 = none.
    limit: usize,
}

/// Reads the options in `rest` exactly as Redis's loop does: WEIGHTS and
/// AGGREGATE not for ZDIFF* and ZINTERCARD, WITHSCORES not for the STORE
/// forms, LIMIT only for ZINTERCARD.
fn parse_options(
    rest: &[Bytes],
    numkeys: usize,
    op: Op,
    store: bool,
    card_only: bool,
) -> Result<Options, CmdError> {
    let mut o = Options {
        weights: vec![1.0; numkeys],
        aggregate: Aggregate::Sum,
        with_scores: false,
        limit: 0,
    };
    let combines = op != Op::Diff && !card_only;
    let mut j = 0;
    while j < rest.len() {
        let remaining = rest.len() - j;
        let word = &rest[j];
        if combines && remaining > numkeys && is(word, "WEIGHTS") {
            for (i, w) in rest[j + 1..=j + numkeys].iter().enumerate() {
                o.weights[i] =
                    parse_f64(w).ok_or(CmdError::new("ERR weight value is not a float"))?;
            }
            j += 1 + numkeys;
        } else if combines && remaining >= 2 && is(word, "AGGREGATE") {
            o.aggregate = match &rest[j + 1] {
                a if is(a, "SUM") => Aggregate::Sum,
                a if is(a, "MIN") => Aggregate::Min,
                a if is(a, "MAX") => Aggregate::Max,
                _ => return Err(SYNTAX),
            };
            j += 2;
        } else if !store && !card_only && is(word, "WITHSCORES") {
            o.with_scores = true;
            j += 1;
        } else if card_only && remaining >= 2 && is(word, "LIMIT") {
            let limit = super::parse::int_in(
                &rest[j + 1],
                0,
                i64::MAX,
                CmdError::new("ERR LIMIT can't be negative"),
            )?;
            o.limit = usize::try_from(limit).unwrap_or(usize::MAX);
            j += 2;
        } else {
            return Err(SYNTAX);
        }
    }
    Ok(o)
}

/// Orders results as a sorted set does: by score, then member.
fn sort_results(results: &mut [(Vec<u8>, f64)]) {
    results.sort_by(|a, b| a.1.partial_cmp(&b.1).unwrap_or(Ordering::Equal).then(a.0.cmp(&b.0)));
}

/// A weighted score as an input contributes it (NaN from `inf * 0` is 0).
fn weighted(score: f64, weight: f64) -> f64 {
    let v = score * weight;
    if v.is_nan() {
        0.0
    } else {
        v
    }
}

fn union(inputs: &[(Source<'_>, f64)], aggregate: Aggregate) -> Vec<(Vec<u8>, f64)> {
    let largest = inputs.last().map_or(0, |(s, _)| s.len());
    let mut acc: HashMap<Vec<u8>, f64> = HashMap::with_capacity(largest);
    for (source, weight) in inputs {
        source.each(|member, score| {
            let value = weighted(score, *weight);
            match acc.get_mut(member) {
                Some(target) => aggregate.apply(target, value),
                None => {
                    acc.insert(member.to_vec(), value);
                }
            }
            true
        });
    }
    acc.into_iter().collect()
}

/// The intersection of `inputs` (smallest first): its members, or only
/// their number (`card_only`, stopping at `limit` when it is not 0).
fn inter(
    inputs: &[(Source<'_>, f64)],
    aggregate: Aggregate,
    card_only: bool,
    limit: usize,
) -> (Vec<(Vec<u8>, f64)>, usize) {
    let mut found = Vec::new();
    let mut count = 0;
    let Some(((first, first_weight), rest)) = inputs.split_first() else { return (found, 0) };
    first.each(|member, score| {
        let mut total = weighted(score, *first_weight);
        for (source, weight) in rest {
            match source.score(member) {
                // Unlike the first input's, these products are not cleaned of
                // NaN before aggregating (Redis does the same).
                Some(v) => aggregate.apply(&mut total, v * weight),
                None => return true,
            }
        }
        count += 1;
        if card_only {
            return limit == 0 || count < limit;
        }
        found.push((member.to_vec(), total));
        true
    });
    (found, count)
}

/// The members of the first input found in no other, with their scores.
fn diff(inputs: &[Source<'_>]) -> Vec<(Vec<u8>, f64)> {
    let mut found = Vec::new();
    let Some((first, rest)) = inputs.split_first() else { return found };
    first.each(|member, score| {
        if !rest.iter().any(|s| s.score(member).is_some()) {
            found.push((member.to_vec(), score));
        }
        true
    });
    found
}

/// What a call computes.
enum Outcome {
    Members(Vec<(Vec<u8>, f64)>),
    Count(usize),
}

/// Redis's `zunionInterDiffGenericCommand`. `name` is the command's name for
/// the numkeys error; `dst` is the STORE forms' destination.
fn zsetop(
    ctx: &mut Ctx,
    args: &[Bytes],
    name: &str,
    dst: Option<&Bytes>,
    numkeys_at: usize,
    op: Op,
    card_only: bool,
) -> CmdResult {
    let numkeys = args::int(&args[numkeys_at])?;
    if numkeys < 1 {
        return Err(CmdError::owned(format!(
            "ERR at least 1 input key is needed for '{name}' command"
        )));
    }
    let first_key = numkeys_at + 1;
    let available = args.len() - first_key;
    let Some(n) = usize::try_from(numkeys).ok().filter(|&n| n <= available) else {
        return Err(SYNTAX);
    };
    let keys = &args[first_key..first_key + n];
    for key in keys {
        if let Some(e) = ctx.ks.read(key) {
            if !matches!(e.value, Value::ZSet(_) | Value::Set(_)) {
                return Err(WRONG_TYPE);
            }
        }
    }
    let o = parse_options(&args[first_key + n..], n, op, dst.is_some(), card_only)?;
    let sources: Vec<Source<'_>> = keys
        .iter()
        .map(|key| match ctx.ks.peek(key).map(|e| &e.value) {
            Some(Value::ZSet(z)) => Source::Sorted(z),
            Some(Value::Set(s)) => Source::Plain(s),
            _ => Source::Missing,
        })
        .collect();
    let outcome = if op == Op::Diff {
        Outcome::Members(diff(&sources))
    } else {
        // Smallest first (a stable sort, as glibc's qsort is in practice):
        // the intersection then probes the fewest members.
        let mut inputs: Vec<(Source<'_>, f64)> = sources.into_iter().zip(o.weights).collect();
        inputs.sort_by_key(|(s, _)| s.len());
        match op {
            Op::Union => Outcome::Members(union(&inputs, o.aggregate)),
            _ => match inter(&inputs, o.aggregate, card_only, o.limit) {
                (_, count) if card_only => Outcome::Count(count),
                (members, _) => Outcome::Members(members),
            },
        }
    };
    let mut members = match outcome {
        Outcome::Count(count) => {
            ctx.out.int(count as i64);
            return Ok(());
        }
        Outcome::Members(members) => members,
    };
    match dst {
        Some(dst) => {
            let event = match op {
                Op::Union => "zunionstore",
                Op::Inter => "zinterstore",
                Op::Diff => "zdiffstore",
            };
            store_result(ctx, dst, &members, event);
        }
        None => {
            sort_results(&mut members);
            let items = members.iter().map(|(m, s)| (Item::Str(m), *s));
            reply_members(&mut ctx.out, items, o.with_scores);
        }
    }
    Ok(())
}

/// ZUNION numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]
pub fn zunion(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    zsetop(ctx, args, "zunion", None, 1, Op::Union, false)
}

/// ZINTER numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]
pub fn zinter(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    zsetop(ctx, args, "zinter", None, 1, Op::Inter, false)
}

/// ZDIFF numkeys key [key ...] [WITHSCORES]
pub fn zdiff(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    zsetop(ctx, args, "zdiff", None, 1, Op::Diff, false)
}

/// ZUNIONSTORE destination numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE …]
pub fn zunionstore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    zsetop(ctx, args, "zunionstore", Some(&args[1]), 2, Op::Union, false)
}

/// ZINTERSTORE destination numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE …]
pub fn zinterstore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    zsetop(ctx, args, "zinterstore", Some(&args[1]), 2, Op::Inter, false)
}

/// ZDIFFSTORE destination numkeys key [key ...]
pub fn zdiffstore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    zsetop(ctx, args, "zdiffstore", Some(&args[1]), 2, Op::Diff, false)
}

/// ZINTERCARD numkeys key [key ...] [LIMIT limit]
pub fn zintercard(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    zsetop(ctx, args, "zintercard", None, 1, Op::Inter, true)
}
