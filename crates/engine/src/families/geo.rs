//! Geospatial indexes: GEOADD, GEOPOS, GEOHASH, GEODIST, GEOSEARCH,
//! GEOSEARCHSTORE and the older GEORADIUS, GEORADIUSBYMEMBER (and their
//! read-only forms). A geospatial index is a sorted set whose scores are
//! 52-bit geohashes (`ringdb_types::geohash`), so every sorted-set command
//! works on it too. Semantics, reply shapes and error texts follow Redis
//! 7.0's `geo.c`; a search reads the sorted set's score ranges of the nine
//! cells around the centre, as Redis does, so results and their order match.

use super::zset::{read_zset, store_result, zadd};
use crate::command::args::{self, is};
use crate::command::error::{CmdError, CmdResult, SYNTAX};
use crate::command::spec::{acl, flags::*, keyflags as kf, CommandSpec, Exec, FindKeys, KeySpec};
use crate::command::Ctx;
use bytes::Bytes;
use ringdb_protocol::ReplyWriter;
use ringdb_types::geohash::{self, Extent, Shape};
use ringdb_types::zset::{ScoreRange, ZSet};

const ONE_RO: &[KeySpec] = &[KeySpec::one(1, kf::RO | kf::ACCESS)];
const STORE_AFTER: FindKeys = FindKeys::Range { lastkey: 0, step: 1, limit: 0 };
const GEORADIUS_KEYS: &[KeySpec] = &[
    KeySpec::one(1, kf::RO | kf::ACCESS),
    KeySpec::keyword("STORE", 6, STORE_AFTER, kf::OW | kf::UPDATE),
    KeySpec::keyword("STOREDIST", 6, STORE_AFTER, kf::OW | kf::UPDATE),
];
const GEORADIUSBYMEMBER_KEYS: &[KeySpec] = &[
    KeySpec::one(1, kf::RO | kf::ACCESS),
    KeySpec::keyword("STORE", 5, STORE_AFTER, kf::OW | kf::UPDATE),
    KeySpec::keyword("STOREDIST", 5, STORE_AFTER, kf::OW | kf::UPDATE),
];

const RADIUS_COMPLEXITY: &str = "O(N+log(M)) where N is the number of elements inside the bounding box of the circular area delimited by center and radius and M is the number of items inside the index.";
const SEARCH_COMPLEXITY: &str = "O(N+log(M)) where N is the number of elements in the grid-aligned bounding box area around the shape provided as the filter and M is the number of items inside the shape";
const UNITS_HISTORY: &[(&str, &str)] = &[("7.0.0", "Added support for uppercase unit names.")];

/// A geo row: group `geo`, ACL category `@geo`.
const fn row(
    name: &'static str,
    arity: i32,
    flags: u32,
    handler: crate::command::Handler,
    keys: &'static [KeySpec],
) -> CommandSpec {
    CommandSpec::new(name, arity, flags, Exec::Shard(handler)).keys(keys).acl(acl::GEO)
}

