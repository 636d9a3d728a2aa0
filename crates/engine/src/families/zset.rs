//! Sorted sets: ZADD, ZINCRBY, ZREM, ZCARD, ZCOUNT, ZLEXCOUNT, ZSCORE, ZMSCORE, ZRANK, ZREVRANK, ZRANGE and its older forms, ZRANGESTORE, ZREM*RANGE*, ZPOPMIN, ZPOPMAX, ZMPOP, ZRANDMEMBER, ZUNION, ZINTER, ZDIFF and their STORE forms, ZINTERCARD, ZSCAN.

use crate::command::spec::CommandSpec;

pub static COMMANDS: &[CommandSpec] = &[];
