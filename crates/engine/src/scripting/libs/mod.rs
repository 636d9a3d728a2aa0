//! The libraries Redis bundles for scripts, written against mlua: `bit`
//! (LuaBitOp), `struct` (Roberto Ierusalimschy's struct), `cjson`
//! (lua-cjson 2.1) and `cmsgpack` (lua-cmsgpack). They follow the C
//! originals Redis ships for everything scripts commonly do; each module
//! says where it differs.

pub mod bit;
pub mod cjson;
pub mod cmsgpack;
pub mod structlib;

use mlua::{Lua, MultiValue, Table, Value};

/// Adds `bit`, `struct`, `cjson` and `cmsgpack` to `globals`.
pub fn register(lua: &Lua, globals: &Table) -> mlua::Result<()> {
    globals.raw_set("bit", bit::open(lua)?)?;
    globals.raw_set("struct", structlib::open(lua)?)?;
    globals.raw_set("cjson", cjson::open(lua)?)?;
    globals.raw_set("cmsgpack", cmsgpack::open(lua)?)?;
    Ok(())
}

/// Lua's name for a value's type (`luaL_typename`).
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Nil => "nil",
        Value::Boolean(_) => "boolean",
        Value::LightUserData(_) | Value::UserData(_) => "userdata",
        Value::Integer(_) | Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Table(_) => "table",
        Value::Function(_) => "function",
        Value::Thread(_) => "thread",
        _ => "userdata",
    }
}

/// `luaL_checknumber`: argument `i` (0-based) as a number, numeric strings
/// included, with Lua's error text.
pub fn check_number(args: &MultiValue, i: usize, fname: &str) -> mlua::Result<f64> {
    let v = args.get(i).cloned().unwrap_or(Value::Nil);
    opt_number(&v).ok_or_else(|| {
        mlua::Error::runtime(format!(
            "bad argument #{} to '{fname}' (number expected, got {})",
            i + 1,
            if matches!(v, Value::Nil) && i >= args.len() { "no value" } else { type_name(&v) }
        ))
    })
}

/// A value as a number, if Lua would convert it.
pub fn opt_number(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        Value::String(s) => {
            let text = s.to_str().ok()?;
            let t = text.trim();
            if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                return u64::from_str_radix(hex, 16).ok().map(|n| n as f64);
            }
            t.parse::<f64>().ok()
        }
        _ => None,
    }
}

/// `luaL_checklstring`: argument `i` as bytes (numbers converted as Lua
/// does, with `%.14g`).
pub fn check_bytes(args: &MultiValue, i: usize, fname: &str) -> mlua::Result<Vec<u8>> {
    let v = args.get(i).cloned().unwrap_or(Value::Nil);
    opt_bytes(&v).ok_or_else(|| {
        mlua::Error::runtime(format!(
            "bad argument #{} to '{fname}' (string expected, got {})",
            i + 1,
            if matches!(v, Value::Nil) && i >= args.len() { "no value" } else { type_name(&v) }
        ))
    })
}

/// A value as bytes, if Lua would convert it (`lua_tolstring`).
pub fn opt_bytes(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        Value::Integer(i) => Some(i.to_string().into_bytes()),
        Value::Number(n) => Some(lua_number_text(*n).into_bytes()),
        _ => None,
    }
}

/// Lua 5.1's `tostring` of a number (`%.14g`).
pub fn lua_number_text(n: f64) -> String {
    if n.is_nan() {
        return if n.is_sign_negative() { "-nan".into() } else { "nan".into() };
    }
    if n.is_infinite() {
        return if n > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let mut out = Vec::new();
    ringdb_protocol::reply::format_g(&mut out, n, 14);
    String::from_utf8(out).unwrap_or_default()
}
