//! `cjson`: lua-cjson 2.1 as Redis bundles it: `cjson.encode`,
//! `cjson.decode`, `cjson.null`, and the settings functions
//! (`encode_max_depth`, `decode_max_depth`, `encode_invalid_numbers`,
//! `decode_invalid_numbers`, `encode_number_precision`,
//! `encode_sparse_array`, `encode_keep_buffer`). Settings belong to the Lua
//! state, as in Redis, so they outlive the script that changes them.
//!
//! Encoding follows lua-cjson: tables whose keys are all positive integers
//! become arrays (unless excessively sparse), other tables objects (an empty
//! table is `{}`), `/` is escaped, numbers use `%.14g`.

use super::type_name;
use mlua::{LightUserData, Lua, MultiValue, Table, Value};
use std::cell::Cell;
use std::rc::Rc;

/// The settings of one Lua state's `cjson`.
struct Config {
    encode_max_depth: Cell<usize>,
    decode_max_depth: Cell<usize>,
    /// 0 = refuse, 1 = allow, 2 = encode as null.
    encode_invalid_numbers: Cell<u8>,
    decode_invalid_numbers: Cell<bool>,
    precision: Cell<usize>,
    sparse_convert: Cell<bool>,
    sparse_ratio: Cell<i64>,
    sparse_safe: Cell<i64>,
    keep_buffer: Cell<bool>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            encode_max_depth: Cell::new(1000),
            decode_max_depth: Cell::new(1000),
            encode_invalid_numbers: Cell::new(0),
            decode_invalid_numbers: Cell::new(true),
            precision: Cell::new(14),
            sparse_convert: Cell::new(false),
            sparse_ratio: Cell::new(2),
            sparse_safe: Cell::new(10),
            keep_buffer: Cell::new(true),
        }
    }
}

fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

fn fail(msg: impl Into<String>) -> mlua::Error {
    mlua::Error::runtime(msg.into())
}

// ---- encoding ----------------------------------------------------------

fn encode_number(cfg: &Config, n: f64, out: &mut Vec<u8>) -> mlua::Result<()> {
    if n.is_nan() || n.is_infinite() {
        match cfg.encode_invalid_numbers.get() {
            0 => return Err(fail("Cannot serialise number: must not be NaN or Inf")),
            2 => {
                out.extend_from_slice(b"null");
                return Ok(());
            }
            _ => {
                out.extend_from_slice(if n.is_nan() {
                    b"nan".as_slice()
                } else if n > 0.0 {
                    b"inf"
                } else {
                    b"-inf"
                });
                return Ok(());
            }
        }
    }
    ringdb_protocol::reply::format_g(out, n, cfg.precision.get());
    Ok(())
}

fn encode_string(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &c in s {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            c if c < 0x20 || c == 0x7f => {
                out.extend_from_slice(format!("\\u{:04x}", c).as_bytes());
            }
            c => out.push(c),
        }
    }
    out.push(b'"');
}

/// The array length of `t` if it is an array (`lua_array_length`): `Ok(None)`
/// for an object.
fn array_length(cfg: &Config, t: &Table) -> mlua::Result<Option<usize>> {
    let mut max: i64 = 0;
    let mut items: i64 = 0;
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        let k = match k {
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => return Ok(None),
        };
        if k < 1.0 || k.fract() != 0.0 || k > i64::MAX as f64 {
            return Ok(None);
        }
        max = max.max(k as i64);
        items += 1;
    }
    let ratio = cfg.sparse_ratio.get();
    if ratio > 0 && max > items * ratio && max > cfg.sparse_safe.get() {
        if !cfg.sparse_convert.get() {
            return Err(fail("Cannot serialise table: excessively sparse array"));
        }
        return Ok(None);
    }
    Ok(Some(max as usize))
}

fn encode_value(cfg: &Config, v: &Value, depth: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    match v {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Integer(i) => encode_number(cfg, *i as f64, out)?,
        Value::Number(n) => encode_number(cfg, *n, out)?,
        Value::String(s) => encode_string(&s.as_bytes(), out),
        Value::Table(t) => {
            let depth = depth + 1;
            if depth > cfg.encode_max_depth.get() {
                return Err(fail(format!("Cannot serialise, excessive nesting ({depth})")));
            }
            match array_length(cfg, t)? {
                Some(len) if len > 0 => {
                    out.push(b'[');
                    for i in 1..=len {
                        if i > 1 {
                            out.push(b',');
                        }
                        encode_value(cfg, &t.raw_get::<Value>(i)?, depth, out)?;
                    }
                    out.push(b']');
                }
                _ => {
                    out.push(b'{');
                    let mut first = true;
                    for pair in t.pairs::<Value, Value>() {
                        let (k, v) = pair?;
                        if !first {
                            out.push(b',');
                        }
                        first = false;
                        match &k {
                            Value::String(s) => encode_string(&s.as_bytes(), out),
                            Value::Integer(_) | Value::Number(_) => {
                                out.push(b'"');
                                let n = super::opt_number(&k).unwrap_or(0.0);
                                encode_number(cfg, n, out)?;
                                out.push(b'"');
                            }
                            other => {
                                return Err(fail(format!(
                                    "Cannot serialise {}: table key must be a number or string",
                                    type_name(other)
                                )))
                            }
                        }
                        out.push(b':');
                        encode_value(cfg, &v, depth, out)?;
                    }
                    out.push(b'}');
                }
            }
        }
        other => {
            return Err(fail(format!("Cannot serialise {}: type not supported", type_name(other))))
        }
    }
    Ok(())
}

