//! Hashes: HSET, HSETNX, HMSET, HGET, HMGET, HGETALL, HDEL, HLEN, HSTRLEN, HEXISTS, HKEYS, HVALS, HINCRBY, HINCRBYFLOAT, HRANDFIELD, HSCAN.

use crate::command::spec::CommandSpec;

pub static COMMANDS: &[CommandSpec] = &[];
