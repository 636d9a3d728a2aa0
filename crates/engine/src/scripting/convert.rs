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

use mlua::{Lua, Table, Value};
use ringdb_protocol::{ReplyWriter, Resp};

/// Deepest nesting of tables a script's result may have (a table that
/// contains itself would otherwise recurse for ever).
pub const MAX_DEPTH: usize = 128;

/// Redis's `luaPushErrorBuff` text: `-CODE message` keeps its code,
/// anything else gets `ERR`; CR/LF are trimmed from both ends.
pub fn error_text(raw: &[u8]) -> Vec<u8> {
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
    let mut out = Vec::with_capacity(code.len() + 1 + end - start);
    out.extend_from_slice(code);
    out.push(b' ');
    out.extend_from_slice(&msg[start..end.max(start)]);
    out
}

/// The field of an error table whose error INFO errorstats has counted
/// already (an error of a command the script called): the script's reply
/// does not count it again.
pub const COUNTED: &str = "ignore_error_stats_update";

/// An error table `{err = <error_text(raw)>}`.
pub fn error_table(lua: &Lua, raw: &[u8]) -> mlua::Result<Table> {
    let t = lua.create_table_with_capacity(0, 1)?;
    t.raw_set("err", lua.create_string(error_text(raw))?)?;
    Ok(t)
}

/// A table with one field.
fn single(lua: &Lua, field: &str, value: impl mlua::IntoLua) -> mlua::Result<Value> {
    let t = lua.create_table_with_capacity(0, 1)?;
    t.raw_set(field, value)?;
    Ok(Value::Table(t))
}

/// Parses the reply at the start of `buf` into a Lua value. Returns the
/// value and the bytes it used. The reply was produced by ringdb itself, but
/// a malformed one still yields an error rather than a panic.
pub fn resp_to_lua(lua: &Lua, buf: &[u8]) -> mlua::Result<(Value, usize)> {
    let bad = || mlua::Error::runtime("malformed reply");
    let line_end = buf.windows(2).position(|w| w == b"\r\n").ok_or_else(bad)?;
    let line = &buf[1..line_end];
    let after = line_end + 2;
    let number = || -> mlua::Result<i64> {
        std::str::from_utf8(line).ok().and_then(|s| s.parse().ok()).ok_or_else(bad)
    };
    let blob = |len: i64| -> mlua::Result<&[u8]> {
        let len = usize::try_from(len).map_err(|_| bad())?;
        buf.get(after..after + len).ok_or_else(bad)
    };
    match buf.first().copied().ok_or_else(bad)? {
        b'+' => Ok((single(lua, "ok", lua.create_string(line)?)?, after)),
        b'-' => {
            let mut raw = Vec::with_capacity(line.len() + 1);
            raw.push(b'-');
            raw.extend_from_slice(line);
            Ok((Value::Table(error_table(lua, &raw)?), after))
        }
        b':' => Ok((Value::Number(number()? as f64), after)),
        b'$' => {
            let len = number()?;
            if len < 0 {
                return Ok((Value::Boolean(false), after));
            }
            let data = blob(len)?;
            Ok((Value::String(lua.create_string(data)?), after + data.len() + 2))
        }
        b'*' | b'>' => {
            let n = number()?;
            if n < 0 {
                return Ok((Value::Boolean(false), after));
            }
            let t = lua.create_table_with_capacity(n.min(1 << 16) as usize, 0)?;
            let mut at = after;
            for i in 1..=n {
                let (v, used) = resp_to_lua(lua, buf.get(at..).ok_or_else(bad)?)?;
                t.raw_set(i, v)?;
                at += used;
            }
            Ok((Value::Table(t), at))
        }
        b'%' | b'~' => {
            let is_map = buf[0] == b'%';
            let n = number()?;
            let inner = lua.create_table()?;
            let mut at = after;
            for _ in 0..n.max(0) {
                let (k, used) = resp_to_lua(lua, buf.get(at..).ok_or_else(bad)?)?;
                at += used;
                let v = if is_map {
                    let (v, used) = resp_to_lua(lua, buf.get(at..).ok_or_else(bad)?)?;
                    at += used;
                    v
                } else {
                    Value::Boolean(true)
                };
                if !k.is_nil() {
                    inner.raw_set(k, v)?;
                }
            }
            Ok((single(lua, if is_map { "map" } else { "set" }, inner)?, at))
        }
        b'|' => {
            // Attributes are not shown to scripts: skip them, then the reply.
            let n = number()?;
            let mut at = after;
            for _ in 0..n.max(0) * 2 {
                at += resp_to_lua(lua, buf.get(at..).ok_or_else(bad)?)?.1;
            }
            let (v, used) = resp_to_lua(lua, buf.get(at..).ok_or_else(bad)?)?;
            Ok((v, at + used))
        }
        b'_' => Ok((Value::Nil, after)),
        b'#' => Ok((Value::Boolean(line == b"t"), after)),
        b',' => {
            let d = match line {
                b"inf" => f64::INFINITY,
                b"-inf" => f64::NEG_INFINITY,
                _ => ringdb_types::number::parse_f64(line).unwrap_or(f64::NAN),
            };
            Ok((single(lua, "double", d)?, after))
        }
        b'(' => Ok((single(lua, "big_number", lua.create_string(line)?)?, after)),
        b'=' => {
            let data = blob(number()?)?;
            let (format, text) =
                if data.len() >= 4 { (&data[..3], &data[4..]) } else { (data, &[][..]) };
            let inner = lua.create_table_with_capacity(0, 2)?;
            inner.raw_set("format", lua.create_string(format)?)?;
            inner.raw_set("string", lua.create_string(text)?)?;
            Ok((single(lua, "verbatim_string", inner)?, after + data.len() + 2))
        }
        _ => Err(bad()),
    }
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

    fn roundtrip(reply: &[u8], script_resp: Resp, client: Resp) -> Vec<u8> {
        let lua = Lua::new();
        let (v, used) = resp_to_lua(&lua, reply).unwrap();
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
