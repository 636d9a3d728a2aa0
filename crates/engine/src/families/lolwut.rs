//! LOLWUT [VERSION v] [...]: Redis 7.0's computer art (lolwut.c, lolwut5.c,
//! lolwut6.c), drawn the same way: version 5 is Georg Nees' *Schotter* in
//! braille, version 6 a skyline in terminal colours, any other version just
//! "Redis ver. X.Y.Z".
//!
//! The output is byte-identical to redis-server's for the same arguments and
//! the same random numbers: the arithmetic keeps C's float/double/int
//! conversions step by step, and the random numbers come from glibc's
//! `rand()` algorithm (seeded, as Redis seeds it, from the time and pid).

use crate::command::args::{self, is};
use crate::command::error::CmdResult;
use crate::command::spec::{flags::*, CommandSpec, Exec};
use crate::command::Ctx;
use crate::scripting::REDIS_VERSION;
use bytes::Bytes;
use std::cell::RefCell;

pub static COMMANDS: &[CommandSpec] =
    &[CommandSpec::new("lolwut", -1, READONLY | FAST, Exec::Shard(lolwut)).doc(
        "server",
        "5.0.0",
        "Displays computer art and the Redis version",
        "",
        "[VERSION version:integer]",
    )];

/// glibc's `rand()` (the TYPE_3 additive feedback generator behind
/// `random()`), so that a seed gives the numbers it gives in C.
struct CRand {
    r: [i32; 34],
    /// Next position in the ring of the last 34 values.
    i: usize,
}

const RAND_MAX: i32 = 2147483647;

impl CRand {
    fn new(seed: u32) -> CRand {
        let mut r = [0i32; 34];
        r[0] = if seed == 0 { 1 } else { seed as i32 };
        for i in 1..31 {
            // 16807 * r[i-1] % 2147483647 without overflow (Schrage), as glibc.
            let (hi, lo) = (r[i - 1] / 127773, r[i - 1] % 127773);
            let mut word = 16807 * lo - 2836 * hi;
            if word < 0 {
                word += 2147483647;
            }
            r[i] = word;
        }
        for i in 31..34 {
            r[i] = r[i - 31];
        }
        let mut rng = CRand { r, i: 0 };
        // glibc discards the first 310 outputs.
        for _ in 0..310 {
            rng.next_raw();
        }
        rng
    }

    fn next_raw(&mut self) -> i32 {
        // r[k] = r[k-31] + r[k-3], over a ring of 34.
        let k = self.i;
        let v = self.r[(k + 34 - 31) % 34].wrapping_add(self.r[(k + 34 - 3) % 34]);
        self.r[k] = v;
        self.i = (k + 1) % 34;
        v
    }

    /// The next `rand()`: 0 ..= RAND_MAX.
    fn rand(&mut self) -> i32 {
        ((self.next_raw() as u32) >> 1) as i32
    }
}

thread_local! {
    /// One generator per shard thread, seeded once as Redis seeds its own
    /// (`srand(time(NULL)^getpid())`), so pictures differ between calls.
    static RNG: RefCell<CRand> = RefCell::new(CRand::new(seed()));
}

fn seed() -> u32 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let thread = std::thread::current().id();
    let thread = format!("{thread:?}").bytes().fold(0u32, |h, b| h.wrapping_mul(31) ^ b as u32);
    (now as u32) ^ std::process::id() ^ thread
}

fn rand() -> i32 {
    RNG.with(|r| r.borrow_mut().rand())
}

/// A grid of pixels, each a colour (0 … 3).
struct Canvas {
    width: i32,
    height: i32,
    pixels: Vec<u8>,
}

impl Canvas {
    fn new(width: i32, height: i32, bg: u8) -> Canvas {
        let size = (width.max(0) as usize) * (height.max(0) as usize);
        Canvas { width, height, pixels: vec![bg; size] }
    }

    fn draw(&mut self, x: i32, y: i32, color: u8) {
        if x < 0 || x >= self.width || y < 0 || y >= self.height {
            return;
        }
        self.pixels[(x + y * self.width) as usize] = color;
    }

    fn get(&self, x: i32, y: i32) -> u8 {
        if x < 0 || x >= self.width || y < 0 || y >= self.height {
            return 0;
        }
        self.pixels[(x + y * self.width) as usize]
    }