pub static COMMANDS: &[CommandSpec] = &[
    row("geoadd", -5, WRITE | DENYOOM, geoadd, &[KeySpec::one(1, kf::RW | kf::UPDATE)])
        .doc("geo", "3.2.0", "Adds one or more members to a geospatial index. The key is created if it doesn't exist.", "O(log(N)) for each item added, where N is the number of elements in the sorted set.", "key [NX | XX] [CH] longitude:double latitude:double member [longitude:double latitude:double member ...]")
        .history(&[("6.2.0", "Added the `CH`, `NX` and `XX` options.")]),
    row("geodist", -4, READONLY | WATCHABLE, geodist, ONE_RO)
        .doc("geo", "3.2.0", "Returns the distance between two members of a geospatial index.", "O(1)", "key member1 member2 [m | km | ft | mi]"),
    row("geohash", -2, READONLY | WATCHABLE, geohash, ONE_RO)
        .doc("geo", "3.2.0", "Returns members from a geospatial index as geohash strings.", "O(1) for each member requested.", "key [member [member ...]]"),
    row("geopos", -2, READONLY | WATCHABLE, geopos, ONE_RO)
        .doc("geo", "3.2.0", "Returns the longitude and latitude of members from a geospatial index.", "O(1) for each member requested.", "key [member [member ...]]"),
    row("georadius", -6, WRITE | DENYOOM, georadius, GEORADIUS_KEYS)
        .doc("geo", "3.2.0", "Queries a geospatial index for members within a distance from a coordinate, optionally stores the result.", RADIUS_COMPLEXITY, "key longitude:double latitude:double radius:double <m | km | ft | mi> [WITHCOORD] [WITHDIST] [WITHHASH] [COUNT count [ANY]] [ASC | DESC] [STORE storekey=key:key | STOREDIST storedistkey=key:key]")
        .history(&[("6.2.0", "Added the `ANY` option for `COUNT`."), ("7.0.0", "Added support for uppercase unit names.")])
        .deprecated("6.2.0", "`GEOSEARCH` and `GEOSEARCHSTORE` with the `BYRADIUS` argument"),
    row("georadius_ro", -6, READONLY, georadius_ro, ONE_RO)
        .doc("geo", "3.2.10", "Returns members from a geospatial index that are within a distance from a coordinate.", RADIUS_COMPLEXITY, "key longitude:double latitude:double radius:double <m | km | ft | mi> [WITHCOORD] [WITHDIST] [WITHHASH] [COUNT count [ANY]] [ASC | DESC]")
        .history(&[("6.2.0", "Added the `ANY` option for `COUNT`.")])
        .deprecated("6.2.0", "`GEOSEARCH` with the `BYRADIUS` argument"),
    row("georadiusbymember", -5, WRITE | DENYOOM, georadiusbymember, GEORADIUSBYMEMBER_KEYS)
        .doc("geo", "3.2.0", "Queries a geospatial index for members within a distance from a member, optionally stores the result.", RADIUS_COMPLEXITY, "key member radius:double <m | km | ft | mi> [WITHCOORD] [WITHDIST] [WITHHASH] [COUNT count [ANY]] [ASC | DESC] [STORE storekey=key:key | STOREDIST storedistkey=key:key]")
        .history(UNITS_HISTORY)
        .deprecated("6.2.0", "`GEOSEARCH` and `GEOSEARCHSTORE` with the `BYRADIUS` and `FROMMEMBER` arguments"),
    row("georadiusbymember_ro", -5, READONLY, georadiusbymember_ro, ONE_RO)
        .doc("geo", "3.2.10", "Returns members from a geospatial index that are within a distance from a member.", RADIUS_COMPLEXITY, "key member radius:double <m | km | ft | mi> [WITHCOORD] [WITHDIST] [WITHHASH] [COUNT count [ANY]] [ASC | DESC]")
        .deprecated("6.2.0", "`GEOSEARCH` with the `BYRADIUS` and `FROMMEMBER` arguments"),
    row("geosearch", -7, READONLY | WATCHABLE, geosearch, ONE_RO)
        .doc("geo", "6.2.0", "Queries a geospatial index for members inside an area of a box or a circle.", SEARCH_COMPLEXITY, "key <FROMMEMBER member | FROMLONLAT longitude:double latitude:double> <BYRADIUS radius:double <m | km | ft | mi> | BYBOX width:double height:double <m | km | ft | mi>> [ASC | DESC] [COUNT count [ANY]] [WITHCOORD] [WITHDIST] [WITHHASH]")
        .history(UNITS_HISTORY),
    row("geosearchstore", -8, WRITE | DENYOOM, geosearchstore, &[KeySpec::one(1, kf::OW | kf::UPDATE), KeySpec::one(2, kf::RO | kf::ACCESS)])
        .doc("geo", "6.2.0", "Queries a geospatial index for members inside an area of a box or a circle, optionally stores the result.", SEARCH_COMPLEXITY, "destination source <FROMMEMBER member | FROMLONLAT longitude:double latitude:double> <BYRADIUS radius:double <m | km | ft | mi> | BYBOX width:double height:double <m | km | ft | mi>> [ASC | DESC] [COUNT count [ANY]] [STOREDIST]")
        .history(UNITS_HISTORY),
];

