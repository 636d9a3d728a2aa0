//! The wire: RESP2/RESP3 as Redis speaks it.
//!
//! Layout:
//! - [`parse`]: the request parser. Bounded (every length a client claims is
//!   checked against a limit before anything is allocated for it) and
//!   incremental (a half-received command resumes where it stopped instead of
//!   re-parsing from the start). Understands RESP multibulk and inline
//!   (telnet-style) commands.
//! - [`reply`]: the reply writer. Every reply ringdb sends goes through it, so
//!   the RESP2/RESP3 differences (maps, sets, doubles, nulls, pushes) live in
//!   one place.
//! - [`output`]: replies on their way out as segments (a byte buffer with
//!   large shared values spliced in by reference, never copied).
//! - [`frame`]: a small reader for reply frames, used where ringdb merges
//!   replies produced on several shards.
//!
//! This crate knows nothing about commands or shards; it depends on `bytes` only
//! (plus `redis-protocol` for encoding scalar frames).

pub mod frame;
pub mod output;
pub mod parse;
pub mod reply;

pub use output::{Output, Segments, Splice, Splices, SPLICE_MIN};
pub use parse::{encode_command, ParseError, ParseLimits, Request, RequestParser};
pub use reply::{ReplyWriter, Resp};