    /// Bresenham, as `lwDrawLine`.
    fn line(&mut self, mut x1: i32, mut y1: i32, x2: i32, y2: i32, color: u8) {
        let (dx, dy) = ((x2 - x1).abs(), (y2 - y1).abs());
        let sx = if x1 < x2 { 1 } else { -1 };
        let sy = if y1 < y2 { 1 } else { -1 };
        let mut err = dx - dy;
        loop {
            self.draw(x1, y1, color);
            if x1 == x2 && y1 == y2 {
                break;
            }
            let e2 = err * 2;
            if e2 > -dy {
                err -= dy;
                x1 += sx;
            }
            if e2 < dx {
                err += dx;
                y1 += sy;
            }
        }
    }

    /// `lwDrawSquare`: a square of side `size` centred on (x, y), rotated by
    /// `angle`. C's types are kept: `size` and `k` are floats, the trigonometry
    /// is done in double.
    fn square(&mut self, x: i32, y: i32, size: f32, angle: f32, color: u8) {
        // Redis's truncated constant, not SQRT_2: the pixels must match.
        #[allow(clippy::approx_constant)]
        let mut size = (size as f64 / 1.4142135623) as f32;
        size = (size as f64).round() as f32;
        let mut k = (std::f64::consts::PI / 4.0 + angle as f64) as f32;
        let (mut px, mut py) = ([0i32; 4], [0i32; 4]);
        for j in 0..4 {
            px[j] = ((k as f64).sin() * size as f64 + x as f64).round() as i32;
            py[j] = ((k as f64).cos() * size as f64 + y as f64).round() as i32;
            k = (k as f64 + std::f64::consts::PI / 2.0) as f32;
        }
        for j in 0..4 {
            self.line(px[j], py[j], px[(j + 1) % 4], py[(j + 1) % 4], color);
        }
    }
}

/// Schotter: rows of squares, more and more rotated and displaced going down.
fn schotter(cols: i32, per_row: i32, per_col: i32) -> Canvas {
    let width = cols * 2;
    let padding = if width > 4 { 2 } else { 0 };
    let side = (width - padding * 2) as f32 / per_row as f32;
    let height = (side * per_col as f32 + (padding * 2) as f32) as i32;
    let mut canvas = Canvas::new(width, height, 0);
    for y in 0..per_col {
        for x in 0..per_row {
            let mut sx = (x as f32 * side + side / 2.0 + padding as f32) as i32;
            let mut sy = (y as f32 * side + side / 2.0 + padding as f32) as i32;
            let mut angle = 0f32;
            if y > 1 {
                let mut r1 = rand() as f32 / RAND_MAX as f32 / per_col as f32 * y as f32;
                let mut r2 = rand() as f32 / RAND_MAX as f32 / per_col as f32 * y as f32;
                let mut r3 = rand() as f32 / RAND_MAX as f32 / per_col as f32 * y as f32;
                if rand() % 2 != 0 {
                    r1 = -r1;
                }
                if rand() % 2 != 0 {
                    r2 = -r2;
                }
                if rand() % 2 != 0 {
                    r3 = -r3;
                }
                angle = r1;
                sx = (sx as f32 + r2 * side / 3.0) as i32;
                sy = (sy as f32 + r3 * side / 3.0) as i32;
            }
            canvas.square(sx, sy, side, angle, 1);
        }
    }
    canvas
}

/// Each 2x4 block of pixels as one braille character (U+2800 + bits).
fn render_braille(canvas: &Canvas, out: &mut Vec<u8>) {
    let mut y = 0;
    while y < canvas.height {
        let mut x = 0;
        while x < canvas.width {
            let bits = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (0, 3), (1, 3)];
            let mut byte = 0u32;
            for (bit, (dx, dy)) in bits.iter().enumerate() {
                if canvas.get(x + dx, y + dy) != 0 {
                    byte |= 1 << bit;
                }
            }
            let code = 0x2800 + byte;
            out.extend_from_slice(&[
                0xE0 | (code >> 12) as u8,
                0x80 | ((code >> 6) & 0x3F) as u8,
                0x80 | (code & 0x3F) as u8,
            ]);
            x += 2;
        }
        // As Redis: rows step by 4, so this is nearly always true.
        if y != canvas.height - 1 {
            out.push(b'\n');
        }
        y += 4;
    }
}

struct Skyscraper {
    xoff: i32,
    width: i32,
    height: i32,
    windows: bool,
    color: u8,
}

