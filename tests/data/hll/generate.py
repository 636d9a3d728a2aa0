#!/usr/bin/env python3
"""Generates tests/data/hll/expected.txt from a real redis-server.

usage: tests/data/hll/generate.py [REDIS_SERVER]   (default: redis-server on PATH)

Starts redis-server (7.0.15 is the reference) on a free port with no
persistence, builds HyperLogLogs from fixed inputs with PFADD, and records
what Redis answers: the raw bytes (GET) before and after PFCOUNT caches the
count, the count itself, PFCOUNT of several keys, and PFMERGE results. The
ringdb tests (crates/types/src/hll.rs and tests/hyperloglog.rs) replay the
same inputs and must produce the same numbers and bytes. Needs only Python's
standard library.

Line format (space separated; hex for bytes):
  hll NAME SPARSE_MAX ELEMENTS COUNT BYTES_BEFORE_COUNT BYTES_AFTER_COUNT
  union NAME,NAME,... COUNT
  merge DEST_START SOURCE,SOURCE,... COUNT BYTES
ELEMENTS is one of
  str:PREFIX:START:END:BATCH   PREFIX + decimal i for i in START..END, BATCH per PFADD
  u64:START:END:BATCH          i as 8 little-endian bytes
  len:START:END:BATCH          i bytes, byte j being (i * 31 + j) mod 256
DEST_START is '-' (PFMERGE into a new key) or the NAME of an HLL the
destination starts as a copy of.
"""

import os
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# (name, sparse_max, elements)
HLLS = [
    ("empty", 3000, "str:e:0:0:1"),
    ("one", 3000, "str:elem:0:1:1"),
    ("three", 3000, "str:elem:0:3:1"),
    ("ten", 3000, "str:elem:0:10:1"),
    ("hundred", 3000, "str:elem:0:100:1"),
    ("thousand", 3000, "str:elem:0:1000:1"),
    ("thousand_batched", 3000, "str:elem:0:1000:100"),
    ("other_thousand", 3000, "str:other:0:1000:50"),
    ("two_thousand", 3000, "str:elem:0:2000:1"),
    ("three_thousand", 3000, "str:elem:0:3000:10"),
    ("five_thousand", 3000, "str:elem:0:5000:100"),
    ("twenty_thousand", 3000, "str:elem:0:20000:500"),
    ("two_hundred_thousand", 3000, "str:elem:0:200000:1000"),
    ("binary", 3000, "u64:0:2000:7"),
    ("lengths", 3000, "len:0:300:1"),
    ("small_sparse_max", 300, "str:elem:0:1000:1"),
    ("no_sparse_room", 0, "str:elem:0:50:1"),
    ("large_sparse_max", 10000, "str:elem:0:5000:1"),
]

UNIONS = [
    ["hundred", "thousand"],
    ["thousand", "other_thousand"],
    ["five_thousand", "hundred"],
    ["binary", "lengths", "other_thousand", "twenty_thousand"],
    ["empty", "one"],
]

MERGES = [
    ("-", ["hundred", "other_thousand"]),
    ("-", ["five_thousand", "hundred"]),
    ("hundred", ["thousand", "binary"]),
    ("ten", ["twenty_thousand"]),
    ("-", ["empty"]),
]


def elements(spec):
    """The PFADD batches of an ELEMENTS spec, as lists of bytes."""
    kind, *rest = spec.split(":")
    if kind == "str":
        prefix, start, end, batch = rest[0], *map(int, rest[1:])
        items = [(prefix + str(i)).encode() for i in range(start, end)]
    elif kind == "u64":
        start, end, batch = map(int, rest)
        items = [i.to_bytes(8, "little") for i in range(start, end)]
    elif kind == "len":
        start, end, batch = map(int, rest)
        items = [bytes((i * 31 + j) % 256 for j in range(i)) for i in range(start, end)]
    else:
        raise ValueError(spec)
    return [items[i:i + batch] for i in range(0, len(items), batch)] or [[]]


class Redis:
    """A minimal RESP2 client."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.file = self.sock.makefile("rb")

    def call(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.sock.sendall(b"".join(out))
        return self.read()

    def read(self):
        line = self.file.readline()[:-2]
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.file.read(n + 2)
            return data[:-2]
        if kind == b"*":
            return [self.read() for _ in range(int(rest))]
        raise RuntimeError("bad reply %r" % line)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    server = sys.argv[1] if len(sys.argv) > 1 else "redis-server"
    port = free_port()
    workdir = tempfile.mkdtemp()
    proc = subprocess.Popen(
        [server, "--port", str(port), "--save", "", "--appendonly", "no", "--dir", workdir],
        stdout=subprocess.DEVNULL,
    )
    try:
        for _ in range(200):
            try:
                r = Redis(port)
                r.call("PING")
                break
            except OSError:
                time.sleep(0.05)
        version = r.call("INFO", "server").decode().split("redis_version:")[1].split()[0]
        lines = [
            "# Generated by tests/data/hll/generate.py from redis-server %s; do not edit." % version,
        ]
        for name, sparse_max, spec in HLLS:
            r.call("CONFIG", "SET", "hll-sparse-max-bytes", sparse_max)
            for batch in elements(spec):
                r.call("PFADD", name, *batch)
            before = r.call("GET", name)
            count = r.call("PFCOUNT", name)
            after = r.call("GET", name)
            lines.append("hll %s %d %s %d %s %s" % (name, sparse_max, spec, count, before.hex(), after.hex()))
        r.call("CONFIG", "SET", "hll-sparse-max-bytes", 3000)
        for names in UNIONS:
            count = r.call("PFCOUNT", *names)
            lines.append("union %s %d" % (",".join(names), count))
        for i, (start, sources) in enumerate(MERGES):
            dest = "merged:%d" % i
            if start != "-":
                r.call("COPY", start, dest)
            r.call("PFMERGE", dest, *sources)
            merged = r.call("GET", dest)
            count = r.call("PFCOUNT", dest)
            lines.append("merge %s %s %d %s" % (start, ",".join(sources), count, merged.hex()))
        with open(os.path.join(HERE, "expected.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