// ---- decoding ----------------------------------------------------------

struct Decoder<'a> {
    lua: &'a Lua,
    cfg: &'a Config,
    s: &'a [u8],
    at: usize,
    depth: usize,
}

impl Decoder<'_> {
    fn skip_ws(&mut self) {
        while self.s.get(self.at).is_some_and(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn error(&self, expected: &str) -> mlua::Error {
        let found = match self.s.get(self.at) {
            None => "the end".to_string(),
            Some(_) => "invalid token".to_string(),
        };
        fail(format!("Expected {expected} but found {found} at character {}", self.at + 1))
    }

    fn value(&mut self) -> mlua::Result<Value> {
        self.skip_ws();
        match self.s.get(self.at).copied() {
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'"') => Ok(Value::String(self.lua.create_string(self.string()?)?)),
            Some(b't') if self.s[self.at..].starts_with(b"true") => {
                self.at += 4;
                Ok(Value::Boolean(true))
            }
            Some(b'f') if self.s[self.at..].starts_with(b"false") => {
                self.at += 5;
                Ok(Value::Boolean(false))
            }
            Some(b'n') if self.s[self.at..].starts_with(b"null") => {
                self.at += 4;
                Ok(null())
            }
            Some(c) if c == b'-' || c.is_ascii_digit() || self.invalid_number_start(c) => {
                self.number()
            }
            _ => Err(self.error("value")),
        }
    }

    fn invalid_number_start(&self, c: u8) -> bool {
        self.cfg.decode_invalid_numbers.get() && matches!(c, b'i' | b'I' | b'n' | b'N' | b'+')
    }

    fn number(&mut self) -> mlua::Result<Value> {
        let start = self.at;
        while self
            .s
            .get(self.at)
            .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'+' | b'.'))
        {
            self.at += 1;
        }
        let text = std::str::from_utf8(&self.s[start..self.at]).unwrap_or("");
        let lower = text.to_ascii_lowercase();
        let parsed = if let Some(hex) = lower.strip_prefix("0x") {
            u64::from_str_radix(hex, 16).ok().map(|n| n as f64)
        } else {
            match lower.trim_start_matches(['+', '-']) {
                "inf" | "infinity" if self.cfg.decode_invalid_numbers.get() => {
                    Some(if lower.starts_with('-') { f64::NEG_INFINITY } else { f64::INFINITY })
                }
                "nan" if self.cfg.decode_invalid_numbers.get() => Some(f64::NAN),
                _ => lower
                    .parse::<f64>()
                    .ok()
                    .filter(|_| !lower.contains("inf") && !lower.contains("nan")),
            }
        };
        match parsed {
            Some(n) => Ok(Value::Number(n)),
            None => {
                self.at = start;
                Err(self.error("value"))
            }
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let text = std::str::from_utf8(self.s.get(self.at..self.at + 4)?).ok()?;
        let v = u32::from_str_radix(text, 16).ok()?;
        self.at += 4;
        Some(v)
    }

    fn string(&mut self) -> mlua::Result<Vec<u8>> {
        let start = self.at;
        self.at += 1;
        let mut out = Vec::new();
        loop {
            let Some(&c) = self.s.get(self.at) else {
                self.at = start;
                return Err(self.error("value"));
            };
            self.at += 1;
            match c {
                b'"' => return Ok(out),
                b'\\' => {
                    let Some(&e) = self.s.get(self.at) else {
                        return Err(self.error("value"));
                    };
                    self.at += 1;
                    match e {
                        b'"' | b'\\' | b'/' => out.push(e),
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let Some(mut cp) = self.hex4() else {
                                return Err(fail(format!(
                                    "Expected value but found invalid unicode escape code at character {}",
                                    self.at
                                )));
                            };
                            if (0xD800..0xDC00).contains(&cp)
                                && self.s.get(self.at..self.at + 2) == Some(b"\\u")
                            {
                                self.at += 2;
                                let low = self.hex4().unwrap_or(0);
                                cp = 0x10000
                                    + ((cp - 0xD800) << 10)
                                    + (low.wrapping_sub(0xDC00) & 0x3ff);
                            }
                            let ch = char::from_u32(cp).unwrap_or('\u{fffd}');
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                        }
                        _ => {
                            return Err(fail(format!(
                                "Expected value but found invalid escape code at character {}",
                                self.at
                            )))
                        }
                    }
                }
                c => out.push(c),
            }
        }
    }

    fn nest(&mut self) -> mlua::Result<()> {
        self.depth += 1;
        if self.depth > self.cfg.decode_max_depth.get() {
            return Err(fail(format!(
                "Found too many nested data structures ({}) at character {}",
                self.depth,
                self.at + 1
            )));
        }
        Ok(())
    }

    fn object(&mut self) -> mlua::Result<Value> {
        self.nest()?;
        self.at += 1;
        let t = self.lua.create_table()?;
        self.skip_ws();
        if self.s.get(self.at) == Some(&b'}') {
            self.at += 1;
            self.depth -= 1;
            return Ok(Value::Table(t));
        }
        loop {
            self.skip_ws();
            if self.s.get(self.at) != Some(&b'"') {
                return Err(self.error("object key string"));
            }
            let key = self.string()?;
            self.skip_ws();
            if self.s.get(self.at) != Some(&b':') {
                return Err(self.error("colon"));
            }
            self.at += 1;
            let v = self.value()?;
            t.raw_set(self.lua.create_string(&key)?, v)?;
            self.skip_ws();
            match self.s.get(self.at) {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    break;
                }
                _ => return Err(self.error("comma or object end")),
            }
        }
        self.depth -= 1;
        Ok(Value::Table(t))
    }

    fn array(&mut self) -> mlua::Result<Value> {
        self.nest()?;
        self.at += 1;
        let t = self.lua.create_table()?;
        self.skip_ws();
        if self.s.get(self.at) == Some(&b']') {
            self.at += 1;
            self.depth -= 1;
            return Ok(Value::Table(t));
        }
        let mut i = 1;
        loop {
            let v = self.value()?;
            t.raw_set(i, v)?;
            i += 1;
            self.skip_ws();
            match self.s.get(self.at) {
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    break;
                }
                _ => return Err(self.error("comma or array end")),
            }
        }
        self.depth -= 1;
        Ok(Value::Table(t))
    }
}

