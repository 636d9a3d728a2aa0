#!/usr/bin/env python3
"""Memory and latency of a BGSAVE (or, with `--rewrite`, a BGREWRITEAOF)
of many small keys (ringdb's snapshots and log rewrites without fork and
without stop).

Starts the given ringdb binary (2 shards, its own temp dir, no schedule),
fills KEYS keys `key:%012d` = `xxx` (the keys redis-benchmark's
`-r KEYS` draws) with `redis-cli --pipe`, then runs BGSAVE while a probe
client sends GETs one at a time and measures each reply (and 500 before
the BGSAVE, for comparison), and (with
`--writes`) redis-benchmark overwrites random keys of the same keyspace
(SET, 8 clients, pipeline 16). Peak memory is the server's VmRSS sampled
every 5 ms during the snapshot, and its VmHWM. With `--rewrite` the server
runs with `appendonly yes` (automatic rewrites off) and the command is
BGREWRITEAOF.

Usage: benches/snapshot.py BINARY [--keys N] [--writes] [--rewrite] [--port P]
"""

import argparse
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time


def status(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


class Client:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def call(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a.encode() if isinstance(a, str) else a
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)
        return self.reply()

    def line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def reply(self):
        line = self.line()
        kind, rest = line[:1], line[1:]
        if kind in (b"+", b"-", b":"):
            return rest.decode()
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self.buf += self.sock.recv(65536)
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data.decode(errors="replace")
        raise ValueError(line)


def info_field(c, field):
    for line in c.call("INFO", "persistence").splitlines():
        if line.startswith(field + ":"):
            return line.split(":", 1)[1]
    return None


def fill(port, keys):
    cli = subprocess.Popen(["redis-cli", "-p", str(port), "--pipe"], stdin=subprocess.PIPE,
                           stdout=subprocess.DEVNULL)
    batch = []
    for i in range(keys):
        k = b"key:%012d" % i
        batch.append(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$3\r\nxxx\r\n" % (len(k), k))
        if len(batch) == 10000:
            cli.stdin.write(b"".join(batch))
            batch = []
    cli.stdin.write(b"".join(batch))
    cli.stdin.close()
    cli.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--keys", type=int, default=5_000_000)
    ap.add_argument("--writes", action="store_true")
    ap.add_argument("--rewrite", action="store_true")
    ap.add_argument("--port", type=int, default=7801)
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="ringdb-snapbench-")
    if args.rewrite:
        extra = ["--appendonly", "yes", "--auto-aof-rewrite-percentage", "0"]
        command, started = "BGREWRITEAOF", "Background append only file rewriting started"
        running, last_status = "aof_rewrite_in_progress", "aof_last_bgrewrite_status"
    else:
        extra = []
        command, started = "BGSAVE", "Background saving started"
        running, last_status = "rdb_bgsave_in_progress", "rdb_last_bgsave_status"
    server = subprocess.Popen([args.binary, "--port", str(args.port), "--shards", "2",
                               "--pin-cpus", "no", "--dir", d, "--save", "",
                               "--loglevel", "warning"] + extra)
    try:
        for _ in range(200):
            try:
                c = Client(args.port)
                break
            except OSError:
                time.sleep(0.05)
        t = time.time()
        fill(args.port, args.keys)
        fill_s = time.time() - t
        assert int(c.call("DBSIZE")) == args.keys
        base_rss = status(server.pid, "VmRSS")
        base_hwm = status(server.pid, "VmHWM")
        writer = None
        if args.writes:
            writer = subprocess.Popen(
                ["redis-benchmark", "-p", str(args.port), "-t", "set", "-r", str(args.keys),
                 "-n", "1000000000", "-c", "8", "-P", "16", "-q"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1.0)
        peak = [0]
        done = threading.Event()

        def sample():
            while not done.is_set():
                peak[0] = max(peak[0], status(server.pid, "VmRSS"))
                time.sleep(0.005)

        sampler = threading.Thread(target=sample)
        sampler.start()
        probe = Client(args.port)
        idle = []
        for _ in range(500):
            a = time.perf_counter()
            probe.call("GET", "key:000000000123")
            idle.append(time.perf_counter() - a)
            time.sleep(0.001)
        idle.sort()
        t0 = time.time()
        assert c.call(command).startswith(started)
        bgsave_reply = time.time() - t0
        lat = []
        while True:
            for _ in range(50):
                a = time.perf_counter()
                probe.call("GET", "key:000000000123")
                lat.append(time.perf_counter() - a)
                time.sleep(0.001)
            if info_field(c, running) == "0":
                break
        total = time.time() - t0
        done.set()
        sampler.join()
        if writer:
            writer.kill()
            writer.wait()
        status_ok = info_field(c, last_status)
        hwm = status(server.pid, "VmHWM")
        if args.rewrite:
            logs = os.path.join(d, "appendonlydir")
            size = sum(os.path.getsize(os.path.join(logs, f)) for f in os.listdir(logs))
        else:
            size = os.path.getsize(os.path.join(d, "dump.rdb"))
        lat.sort()
        mib = 1 << 20
        print(f"binary={args.binary} keys={args.keys} writes={args.writes} command={command}")
        print(f"  fill {fill_s:.1f}s; rss before {command} {base_rss / mib:.0f} MiB "
              f"(VmHWM {base_hwm / mib:.0f} MiB); file {size / mib:.0f} MiB; status {status_ok}")
        print(f"  {command} reply {bgsave_reply * 1000:.1f} ms; snapshot done after {total:.2f}s")
        print(f"  peak VmRSS during snapshot {peak[0] / mib:.0f} MiB "
              f"(+{(peak[0] - base_rss) / mib:.0f} MiB); VmHWM after {hwm / mib:.0f} MiB")
        print(f"  GET probes {len(lat)}: p50 {lat[len(lat) // 2] * 1000:.2f} ms, "
              f"p99 {lat[int(len(lat) * 0.99)] * 1000:.2f} ms, max {lat[-1] * 1000:.1f} ms; "
              f"before {command}: p50 {idle[len(idle) // 2] * 1000:.2f} ms, "
              f"p99 {idle[int(len(idle) * 0.99)] * 1000:.2f} ms, max {idle[-1] * 1000:.1f} ms")
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
