#!/usr/bin/env python3
"""Turns the raw data of benches/load.sh into benches/RESULTS.md.

usage: report.py OUT_DIR RESULTS_MD

Reads OUT_DIR/meta.txt (tab-separated key, value), OUT_DIR/raw.csv (one row
per measured redis-benchmark run), OUT_DIR/mem.csv (one row per memory
load; its `dataset` column says which data set, strings when absent) and
OUT_DIR/loadgen.csv (one row per benches/loadgen.rs run), writes RESULTS_MD
and OUT_DIR/summary.csv (one row per benchmark row, read by chart.py). The
hand-written notes between NOTES_START and NOTES_END in an existing
RESULTS_MD are carried over unchanged.

A run with loadgen rows only (no redis-benchmark rows, no memory rows)
rewrites only the loadgen section of an existing RESULTS_MD (between
LOADGEN_START and LOADGEN_END, inserted before "## Errors and crashes" if
absent), with its own command line, and leaves the rest as it was.
"""

import csv
import os
import re
import statistics
import sys

NOTES_START = "<!-- notes:start -->"
NOTES_END = "<!-- notes:end -->"
LOADGEN_START = "<!-- loadgen:start -->"
LOADGEN_END = "<!-- loadgen:end -->"
# The section benches/persistence.sh writes (benches/persistence_report.py):
# carried over unchanged, as the notes are.
PERSIST_START = "<!-- persistence:start -->"
PERSIST_END = "<!-- persistence:end -->"
# What each loadgen scenario does, by the scenario column of loadgen.csv.
SCENARIO_TEXT = {
    "multi": "`MULTI`, 10 × `INCR`, `EXEC` per transaction from CLIENTS closed-loop clients; "
    "`keys=tagged`: the 10 keys share a hash tag (one shard), `keys=random`: each key drawn from "
    "KEYSPACE on its own, so with 2 shards almost every transaction spans both. Rate: transactions/s; "
    "latency: from sending MULTI to reading EXEC's reply.",
    "evalsha": "`EVALSHA` of a flash-sale script loaded with `SCRIPT LOAD`, from CLIENTS closed-loop "
    "clients: per call it checks the item's stock (`GET`), checks the buyer is not in the item's buyer "
    "set (`SISMEMBER`), then `DECR`s the stock, `SADD`s the buyer and `RPUSH`es the order; items drawn "
    "from 1000 (the 3 keys of an item share a hash tag), buyers from KEYSPACE (`script=flash-sale`); "
    "`script=seckill`: the purchase script of the flash-sale tutorial verbatim, `EVALSHA sha 0 voucher "
    "user order` with no declared key: `GET` of the voucher's stock, `SISMEMBER` of its buyers, then "
    "`INCRBY -1`, `SADD` and `XADD` to the one stream `stream.orders`; 3 vouchers, users from KEYSPACE. "
    "Rate: calls/s.",
    "publish": "S subscriber connections on one channel and 4 publisher connections, `PUBLISH` of a "
    "16-byte payload carrying its send time; at most 64 messages per subscriber in flight. Rate: "
    "messages delivered per second, summed over subscribers; latency: PUBLISH sent to message read.",
    "watch-latency": "W RESP3 connections on `GET.WATCH lg:watched` (ringdb's reactive reads), one "
    "writer `SET`ting the key to a stamped value as soon as every watcher saw the previous one. Rate: "
    "pushes received/s, summed over watchers; latency: SET sent to push read.",
    "blpop-latency": "One connection blocked in `BLPOP lg:list 0`, re-blocking as soon as it is "
    "served; a pusher `LPUSH`es a stamped element once the previous one was popped. Rate: wake-ups/s; "
    "latency: LPUSH sent to BLPOP's reply read.",
    "xreadgroup": "2 producers `XADD` stamped entries to one stream (at most 1000 unacknowledged); a "
    "group of 4 consumers loops on `XREADGROUP ... COUNT 10 BLOCK 100 ... >` and `XACK`s each batch. "
    "Rate: entries acknowledged/s; latency: XADD sent to delivery.",
}
TEST_ORDER = ["ping_mbulk", "set", "get", "get_64k", "incr", "mset", "lpush", "lpop", "sadd", "hset", "zadd", "zpopmin", "zrange", "pfadd", "pfcount", "geoadd", "geosearch"]
TEST_NAMES = {
    "ping_mbulk": "PING",
    "set": "SET",
    "get": "GET",
    "get_64k": "GET 64 KiB",
    "incr": "INCR",
    "mset": "MSET (10 keys)",
    "lpush": "LPUSH",
    "lpop": "LPOP",
    "sadd": "SADD",
    "hset": "HSET",
    "zadd": "ZADD",
    "zpopmin": "ZPOPMIN",
    "zrange": "ZRANGE 0 9",
    "pfadd": "PFADD",
    "pfcount": "PFCOUNT",
    "geoadd": "GEOADD",
    "geosearch": "GEOSEARCH 10 km, nearest 10",
}
# Memory data sets in report order: (name, heading with {keys}, what each key holds).
DATASETS = [
    ("strings", "{keys} keys, 12-byte keys, 16-byte values"),
    ("hashes", "{keys} hashes of {size} fields (13-byte keys, 7-byte fields, 16-byte values)"),
    ("zsets", "{keys} sorted sets of {size} members (13-byte keys, 14-byte members, integer scores)"),
]


