//! Redis 7 functions (functions.c, function_lua.c): library metadata,
//! `redis.register_function`, the per-shard library registry, and the
//! FUNCTION DUMP payload (RDB `FUNCTION2` records, RDB version, CRC64).
//!
//! Library names are case-sensitive; function names are looked up without
//! regard to case, as in Redis.

use super::{flags_from_names, ScriptFlags};
use bytes::Bytes;
use hashbrown::HashMap;
use mlua::{Function, MultiValue, Value};
use std::collections::BTreeMap;

pub const BAD_NAME: &str = "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";

/// A registered function.
#[derive(Clone)]
pub struct FunctionDef {
    pub name: String,
    pub description: Option<String>,
    pub flags: ScriptFlags,
    pub callback: Function,
}

/// A loaded library.
pub struct Library {
    pub name: String,
    /// The code as loaded, shebang included (FUNCTION LIST WITHCODE, DUMP).
    pub code: Bytes,
    pub functions: BTreeMap<String, FunctionDef>,
}

/// The functions a library's code registers while FUNCTION LOAD runs it.
#[derive(Default)]
pub struct PendingLibrary {
    pub functions: BTreeMap<String, FunctionDef>,
}

/// Redis's `functionsVerifyName`.
pub fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

fn lua_text(v: &Value) -> Option<String> {
    super::libs::opt_bytes(v).map(|b| String::from_utf8_lossy(&b).into_owned())
}

impl PendingLibrary {
    /// `redis.register_function(name, callback)` or
    /// `redis.register_function{function_name=…, callback=…, flags={…},
    /// description=…}`, with Redis's checks and texts.
    pub fn register(&mut self, args: MultiValue) -> Result<(), String> {
        let def = match args.len() {
            1 => named_args(&args[0])?,
            2 => {
                let name = lua_text(&args[0])
                    .ok_or("first argument to redis.register_function must be a string")?;
                let Value::Function(callback) = &args[1] else {
                    return Err(
                        "second argument to redis.register_function must be a function".into()
                    );
                };
                FunctionDef { name, description: None, flags: 0, callback: callback.clone() }
            }
            _ => return Err("wrong number of arguments to redis.register_function".into()),
        };
        if !valid_name(def.name.as_bytes()) {
            return Err(BAD_NAME.into());
        }
        if self.functions.contains_key(&def.name) {
            return Err("Function already exists in the library".into());
        }
        self.functions.insert(def.name.clone(), def);
        Ok(())
    }
}

fn named_args(arg: &Value) -> Result<FunctionDef, String> {
    let Value::Table(t) = arg else {
        return Err("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).".into());
    };
    let (mut name, mut description, mut callback, mut flags) = (None, None, None, 0);
    for pair in t.pairs::<Value, Value>() {
        let (k, v) = pair.map_err(|e| e.to_string())?;
        let Some(key) = lua_text(&k) else {
            return Err(
                "named argument key given to redis.register_function is not a string".into()
            );
        };
        match key.to_ascii_lowercase().as_str() {
            "function_name" => {
                name = Some(lua_text(&v).ok_or(
                    "function_name argument given to redis.register_function must be a string",
                )?)
            }
            "description" => {
                description = Some(lua_text(&v).ok_or(
                    "description argument given to redis.register_function must be a string",
                )?)
            }
            "callback" => match v {
                Value::Function(f) => callback = Some(f),
                _ => {
                    return Err(
                        "callback argument given to redis.register_function must be a function"
                            .into(),
                    )
                }
            },
            "flags" => {
                let Value::Table(list) = v else {
                    return Err("flags argument to redis.register_function must be a table representing function flags".into());
                };
                let mut names = Vec::new();
                for item in list.sequence_values::<Value>() {
                    let item = item.map_err(|e| e.to_string())?;
                    names.push(lua_text(&item).ok_or("unknown flag given")?);
                }
                flags = flags_from_names(names.iter().map(String::as_str), true)
                    .map_err(|_| "unknown flag given".to_string())?;
            }
            _ => return Err("unknown argument given to redis.register_function".into()),
        }
    }
    let name = name.ok_or("redis.register_function must get a function name argument")?;
    let callback = callback.ok_or("redis.register_function must get a callback argument")?;
    Ok(FunctionDef { name, description, flags, callback })
}

/// A library's metadata line: `#!<engine> name=<name>`.
pub struct Metadata {
    pub engine: String,
    pub name: String,
    /// Where the code after the metadata line starts (at its newline, so
    /// that line numbers stay right).
    pub body: usize,
}

