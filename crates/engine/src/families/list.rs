//! Lists: LPUSH, RPUSH, LPUSHX, RPUSHX, LPOP, RPOP, LLEN, LRANGE, LINDEX, LSET, LINSERT, LREM, LTRIM, LPOS, LMOVE, RPOPLPUSH, LMPOP.

use crate::command::spec::CommandSpec;

pub static COMMANDS: &[CommandSpec] = &[];
