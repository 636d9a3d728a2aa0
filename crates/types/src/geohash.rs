//! Geohash math behind the GEO commands: a position as the 52-bit integer
//! Redis stores as a sorted-set score (26 bits each of longitude and
//! latitude, interleaved), decoding it back to the centre of its cell, the
//! eight neighbours of a cell, the cells that cover a search circle or box,
//! and great-circle distances.
//!
//! Everything here follows Redis 7.0's `geohash.c` and `geohash_helper.c`
//! operation for operation (the same divisions in the same order, the same
//! libm calls), so scores, decoded positions and distances are bit-identical
//! to Redis's and GEOPOS/GEODIST replies print the same digits.

use std::f64::consts::PI;

pub const LONG_MIN: f64 = -180.0;
pub const LONG_MAX: f64 = 180.0;
/// The Web Mercator limits (EPSG:3785): positions nearer the poles cannot
/// be indexed.
pub const LAT_MIN: f64 = -85.05112878;
pub const LAT_MAX: f64 = 85.05112878;
/// 26 steps of one longitude and one latitude bit: 52 bits, which a double
/// score holds exactly.
pub const STEP_MAX: u8 = 26;

/// The quadratic mean radius of the WGS-84 ellipsoid, as Redis uses it.
const EARTH_RADIUS_IN_METERS: f64 = 6372797.560856;
const MERCATOR_MAX: f64 = 20037726.37;
const D_R: f64 = PI / 180.0;

fn deg_rad(ang: f64) -> f64 {
    ang * D_R
}

fn rad_deg(ang: f64) -> f64 {
    ang / D_R
}

/// A geohash cell: `step` bits of each coordinate, interleaved (latitude in
/// the even bits, longitude in the odd ones). `Cell::NONE` marks a
/// neighbour a search leaves out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cell {
    pub bits: u64,
    pub step: u8,
}

impl Cell {
    pub const NONE: Cell = Cell { bits: 0, step: 0 };

    fn is_none(self) -> bool {
        self.bits == 0 && self.step == 0
    }

    /// The cell's bits shifted to 52 bits: the smallest score inside it.
    pub fn align52(self) -> u64 {
        self.bits << (52 - self.step as u32 * 2)
    }