def read_meta(path):
    meta = {}
    with open(path) as f:
        for line in f:
            key, _, value = line.rstrip("\n").partition("\t")
            meta[key] = value
    return meta


def read_csv(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def old_notes(path, start_mark=NOTES_START, end_mark=NOTES_END):
    """The notes block (or another carried-over block) of an existing
    report, markers included, or None."""
    if not os.path.exists(path):
        return None
    text = open(path).read()
    start = text.find(start_mark)
    end = text.find(end_mark)
    if start < 0 or end < start:
        return None
    return text[start : end + len(end_mark)]


def num(row, key):
    try:
        return float(row[key])
    except (KeyError, ValueError):
        return 0.0


def per_cpu_second(run):
    cpu = num(run, "server_cpu_s")
    return num(run, "requests") / cpu if cpu > 0 else 0.0


def other_cpu(run):
    """Cores busy with anything but this server and redis-benchmark."""
    wall = num(run, "wall_s")
    if wall <= 0:
        return 0.0
    rest = num(run, "busy_cpu_s") - num(run, "server_cpu_s") - num(run, "client_cpu_s")
    return max(rest, 0.0) / wall


def share(run, key):
    wall = num(run, "wall_s")
    return num(run, key) / wall if wall > 0 else 0.0


def summarize(runs):
    """Medians (and rps range) over the repetitions of one server in one row."""
    ok = [r for r in runs if r["status"] == "ok"]
    use = ok or runs
    med = lambda f: statistics.median(f(r) for r in use) if use else 0.0
    rps = [num(r, "rps") for r in use]
    return {
        "runs": len(runs),
        "failed": len(runs) - len(ok),
        "requests": int(num(use[0], "requests")) if use else 0,
        "rps": med(lambda r: num(r, "rps")),
        "rps_min": min(rps) if rps else 0.0,
        "rps_max": max(rps) if rps else 0.0,
        "p50": med(lambda r: num(r, "p50_ms")),
        "p99": med(lambda r: num(r, "p99_ms")),
        "per_cpu": med(per_cpu_second),
        "server_cores": med(lambda r: share(r, "server_cpu_s")),
        "client_cores": med(lambda r: share(r, "client_cpu_s")),
        "other_cores": med(other_cpu),
        "steal_cores": med(lambda r: share(r, "steal_cpu_s")),
    }


def phase_key(phase):
    """Sort key of a ringdb phase: "N" (shards, default socket backend) or
    "N:backend" (SHARDS_LIST entries such as 1:glommio)."""
    shards, _, backend = phase.partition(":")
    return (int(shards), backend)


def rows_of(raw):
    """(shards, test, pipeline) keys in run order, tests in redis-benchmark order."""
    keys = []
    for r in raw:
        key = (r["shards"], r["test"], int(r["pipeline"]))
        if key not in keys:
            keys.append(key)
    rank = lambda t: TEST_ORDER.index(t) if t in TEST_ORDER else len(TEST_ORDER)
    return sorted(keys, key=lambda k: (phase_key(k[0]), rank(k[1]), k[2]))


def ratio(a, b):
    return a / b if b else 0.0


def fmt_int(x):
    return f"{x:,.0f}"


def build_rows(raw):
    table = []
    for shards, test, pipeline in rows_of(raw):
        pick = lambda server: [
            r
            for r in raw
            if r["shards"] == shards and r["test"] == test and int(r["pipeline"]) == pipeline and r["server"] == server
        ]
        ring, red = summarize(pick("ringdb")), summarize(pick("redis"))
        table.append({"shards": shards, "test": test, "pipeline": pipeline, "ringdb": ring, "redis": red})
    return table


def write_summary(rows, path):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["shards", "test", "pipeline", "ringdb_rps", "redis_rps", "rps_ratio",
                    "ringdb_per_cpu", "redis_per_cpu", "per_cpu_ratio"])
        for row in rows:
            ring, red = row["ringdb"], row["redis"]
            w.writerow([row["shards"], TEST_NAMES.get(row["test"], row["test"]), row["pipeline"],
                        f"{ring['rps']:.2f}", f"{red['rps']:.2f}", f"{ratio(ring['rps'], red['rps']):.3f}",
                        f"{ring['per_cpu']:.0f}", f"{red['per_cpu']:.0f}",
                        f"{ratio(ring['per_cpu'], red['per_cpu']):.3f}"])