fn skyscraper(canvas: &mut Canvas, si: &Skyscraper) {
    let starty = canvas.height - 1;
    let endy = starty - si.height + 1;
    let mut y = starty;
    while y >= endy {
        for x in si.xoff..si.xoff + si.width {
            // The roof is four pixels narrower.
            if y == endy && (x <= si.xoff + 1 || x >= si.xoff + si.width - 2) {
                continue;
            }
            let mut color = si.color;
            if si.windows
                && x > si.xoff + 1
                && x < si.xoff + si.width - 2
                && y > endy + 1
                && y < starty - 1
            {
                let relx = x - (si.xoff + 1);
                let rely = y - (endy + 1);
                // Windows two pixels wide, one tall (terminal cells are not
                // square); both pixels of a window share its colour.
                if (relx / 2) % 2 != 0 && rely % 2 != 0 {
                    loop {
                        color = (1 + rand() % 2) as u8;
                        if color != si.color {
                            break;
                        }
                    }
                    if relx % 2 != 0 {
                        color = canvas.get(x - 1, y);
                    }
                }
            }
            canvas.draw(x, y, color);
        }
        y -= 1;
    }
}

/// A skyline in the manner of 8 bit games' parallax backgrounds.
fn skyline(canvas: &mut Canvas) {
    let h = canvas.height;
    // Background buildings, lighter ones behind.
    for color in [2u8, 1] {
        let mut offset = -10;
        while offset < canvas.width {
            offset += rand() % 8;
            let width = 10 + rand() % 9;
            let height = if color == 2 { h / 2 + rand() % h / 2 } else { h / 2 + rand() % h / 3 };
            skyscraper(canvas, &Skyscraper { xoff: offset, width, height, windows: false, color });
            offset += if color == 2 { width / 2 } else { width + 1 };
        }
    }
    // Foreground buildings, with windows.
    let mut offset = -10;
    while offset < canvas.width {
        offset += rand() % 8;
        let mut width = 5 + rand() % 14;
        if width % 4 != 0 {
            width += width % 3;
        }
        let height = h / 3 + rand() % h / 2;
        skyscraper(canvas, &Skyscraper { xoff: offset, width, height, windows: true, color: 0 });
        offset += width + 5;
    }
}

/// Four grey levels, each pixel one space with both colours set.
fn render_colors(canvas: &Canvas, out: &mut Vec<u8>) {
    for y in 0..canvas.height {
        for x in 0..canvas.width {
            let escape: &[u8] = match canvas.get(x, y) {
                1 => b"0;90;100m",
                2 => b"0;37;47m",
                3 => b"0;97;107m",
                _ => b"0;30;40m",
            };
            out.extend_from_slice(b"\x1b[");
            out.extend_from_slice(escape);
            out.extend_from_slice(b" \x1b[0m");
        }
        if y != canvas.height - 1 {
            out.push(b'\n');
        }
    }
}

/// The optional numeric arguments after the command (and VERSION v), with
/// their defaults; Redis's error for one that is not an integer.
fn numbers<const N: usize>(
    args: &[&Bytes],
    defaults: [i64; N],
) -> Result<[i64; N], crate::command::CmdError> {
    let mut values = defaults;
    for (value, arg) in values.iter_mut().zip(args) {
        *value = args::int(arg)?;
    }
    Ok(values)
}

fn version5(args: &[&Bytes]) -> Result<Vec<u8>, crate::command::CmdError> {
    let [cols, per_row, per_col] = numbers(args, [66, 8, 12])?;
    // Limits keep it cheap, as Redis's.
    let canvas = schotter(
        cols.clamp(1, 1000) as i32,
        per_row.clamp(1, 200) as i32,
        per_col.clamp(1, 200) as i32,
    );
    let mut out = Vec::new();
    render_braille(&canvas, &mut out);
    out.extend_from_slice(b"\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. ");
    out.extend_from_slice(REDIS_VERSION.as_bytes());
    out.push(b'\n');
    Ok(out)
}

fn version6(args: &[&Bytes]) -> Result<Vec<u8>, crate::command::CmdError> {
    let [cols, rows] = numbers(args, [80, 20])?;
    let mut canvas = Canvas::new(cols.clamp(1, 1000) as i32, rows.clamp(1, 1000) as i32, 3);
    skyline(&mut canvas);
    let mut out = Vec::new();
    render_colors(&canvas, &mut out);
    out.extend_from_slice(
        b"\nDedicated to the 8 bit game developers of past and present.\n\
          Original 8 bit image from Plaguemon by hikikomori. Redis ver. ",
    );
    out.extend_from_slice(REDIS_VERSION.as_bytes());
    out.push(b'\n');
    Ok(out)
}

