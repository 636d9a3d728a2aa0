//! Server commands: COMMAND, CONFIG, INFO, DBSIZE, FLUSHDB, FLUSHALL, SWAPDB,
//! TIME, LASTSAVE, SHUTDOWN, DEBUG, FUNCTION FLUSH. They run on the
//! connection's core and visit shards as needed (`Exec::Node`); the server
//! crate implements them. Only their rows live here.

use crate::command::spec::CommandSpec;

pub static COMMANDS: &[CommandSpec] = &[];