def throughput_table(rows):
    out = [
        "| shards | test | -P | requests/run | ringdb rps (min–max) | redis rps (min–max) | ringdb/redis "
        "| ringdb p50 ms | redis p50 ms | ringdb p99 ms | redis p99 ms |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        ring, red = row["ringdb"], row["redis"]
        out.append(
            f"| {row['shards']} | {TEST_NAMES.get(row['test'], row['test'])} | {row['pipeline']} "
            f"| {fmt_int(ring['requests'])} "
            f"| **{fmt_int(ring['rps'])}** ({fmt_int(ring['rps_min'])}–{fmt_int(ring['rps_max'])}) "
            f"| **{fmt_int(red['rps'])}** ({fmt_int(red['rps_min'])}–{fmt_int(red['rps_max'])}) "
            f"| **{ratio(ring['rps'], red['rps']):.2f}** "
            f"| {ring['p50']:.3f} | {red['p50']:.3f} | {ring['p99']:.3f} | {red['p99']:.3f} |"
        )
    return "\n".join(out)


def cpu_table(rows):
    out = [
        "| shards | test | -P | ringdb req/CPU-s | redis req/CPU-s | ringdb/redis "
        "| ringdb cores busy | redis cores busy | client cores busy | other load (cores) |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        ring, red = row["ringdb"], row["redis"]
        out.append(
            f"| {row['shards']} | {TEST_NAMES.get(row['test'], row['test'])} | {row['pipeline']} "
            f"| {fmt_int(ring['per_cpu'])} | {fmt_int(red['per_cpu'])} "
            f"| **{ratio(ring['per_cpu'], red['per_cpu']):.2f}** "
            f"| {ring['server_cores']:.2f} | {red['server_cores']:.2f} "
            f"| {ring['client_cores']:.2f} / {red['client_cores']:.2f} "
            f"| {ring['other_cores']:.2f} / {red['other_cores']:.2f} |"
        )
    return "\n".join(out)


def dataset_of(m):
    return m.get("dataset") or "strings"


def memory_table(mem):
    if not mem:
        return "Not measured (MEM_KEYS=0)."
    out = [
        "| server | keys | RSS before | RSS after | RSS growth | RSS growth per key | used_memory | load time | check |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for m in mem:
        keys = int(m["keys"])
        before, after = int(m["rss_before_kb"]), int(m["rss_after_kb"])
        growth = (after - before) * 1024
        used = m["used_memory"]
        used_text = f"{int(used) / 1e6:.1f} MB" if used.isdigit() else "not available (no INFO memory)"
        out.append(
            f"| {m['server']} | {keys:,} | {before / 1024:.1f} MiB | {after / 1024:.1f} MiB "
            f"| {growth / 1e6:.1f} MB | {growth / keys:.1f} B | {used_text} | {float(m['load_s']):.1f} s | {m['status']} |"
        )
    return "\n".join(out)


def growth_ratios(mem):
    """ringdb's RSS growth against redis's, one clause per ringdb row."""
    growth = lambda m: int(m["rss_after_kb"]) - int(m["rss_before_kb"])
    redis = [m for m in mem if m["server"] == "redis"]
    if not redis or growth(redis[0]) <= 0:
        return ""
    base = growth(redis[0])
    parts = [f"{m['server']} {growth(m) / base:.2f}" for m in mem if m["server"] != "redis"]
    return "RSS growth against redis-server's: " + ", ".join(parts) + "." if parts else ""


def memory_sections(meta, mem, shards_list):
    """One section per data set measured (the strings one as before)."""
    sizes = {
        "hashes": settings_value(meta, "MEM_HASH_FIELDS", "10"),
        "zsets": settings_value(meta, "MEM_ZSET_MEMBERS", "10"),
    }
    parts = []
    for name, heading in DATASETS:
        rows = [m for m in mem if dataset_of(m) == name]
        if not rows and name != "strings":
            continue
        title = (
            "## Memory: " + heading.format(keys=f"{int(rows[0]['keys']):,}", size=sizes.get(name, ""))
            if rows
            else "## Memory"
        )
        parts += [title, ""]
        if name == "strings":
            parts.append(
                "Loaded into a freshly started server with `redis-cli --pipe` (one SET per key, exact sizes), "
                "then RSS from `/proc/PID/status` (VmRSS) after 1 s. `used_memory` is from `INFO memory`"
                + ("; ringdb has no INFO yet, so for ringdb only RSS is available" if meta.get("ringdb_info_memory") == "no" else "")
                + ". RSS growth is RSS after minus RSS before loading. The issue's reference for Redis: "
                "about 108 MB used_memory / 121 MB RSS. Shard counts measured: "
                + ", ".join(str(s) for s in shards_list)
                + "."
            )
        else:
            command, limit = (
                ("HSET of all fields", "hash-max-listpack-entries 512")
                if name == "hashes"
                else ("ZADD of all members", "zset-max-listpack-entries 128")
            )
            parts.append(
                f"Loaded the same way into a freshly started server, one {command} per key; RSS growth per "
                "key is per collection. Both servers keep collections this small in their compact encoding "
                f"(Redis's listpack; defaults {limit}, 64-byte values)."
            )
        parts += ["", memory_table(rows)]
        ratios = growth_ratios(rows)
        if ratios:
            parts += ["", ratios]
        parts.append("")
    return "\n".join(parts).rstrip("\n")


def problems(raw, mem):
    lines = []
    for r in raw:
        if r["status"] != "ok":
            lines.append(f"- shards={r['shards']} {r['server']} {r['test']} -P {r['pipeline']} rep {r['rep']}: {r['status']}")
    for m in mem:
        if m["status"] != "ok":
            what = "" if dataset_of(m) == "strings" else f" ({dataset_of(m)})"
            lines.append(f"- memory load {m['server']}{what}: {m['status']}")
    return "\n".join(lines) if lines else "None: every run exited 0, no server exited, no error replies."


def raw_table(raw):
    cols = ["shards", "server", "test", "pipeline", "rep", "requests", "rps", "p50_ms", "p99_ms",
            "wall_s", "server_cpu_s", "client_cpu_s", "busy_cpu_s", "steal_cpu_s", "load1", "status"]
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in raw:
        out.append("| " + " | ".join(r[c] for c in cols) + " |")
    return "\n".join(out)


def settings_value(meta, name, default):
    """A setting from meta's `settings` line (NAME=value or NAME="several words")."""
    found = re.search(r'(?:^| )' + name + r'=("[^"]*"|\S*)', meta.get("settings", ""))
    return found.group(1).strip('"') if found else default


def method(meta):
    pin = meta.get("pin") == "1"
    cpu = meta.get("client_cpu", "1")
    lines = [
        f"- Each row: `redis-benchmark -h 127.0.0.1 -p PORT -t TEST -n N -r 100000 -c 50 -P {{1,16}} --csv` "
        "(default 3-byte values; `-r` draws every `__rand_int__` independently, so the 10 keys of one MSET "
        "usually live on different shards when ringdb has 2).",
        f"- N is sized per row from a short probe run against each server (not reported) so that the faster "
        f"server runs about RUN_SECONDS; the probes also fill the keyspace the same way on both servers.",
        "- Both servers run at the same time; each row is measured REPS times per server, alternating which "
        "server goes first. The tables show the median of the runs (each column its own median); rps also "
        "shows the range.",
        "- requests per server-CPU-second = N / (utime+stime of the server process, all threads, read from "
        f"`/proc/PID/stat` before and after the run; clock tick 1/{meta.get('clk_tck', '100')} s).",
        "- *cores busy* = CPU seconds / wall seconds of the run; *client* is redis-benchmark's user+sys time; "
        "*other load* is what the rest of the machine used meanwhile (busy time of all CPUs from `/proc/stat` "
        "minus server and client). This machine is shared, so other load is noise the numbers carry.",
    ]
    tests = settings_value(meta, "TESTS", "").split()
    if {"lpop", "zpopmin", "zrange"} & set(tests):
        lines.append(
            "- ZRANGE has no redis-benchmark 7.0 test: its row runs the custom command `ZRANGE myzset 0 9` "
            "(in place of `-t TEST`) on a sorted set of "
            f"{settings_value(meta, 'ZRANGE_MEMBERS', '1000')} members. LPOP, ZPOPMIN and ZRANGE runs (probes "
            "too) start from their key seeded afresh with `redis-cli --pipe` outside the measured time: "
            "`mylist` and `myzset` hold exactly as many elements as the run pops, so every pop finds one."
        )
    if "get_64k" in tests:
        lines.append(
            "- GET 64 KiB runs the custom command `GET big64k`: one key holding 65,536 bytes, set with "
            "`redis-cli -x` before every run (large replies: ringdb sends the value by reference)."
        )
    if {"geoadd", "geosearch"} & set(tests):
        lines.append(
            "- GEOADD runs `GEOADD points 13.R 38.R m:R` (R a random number below KEYSPACE, so the positions "
            "vary in their last digits); GEOSEARCH runs `GEOSEARCH geo FROMLONLAT 14 38 BYRADIUS 10 km ASC "
            f"COUNT 10` on {settings_value(meta, 'GEO_MEMBERS', '10000')} points spread over 2 x 2 degrees "
            "around that centre (the same points on both servers, seeded before every run): the nine cells' "
            "score ranges, the distance filter, the sort."
        )
    if {"lpush", "lpop", "sadd", "hset", "zadd", "zpopmin", "zrange"} & set(tests):
        lines.append(
            "- The collection tests each work on one key (`mylist`, `myset`, `myhash`, `myzset`), as "
            "redis-benchmark does, so with 2 shards all their requests go to the shard that owns it."
        )
    if pin:
        lines.append(
            f"- Pinning (`taskset`): redis-server on CPU 0; ringdb with 1 shard on CPU 0, with 2 shards on "
            f"CPUs 0-1 (it pins shard i to CPU i of its mask); redis-benchmark and redis-cli on CPU {cpu}. "
            "So with 2 shards, ringdb's second shard shares CPU 1 with the load generator and uses CPU time "
            "redis cannot use: on a 2-core machine the 2-shard rows compare 2 server cores (minus what the "
            "client takes) with redis's 1."
        )
    else:
        lines.append("- No CPU pinning (PIN=0): the kernel placed servers and client.")
    nice = meta.get("nice", "0")
    if nice != "0":
        lines.append(
            f"- Servers, redis-benchmark and redis-cli run at nice {nice}, so the machine's other work "
            "(this machine is shared) disturbs them less; both servers alike."
            + (
                f" The kernel schedules by autogroup, so the script's session group got that nice "
                f"value too (`{meta['autogroup']}`)."
                if "autogroup" in meta
                else ""
            )
        )
    config = (
        " The ringdb under test has no CONFIG GET yet, so redis-benchmark printed `WARNING: Could not fetch "
        "server CONFIG` for it (harmless; not counted as an error)."
        if meta.get("ringdb_config_get") == "no"
        else ""
    )
    lines.append(
        "- ringdb runs with its defaults but for persistence (`--port P --bind 127.0.0.1 --shards N --io-backend B --save '' --appendonly no --dir benches/out`); redis-server with "
        "`--save '' --appendonly no`." + config
    )
    lines.append(
        "- The *shards* column names the ringdb phase: `N` is N shards on the default socket backend "
        "(`--io-backend auto`: each shard's own io_uring ring where the kernel supports it; the phase's log "
        "says which), `N:glommio` the same on glommio's `TcpStream` (the fallback backend). PING is "
        "`-t ping_mbulk`: the ceiling of each socket path, with no command work."
    )
    return "\n".join(lines)


def loadgen_summary(runs):
    """Medians over the repetitions of one server in one loadgen row; `status` is
    `ok` when some runs were, else the first run's status."""
    ok = [r for r in runs if r["status"] == "ok"]
    med = lambda f: statistics.median(f(r) for r in ok) if ok else 0.0
    per_cpu = lambda r: num(r, "ops") / num(r, "server_cpu_s") if num(r, "server_cpu_s") > 0 else 0.0
    rates = [num(r, "rate") for r in ok]
    return {
        "status": "ok" if ok else (runs[0]["status"] if runs else "not run"),
        "runs": len(runs),
        "failed": len(runs) - len(ok),
        "rate": med(lambda r: num(r, "rate")),
        "rate_min": min(rates) if rates else 0.0,
        "rate_max": max(rates) if rates else 0.0,
        "p50": med(lambda r: num(r, "p50_ms")),
        "p99": med(lambda r: num(r, "p99_ms")),
        "per_cpu": med(per_cpu),
        "unit": runs[0]["unit"] if runs else "",
        "variant": runs[0]["variant"] if runs else "",
    }


def loadgen_rows(runs):
    """One row per (shards, scenario name) in run order."""
    keys = []
    for r in runs:
        key = (r["shards"], r["name"])
        if key not in keys:
            keys.append(key)
    rows = []
    for shards, name in sorted(keys, key=lambda k: (phase_key(k[0]), keys.index(k))):
        pick = lambda server: [
            r for r in runs if r["shards"] == shards and r["name"] == name and r["server"] == server
        ]
        ring, red = loadgen_summary(pick("ringdb")), loadgen_summary(pick("redis"))
        rows.append({"shards": shards, "name": name, "ringdb": ring, "redis": red,
                     "variant": ring["variant"] or red["variant"], "unit": ring["unit"] or red["unit"]})
    return rows


def short_status(status):
    """A status cell: `not supported` or `error` without the (long) reason."""
    return status.split(":", 1)[0]


def loadgen_table(rows):
    out = [
        "| shards | scenario | variant | unit | ringdb /s (min–max) | redis /s (min–max) | ringdb/redis "
        "| ringdb p50 ms | redis p50 ms | ringdb p99 ms | redis p99 ms | ringdb per CPU-s | redis per CPU-s "
        "| ringdb/redis |",
        "|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        ring, red = row["ringdb"], row["redis"]
        both = ring["status"] == "ok" and red["status"] == "ok"
        span = lambda s: f" ({fmt_int(s['rate_min'])}–{fmt_int(s['rate_max'])})" if s["runs"] > 1 else ""
        cell = lambda s: f"**{fmt_int(s['rate'])}**{span(s)}" if s["status"] == "ok" else short_status(s["status"])
        ms = lambda s, key: f"{s[key]:.3f}" if s["status"] == "ok" else "–"
        cpu = lambda s: fmt_int(s["per_cpu"]) if s["status"] == "ok" and s["per_cpu"] > 0 else "–"
        rate_ratio = f"**{ratio(ring['rate'], red['rate']):.2f}**" if both else "–"
        cpu_ratio = f"{ratio(ring['per_cpu'], red['per_cpu']):.2f}" if both and red["per_cpu"] > 0 else "–"
        out.append(
            f"| {row['shards']} | {row['name']} | {row['variant']} | {row['unit']} | {cell(ring)} | {cell(red)} "
            f"| {rate_ratio} | {ms(ring, 'p50')} | {ms(red, 'p50')} | {ms(ring, 'p99')} | {ms(red, 'p99')} "
            f"| {cpu(ring)} | {cpu(red)} | {cpu_ratio} |"
        )
    return "\n".join(out)


def loadgen_problems(runs):
    """Statuses other than ok, one line per distinct (server, status), with
    the scenarios and shard counts it happened in."""
    seen = {}
    for r in runs:
        if r["status"] != "ok":
            where = seen.setdefault((r["server"], r["status"]), {})
            where.setdefault(r["name"], set()).add(r["shards"])
    lines = []
    for (server, status), where in seen.items():
        places = ", ".join(f"{name} (shards {', '.join(sorted(shards))})" for name, shards in where.items())
        lines.append(f"- {server}, {places}: {status}")
    return "\n".join(lines)


def loadgen_raw_table(runs):
    cols = ["shards", "server", "name", "rep", "variant", "ops", "seconds", "rate", "p50_ms", "p99_ms",
            "max_ms", "samples", "server_cpu_s", "client_cpu_s", "status"]
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in runs:
        out.append("| " + " | ".join(r.get(c, "").replace("|", "\\|") for c in cols) + " |")
    return "\n".join(out)


def loadgen_section(meta, runs, own_run):
    """The loadgen section, markers included; `own_run` adds the run's command
    and machine state (when the rest of the report comes from another run)."""
    if not runs:
        return ""
    parts = [LOADGEN_START, "## Beyond redis-benchmark: transactions, scripts, Pub/Sub, watches, blocking", ""]
    parts.append(
        "Measured by `benches/loadgen.rs` (`cargo bench --bench loadgen -- SCENARIO ...`), a RESP load "
        "generator for what redis-benchmark cannot drive, run by `benches/load.sh` against both servers "
        "with the same arguments (`SCENARIOS`), REPS times each, alternating which server goes first; "
        "the table shows medians over the runs that succeeded. Each run has a warm-up "
        f"({settings_value(meta, 'LOADGEN_WARMUP', '1')} s, not counted) and a measured window "
        f"({settings_value(meta, 'LOADGEN_SECONDS', '5')} s); an operation counts when it completes in the "
        "window. Latencies come from an HDR-style histogram (under 0.8% error); payloads carry their send "
        "time, so a delivery's latency is read off the message. Senders of pushed traffic (publishers, "
        "writers, pushers, producers) are paced by a credit window, so no backlog builds up and the rate "
        "is one the receivers keep up with. *per CPU-s* is operations per server-CPU-second (utime+stime "
        "from `/proc/PID/stat` over the window). *not supported*: the server answered the scenario's "
        "command with an unknown-command error (redis-server has no `GET.WATCH`). Servers run and are "
        "pinned as for the redis-benchmark rows (see Method); loadgen, all its threads, runs where "
        "redis-benchmark does."
    )
    parts.append("")
    if own_run:
        parts += [
            f"- Command: `{meta.get('command', '?')}`",
            f"- Settings: `{meta.get('settings', '?')}`",
            f"- Date: {meta.get('date', '?')}; total run time {meta.get('runtime_s', '?')} s",
            f"- Load average (1/5/15 min) at start: {meta.get('load_start', '?')}; at end: "
            f"{meta.get('load_end', '?')}",
            f"- ringdb: {meta.get('ringdb', '?')}; Redis: {meta.get('redis', '?')}",
            "",
        ]
    parts.append("Scenarios:")
    parts.append("")
    for name in dict.fromkeys(r["scenario"] for r in runs):
        if name in SCENARIO_TEXT:
            parts.append(f"- `{name}`: {SCENARIO_TEXT[name]}")
    parts += ["", loadgen_table(loadgen_rows(runs)), ""]
    problems_text = loadgen_problems(runs)
    if problems_text:
        parts += ["Runs that did not measure:", "", problems_text, ""]
    parts += ["<details><summary>All loadgen runs</summary>", "", loadgen_raw_table(runs), "", "</details>",
              LOADGEN_END]
    return "\n".join(parts)


def replace_loadgen_section(text, section):
    """`text` with its loadgen section replaced by `section` (or inserted
    before the errors section, or appended)."""
    start, end = text.find(LOADGEN_START), text.find(LOADGEN_END)
    if start >= 0 and end > start:
        return text[:start] + section + text[end + len(LOADGEN_END):]
    anchor = text.find("## Errors and crashes")
    if anchor < 0:
        return text.rstrip("\n") + "\n\n" + section + "\n"
    return text[:anchor] + section + "\n\n" + text[anchor:]


def render(meta, rows, raw, mem, notes, loadgen="", persistence=None, chart=True):
    shards_list = sorted({r["shards"] for r in rows}, key=phase_key)
    parts = [
        "# ringdb vs Redis: load benchmark",
        "",
        "Generated by `benches/load.sh` (which calls `benches/report.py` and `benches/chart.py`). "
        "Each run rewrites this file except the notes section.",
        "",
        "## Run",
        "",
        f"- Command: `{meta.get('command', '?')}`",
        f"- Settings: `{meta.get('settings', '?')}`",
        f"- Date: {meta.get('date', '?')}; total run time {meta.get('runtime_s', '?')} s",
        f"- Machine: {meta.get('nproc', '?')} CPUs ({meta.get('cpu', '?')}), {meta.get('memory', '?')} RAM, "
        f"{meta.get('kernel', '?')}",
        f"- Load average (1/5/15 min) at start: {meta.get('load_start', '?')}; at end: {meta.get('load_end', '?')}",
        f"- ringdb: {meta.get('ringdb', '?')}, built with {meta.get('rustc', '?')}",
        f"- Redis: {meta.get('redis', '?')}; {meta.get('redis-benchmark', '?')}",
        "",
        "## Method",
        "",
        method(meta),
        "",
        "## Throughput and latency (medians)",
        "",
        throughput_table(rows),
        "",
    ]
    # load.sh draws the chart for the main report only.
    if chart:
        parts += ["![ringdb/redis ratio per row](results.svg)", ""]
    parts += [
        "## CPU efficiency (medians)",
        "",
        "Client and other load are shown as ringdb run / redis run.",
        "",
        cpu_table(rows),
        "",
        memory_sections(meta, mem, shards_list),
        "",
    ]
    if loadgen:
        parts += [loadgen, ""]
    if persistence:
        parts += [persistence, ""]
    parts += [
        "## Errors and crashes",
        "",
        problems(raw, mem),
        "",
        "## Notes",
        "",
        notes
        or f"{NOTES_START}\n(Hand-written notes go here; load.sh keeps this block.)\n{NOTES_END}",
        "",
        "<details><summary>All measured runs</summary>",
        "",
        raw_table(raw),
        "",
        "</details>",
        "",
    ]
    return "\n".join(parts)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    out_dir, results = sys.argv[1], sys.argv[2]
    meta = read_meta(os.path.join(out_dir, "meta.txt"))
    raw = read_csv(os.path.join(out_dir, "raw.csv"))
    mem = read_csv(os.path.join(out_dir, "mem.csv"))
    runs = read_csv(os.path.join(out_dir, "loadgen.csv"))
    rows = build_rows(raw)
    write_summary(rows, os.path.join(out_dir, "summary.csv"))
    if runs and not raw and not mem and os.path.exists(results):
        text = replace_loadgen_section(open(results).read(), loadgen_section(meta, runs, own_run=True))
    else:
        persistence = old_notes(results, PERSIST_START, PERSIST_END)
        loadgen = loadgen_section(meta, runs, own_run=False)
        chart = os.path.basename(results) == "RESULTS.md"
        text = render(meta, rows, raw, mem, old_notes(results), loadgen, persistence, chart)
    with open(results, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