/// The art for `args` (the command name included), as `lolwutCommand`
/// chooses it: `VERSION v` picks the drawing by the version string
/// "v.0.0"; without it, the server's own version does.
fn render(args: &[Bytes]) -> Result<Vec<u8>, crate::command::CmdError> {
    let mut version = REDIS_VERSION.to_string();
    let mut rest: Vec<&Bytes> = args.iter().skip(1).collect();
    if args.len() >= 3 && is(&args[1], "version") {
        // C prints the long as unsigned: -1 becomes 4294967295.0.0.
        version = format!("{}.0.0", args::int(&args[2])? as u32);
        rest = args.iter().skip(3).collect();
    }
    let v = version.as_bytes();
    let at = |i: usize| v.get(i).copied().unwrap_or(0);
    if (at(0) == b'5' && at(1) == b'.' && at(2) != b'9')
        || (at(0) == b'4' && at(1) == b'.' && at(2) == b'9')
    {
        version5(&rest)
    } else if (at(0) == b'6' && at(1) == b'.' && at(2) != b'9')
        || (at(0) == b'5' && at(1) == b'.' && at(2) == b'9')
    {
        version6(&rest)
    } else {
        Ok(format!("Redis ver. {REDIS_VERSION}\n").into_bytes())
    }
}

fn lolwut(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let text = render(args)?;
    ctx.out.verbatim("txt", &text);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<Bytes> {
        words.iter().map(|w| Bytes::copy_from_slice(w.as_bytes())).collect()
    }

    #[test]
    fn rand_is_glibcs() {
        // glibc: srand(1) gives these first values.
        let mut r = CRand::new(1);
        assert_eq!([r.rand(), r.rand(), r.rand()], [1804289383, 846930886, 1681692777]);
        let mut r = CRand::new(42);
        assert_eq!(r.rand(), 71876166);
    }

    #[test]
    fn schotter_without_randomness_is_redis() {
        // Two rows or fewer draw no random numbers: redis-server 7.0's
        // output, byte for byte (apart from the version).
        let text = render(&args(&["LOLWUT", "VERSION", "5", "1", "1", "1"])).unwrap();
        let expected = format!(
            "\u{280b}\n\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. {REDIS_VERSION}\n"
        );
        assert_eq!(String::from_utf8(text).unwrap(), expected);
        let text = render(&args(&["lolwut", "version", "5", "10", "2", "2"])).unwrap();
        let art = String::from_utf8(text).unwrap();
        let first = art.lines().next().unwrap();
        assert_eq!(
            first,
            "\u{2800}\u{2864}\u{2824}\u{2824}\u{2824}\u{2864}\u{2824}\u{2824}\u{2824}\u{2844}"
        );
    }

    #[test]
    fn versions_and_errors() {
        let plain = format!("Redis ver. {REDIS_VERSION}\n").into_bytes();
        assert_eq!(render(&args(&["LOLWUT"])).unwrap(), plain);
        assert_eq!(render(&args(&["LOLWUT", "10", "20"])).unwrap(), plain);
        assert_eq!(render(&args(&["LOLWUT", "VERSION", "7"])).unwrap(), plain);
        assert_eq!(render(&args(&["LOLWUT", "VERSION", "-1"])).unwrap(), plain);
        assert_eq!(render(&args(&["LOLWUT", "VERSION"])).unwrap(), plain);
        assert!(render(&args(&["LOLWUT", "VERSION", "x"])).is_err());
        assert!(render(&args(&["LOLWUT", "VERSION", "6", "x"])).is_err());
        let six = render(&args(&["LOLWUT", "VERSION", "6", "5", "3"])).unwrap();
        let six = String::from_utf8(six).unwrap();
        assert_eq!(six.matches("\x1b[0m").count(), 15);
        assert!(six.contains("Plaguemon by hikikomori"));
        // Huge or negative sizes are clamped, not refused.
        assert!(render(&args(&["LOLWUT", "VERSION", "5", "-5", "0", "99999"])).is_ok());
        assert!(render(&args(&["LOLWUT", "VERSION", "6", "-1", "-1"])).is_ok());
    }
}
