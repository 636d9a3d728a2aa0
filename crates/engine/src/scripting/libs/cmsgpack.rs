//! `cmsgpack`: lua-cmsgpack as Redis bundles it: `pack(...)`,
//! `unpack(s)`, `unpack_one(s [, offset])`, `unpack_limit(s, limit [,
//! offset])`, with its encoding choices (smallest integer form, float32
//! when exact, tables with only 1..n keys as arrays, nesting cut at 16
//! levels with nil) and error texts.

use super::{check_bytes, check_number};
use mlua::{Lua, MultiValue, Table, Value};

/// lua-cmsgpack's `LUACMSGPACK_MAX_NESTING`.
const MAX_NESTING: usize = 16;
/// Deepest nesting `unpack` follows (the C library recurses without a
/// limit; a bound keeps hostile input from exhausting the stack).
const MAX_DECODE_DEPTH: usize = 128;

fn encode_int(n: i64, out: &mut Vec<u8>) {
    if n >= 0 {
        match n {
            0..=127 => out.push(n as u8),
            128..=0xff => out.extend_from_slice(&[0xcc, n as u8]),
            0x100..=0xffff => {
                out.push(0xcd);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            }
            0x1_0000..=0xffff_ffff => {
                out.push(0xce);
                out.extend_from_slice(&(n as u32).to_be_bytes());
            }
            _ => {
                out.push(0xcf);
                out.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_number(n: f64, out: &mut Vec<u8>) {
    // IS_INT64_EQUIVALENT: integral and representable.
    if n.fract() == 0.0 && n >= -(2f64.powi(63)) && n < 2f64.powi(63) {
        encode_int(n as i64, out);
    } else if (n as f32) as f64 == n || n.is_nan() {
        out.push(0xca);
        out.extend_from_slice(&(n as f32).to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_len(len: usize, small: u8, small_max: usize, codes: [u8; 2], out: &mut Vec<u8>) {
    if len <= small_max {
        out.push(small | len as u8);
    } else if len <= 0xffff {
        out.push(codes[0]);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(codes[1]);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
}

fn encode_bytes(s: &[u8], out: &mut Vec<u8>) {
    let len = s.len();
    if len < 32 {
        out.push(0xa0 | len as u8);
    } else if len <= 0xff {
        out.extend_from_slice(&[0xd9, len as u8]);
    } else if len <= 0xffff {
        out.push(0xda);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
    out.extend_from_slice(s);
}

/// `table_is_an_array`: every key a positive integer and as many keys as
/// the largest.
fn is_array(t: &Table) -> mlua::Result<bool> {
    let (mut count, mut max) = (0f64, 0f64);
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        let n = match k {
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => return Ok(false),
        };
        if n <= 0.0 || n.fract() != 0.0 {
            return Ok(false);
        }
        max = f64::max(max, n);
        count += 1.0;
    }
    Ok(max == count)
}

fn encode_value(v: &Value, level: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    match v {
        Value::String(s) => encode_bytes(&s.as_bytes(), out),
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => encode_number(*i as f64, out),
        Value::Number(n) => encode_number(*n, out),
        Value::Table(t) if level < MAX_NESTING => {
            if is_array(t)? {
                let len = t.raw_len();
                encode_len(len, 0x90, 15, [0xdc, 0xdd], out);
                for i in 1..=len {
                    encode_value(&t.raw_get::<Value>(i)?, level + 1, out)?;
                }
            } else {
                // Encoded as read: collecting would hold a Lua stack slot per
                // value, and there are only about 8000.
                encode_len(t.pairs::<Value, Value>().count(), 0x80, 15, [0xde, 0xdf], out);
                for pair in t.pairs::<Value, Value>() {
                    let (k, v) = pair?;
                    encode_value(&k, level + 1, out)?;
                    encode_value(&v, level + 1, out)?;
                }
            }
        }
        _ => out.push(0xc0),
    }
    Ok(())
}

enum DecodeError {
    Eof,
    BadFormat,
}

struct Cursor<'a> {
    s: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], DecodeError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.s.len()).ok_or(DecodeError::Eof)?;
        let bytes = &self.s[self.at..end];
        self.at = end;
        Ok(bytes)
    }

    fn uint(&mut self, n: usize) -> Result<u64, DecodeError> {
        Ok(self.take(n)?.iter().fold(0u64, |acc, &b| (acc << 8) | b as u64))
    }

    fn decode(&mut self, lua: &Lua, depth: usize) -> Result<Value, DecodeError> {
        if depth > MAX_DECODE_DEPTH {
            return Err(DecodeError::BadFormat);
        }
        let tag = self.take(1)?[0];
        Ok(match tag {
            0x00..=0x7f => Value::Number(tag as f64),
            0x80..=0x8f => self.map(lua, (tag & 0x0f) as usize, depth)?,
            0x90..=0x9f => self.array(lua, (tag & 0x0f) as usize, depth)?,
            0xa0..=0xbf => self.string(lua, (tag & 0x1f) as usize)?,
            0xc0 => Value::Nil,
            0xc2 => Value::Boolean(false),
            0xc3 => Value::Boolean(true),
            0xc4 | 0xd9 => {
                let n = self.uint(1)? as usize;
                self.string(lua, n)?
            }
            0xc5 | 0xda => {
                let n = self.uint(2)? as usize;
                self.string(lua, n)?
            }
            0xc6 | 0xdb => {
                let n = self.uint(4)? as usize;
                self.string(lua, n)?
            }
            0xca => Value::Number(f32::from_bits(self.uint(4)? as u32) as f64),
            0xcb => Value::Number(f64::from_bits(self.uint(8)?)),
            0xcc => Value::Number(self.uint(1)? as f64),
            0xcd => Value::Number(self.uint(2)? as f64),
            0xce => Value::Number(self.uint(4)? as f64),
            0xcf => Value::Number(self.uint(8)? as f64),
            0xd0 => Value::Number(self.uint(1)? as u8 as i8 as f64),
            0xd1 => Value::Number(self.uint(2)? as u16 as i16 as f64),
            0xd2 => Value::Number(self.uint(4)? as u32 as i32 as f64),
            0xd3 => Value::Number(self.uint(8)? as i64 as f64),
            0xdc => {
                let n = self.uint(2)? as usize;
                self.array(lua, n, depth)?
            }
            0xdd => {
                let n = self.uint(4)? as usize;
                self.array(lua, n, depth)?
            }
            0xde => {
                let n = self.uint(2)? as usize;
                self.map(lua, n, depth)?
            }
            0xdf => {
                let n = self.uint(4)? as usize;
                self.map(lua, n, depth)?
            }
            0xe0..=0xff => Value::Number(tag as i8 as f64),
            _ => return Err(DecodeError::BadFormat),
        })
    }

    fn string(&mut self, lua: &Lua, n: usize) -> Result<Value, DecodeError> {
        let bytes = self.take(n)?;
        lua.create_string(bytes).map(Value::String).map_err(|_| DecodeError::BadFormat)
    }

    fn array(&mut self, lua: &Lua, n: usize, depth: usize) -> Result<Value, DecodeError> {
        // Every element takes at least one byte: never reserve beyond that.
        let room = n.min(self.s.len() - self.at);
        let t = lua.create_table_with_capacity(room, 0).map_err(|_| DecodeError::BadFormat)?;
        for i in 1..=n {
            let v = self.decode(lua, depth + 1)?;
            t.raw_set(i, v).map_err(|_| DecodeError::BadFormat)?;
        }
        Ok(Value::Table(t))
    }

    fn map(&mut self, lua: &Lua, n: usize, depth: usize) -> Result<Value, DecodeError> {
        let t = lua.create_table().map_err(|_| DecodeError::BadFormat)?;
        for _ in 0..n {
            let k = self.decode(lua, depth + 1)?;
            let v = self.decode(lua, depth + 1)?;
            if !k.is_nil() {
                t.raw_set(k, v).map_err(|_| DecodeError::BadFormat)?;
            }
        }
        Ok(Value::Table(t))
    }
}

/// `mp_unpack_full`.
fn unpack_full(lua: &Lua, s: &[u8], limit: i64, offset: i64) -> mlua::Result<MultiValue> {
    let decode_all = limit == 0 && offset == 0;
    if offset < 0 || limit < 0 {
        return Err(mlua::Error::runtime(format!(
            "Invalid request to unpack with offset of {offset} and limit of {}.",
            s.len()
        )));
    }
    if offset as usize > s.len() {
        return Err(mlua::Error::runtime(format!(
            "Start offset {offset} greater than input length {}.",
            s.len()
        )));
    }
    let limit = if decode_all { i64::MAX } else { limit };
    let mut c = Cursor { s, at: offset as usize };
    let mut values = Vec::new();
    let mut count = 0;
    while c.at < s.len() && count < limit {
        match c.decode(lua, 0) {
            Ok(v) => values.push(v),
            Err(DecodeError::Eof) => return Err(mlua::Error::runtime("Missing bytes in input.")),
            Err(DecodeError::BadFormat) => {
                return Err(mlua::Error::runtime("Bad data format in input."))
            }
        }
        count += 1;
    }
    if !decode_all {
        let next = if c.at >= s.len() { -1.0 } else { c.at as f64 };
        values.insert(0, Value::Number(next));
    }
    Ok(MultiValue::from_iter(values))
}

fn opt_int(args: &MultiValue, i: usize, name: &str) -> mlua::Result<i64> {
    match args.get(i) {
        None | Some(Value::Nil) => Ok(0),
        Some(_) => Ok(check_number(args, i, name)? as i64),
    }
}

pub fn open(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "pack",
        lua.create_function(|lua, args: MultiValue| {
            if args.is_empty() {
                return Err(mlua::Error::runtime("MessagePack pack needs input."));
            }
            let mut out = Vec::new();
            for v in args.iter() {
                encode_value(v, 0, &mut out)?;
            }
            lua.create_string(&out)
        })?,
    )?;
    t.raw_set(
        "unpack",
        lua.create_function(|lua, args: MultiValue| {
            let s = check_bytes(&args, 0, "unpack")?;
            unpack_full(lua, &s, 0, 0)
        })?,
    )?;
    t.raw_set(
        "unpack_one",
        lua.create_function(|lua, args: MultiValue| {
            let s = check_bytes(&args, 0, "unpack_one")?;
            let offset = opt_int(&args, 1, "unpack_one")?;
            unpack_full(lua, &s, 1, offset)
        })?,
    )?;
    t.raw_set(
        "unpack_limit",
        lua.create_function(|lua, args: MultiValue| {
            let s = check_bytes(&args, 0, "unpack_limit")?;
            let limit = check_number(&args, 1, "unpack_limit")? as i64;
            let offset = opt_int(&args, 2, "unpack_limit")?;
            unpack_full(lua, &s, limit, offset)
        })?,
    )?;
    t.raw_set("_NAME", "cmsgpack")?;
    t.raw_set("_VERSION", "lua-cmsgpack 0.4.0")?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use mlua::Lua;

    fn hex(lua: &Lua, code: &str) -> String {
        let s: mlua::LuaString = lua.load(code).eval().unwrap();
        s.as_bytes().iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn encodings_match_lua_cmsgpack() {
        let lua = Lua::new();
        lua.globals().set("cmsgpack", super::open(&lua).unwrap()).unwrap();
        assert_eq!(hex(&lua, "return cmsgpack.pack(0.1)"), "cb3fb999999999999a");
        assert_eq!(hex(&lua, "return cmsgpack.pack(-1099511627776)"), "d3ffffff0000000000");
        assert_eq!(
            hex(&lua, "return cmsgpack.pack({1, 2}, 'ab', true, 1.5)"),
            "920102a26162c3ca3fc00000"
        );
        assert_eq!(hex(&lua, "return cmsgpack.pack({})"), "90");
        let ok = |code: &str| assert!(lua.load(code).eval::<bool>().unwrap(), "{code}");
        ok("local t = cmsgpack.unpack(cmsgpack.pack({a = 1, b = {1, 2, 3}})) return t.a == 1 and t.b[3] == 3");
        ok("local o, v = cmsgpack.unpack_one(cmsgpack.pack(1, 2), 0) return o == 1 and v == 1");
        ok("local o, v = cmsgpack.unpack_limit(cmsgpack.pack(1, 2), 1, 1) return o == -1 and v == 2");
        ok("local a = {y = 5} a.x = a local r = cmsgpack.unpack(cmsgpack.pack(a)) return r.x.x.y == 5");
        ok("local m = {} for i = 1, 20000 do m[tostring(i)] = i end return cmsgpack.unpack(cmsgpack.pack(m))['777'] == 777");
        assert!(lua.load("return cmsgpack.unpack('\\146\\1')").exec().is_err());
        assert!(lua.load("return cmsgpack.unpack('\\193')").exec().is_err());
    }
}