/// GEOADD key [NX | XX] [CH] longitude latitude member [...]: ZADD with each
/// position's 52-bit geohash as the score (Redis rewrites the command into
/// a ZADD the same way, so replies and events are ZADD's).
fn geoadd(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let mut first = 2;
    let (mut nx, mut xx) = (false, false);
    while let Some(opt) = args.get(first) {
        if is(opt, "NX") {
            nx = true;
        } else if is(opt, "XX") {
            xx = true;
        } else if !is(opt, "CH") {
            break;
        }
        first += 1;
    }
    let triples = &args[first..];
    if !triples.len().is_multiple_of(3) || (nx && xx) {
        return Err(SYNTAX);
    }
    let mut zadd_args = Vec::with_capacity(first + triples.len() / 3 * 2);
    zadd_args.push(Bytes::from_static(b"zadd"));
    zadd_args.extend_from_slice(&args[1..first]);
    for t in triples.chunks(3) {
        let (lon, lat) = long_lat(&t[0], &t[1])?;
        let score = geohash::score_of(lon, lat).ok_or_else(|| invalid_pair(lon, lat))?;
        zadd_args.push(Bytes::from(score.to_string()));
        zadd_args.push(t[2].clone());
    }
    zadd(ctx, &zadd_args)
}

/// GEOPOS key [member ...]: each member's position, nil for missing ones.
fn geopos(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let z = read_zset(&mut ctx.ks, &args[1])?;
    ctx.out.array(args.len() - 2);
    for member in &args[2..] {
        match z.and_then(|z| z.score(member)) {
            Some(score) => {
                let (lon, lat) = geohash::decode_score(score);
                ctx.out.array(2);
                coordinate(&mut ctx.out, lon);
                coordinate(&mut ctx.out, lat);
            }
            None => ctx.out.null_array(),
        }
    }
    Ok(())
}

/// GEOHASH key [member ...]: each member's 11-character standard geohash.
fn geohash(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let z = read_zset(&mut ctx.ks, &args[1])?;
    ctx.out.array(args.len() - 2);
    for member in &args[2..] {
        match z.and_then(|z| z.score(member)) {
            Some(score) => {
                let (lon, lat) = geohash::decode_score(score);
                ctx.out.bulk(&geohash::standard_geohash(lon, lat));
            }
            None => ctx.out.null(),
        }
    }
    Ok(())
}

/// GEODIST key member1 member2 [unit]: nil when either member is missing.
fn geodist(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let to_meters = match args.len() {
        4 => 1.0,
        5 => unit(&args[4])?,
        _ => return Err(SYNTAX),
    };
    let Some(z) = read_zset(&mut ctx.ks, &args[1])? else {
        ctx.out.null();
        return Ok(());
    };
    match (z.score(&args[2]), z.score(&args[3])) {
        (Some(a), Some(b)) => {
            let ((lon1, lat1), (lon2, lat2)) = (geohash::decode_score(a), geohash::decode_score(b));
            distance_reply(&mut ctx.out, geohash::distance(lon1, lat1, lon2, lat2) / to_meters);
        }
        _ => ctx.out.null(),
    }
    Ok(())
}

/// Which search command is running (Redis's `georadiusGeneric` flags).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    /// GEORADIUS: centre given as longitude and latitude.
    ByCoords { store: bool },
    /// GEORADIUSBYMEMBER: centre at a member.
    ByMember { store: bool },
    /// GEOSEARCH and GEOSEARCHSTORE.
    Search { store: bool },
}

fn georadius(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    search(ctx, args, Form::ByCoords { store: true })
}

fn georadius_ro(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    search(ctx, args, Form::ByCoords { store: false })
}

fn georadiusbymember(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    search(ctx, args, Form::ByMember { store: true })
}

fn georadiusbymember_ro(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    search(ctx, args, Form::ByMember { store: false })
}

fn geosearch(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    search(ctx, args, Form::Search { store: false })
}

fn geosearchstore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    search(ctx, args, Form::Search { store: true })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Order {
    Unsorted,
    Asc,
    Desc,
}

/// A parsed search request.
struct Request {
    /// Centre and extent; `None` only when the source key is missing (its
    /// member centre could not be looked up, and the reply is empty anyway).
    shape: Option<Shape>,
    with_dist: bool,
    with_hash: bool,
    with_coord: bool,
    order: Order,
    /// COUNT (0: all).
    count: usize,
    any: bool,
    /// Where to store the result, and whether distances become the scores.
    store: Option<(Bytes, bool)>,
}

