//! `struct`: Roberto Ierusalimschy's struct library as Redis bundles it
//! (lua_struct.c): `struct.pack(fmt, ...)`, `struct.unpack(fmt, s [, pos])`
//! and `struct.size(fmt)`, with the same format options (`< > ! x b B h H
//! l L T i[n] I[n] f d s c[n]`), alignment rules and error texts. Native
//! byte order is little-endian, as on the machines Redis runs on.

use super::{check_bytes, check_number};
use mlua::{Lua, MultiValue, Table, Value};

const MAXINTSIZE: usize = 32;
const MAXALIGN: usize = 8;

#[derive(Clone, Copy)]
struct Header {
    little: bool,
    align: usize,
}

impl Default for Header {
    fn default() -> Self {
        Header { little: true, align: 1 }
    }
}

fn err(msg: String) -> mlua::Error {
    mlua::Error::runtime(msg)
}

fn arg_error(n: usize, fname: &str, msg: &str) -> mlua::Error {
    err(format!("bad argument #{n} to '{fname}' ({msg})"))
}

/// A format being read, byte by byte.
struct Format<'a> {
    fmt: &'a [u8],
    at: usize,
}

impl Format<'_> {
    fn next(&mut self) -> Option<u8> {
        let c = *self.fmt.get(self.at)?;
        self.at += 1;
        Some(c)
    }

    fn number(&mut self, default: usize) -> mlua::Result<usize> {
        if !self.fmt.get(self.at).is_some_and(u8::is_ascii_digit) {
            return Ok(default);
        }
        let mut a: usize = 0;
        while let Some(d) = self.fmt.get(self.at).filter(|c| c.is_ascii_digit()) {
            let digit = (d - b'0') as usize;
            if a > (i32::MAX as usize) / 10 || a * 10 > i32::MAX as usize - digit {
                return Err(err("integral size overflow".into()));
            }
            a = a * 10 + digit;
            self.at += 1;
        }
        Ok(a)
    }

    /// Size of option `opt` (`optsize`).
    fn size(&mut self, opt: u8) -> mlua::Result<usize> {
        Ok(match opt {
            b'B' | b'b' | b'x' => 1,
            b'H' | b'h' => 2,
            b'L' | b'l' | b'T' | b'd' => 8,
            b'f' => 4,
            b'c' => self.number(1)?,
            b'i' | b'I' => {
                let sz = self.number(4)?;
                if sz > MAXINTSIZE {
                    return Err(err(format!(
                        "integral size {sz} is larger than limit of {MAXINTSIZE}"
                    )));
                }
                sz
            }
            _ => 0,
        })
    }

    /// Endianness, alignment and spaces (`controloptions`).
    fn control(&mut self, opt: u8, h: &mut Header, fname: &str) -> mlua::Result<()> {
        match opt {
            b' ' => {}
            b'>' => h.little = false,
            b'<' => h.little = true,
            b'!' => {
                let a = self.number(MAXALIGN)?;
                if !a.is_power_of_two() {
                    return Err(err(format!("alignment {a} is not a power of 2")));
                }
                h.align = a;
            }
            other => {
                let msg = format!("invalid format option '{}'", other as char);
                return Err(arg_error(1, fname, &msg));
            }
        }
        Ok(())
    }
}

fn padding(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align).max(1);
    (size - (len & (size - 1))) & (size - 1)
}

fn put_integer(out: &mut Vec<u8>, n: f64, little: bool, size: usize) {
    let mut value: u64 = if n < 0.0 { n as i64 as u64 } else { n as u64 };
    let mut bytes = vec![0u8; size];
    for i in 0..size {
        let at = if little { i } else { size - 1 - i };
        bytes[at] = (value & 0xff) as u8;
        value = value.checked_shr(8).unwrap_or(0);
    }
    out.extend_from_slice(&bytes);
}

fn get_integer(data: &[u8], little: bool, signed: bool) -> f64 {
    let mut l: u64 = 0;
    let size = data.len();
    for i in 0..size {
        let b = if little { data[size - 1 - i] } else { data[i] };
        l = (l << 8) | b as u64;
    }
    if !signed {
        return l as f64;
    }
    let bits = (size * 8).clamp(1, 64);
    let mask = u64::MAX.checked_shl(bits as u32 - 1).unwrap_or(0);
    if l & mask != 0 {
        l |= mask;
    }
    l as i64 as f64
}

fn with_order<const N: usize>(mut bytes: [u8; N], little: bool) -> [u8; N] {
    if !little {
        bytes.reverse();
    }
    bytes
}

fn pack(lua: &Lua, args: MultiValue) -> mlua::Result<mlua::LuaString> {
    let fmt = check_bytes(&args, 0, "pack")?;
    let mut f = Format { fmt: &fmt, at: 0 };
    let mut h = Header::default();
    let mut arg = 1;
    let mut out = Vec::new();
    while let Some(opt) = f.next() {
        let mut size = f.size(opt)?;
        let pad = padding(out.len(), &h, opt, size);
        out.resize(out.len() + pad, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                put_integer(&mut out, check_number(&args, arg, "pack")?, h.little, size);
                arg += 1;
            }
            b'x' => out.push(0),
            b'f' => {
                let v = check_number(&args, arg, "pack")? as f32;
                out.extend_from_slice(&with_order(v.to_le_bytes(), h.little));
                arg += 1;
            }
            b'd' => {
                let v = check_number(&args, arg, "pack")?;
                out.extend_from_slice(&with_order(v.to_le_bytes(), h.little));
                arg += 1;
            }
            b'c' | b's' => {
                let s = check_bytes(&args, arg, "pack")?;
                arg += 1;
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    return Err(arg_error(arg, "pack", "string too short"));
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                }
            }
            _ => f.control(opt, &mut h, "pack")?,
        }
    }
    lua.create_string(&out)
}