    /// The sorted-set scores of the points inside the cell:
    /// `min <= score < max`.
    pub fn score_range(self) -> (f64, f64) {
        let next = Cell { bits: self.bits + 1, step: self.step };
        (self.align52() as f64, next.align52() as f64)
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Range {
    pub min: f64,
    pub max: f64,
}

/// The rectangle a cell covers.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Area {
    pub longitude: Range,
    pub latitude: Range,
}

const WORLD_LONG: Range = Range { min: LONG_MIN, max: LONG_MAX };
const WORLD_LAT: Range = Range { min: LAT_MIN, max: LAT_MAX };

/// Spreads the bits of `x` into the even bit positions and those of `y`
/// into the odd ones.
fn interleave(x: u32, y: u32) -> u64 {
    fn spread(v: u32) -> u64 {
        let mut v = v as u64;
        v = (v | (v << 16)) & 0x0000_FFFF_0000_FFFF;
        v = (v | (v << 8)) & 0x00FF_00FF_00FF_00FF;
        v = (v | (v << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
        v = (v | (v << 2)) & 0x3333_3333_3333_3333;
        (v | (v << 1)) & 0x5555_5555_5555_5555
    }
    spread(x) | (spread(y) << 1)
}

/// The inverse of [`interleave`]: the even bits in the low 32 bits of the
/// result, the odd ones in the high 32.
fn deinterleave(v: u64) -> u64 {
    fn gather(mut v: u64) -> u64 {
        v &= 0x5555_5555_5555_5555;
        v = (v | (v >> 1)) & 0x3333_3333_3333_3333;
        v = (v | (v >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
        v = (v | (v >> 4)) & 0x00FF_00FF_00FF_00FF;
        v = (v | (v >> 8)) & 0x0000_FFFF_0000_FFFF;
        (v | (v >> 16)) & 0x0000_0000_FFFF_FFFF
    }
    gather(v) | (gather(v >> 1) << 32)
}

/// Redis's `geohashEncode`: the cell of `step` bits holding the position
/// within the given ranges; `None` outside them (or outside the Mercator
/// limits, which Redis checks whatever the ranges).
pub fn encode_in(
    long_range: Range,
    lat_range: Range,
    longitude: f64,
    latitude: f64,
    step: u8,
) -> Option<Cell> {
    if step == 0 || step > 32 {
        return None;
    }
    if !(LONG_MIN..=LONG_MAX).contains(&longitude) || !(LAT_MIN..=LAT_MAX).contains(&latitude) {
        return None;
    }
    if latitude < lat_range.min
        || latitude > lat_range.max
        || longitude < long_range.min
        || longitude > long_range.max
    {
        return None;
    }
    let lat_offset = (latitude - lat_range.min) / (lat_range.max - lat_range.min);
    let long_offset = (longitude - long_range.min) / (long_range.max - long_range.min);
    let scale = (1u64 << step) as f64;
    // Truncation to 32 bits, as C's implicit conversion does.
    let bits = interleave((lat_offset * scale) as u32, (long_offset * scale) as u32);
    Some(Cell { bits, step })
}

/// The cell of `step` bits holding a position, on the world's ranges.
pub fn encode(longitude: f64, latitude: f64, step: u8) -> Option<Cell> {
    encode_in(WORLD_LONG, WORLD_LAT, longitude, latitude, step)
}

/// The 52-bit score GEOADD stores for a position (`None` outside the
/// Mercator limits).
pub fn score_of(longitude: f64, latitude: f64) -> Option<u64> {
    encode(longitude, latitude, STEP_MAX).map(Cell::align52)
}

/// Redis's `geohashDecode`: the rectangle a cell covers.
pub fn decode_in(long_range: Range, lat_range: Range, cell: Cell) -> Option<Area> {
    if cell.is_none() {
        return None;
    }
    let sep = deinterleave(cell.bits);
    let lat_scale = lat_range.max - lat_range.min;
    let long_scale = long_range.max - long_range.min;
    let ilato = sep as u32;
    let ilono = (sep >> 32) as u32;
    let cells = (1u64 << cell.step) as f64;
    Some(Area {
        latitude: Range {
            min: lat_range.min + (ilato as f64 / cells) * lat_scale,
            max: lat_range.min + ((ilato.wrapping_add(1)) as f64 / cells) * lat_scale,
        },
        longitude: Range {
            min: long_range.min + (ilono as f64 / cells) * long_scale,
            max: long_range.min + ((ilono.wrapping_add(1)) as f64 / cells) * long_scale,
        },
    })
}

fn decode(cell: Cell) -> Option<Area> {
    decode_in(WORLD_LONG, WORLD_LAT, cell)
}

/// The centre of a cell, clamped to the indexable ranges.
fn centre(area: &Area) -> (f64, f64) {
    let lon = ((area.longitude.min + area.longitude.max) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let lat = ((area.latitude.min + area.latitude.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    (lon, lat)
}

/// The position (longitude, latitude) a sorted-set score stands for: the
/// centre of its 52-bit cell (Redis's `decodeGeohash`). Any score decodes
/// (a sorted set may hold scores ZADD put there): to what its bits say
/// after C's `(uint64_t)` conversion as Redis on x86-64 does it.
pub fn decode_score(score: f64) -> (f64, f64) {
    let cell = Cell { bits: c_to_u64(score), step: STEP_MAX };
    // A 26-step cell is never NONE, so decoding cannot fail.
    decode(cell).map_or((0.0, 0.0), |area| centre(&area))
}

/// x86-64's double → uint64_t conversion as gcc compiles it: below 2^63
/// through a signed conversion (so -5 becomes 2^64 - 5), above it with the
/// top bit flipped, and the "indefinite" integer where the signed
/// conversion overflows (so 1e300 and inf become 0). Rust's `as u64`
/// saturates instead, which would place such scores elsewhere than Redis.
fn c_to_u64(score: f64) -> u64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    const INDEFINITE: u64 = 1 << 63;
    let signed = |v: f64| if (-TWO_63..TWO_63).contains(&v) { v as i64 as u64 } else { INDEFINITE };
    if score < TWO_63 {
        signed(score)
    } else {
        signed(score - TWO_63) ^ INDEFINITE
    }
}

/// The 11-character standard geohash of a position (GEOHASH): Redis
/// re-encodes on the standard ±90° latitude range and pads the 52 bits
/// with a final `0`.
pub fn standard_geohash(longitude: f64, latitude: f64) -> [u8; 11] {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let standard_lat = Range { min: -90.0, max: 90.0 };
    let bits =
        encode_in(WORLD_LONG, standard_lat, longitude, latitude, STEP_MAX).map_or(0, |c| c.bits);
    let mut out = [b'0'; 11];
    for (i, c) in out.iter_mut().take(10).enumerate() {
        *c = ALPHABET[((bits >> (52 - (i + 1) * 5)) & 0x1f) as usize];
    }
    out
}

/// The interleaved bits of each axis.
const LONG_BITS: u64 = 0xaaaa_aaaa_aaaa_aaaa;
const LAT_BITS: u64 = 0x5555_5555_5555_5555;

/// The cell `d` (-1, 0 or 1) steps along the axis whose bits are `axis`
/// (Redis's `geohash_move_x` / `geohash_move_y`): the other axis' bits are
/// set to ones so that adding one carries across them, and the result is
/// masked back to the cell's width.
fn moved(cell: Cell, axis: u64, d: i8) -> Cell {
    // A step-0 cell (`Cell::NONE`) has no bits to move (and would shift by 64).
    if d == 0 || cell.step == 0 {
        return cell;
    }
    let width = 64 - cell.step as u32 * 2;
    let other = !axis;
    let fill = other >> width;
    let mut v = cell.bits & axis;
    if d > 0 {
        v = v.wrapping_add(fill + 1);
    } else {
        v |= fill;
        v = v.wrapping_sub(fill + 1);
    }
    v &= axis >> width;
    Cell { bits: v | (cell.bits & other), step: cell.step }
}

/// The eight neighbours of a cell, in the order Redis searches them:
/// north, south, east, west, north-east, north-west, south-east, south-west.
fn neighbours(cell: Cell) -> [Cell; 8] {
    let to = |dx: i8, dy: i8| moved(moved(cell, LONG_BITS, dx), LAT_BITS, dy);
    [to(0, 1), to(0, -1), to(1, 0), to(-1, 0), to(1, 1), to(-1, 1), to(1, -1), to(-1, -1)]
}

const NORTH: usize = 0;
const SOUTH: usize = 1;
const EAST: usize = 2;
const WEST: usize = 3;
const NORTH_EAST: usize = 4;
const NORTH_WEST: usize = 5;
const SOUTH_EAST: usize = 6;
const SOUTH_WEST: usize = 7;

/// The area a search covers, around a centre (longitude, latitude).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Extent {
    /// Within `radius` of the centre.
    Radius(f64),
    /// Within an axis-aligned `width` × `height` box centred on it.
    Box { width: f64, height: f64 },
}

/// A search area: its centre, its extent in the request's unit, and the
/// unit's size in metres.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shape {
    pub longitude: f64,
    pub latitude: f64,
    pub extent: Extent,
    pub to_meters: f64,
    centre: Point,
}

impl Shape {
    pub fn new(longitude: f64, latitude: f64, extent: Extent, to_meters: f64) -> Shape {
        Shape { longitude, latitude, extent, to_meters, centre: Point::new(longitude, latitude) }
    }

    /// Redis's `geohashBoundingBox`: `[min_lon, min_lat, max_lon, max_lat]`.
    fn bounding_box(&self) -> [f64; 4] {
        let (half_height, half_width) = match self.extent {
            Extent::Radius(r) => (r, r),
            Extent::Box { width, height } => (height / 2.0, width / 2.0),
        };
        let (height, width) = (self.to_meters * half_height, self.to_meters * half_width);
        let (lon, lat) = (self.longitude, self.latitude);
        let lat_delta = rad_deg(height / EARTH_RADIUS_IN_METERS);
        let long_delta_top =
            rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(lat + lat_delta).cos());
        let long_delta_bottom =
            rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(lat - lat_delta).cos());
        // The box's wider edge is the one nearer the equator.
        let long_delta = if lat < 0.0 { long_delta_bottom } else { long_delta_top };
        [lon - long_delta, lat - lat_delta, lon + long_delta, lat + lat_delta]
    }

    /// Redis's `geohashCalculateAreasByShapeWGS84`: the cells to search, in
    /// Redis's order (the centre's cell, then its neighbours), with
    /// [`Cell::NONE`] for neighbours the area cannot reach.
    pub fn cells(&self) -> [Cell; 9] {
        let [min_lon, min_lat, max_lon, max_lat] = self.bounding_box();
        let radius_meters = self.to_meters
            * match self.extent {
                Extent::Radius(r) => r,
                Extent::Box { width, height } => {
                    ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
                }
            };
        let mut steps = estimate_steps(radius_meters, self.latitude);
        let around = |steps: u8| {
            let cell = encode(self.longitude, self.latitude, steps).unwrap_or(Cell::NONE);
            (cell, neighbours(cell), decode(cell).unwrap_or_default())
        };
        let (mut cell, mut near, mut area) = around(steps);
        // Near a cell's edge the estimated step can leave part of the area
        // outside the nine cells: then use cells twice as large.
        let side = |c: Cell| decode(c).unwrap_or_default();
        let decrease = side(near[NORTH]).latitude.max < max_lat
            || side(near[SOUTH]).latitude.min > min_lat
            || side(near[EAST]).longitude.max < max_lon
            || side(near[WEST]).longitude.min > min_lon;
        if steps > 1 && decrease {
            steps -= 1;
            (cell, near, area) = around(steps);
        }
        // Leave out the neighbours the area does not reach.
        if steps >= 2 {
            let mut drop = |which: [usize; 3]| which.iter().for_each(|&i| near[i] = Cell::NONE);
            if area.latitude.min < min_lat {
                drop([SOUTH, SOUTH_WEST, SOUTH_EAST]);
            }
            if area.latitude.max > max_lat {
                drop([NORTH, NORTH_EAST, NORTH_WEST]);
            }
            if area.longitude.min < min_lon {
                drop([WEST, SOUTH_WEST, NORTH_WEST]);
            }
            if area.longitude.max > max_lon {
                drop([EAST, SOUTH_EAST, NORTH_EAST]);
            }
        }
        let mut all = [Cell::NONE; 9];
        all[0] = cell;
        all[1..].copy_from_slice(&near);
        all
    }

    /// Whether a point is inside the area, and if so its distance from the
    /// centre in metres (Redis's `geoWithinShape`).
    pub fn distance_if_within(&self, longitude: f64, latitude: f64) -> Option<f64> {
        let point = Point::new(longitude, latitude);
        match self.extent {
            Extent::Radius(r) => {
                let d = haversine(self.centre, point);
                (d <= r * self.to_meters).then_some(d)
            }
            Extent::Box { width, height } => {
                let (width_m, height_m) = (width * self.to_meters, height * self.to_meters);
                // The cheaper latitude test first, as Redis does.
                if lat_distance(latitude, self.latitude) > height_m / 2.0 {
                    return None;
                }
                let level = Point { longitude: self.longitude, ..point };
                if haversine(point, level) > width_m / 2.0 {
                    return None;
                }
                Some(haversine(self.centre, point))
            }
        }
    }
}

/// Redis's `geohashEstimateStepsByRadius`: the cell size whose nine cells
/// cover a search of this radius.
fn estimate_steps(range_meters: f64, lat: f64) -> u8 {
    if range_meters == 0.0 {
        return STEP_MAX;
    }
    let mut range_meters = range_meters;
    let mut step: i32 = 1;
    while range_meters < MERCATOR_MAX {
        range_meters *= 2.0;
        step += 1;
    }
    step -= 2;
    // Cells get narrower towards the poles.
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, STEP_MAX as i32) as u8
}

/// Great-circle distance along a meridian, in metres.
fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_IN_METERS * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// Haversine great-circle distance in metres between two positions
/// (Redis's `geohashGetDistance`).
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    haversine(Point::new(lon1, lat1), Point::new(lon2, lat2))
}

/// A position with the cosine of its latitude, which the haversine formula
/// needs: a search computes its centre's once rather than per point (the
/// same libm call on the same value, so distances stay Redis's to the bit).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Point {
    longitude: f64,
    latitude: f64,
    cos_lat: f64,
}