/// A member found by a search.
struct Found {
    member: Vec<u8>,
    score: f64,
    longitude: f64,
    latitude: f64,
    /// From the centre, in metres until the reply converts it.
    dist: f64,
}

/// Redis's `georadiusGeneric`: parses in Redis's order (so the same
/// arguments give the same first error), searches the nine cells around
/// the centre, then sorts, trims and replies or stores.
fn search(ctx: &mut Ctx, args: &[Bytes], form: Form) -> CmdResult {
    let source = if matches!(form, Form::Search { store: true }) { &args[2] } else { &args[1] };
    let z = read_zset(&mut ctx.ks, source)?;
    let req = parse_request(args, form, z)?;
    let limit = if req.any { req.count } else { 0 };
    let searched = match (z, req.shape) {
        (Some(z), Some(shape)) => Some((shape, points_within(z, &shape, limit))),
        _ => None,
    };
    let Some((shape, mut found)) = searched else {
        match &req.store {
            Some((dst, _)) => store_result(ctx, dst, &[], event_of(form)),
            None => ctx.out.array(0),
        }
        return Ok(());
    };
    let order = match req.order {
        Order::Unsorted if req.count > 0 && !req.any => Order::Asc,
        order => order,
    };
    match order {
        Order::Unsorted => {}
        Order::Asc => found.sort_by(|a, b| a.dist.total_cmp(&b.dist)),
        Order::Desc => found.sort_by(|a, b| b.dist.total_cmp(&a.dist)),
    }
    if req.count > 0 {
        found.truncate(req.count);
    }
    for f in &mut found {
        f.dist /= shape.to_meters;
    }
    match req.store {
        Some((dst, dist_as_score)) => {
            let members: Vec<(Vec<u8>, f64)> = found
                .into_iter()
                .map(|f| {
                    let score = if dist_as_score { f.dist } else { f.score };
                    (f.member, score)
                })
                .collect();
            store_result(ctx, &dst, &members, event_of(form));
        }
        None => reply_found(&mut ctx.out, &found, &req),
    }
    Ok(())
}

fn event_of(form: Form) -> &'static str {
    match form {
        Form::Search { .. } => "geosearchstore",
        _ => "georadiusstore",
    }
}

