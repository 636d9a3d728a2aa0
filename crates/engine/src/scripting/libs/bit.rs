//! `bit`: LuaBitOp 1.0, 32-bit operations on Lua numbers (results are
//! signed 32-bit integers, as LuaBitOp returns them).

use super::check_number;
use mlua::{Lua, MultiValue, Table};

/// LuaBitOp's `barg`: the number reduced to 32 bits the way the library
/// does it (rounded, then taken modulo 2^32).
fn to_bits(n: f64) -> u32 {
    (n + 6_755_399_441_055_744.0).to_bits() as u32
}

fn arg(args: &MultiValue, i: usize, name: &str) -> mlua::Result<u32> {
    Ok(to_bits(check_number(args, i, name)?))
}

fn result(b: u32) -> f64 {
    b as i32 as f64
}

/// A function of all its arguments folded with `op` (band, bor, bxor).
fn fold(lua: &Lua, name: &'static str, op: fn(u32, u32) -> u32) -> mlua::Result<mlua::Function> {
    lua.create_function(move |_, args: MultiValue| {
        let mut acc = arg(&args, 0, name)?;
        for i in 1..args.len() {
            acc = op(acc, arg(&args, i, name)?);
        }
        Ok(result(acc))
    })
}

/// A shift or rotation of the first argument by the second (mod 32).
fn shift(lua: &Lua, name: &'static str, op: fn(u32, u32) -> u32) -> mlua::Result<mlua::Function> {
    lua.create_function(move |_, args: MultiValue| {
        let x = arg(&args, 0, name)?;
        let n = arg(&args, 1, name)? & 31;
        Ok(result(op(x, n)))
    })
}

fn tohex(x: u32, n: i32) -> String {
    let upper = n < 0;
    let digits = n.unsigned_abs().min(8) as usize;
    let full = if upper { format!("{x:08X}") } else { format!("{x:08x}") };
    full[8 - digits..].to_string()
}

pub fn open(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "tobit",
        lua.create_function(|_, args: MultiValue| Ok(result(arg(&args, 0, "tobit")?)))?,
    )?;
    t.raw_set(
        "bnot",
        lua.create_function(|_, args: MultiValue| Ok(result(!arg(&args, 0, "bnot")?)))?,
    )?;
    t.raw_set(
        "bswap",
        lua.create_function(|_, args: MultiValue| {
            Ok(result(arg(&args, 0, "bswap")?.swap_bytes()))
        })?,
    )?;
    t.raw_set(
        "tohex",
        lua.create_function(|_, args: MultiValue| {
            let x = arg(&args, 0, "tohex")?;
            let n = if args.len() > 1 { arg(&args, 1, "tohex")? as i32 } else { 8 };
            Ok(tohex(x, n))
        })?,
    )?;
    t.raw_set("band", fold(lua, "band", |a, b| a & b)?)?;
    t.raw_set("bor", fold(lua, "bor", |a, b| a | b)?)?;
    t.raw_set("bxor", fold(lua, "bxor", |a, b| a ^ b)?)?;
    t.raw_set("lshift", shift(lua, "lshift", |x, n| x << n)?)?;
    t.raw_set("rshift", shift(lua, "rshift", |x, n| x >> n)?)?;
    t.raw_set("arshift", shift(lua, "arshift", |x, n| ((x as i32) >> n) as u32)?)?;
    t.raw_set("rol", shift(lua, "rol", |x, n| x.rotate_left(n))?)?;
    t.raw_set("ror", shift(lua, "ror", |x, n| x.rotate_right(n))?)?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use mlua::Lua;

    #[test]
    fn operations_match_luabitop() {
        let lua = Lua::new();
        lua.globals().set("bit", super::open(&lua).unwrap()).unwrap();
        let check = |code: &str| assert!(lua.load(code).eval::<bool>().unwrap(), "{code}");
        check("return bit.tobit(0xffffffff) == -1");
        check("return bit.tobit(2^32 + 5) == 5");
        check("return bit.band(0x12345678, 0xff) == 0x78");
        check("return bit.bor(1, 2, 4, 8, 16, 32, 64, 128) == 255");
        check("return bit.bxor(1, 2) == 3");
        check("return bit.bnot(0) == -1");
        check("return bit.lshift(1, 31) == -2147483648");
        check("return bit.rshift(-1, 28) == 15");
        check("return bit.arshift(-256, 4) == -16");
        check("return bit.rol(0x12345678, 12) == 0x45678123");
        check("return bit.ror(0x12345678, 12) == 0x67812345");
        check("return bit.bswap(0x12345678) == 0x78563412");
        check("return bit.tohex(1) == '00000001'");
        check("return bit.tohex(-1, -4) == 'FFFF'");
        check("return bit.tohex(0x1234abcd, 3) == 'bcd'");
        assert!(lua.load("return bit.band('x')").exec().is_err());
    }
}