impl Point {
    fn new(longitude: f64, latitude: f64) -> Point {
        Point { longitude, latitude, cos_lat: deg_rad(latitude).cos() }
    }
}

/// Redis's `geohashGetDistance`, operation for operation.
fn haversine(a: Point, b: Point) -> f64 {
    let v = ((deg_rad(b.longitude) - deg_rad(a.longitude)) / 2.0).sin();
    // On one meridian the formula reduces to the latitude difference.
    if v == 0.0 {
        return lat_distance(a.latitude, b.latitude);
    }
    let u = ((deg_rad(b.latitude) - deg_rad(a.latitude)) / 2.0).sin();
    let h = u * u + a.cos_lat * b.cos_lat * v * v;
    2.0 * EARTH_RADIUS_IN_METERS * h.sqrt().asin()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Scores, positions and distances below were read from Redis 7.0.15.
    #[test]
    fn scores_and_positions_match_redis() {
        assert_eq!(score_of(13.361389, 38.115556), Some(3479099956230698));
        assert_eq!(score_of(15.087269, 37.502669), Some(3479447370796909));
        let (lon, lat) = decode_score(3479099956230698.0);
        assert_eq!(format!("{lon:.17}"), "13.36138933897018433");
        assert_eq!(format!("{lat:.17}"), "38.11555639549629859");
        assert_eq!(score_of(180.1, 0.0), None);
        assert_eq!(score_of(0.0, 85.06), None);
    }

    #[test]
    fn distances_match_redis() {
        let (a, b) = (decode_score(3479099956230698.0), decode_score(3479447370796909.0));
        let d = distance(a.0, a.1, b.0, b.1);
        assert_eq!(format!("{:.4}", d), "166274.1516");
        assert_eq!(distance(1.0, 2.0, 1.0, 3.0), lat_distance(2.0, 3.0));
    }

    #[test]
    fn standard_geohashes_match_redis() {
        let (lon, lat) = decode_score(3479099956230698.0);
        assert_eq!(&standard_geohash(lon, lat), b"sqc8b49rny0");
        let (lon, lat) = decode_score(3479447370796909.0);
        assert_eq!(&standard_geohash(lon, lat), b"sqdtr74hyu0");
    }

    #[test]
    fn out_of_range_scores_convert_as_c_on_x86_64() {
        assert_eq!(c_to_u64(3479099956230698.0), 3479099956230698);
        assert_eq!(c_to_u64(-5.0), u64::MAX - 4);
        assert_eq!(c_to_u64(1e300), 0);
        assert_eq!(c_to_u64(f64::INFINITY), 0);
        assert_eq!(c_to_u64(-1e300), 1 << 63);
        assert_eq!(c_to_u64(1.5e19), 15_000_000_000_000_000_000);
    }

    #[test]
    fn interleaving_round_trips() {
        for (x, y) in [(0u32, 0u32), (1, 0), (0, 1), (0x3ff_ffff, 0x155_5555), (u32::MAX, 7)] {
            let v = deinterleave(interleave(x, y));
            assert_eq!((v as u32, (v >> 32) as u32), (x, y));
        }
    }

    #[test]
    fn neighbours_are_adjacent_cells() {
        let cell = encode(13.361389, 38.115556, 10).unwrap();
        let area = decode(cell).unwrap();
        let n = neighbours(cell);
        let north = decode(n[NORTH]).unwrap();
        assert_eq!(north.latitude.min, area.latitude.max);
        assert_eq!(north.longitude, area.longitude);
        let west = decode(n[WEST]).unwrap();
        assert_eq!(west.longitude.max, area.longitude.min);
        let south_east = decode(n[SOUTH_EAST]).unwrap();
        assert_eq!(south_east.latitude.max, area.latitude.min);
        assert_eq!(south_east.longitude.min, area.longitude.max);
    }

    #[test]
    fn search_cells_cover_the_area() {
        // Every point of a grid inside the circle lies in one of the cells.
        let shape = Shape::new(15.0, 37.0, Extent::Radius(200.0), 1000.0);
        let cells = shape.cells();
        for i in -20..=20 {
            for j in -20..=20 {
                let (lon, lat) = (15.0 + i as f64 * 0.12, 37.0 + j as f64 * 0.1);
                if shape.distance_if_within(lon, lat).is_none() {
                    continue;
                }
                let score = score_of(lon, lat).unwrap() as f64;
                assert!(
                    cells.iter().any(|c| !c.is_none() && {
                        let (min, max) = c.score_range();
                        min <= score && score < max
                    }),
                    "{lon},{lat} not covered"
                );
            }
        }
    }

    #[test]
    fn steps_by_radius() {
        assert_eq!(estimate_steps(0.0, 0.0), 26);
        assert_eq!(estimate_steps(1.0, 0.0), 24);
        assert_eq!(estimate_steps(1000.0, 0.0), 14);
        assert_eq!(estimate_steps(1000.0, 70.0), 13);
        assert_eq!(estimate_steps(1000.0, -85.0), 12);
        assert_eq!(estimate_steps(1e9, 0.0), 1);
    }
}