/// Redis's `functionExtractLibMetaData`.
pub fn metadata(code: &[u8]) -> Result<Metadata, String> {
    if !code.starts_with(b"#!") {
        return Err("Missing library metadata".into());
    }
    let end = code.iter().position(|&c| c == b'\n').ok_or("Invalid library metadata")?;
    let parts = ringdb_protocol::parse::split_args(&code[..end])
        .filter(|p| !p.is_empty())
        .ok_or("Invalid library metadata")?;
    let engine = String::from_utf8_lossy(&parts[0][2..]).into_owned();
    let mut name = None;
    for part in &parts[1..] {
        if part.len() >= 5 && part[..5].eq_ignore_ascii_case(b"name=") {
            if name.is_some() {
                return Err("Invalid metadata value, name argument was given multiple times".into());
            }
            name = Some(String::from_utf8_lossy(&part[5..]).into_owned());
            continue;
        }
        return Err(format!("Invalid metadata value given: {}", String::from_utf8_lossy(part)));
    }
    let name = name.ok_or("Library name was not given")?;
    Ok(Metadata { engine, name, body: end })
}

/// The libraries of one shard, and their functions by lower-case name.
#[derive(Default)]
pub struct Libraries {
    pub libs: BTreeMap<String, Library>,
    by_function: HashMap<String, String>,
}

impl Libraries {
    pub fn function(&self, name: &[u8]) -> Option<&FunctionDef> {
        let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
        let lib = self.by_function.get(&lower)?;
        let library = self.libs.get(lib)?;
        library.functions.values().find(|f| f.name.eq_ignore_ascii_case(&lower))
    }

    pub fn function_count(&self) -> usize {
        self.by_function.len()
    }

    /// The first function of `lib` whose name another library already has
    /// (ignoring `except`, the library being replaced).
    pub fn collision(&self, lib: &Library, except: Option<&str>) -> Option<String> {
        lib.functions.keys().find_map(|f| {
            let owner = self.by_function.get(&f.to_ascii_lowercase())?;
            (Some(owner.as_str()) != except).then(|| f.clone())
        })
    }

    pub fn insert(&mut self, lib: Library) {
        self.remove(&lib.name.clone());
        for f in lib.functions.keys() {
            self.by_function.insert(f.to_ascii_lowercase(), lib.name.clone());
        }
        self.libs.insert(lib.name.clone(), lib);
    }

    pub fn remove(&mut self, name: &str) -> Option<Library> {
        let lib = self.libs.remove(name)?;
        for f in lib.functions.keys() {
            self.by_function.remove(&f.to_ascii_lowercase());
        }
        Some(lib)
    }

    pub fn clear(&mut self) {
        self.libs.clear();
        self.by_function.clear();
    }
}

// ---- FUNCTION DUMP / RESTORE ----------------------------------------

/// RDB's `RDB_OPCODE_FUNCTION2`: one library's code follows.
const OPCODE_FUNCTION2: u8 = 245;
/// RDB's older `RDB_OPCODE_FUNCTION` (Redis 7.0 release candidates).
const OPCODE_FUNCTION: u8 = 246;
/// The RDB version of Redis 7.2, which ringdb reports being.
pub const RDB_VERSION: u16 = 11;

/// Redis's CRC64 (Jones polynomial, reflected), as DUMP payloads carry.
pub fn crc64(data: &[u8]) -> u64 {
    const POLY: u64 = 0x95ac_9329_ac4b_c9b5;
    let mut crc: u64 = 0;
    for &b in data {
        crc ^= b as u64;
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ POLY } else { crc >> 1 };
        }
    }
    crc
}

fn put_length(out: &mut Vec<u8>, len: usize) {
    if len < 64 {
        out.push(len as u8);
    } else if len < 16384 {
        out.extend_from_slice(&[0x40 | (len >> 8) as u8, len as u8]);
    } else if len <= u32::MAX as usize {
        out.push(0x80);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
}

/// FUNCTION DUMP's payload for these library codes.
pub fn dump<'a>(codes: impl Iterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for code in codes {
        out.push(OPCODE_FUNCTION2);
        put_length(&mut out, code.len());
        out.extend_from_slice(code);
    }
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

pub const BAD_PAYLOAD: &str = "DUMP payload version or checksum are wrong";

