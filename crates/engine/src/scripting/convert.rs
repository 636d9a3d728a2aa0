//! Conversions between RESP and Lua, with Redis's rules (script_lua.c).
//!
//! RESP → Lua (a `redis.call` reply): integer → number, bulk → string,
//! null bulk / null array → `false`, status → `{ok=…}`, error → `{err=…}`,
//! array → table; RESP3: null → `nil`, boolean → boolean, double →
//! `{double=…}`, map → `{map={…}}`, set → `{set={…}}`, big number →
//! `{big_number=…}`, verbatim → `{verbatim_string={format=…, string=…}}`.
//!
//! Lua → RESP (a script's result): number → integer (truncated), string →
//! bulk, `true` → 1 (RESP2) or true, `false` → null (RESP2) or false, table
//! → `{err=…}` error, `{ok=…}` status, `{double=…}`, `{big_number=…}`,
//! `{verbatim_string=…}`, `{map=…}`, `{set=…}`, else an array up to the
//! first `nil`; anything else → null.

use mlua::{ffi, Lua, Table, Value};
use ringdb_protocol::{ReplyWriter, Resp};
use std::ffi::{c_int, CStr};

/// Deepest nesting of tables a script's result may have (a table that
/// contains itself would otherwise recurse for ever).
pub const MAX_DEPTH: usize = 128;

/// Redis's `luaPushErrorBuff` text: `-CODE message` keeps its code,
/// anything else gets `ERR`; CR/LF are trimmed from both ends.
pub fn error_text(raw: &[u8]) -> Vec<u8> {
    let (code, msg) = error_parts(raw);
    [code, b" ", msg].concat()
}

/// The code and the message of [`error_text`].
fn error_parts(raw: &[u8]) -> (&[u8], &[u8]) {
    let (code, msg): (&[u8], &[u8]) = match raw.strip_prefix(b"-") {
        Some(rest) => match rest.iter().position(|&c| c == b' ') {
            Some(sp) => (&rest[..sp], &rest[sp + 1..]),
            None => (b"ERR", rest),
        },
        None => (b"ERR", raw),
    };
    let is_crlf = |c: &u8| *c == b'\r' || *c == b'\n';
    let start = msg.iter().position(|c| !is_crlf(c)).unwrap_or(msg.len());
    let end = msg.iter().rposition(|c| !is_crlf(c)).map_or(start, |e| e + 1);
    (code, &msg[start..end.max(start)])
}

/// The field of an error table whose error INFO errorstats has counted
/// already (an error of a command the script called): the script's reply
/// does not count it again.
pub const COUNTED: &CStr = c"ignore_error_stats_update";

/// An error table `{err = <error_text(raw)>}`.
pub fn error_table(lua: &Lua, raw: &[u8]) -> mlua::Result<Table> {
    let t = lua.create_table_with_capacity(0, 1)?;
    t.raw_set("err", lua.create_string(error_text(raw))?)?;
    Ok(t)
}

/// An error reply line for `text` as [`error_text`] words it (`-CODE
/// message\r\n`, any CR or LF inside made a space).
pub fn error_reply(out: &mut Vec<u8>, text: &[u8]) {
    let (code, msg) = error_parts(text);
    out.push(b'-');
    out.extend_from_slice(code);
    out.push(b' ');
    out.extend(msg.iter().map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c }));
    out.extend_from_slice(b"\r\n");
}

