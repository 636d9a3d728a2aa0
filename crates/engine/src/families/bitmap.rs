//! Bitmaps: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD, BITFIELD_RO.

use crate::command::spec::CommandSpec;

pub static COMMANDS: &[CommandSpec] = &[];