fn unpack(lua: &Lua, args: MultiValue) -> mlua::Result<MultiValue> {
    let fmt = check_bytes(&args, 0, "unpack")?;
    let data = check_bytes(&args, 1, "unpack")?;
    let start = match args.get(2) {
        None | Some(Value::Nil) => 1.0,
        Some(_) => check_number(&args, 2, "unpack")?,
    };
    if start < 1.0 || start as usize - 1 > data.len() {
        return Err(arg_error(3, "unpack", "offset must be 1 <= offset <= len(data)"));
    }
    let mut pos = start as usize - 1;
    let mut f = Format { fmt: &fmt, at: 0 };
    let mut h = Header::default();
    let mut results: Vec<Value> = Vec::new();
    let too_short = || arg_error(2, "unpack", "data string too short");
    while let Some(opt) = f.next() {
        let mut size = f.size(opt)?;
        pos += padding(pos, &h, opt, size);
        if pos + size > data.len() {
            return Err(too_short());
        }
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let signed = opt.is_ascii_lowercase();
                results.push(Value::Number(get_integer(&data[pos..pos + size], h.little, signed)));
            }
            b'x' => {}
            b'f' => {
                let mut b = [0u8; 4];
                b.copy_from_slice(&data[pos..pos + 4]);
                results.push(Value::Number(f32::from_le_bytes(with_order(b, h.little)) as f64));
            }
            b'd' => {
                let mut b = [0u8; 8];
                b.copy_from_slice(&data[pos..pos + 8]);
                results.push(Value::Number(f64::from_le_bytes(with_order(b, h.little))));
            }
            b'c' => {
                if size == 0 {
                    let previous = results.pop().and_then(|v| super::opt_number(&v));
                    let Some(n) = previous.filter(|n| *n >= 0.0) else {
                        return Err(err("format 'c0' needs a previous size".into()));
                    };
                    size = n as usize;
                    if size > data.len() || pos > data.len() - size {
                        return Err(too_short());
                    }
                }
                results.push(Value::String(lua.create_string(&data[pos..pos + size])?));
            }
            b's' => {
                let Some(end) = data[pos..].iter().position(|&c| c == 0) else {
                    return Err(err("unfinished string in data".into()));
                };
                results.push(Value::String(lua.create_string(&data[pos..pos + end])?));
                size = end + 1;
            }
            _ => f.control(opt, &mut h, "unpack")?,
        }
        pos += size;
    }
    results.push(Value::Number((pos + 1) as f64));
    Ok(MultiValue::from_iter(results))
}

fn size(_: &Lua, args: MultiValue) -> mlua::Result<f64> {
    let fmt = check_bytes(&args, 0, "size")?;
    let mut f = Format { fmt: &fmt, at: 0 };
    let mut h = Header::default();
    let mut pos = 0usize;
    while let Some(opt) = f.next() {
        let size = f.size(opt)?;
        pos += padding(pos, &h, opt, size);
        if opt == b's' {
            return Err(arg_error(1, "size", "options 'c0' - 's' have undefined sizes"));
        }
        if opt == b'c' && size == 0 {
            return Err(arg_error(1, "size", "options 'c0' - 's' have undefined sizes"));
        }
        if !opt.is_ascii_alphanumeric() {
            f.control(opt, &mut h, "size")?;
        }
        pos += size;
    }
    Ok(pos as f64)
}

pub fn open(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("pack", lua.create_function(pack)?)?;
    t.raw_set("unpack", lua.create_function(unpack)?)?;
    t.raw_set("size", lua.create_function(size)?)?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use mlua::Lua;

    #[test]
    fn pack_unpack_size() {
        let lua = Lua::new();
        lua.globals().set("struct", super::open(&lua).unwrap()).unwrap();
        let check = |code: &str| assert!(lua.load(code).eval::<bool>().unwrap(), "{code}");
        check("return struct.pack('>I2', 258) == '\\1\\2'");
        check("return struct.pack('<i4', -2) == '\\254\\255\\255\\255'");
        check("local a, b, n = struct.unpack('>hB', '\\255\\254\\7') return a == -2 and b == 7 and n == 4");
        check("return struct.size('!4bi') == 8");
        check("return struct.pack('s', 'ab') == 'ab\\0'");
        check("local s, n = struct.unpack('s', 'ab\\0z') return s == 'ab' and n == 4");
        check("local s = struct.unpack('Bc0', '\\3abcd') return s == 'abc'");
        check("local d = struct.unpack('d', struct.pack('d', 1.5)) return d == 1.5");
        check("return select('#', struct.unpack('>I4I4', struct.pack('>I4I4', 1, 2))) == 3");
        assert!(lua.load("return struct.pack('z', 1)").exec().is_err());
        assert!(lua.load("return struct.unpack('I4', 'ab')").exec().is_err());
        assert!(lua.load("return struct.size('s')").exec().is_err());
    }
}