/// Pushes the reply at the start of `buf` onto the Lua stack, as a script
/// sees it (the rules above); returns the bytes it used. The reply was
/// produced by ringdb itself, but a malformed one is still an error, never
/// a panic.
///
/// # Safety
/// `state` is a Lua state inside a protected call: the Lua API raises its
/// memory errors with a longjmp, and nothing here owns anything that
/// would need dropping.
pub unsafe fn push_reply(state: *mut ffi::lua_State, buf: &[u8]) -> Result<usize, &'static str> {
    const BAD: &str = "malformed reply";
    // Room for a table, a key and a value at each level of nesting.
    if ffi::lua_checkstack(state, 3) == 0 {
        return Err("reply nested too deep");
    }
    let line_end = buf.windows(2).position(|w| w == b"\r\n").ok_or(BAD)?;
    let line = buf.get(1..line_end).ok_or(BAD)?;
    let after = line_end + 2;
    let number = || -> Result<i64, &'static str> {
        std::str::from_utf8(line).ok().and_then(|s| s.parse().ok()).ok_or(BAD)
    };
    let blob = |len: i64| -> Result<&[u8], &'static str> {
        let len = usize::try_from(len).map_err(|_| BAD)?;
        buf.get(after..after.checked_add(len).ok_or(BAD)?).ok_or(BAD)
    };
    let push = |s: &[u8]| {
        ffi::lua_pushlstring(state, s.as_ptr().cast(), s.len());
    };
    // `{field = <what push_value pushes>}`.
    let single = |field: &CStr, push_value: &dyn Fn()| {
        ffi::lua_createtable(state, 0, 1);
        push_value();
        ffi::lua_setfield(state, -2, field.as_ptr());
    };
    let nested =
        |at: usize| -> Result<usize, &'static str> { push_reply(state, buf.get(at..).ok_or(BAD)?) };
    match buf[0] {
        b'+' => single(c"ok", &|| push(line)),
        b'-' => single(c"err", &|| {
            let (code, msg) = error_parts(&buf[..line_end]);
            push(code);
            push(b" ");
            push(msg);
            ffi::lua_concat(state, 3);
        }),
        b':' => ffi::lua_pushnumber(state, number()? as f64),
        b'$' => {
            let len = number()?;
            if len < 0 {
                ffi::lua_pushboolean(state, 0);
                return Ok(after);
            }
            let data = blob(len)?;
            push(data);
            return Ok(after + data.len() + 2);
        }
        b'*' | b'>' => {
            let n = number()?;
            if n < 0 {
                ffi::lua_pushboolean(state, 0);
                return Ok(after);
            }
            ffi::lua_createtable(state, n.clamp(0, 1 << 16) as c_int, 0);
            let mut at = after;
            for i in 1..=n.min(c_int::MAX as i64) as c_int {
                at += nested(at)?;
                ffi::lua_rawseti_(state, -2, i);
            }
            return Ok(at);
        }
        b'%' | b'~' => {
            let is_map = buf[0] == b'%';
            ffi::lua_createtable(state, 0, 1);
            ffi::lua_createtable(state, 0, 0);
            let mut at = after;
            for _ in 0..number()?.max(0) {
                at += nested(at)?;
                if is_map {
                    at += nested(at)?;
                } else {
                    ffi::lua_pushboolean(state, 1);
                }
                if ffi::lua_type(state, -2) == ffi::LUA_TNIL {
                    ffi::lua_settop(state, -3);
                } else {
                    ffi::lua_rawset(state, -3);
                }
            }
            let field = if is_map { c"map" } else { c"set" };
            ffi::lua_setfield(state, -2, field.as_ptr());
            return Ok(at);
        }
        b'|' => {
            // Attributes are not shown to scripts: skip them, then the reply.
            let mut at = after;
            for _ in 0..number()?.max(0) * 2 {
                at += nested(at)?;
                ffi::lua_settop(state, -2);
            }
            return Ok(at + nested(at)?);
        }
        b'_' => ffi::lua_pushnil(state),
        b'#' => ffi::lua_pushboolean(state, (line == b"t") as c_int),
        b',' => {
            let d = match line {
                b"inf" => f64::INFINITY,
                b"-inf" => f64::NEG_INFINITY,
                _ => ringdb_types::number::parse_f64(line).unwrap_or(f64::NAN),
            };
            single(c"double", &|| ffi::lua_pushnumber(state, d));
        }
        b'(' => single(c"big_number", &|| push(line)),
        b'=' => {
            let data = blob(number()?)?;
            let (format, text) =
                if data.len() >= 4 { (&data[..3], &data[4..]) } else { (data, &[][..]) };
            single(c"verbatim_string", &|| {
                ffi::lua_createtable(state, 0, 2);
                push(format);
                ffi::lua_setfield(state, -2, c"format".as_ptr());
                push(text);
                ffi::lua_setfield(state, -2, c"string".as_ptr());
            });
            return Ok(after + data.len() + 2);
        }
        _ => return Err(BAD),
    }
    Ok(after)
}