fn parse_request(args: &[Bytes], form: Form, z: Option<&ZSet>) -> Result<Request, CmdError> {
    let mut req = Request {
        shape: None,
        with_dist: false,
        with_hash: false,
        with_coord: false,
        order: Order::Unsorted,
        count: 0,
        any: false,
        store: None,
    };
    // The centre (and, for the GEORADIUS forms, the radius) come first.
    let mut centre = None;
    let mut extent = None;
    let base = match form {
        Form::ByCoords { .. } => {
            centre = Some(long_lat(&args[2], &args[3]).and_then(checked_pair)?);
            extent = Some(radius(&args[4..6])?);
            6
        }
        Form::ByMember { .. } => {
            if let Some(z) = z {
                centre = Some(member_position(z, &args[2])?);
                extent = Some(radius(&args[3..5])?);
            }
            5
        }
        Form::Search { store } => {
            if store {
                req.store = Some((args[1].clone(), false));
                3
            } else {
                2
            }
        }
    };
    let search = matches!(form, Form::Search { .. });
    let radius_store =
        matches!(form, Form::ByCoords { store: true } | Form::ByMember { store: true });
    let (mut from_member, mut from_lonlat, mut by_radius, mut by_box) =
        (false, false, false, false);
    let mut i = base;
    while i < args.len() {
        let arg = &args[i];
        let left = args.len() - i - 1;
        if is(arg, "WITHDIST") {
            req.with_dist = true;
        } else if is(arg, "WITHHASH") {
            req.with_hash = true;
        } else if is(arg, "WITHCOORD") {
            req.with_coord = true;
        } else if is(arg, "ANY") {
            req.any = true;
        } else if is(arg, "ASC") {
            req.order = Order::Asc;
        } else if is(arg, "DESC") {
            req.order = Order::Desc;
        } else if is(arg, "COUNT") && left >= 1 {
            let count = args::int(&args[i + 1])?;
            if count <= 0 {
                return Err(CmdError::new("ERR COUNT must be > 0"));
            }
            req.count = usize::try_from(count).unwrap_or(usize::MAX);
            i += 1;
        } else if (is(arg, "STORE") || is(arg, "STOREDIST")) && left >= 1 && radius_store {
            req.store = Some((args[i + 1].clone(), is(arg, "STOREDIST")));
            i += 1;
        } else if is(arg, "STOREDIST") && matches!(form, Form::Search { store: true }) {
            req.store = Some((args[1].clone(), true));
        } else if is(arg, "FROMMEMBER") && left >= 1 && search && !from_lonlat {
            if let Some(z) = z {
                centre = Some(member_position(z, &args[i + 1])?);
            }
            from_member = true;
            i += 1;
        } else if is(arg, "FROMLONLAT") && left >= 2 && search && !from_member {
            centre = Some(long_lat(&args[i + 1], &args[i + 2]).and_then(checked_pair)?);
            from_lonlat = true;
            i += 2;
        } else if is(arg, "BYRADIUS") && left >= 2 && search && !by_box {
            extent = Some(radius(&args[i + 1..i + 3])?);
            by_radius = true;
            i += 2;
        } else if is(arg, "BYBOX") && left >= 3 && search && !by_radius {
            extent = Some(bybox(&args[i + 1..i + 4])?);
            by_box = true;
            i += 3;
        } else {
            return Err(SYNTAX);
        }
        i += 1;
    }
    if req.store.is_some() && (req.with_dist || req.with_hash || req.with_coord) {
        let what = if search { "GEOSEARCHSTORE" } else { "STORE option in GEORADIUS" };
        return Err(CmdError::owned(format!(
            "ERR {what} is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        )));
    }
    let name = args::text(&args[0]);
    if search && !(from_member || from_lonlat) {
        return Err(CmdError::owned(format!(
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        )));
    }
    if search && !(by_radius || by_box) {
        return Err(CmdError::owned(format!(
            "ERR exactly one of BYRADIUS and BYBOX can be specified for {name}"
        )));
    }
    if req.any && req.count == 0 {
        return Err(CmdError::new("ERR the ANY argument requires COUNT argument"));
    }
    if let (Some((longitude, latitude)), Some((extent, to_meters))) = (centre, extent) {
        req.shape = Some(Shape::new(longitude, latitude, extent, to_meters));
    }
    Ok(req)
}

/// The members inside `shape`, cell by cell in Redis's order (each cell's
/// members by score), stopping once `limit` are found (0: no limit). A cell
/// equal to the one searched just before it is skipped: with huge radii
/// neighbours can coincide.
fn points_within(z: &ZSet, shape: &Shape, limit: usize) -> Vec<Found> {
    let mut found = Vec::new();
    let mut last = None;
    for cell in shape.cells() {
        if cell == geohash::Cell::NONE || last == Some(cell) {
            continue;
        }
        if limit > 0 && found.len() >= limit {
            break;
        }
        let (min, max) = cell.score_range();
        for (member, score) in
            z.range_by_score(&ScoreRange::new(min, false, max, true), false, 0, None)
        {
            let (longitude, latitude) = geohash::decode_score(score);
            if let Some(dist) = shape.distance_if_within(longitude, latitude) {
                let mut tmp = [0u8; 24];
                found.push(Found {
                    member: member.bytes(&mut tmp).to_vec(),
                    score,
                    longitude,
                    latitude,
                    dist,
                });
            }
            if limit > 0 && found.len() >= limit {
                break;
            }
        }
        last = Some(cell);
    }
    found
}

fn reply_found(out: &mut ReplyWriter, found: &[Found], req: &Request) {
    let extras = req.with_dist as usize + req.with_hash as usize + req.with_coord as usize;
    out.array(found.len());
    for f in found {
        if extras > 0 {
            out.array(extras + 1);
        }
        out.bulk(&f.member);
        if req.with_dist {
            distance_reply(out, f.dist);
        }
        if req.with_hash {
            out.int(f.score as i64);
        }
        if req.with_coord {
            out.array(2);
            coordinate(out, f.longitude);
            coordinate(out, f.latitude);
        }
    }
}

/// Two float arguments as (longitude, latitude).
fn long_lat(lon: &[u8], lat: &[u8]) -> Result<(f64, f64), CmdError> {
    Ok((args::float(lon)?, args::float(lat)?))
}

/// A centre must be inside the indexable ranges.
fn checked_pair((lon, lat): (f64, f64)) -> Result<(f64, f64), CmdError> {
    if (geohash::LONG_MIN..=geohash::LONG_MAX).contains(&lon)
        && (geohash::LAT_MIN..=geohash::LAT_MAX).contains(&lat)
    {
        Ok((lon, lat))
    } else {
        Err(invalid_pair(lon, lat))
    }
}

fn invalid_pair(lon: f64, lat: f64) -> CmdError {
    CmdError::owned(format!("ERR invalid longitude,latitude pair {lon:.6},{lat:.6}"))
}

fn member_position(z: &ZSet, member: &[u8]) -> Result<(f64, f64), CmdError> {
    z.score(member)
        .map(geohash::decode_score)
        .ok_or(CmdError::new("ERR could not decode requested zset member"))
}

/// `radius unit`: the extent and the unit's size in metres.
fn radius(args: &[Bytes]) -> Result<(Extent, f64), CmdError> {
    let r = args::float(&args[0]).map_err(|_| CmdError::new("ERR need numeric radius"))?;
    if r < 0.0 {
        return Err(CmdError::new("ERR radius cannot be negative"));
    }
    Ok((Extent::Radius(r), unit(&args[1])?))
}

/// `width height unit` of BYBOX.
fn bybox(args: &[Bytes]) -> Result<(Extent, f64), CmdError> {
    let width = args::float(&args[0]).map_err(|_| CmdError::new("ERR need numeric width"))?;
    let height = args::float(&args[1]).map_err(|_| CmdError::new("ERR need numeric height"))?;
    if width < 0.0 || height < 0.0 {
        return Err(CmdError::new("ERR height or width cannot be negative"));
    }
    Ok((Extent::Box { width, height }, unit(&args[2])?))
}

/// A unit's size in metres.
fn unit(arg: &[u8]) -> Result<f64, CmdError> {
    Ok(if is(arg, "m") {
        1.0
    } else if is(arg, "km") {
        1000.0
    } else if is(arg, "ft") {
        0.3048
    } else if is(arg, "mi") {
        1609.34
    } else {
        return Err(CmdError::new("ERR unsupported unit provided. please use M, KM, FT, MI"));
    })
}

/// A distance as Redis prints it: a bulk string with four decimals (its
/// `fixedpoint_d2string`, rounding half to even as `llrint` does).
fn distance_reply(out: &mut ReplyWriter, d: f64) {
    out.bulk(fixed4(d).as_bytes());
}

fn fixed4(d: f64) -> String {
    if d == 0.0 {
        return "0.0000".to_string();
    }
    let scaled = (d * 10000.0).round_ties_even();
    // llrint's result for values beyond i64 is unspecified; saturate.
    let v = scaled as i64;
    let sign = if v < 0 { "-" } else { "" };
    let u = v.unsigned_abs();
    format!("{sign}{}.{:04}", u / 10000, u % 10000)
}

/// A coordinate as Redis prints it (`addReplyHumanLongDouble`): 17
/// decimals with trailing zeros removed; a bulk string in RESP2, a double
/// in RESP3.
fn coordinate(out: &mut ReplyWriter, v: f64) {
    let text = format!("{v:.17}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    let text = if text == "-0" { "0" } else { text };
    if out.is_resp3() {
        out.raw(format!(",{text}\r\n").as_bytes());
    } else {
        out.bulk(text.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances_print_four_decimals() {
        assert_eq!(fixed4(0.0), "0.0000");
        assert_eq!(fixed4(166274.15156960033), "166274.1516");
        assert_eq!(fixed4(0.00005), "0.0000");
        // 0.00015 * 10000 is 1.4999999999999998 in doubles, as in C.
        assert_eq!(fixed4(0.00015), "0.0001");
        assert_eq!(fixed4(0.7750), "0.7750");
        assert_eq!(fixed4(12.5), "12.5000");
    }
}
