//! Reading reply frames back, for the few places that combine replies made on
//! several shards (MGET's per-shard arrays interleaved in key order, DEL's
//! per-shard counts summed). Decoding is `redis-protocol`'s zero-copy range
//! decoder; this module only adds the two questions ringdb asks of a frame.

use crate::reply::Resp;
use redis_protocol::{resp2, resp3};
use std::ops::Range;

/// Length in bytes of the first complete frame in `buf`.
pub fn frame_len(buf: &[u8], resp: Resp) -> Option<usize> {
    match resp {
        Resp::V2 => resp2::decode::decode_range(buf).ok().flatten().map(|(_, n)| n),
        Resp::V3 => resp3::decode::complete::decode_range(buf).ok().flatten().map(|(_, n)| n),
    }
}

/// The byte ranges of the elements of the array frame at the start of `buf`.
/// `None` when `buf` does not start with a complete array.
pub fn array_elements(buf: &[u8], resp: Resp) -> Option<Vec<Range<usize>>> {
    let header_end = buf.iter().position(|&c| c == b'\n')? + 1;
    if buf.first() != Some(&b'*') || header_end < 4 {
        return None;
    }
    let count: usize = std::str::from_utf8(&buf[1..header_end - 2]).ok()?.parse().ok()?;
    let mut at = header_end;
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let len = frame_len(&buf[at..], resp)?;
        out.push(at..at + len);
        at += len;
    }
    Some(out)
}

/// The value of an integer frame (`:n\r\n`).
pub fn integer(buf: &[u8]) -> Option<i64> {
    let rest = buf.strip_prefix(b":")?;
    let end = rest.iter().position(|&c| c == b'\r')?;
    std::str::from_utf8(&rest[..end]).ok()?.parse().ok()
}

/// Whether the frame is an error reply.
pub fn is_error(buf: &[u8]) -> bool {
    buf.first() == Some(&b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_of_an_array() {
        let buf = b"*3\r\n$1\r\na\r\n$-1\r\n:5\r\n";
        let r = array_elements(buf, Resp::V2).unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(&buf[r[0].clone()], b"$1\r\na\r\n");
        assert_eq!(&buf[r[1].clone()], b"$-1\r\n");
        assert_eq!(integer(&buf[r[2].clone()]), Some(5));
        let buf3 = b"*2\r\n_\r\n$2\r\nxy\r\n";
        assert_eq!(array_elements(buf3, Resp::V3).unwrap().len(), 2);
    }
}