/// Writes a script's result `value` as a reply. `script_resp` is the
/// protocol the script chose with `redis.setresp` (it decides how booleans
/// are returned, as in Redis); `out` writes in the client's protocol.
pub fn lua_to_resp(value: &Value, script_resp: Resp, out: &mut ReplyWriter) {
    write_value(value, script_resp, out, 0)
}

fn write_value(value: &Value, script_resp: Resp, out: &mut ReplyWriter, depth: usize) {
    if depth > MAX_DEPTH {
        out.error("ERR reached lua stack limit");
        return;
    }
    match value {
        Value::String(s) => out.bulk(&s.as_bytes()),
        Value::Boolean(b) => match (script_resp, b) {
            (Resp::V2, true) => out.int(1),
            (Resp::V2, false) => out.null(),
            (Resp::V3, b) => out.bool(*b),
        },
        Value::Integer(i) => out.int(*i),
        Value::Number(n) => out.int(*n as i64),
        Value::Table(t) => write_table(t, script_resp, out, depth),
        _ => out.null(),
    }
}

fn string_field(t: &Table, field: &str) -> Option<mlua::LuaString> {
    match t.raw_get::<Value>(field).ok()? {
        Value::String(s) => Some(s),
        _ => None,
    }
}

fn write_table(t: &Table, script_resp: Resp, out: &mut ReplyWriter, depth: usize) {
    if let Some(err) = string_field(t, "err") {
        let text = err.as_bytes();
        out.error(&String::from_utf8_lossy(&text));
        return;
    }
    if let Some(ok) = string_field(t, "ok") {
        let text: String = String::from_utf8_lossy(&ok.as_bytes())
            .chars()
            .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
            .collect();
        out.simple(&text);
        return;
    }
    match t.raw_get::<Value>("double") {
        Ok(Value::Number(d)) => return out.double(d),
        Ok(Value::Integer(i)) => return out.double(i as f64),
        _ => {}
    }
    if let Some(big) = string_field(t, "big_number") {
        let text: Vec<u8> = big
            .as_bytes()
            .iter()
            .map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c })
            .collect();
        if out.is_resp3() {
            out.buf.push(b'(');
            out.buf.extend_from_slice(&text);
            out.buf.extend_from_slice(b"\r\n");
        } else {
            out.bulk(&text);
        }
        return;
    }
    if let Ok(Value::Table(v)) = t.raw_get::<Value>("verbatim_string") {
        if let (Some(format), Some(text)) = (string_field(&v, "format"), string_field(&v, "string"))
        {
            let format = String::from_utf8_lossy(&format.as_bytes()).into_owned();
            out.verbatim(&format, &text.as_bytes());
            return;
        }
    }
    // Values are written as they are read, never collected: every live mlua
    // value holds a slot of a Lua stack limited to about 8000.
    if let Ok(Value::Table(map)) = t.raw_get::<Value>("map") {
        out.map(map.pairs::<Value, Value>().count());
        for (k, v) in map.pairs::<Value, Value>().flatten() {
            write_value(&k, script_resp, out, depth + 1);
            write_value(&v, script_resp, out, depth + 1);
        }
        return;
    }
    if let Ok(Value::Table(set)) = t.raw_get::<Value>("set") {
        out.set(set.pairs::<Value, Value>().count());
        for (k, _) in set.pairs::<Value, Value>().flatten() {
            write_value(&k, script_resp, out, depth + 1);
        }
        return;
    }
    let len =
        (1..).take_while(|&i| !matches!(t.raw_get::<Value>(i), Ok(Value::Nil) | Err(_))).count();
    out.array(len);
    for i in 1..=len {
        let v = t.raw_get::<Value>(i).unwrap_or(Value::Nil);
        write_value(&v, script_resp, out, depth + 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_texts_as_redis() {
        assert_eq!(error_text(b"-WRONGTYPE bad thing\r\n"), b"WRONGTYPE bad thing");
        assert_eq!(error_text(b"-OOPS"), b"ERR OOPS");
        assert_eq!(error_text(b"plain message"), b"ERR plain message");
    }

    /// `reply` as a script sees it.
    fn pushed(lua: &Lua, reply: &[u8]) -> Result<(Value, usize), &'static str> {
        let used = std::cell::Cell::new(Err("not run"));
        // SAFETY: the pusher runs inside mlua's protected call and leaves
        // one value on the stack (or nil after an error).
        let value = unsafe {
            lua.exec_raw::<Value>((), |state| {
                used.set(push_reply(state, reply));
                if used.get().is_err() {
                    ffi::lua_pushnil(state);
                }
            })
        }
        .unwrap();
        used.get().map(|used| (value, used))
    }

    #[test]
    fn malformed_replies_are_errors() {
        let lua = Lua::new();
        for bad in [&b""[..], b"\r\n", b"$5\r\nab\r\n", b"*2\r\n:1\r\n", b":x\r\n", b"?\r\n"] {
            assert!(pushed(&lua, bad).is_err(), "{bad:?}");
        }
    }

    fn roundtrip(reply: &[u8], script_resp: Resp, client: Resp) -> Vec<u8> {
        let lua = Lua::new();
        let (v, used) = pushed(&lua, reply).unwrap();
        assert_eq!(used, reply.len());
        let mut buf = Vec::new();
        lua_to_resp(&v, script_resp, &mut ReplyWriter::new(&mut buf, client));
        buf
    }

    #[test]
    fn replies_round_trip() {
        let r2 = |r: &[u8]| roundtrip(r, Resp::V2, Resp::V2);
        assert_eq!(r2(b":42\r\n"), b":42\r\n");
        assert_eq!(r2(b"$3\r\nabc\r\n"), b"$3\r\nabc\r\n");
        assert_eq!(r2(b"$-1\r\n"), b"$-1\r\n");
        assert_eq!(r2(b"+OK\r\n"), b"+OK\r\n");
        assert_eq!(r2(b"-ERR no\r\n"), b"-ERR no\r\n");
        assert_eq!(r2(b"*2\r\n:1\r\n$1\r\nx\r\n"), b"*2\r\n:1\r\n$1\r\nx\r\n");
        // A nil inside an array ends it.
        assert_eq!(r2(b"*3\r\n:1\r\n_\r\n:3\r\n"), b"*1\r\n:1\r\n");
        let r3 = |r: &[u8]| roundtrip(r, Resp::V3, Resp::V3);
        assert_eq!(r3(b"#t\r\n"), b"#t\r\n");
        assert_eq!(r3(b",1.5\r\n"), b",1.5\r\n");
        assert_eq!(r3(b"%1\r\n$1\r\nk\r\n:1\r\n"), b"%1\r\n$1\r\nk\r\n:1\r\n");
        assert_eq!(r3(b"~1\r\n$1\r\nm\r\n"), b"~1\r\n$1\r\nm\r\n");
        assert_eq!(r3(b"(123\r\n"), b"(123\r\n");
        assert_eq!(r3(b"=7\r\ntxt:abc\r\n"), b"=7\r\ntxt:abc\r\n");
    }

    #[test]
    fn lua_values_convert_as_redis() {
        let lua = Lua::new();
        let conv = |code: &str, resp: Resp| {
            let v: Value = lua.load(code).eval().unwrap();
            let mut buf = Vec::new();
            lua_to_resp(&v, resp, &mut ReplyWriter::new(&mut buf, Resp::V2));
            String::from_utf8(buf).unwrap()
        };
        assert_eq!(conv("return 3.99", Resp::V2), ":3\r\n");
        assert_eq!(conv("return -3.99", Resp::V2), ":-3\r\n");
        assert_eq!(conv("return true", Resp::V2), ":1\r\n");
        assert_eq!(conv("return false", Resp::V2), "$-1\r\n");
        assert_eq!(conv("return {1, 2, nil, 4}", Resp::V2), "*2\r\n:1\r\n:2\r\n");
        assert_eq!(conv("return {ok='fine\\r\\nline'}", Resp::V2), "+fine  line\r\n");
        assert_eq!(conv("return {err='ERR bad'}", Resp::V2), "-ERR bad\r\n");
        assert_eq!(conv("return nil", Resp::V2), "$-1\r\n");
        assert!(conv("local t = {} t[1] = t return t", Resp::V2).contains("stack limit"));
        let big = conv("local t = {} for i = 1, 20000 do t[i] = 'x' .. i end return t", Resp::V2);
        assert!(big.starts_with("*20000\r\n$2\r\nx1\r\n"));
        let map =
            conv("local t = {} for i = 1, 20000 do t['k' .. i] = i end return {map = t}", Resp::V3);
        assert!(map.starts_with("*40000\r\n"));
    }
}