struct Reader<'a> {
    s: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.s.len())?;
        let out = &self.s[self.at..end];
        self.at = end;
        Some(out)
    }

    fn byte(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    /// An RDB string: plain, integer-encoded or LZF-compressed.
    fn string(&mut self) -> Option<Vec<u8>> {
        let first = self.byte()?;
        let be = |b: &[u8]| b.iter().fold(0u64, |acc, &x| (acc << 8) | x as u64) as usize;
        match first >> 6 {
            0 => Some(self.take((first & 0x3f) as usize)?.to_vec()),
            1 => {
                let len = (((first & 0x3f) as usize) << 8) | self.byte()? as usize;
                Some(self.take(len)?.to_vec())
            }
            2 => {
                let len = match first {
                    0x80 => be(self.take(4)?),
                    0x81 => be(self.take(8)?),
                    _ => return None,
                };
                Some(self.take(len)?.to_vec())
            }
            _ => match first & 0x3f {
                0 => Some((self.byte()? as i8).to_string().into_bytes()),
                1 => {
                    let b = self.take(2)?;
                    Some(i16::from_le_bytes([b[0], b[1]]).to_string().into_bytes())
                }
                2 => {
                    let b = self.take(4)?;
                    Some(i32::from_le_bytes([b[0], b[1], b[2], b[3]]).to_string().into_bytes())
                }
                3 => {
                    let clen = self.length()?;
                    let len = self.length()?;
                    ringdb_types::lzf::decompress(self.take(clen)?, len)
                }
                _ => None,
            },
        }
    }

    fn length(&mut self) -> Option<usize> {
        let first = self.byte()?;
        match first >> 6 {
            0 => Some((first & 0x3f) as usize),
            1 => Some((((first & 0x3f) as usize) << 8) | self.byte()? as usize),
            2 if first == 0x80 => {
                let b = self.take(4)?;
                Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
            }
            2 if first == 0x81 => {
                let b = self.take(8)?;
                usize::try_from(u64::from_be_bytes(b.try_into().ok()?)).ok()
            }
            _ => None,
        }
    }
}

/// The library codes in a FUNCTION RESTORE payload, after checking its
/// version and checksum.
pub fn parse_dump(payload: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    if payload.len() < 10 {
        return Err(BAD_PAYLOAD.into());
    }
    let footer = payload.len() - 10;
    let version = u16::from_le_bytes([payload[footer], payload[footer + 1]]);
    let mut crc = [0u8; 8];
    crc.copy_from_slice(&payload[footer + 2..]);
    if version > RDB_VERSION || crc64(&payload[..footer + 2]) != u64::from_le_bytes(crc) {
        return Err(BAD_PAYLOAD.into());
    }
    let mut r = Reader { s: &payload[..footer], at: 0 };
    let mut codes = Vec::new();
    while r.at < footer {
        match r.byte() {
            Some(OPCODE_FUNCTION2) => {}
            Some(OPCODE_FUNCTION) => {
                return Err("failed loading the given functions payload".into())
            }
            _ => return Err("given type is not a function".into()),
        }
        codes.push(r.string().ok_or("failed loading the given functions payload")?);
    }
    Ok(codes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc64_matches_redis() {
        // Redis's crc64 test vector.
        assert_eq!(crc64(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    }

    #[test]
    fn dump_round_trips() {
        let codes: Vec<&[u8]> = vec![b"#!lua name=a\nx", &[b'y'; 300]];
        let payload = dump(codes.iter().copied());
        let back = parse_dump(&payload).unwrap();
        assert_eq!(back, vec![b"#!lua name=a\nx".to_vec(), vec![b'y'; 300]]);
        let mut bad = payload.clone();
        bad[3] ^= 1;
        assert_eq!(parse_dump(&bad).unwrap_err(), BAD_PAYLOAD);
        assert_eq!(parse_dump(b"short").unwrap_err(), BAD_PAYLOAD);
    }

    #[test]
    fn metadata_errors_as_redis() {
        assert_eq!(metadata(b"return 1").err().unwrap(), "Missing library metadata");
        assert_eq!(metadata(b"#!lua name=x").err().unwrap(), "Invalid library metadata");
        assert_eq!(metadata(b"#!lua\n").err().unwrap(), "Library name was not given");
        assert_eq!(
            metadata(b"#!lua name=a name=b\n").err().unwrap(),
            "Invalid metadata value, name argument was given multiple times"
        );
        assert_eq!(
            metadata(b"#!lua foo=bar\n").err().unwrap(),
            "Invalid metadata value given: foo=bar"
        );
        let md = metadata(b"#!LUA name=lib\nbody").unwrap();
        assert_eq!((md.engine.as_str(), md.name.as_str(), md.body), ("LUA", "lib", 14));
    }
}