// ---- the library ------------------------------------------------------

fn arg_number(
    args: &MultiValue,
    i: usize,
    name: &str,
    lo: i64,
    hi: i64,
) -> mlua::Result<Option<i64>> {
    match args.get(i) {
        None | Some(Value::Nil) => Ok(None),
        Some(v) => {
            let n = super::opt_number(v).ok_or_else(|| {
                fail(format!(
                    "bad argument #{} to '{name}' (number expected, got {})",
                    i + 1,
                    type_name(v)
                ))
            })? as i64;
            if n < lo || n > hi {
                return Err(fail(format!(
                    "bad argument #{} to '{name}' (expected integer between {lo} and {hi})",
                    i + 1
                )));
            }
            Ok(Some(n))
        }
    }
}

pub fn open(lua: &Lua) -> mlua::Result<Table> {
    let cfg = Rc::new(Config::default());
    let t = lua.create_table()?;
    let c = cfg.clone();
    t.raw_set(
        "encode",
        lua.create_function(move |lua, args: MultiValue| {
            if args.len() != 1 {
                return Err(fail("bad argument #1 to 'encode' (expected 1 argument)"));
            }
            let mut out = Vec::new();
            encode_value(&c, &args[0], 0, &mut out)?;
            lua.create_string(&out)
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "decode",
        lua.create_function(move |lua, args: MultiValue| {
            if args.len() != 1 {
                return Err(fail("bad argument #1 to 'decode' (expected 1 argument)"));
            }
            let s = super::check_bytes(&args, 0, "decode")?;
            let mut d = Decoder { lua, cfg: &c, s: &s, at: 0, depth: 0 };
            let v = d.value()?;
            d.skip_ws();
            if d.at != s.len() {
                return Err(d.error("the end"));
            }
            Ok(v)
        })?,
    )?;
    let depth_setting = |get: fn(&Config) -> &Cell<usize>, name: &'static str| {
        let c = cfg.clone();
        lua.create_function(move |_, args: MultiValue| {
            if let Some(n) = arg_number(&args, 0, name, 1, i32::MAX as i64)? {
                get(&c).set(n as usize);
            }
            Ok(get(&c).get() as f64)
        })
    };
    t.raw_set("encode_max_depth", depth_setting(|c| &c.encode_max_depth, "encode_max_depth")?)?;
    t.raw_set("decode_max_depth", depth_setting(|c| &c.decode_max_depth, "decode_max_depth")?)?;
    let c = cfg.clone();
    t.raw_set(
        "encode_number_precision",
        lua.create_function(move |_, args: MultiValue| {
            if let Some(n) = arg_number(&args, 0, "encode_number_precision", 1, 14)? {
                c.precision.set(n as usize);
            }
            Ok(c.precision.get() as f64)
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "encode_invalid_numbers",
        lua.create_function(move |lua, args: MultiValue| {
            match args.front() {
                Some(Value::Boolean(b)) => c.encode_invalid_numbers.set(*b as u8),
                Some(Value::String(s)) if &*s.as_bytes() == b"null" => {
                    c.encode_invalid_numbers.set(2)
                }
                Some(Value::String(s)) if &*s.as_bytes() == b"on" => {
                    c.encode_invalid_numbers.set(1)
                }
                Some(Value::String(s)) if &*s.as_bytes() == b"off" => {
                    c.encode_invalid_numbers.set(0)
                }
                None | Some(Value::Nil) => {}
                Some(_) => {
                    return Err(fail(
                        "bad argument #1 to 'encode_invalid_numbers' (invalid option)",
                    ))
                }
            }
            Ok(match c.encode_invalid_numbers.get() {
                0 => Value::Boolean(false),
                1 => Value::Boolean(true),
                _ => Value::String(lua.create_string("null")?),
            })
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "decode_invalid_numbers",
        lua.create_function(move |_, args: MultiValue| {
            if let Some(Value::Boolean(b)) = args.front() {
                c.decode_invalid_numbers.set(*b);
            }
            Ok(c.decode_invalid_numbers.get())
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "encode_keep_buffer",
        lua.create_function(move |_, args: MultiValue| {
            if let Some(Value::Boolean(b)) = args.front() {
                c.keep_buffer.set(*b);
            }
            Ok(c.keep_buffer.get())
        })?,
    )?;
    let c = cfg;
    t.raw_set(
        "encode_sparse_array",
        lua.create_function(move |_, args: MultiValue| {
            if let Some(Value::Boolean(b)) = args.front() {
                c.sparse_convert.set(*b);
            }
            if let Some(n) = arg_number(&args, 1, "encode_sparse_array", 0, i32::MAX as i64)? {
                c.sparse_ratio.set(n);
            }
            if let Some(n) = arg_number(&args, 2, "encode_sparse_array", 0, i32::MAX as i64)? {
                c.sparse_safe.set(n);
            }
            Ok((c.sparse_convert.get(), c.sparse_ratio.get() as f64, c.sparse_safe.get() as f64))
        })?,
    )?;
    t.raw_set("null", null())?;
    t.raw_set("_NAME", "cjson")?;
    t.raw_set("_VERSION", "2.1.0")?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use mlua::Lua;

    #[test]
    fn encode_and_decode_as_lua_cjson() {
        let lua = Lua::new();
        lua.globals().set("cjson", super::open(&lua).unwrap()).unwrap();
        let s = |code: &str| lua.load(code).eval::<String>().unwrap();
        assert_eq!(s("return cjson.encode({1, 2, 'x/y'})"), r#"[1,2,"x\/y"]"#);
        assert_eq!(s("return cjson.encode({})"), "{}");
        assert_eq!(s("return cjson.encode({a = {b = true}})"), r#"{"a":{"b":true}}"#);
        assert_eq!(s("return cjson.encode(0.1)"), "0.1");
        assert_eq!(s("return cjson.encode(cjson.null)"), "null");
        assert_eq!(
            s(r#"return table.concat(cjson.decode("[0.0, -5e3, -1, 0.3e-3, 1023.2, 0e10]"), " ")"#),
            "0 -5000 -1 0.0003 1023.2 0"
        );
        assert_eq!(s(r#"return cjson.decode('{"k": "\\u00e9\\n"}').k"#), "é\n");
        assert!(lua.load("return cjson.decode('[1,2') ").exec().is_err());
        assert!(lua.load("local t = {} t[false] = 1 return cjson.encode(t)").exec().is_err());
        assert!(lua.load("return cjson.encode({[1] = 1, [100] = 2})").exec().is_err());
        assert!(lua.load("return cjson.encode(0/0)").exec().is_err());
        lua.load("cjson.decode_max_depth(1)").exec().unwrap();
        assert!(lua.load(r#"return cjson.decode('{"a": {"b": 1}}')"#).exec().is_err());
        assert!(lua.load(r#"return cjson.decode('null') == cjson.null"#).eval::<bool>().unwrap());
    }
}
