#!/usr/bin/env python3
"""Turns the raw data of benches/persistence.sh into the persistence section
of benches/RESULTS.md.

usage: persistence_report.py OUT_DIR RESULTS_MD

Reads OUT_DIR/meta.txt, OUT_DIR/set.csv (one row per redis-benchmark SET
run) and OUT_DIR/snapshot.csv (one row per measured value of the snapshot
part), and replaces the block between PERSIST_START and PERSIST_END in
RESULTS_MD (inserted before "## Errors and crashes", or at the end, when
absent). benches/report.py carries the block over when load.sh rewrites the
file.
"""

import csv
import os
import statistics
import sys

PERSIST_START = "<!-- persistence:start -->"
PERSIST_END = "<!-- persistence:end -->"


def read_csv(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def read_meta(path):
    meta = {}
    if os.path.exists(path):
        for line in open(path):
            key, _, value = line.rstrip("\n").partition("=")
            meta[key] = value
    return meta


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(v, digits=0):
    if v is None:
        return "–"
    return f"{v:,.{digits}f}"


def ratio(a, b):
    if a is None or not b:
        return "–"
    return f"{a / b:.2f}"


def set_table(rows):
    lines = [
        "| appendonly | -P | requests/run | ringdb rps (min–max) | redis rps (min–max) | ringdb/redis "
        "| ringdb p50 ms | redis p50 ms | ringdb p99 ms | redis p99 ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    keys = []
    for r in rows:
        k = (r["mode"], r["pipeline"])
        if k not in keys:
            keys.append(k)
    for mode, pipeline in keys:
        cells = {}
        for server in ("ringdb", "redis"):
            # Failed runs (reported below the tables) are left out.
            runs = [
                r
                for r in rows
                if (r["mode"], r["pipeline"], r["server"]) == (mode, pipeline, server) and r["status"] == "ok"
            ]
            rps = [float(r["rps"]) for r in runs]
            cells[server] = {
                "rps": median(rps),
                "range": f"{fmt(min(rps))}–{fmt(max(rps))}" if rps else "–",
                "p50": median([float(r["p50_ms"]) for r in runs]),
                "p99": median([float(r["p99_ms"]) for r in runs]),
                "requests": runs[0]["requests"] if runs else "–",
            }
        label = "no" if mode == "no" else f"yes, appendfsync {mode}"
        g, r = cells["ringdb"], cells["redis"]
        lines.append(
            f"| {label} | {pipeline} | {g['requests']} | {fmt(g['rps'])} ({g['range']}) "
            f"| {fmt(r['rps'])} ({r['range']}) | {ratio(g['rps'], r['rps'])} "
            f"| {fmt(g['p50'], 3)} | {fmt(r['p50'], 3)} | {fmt(g['p99'], 3)} | {fmt(r['p99'], 3)} |"
        )
    return "\n".join(lines)


def values(rows, server, metric):
    return [
        float(r["value"])
        for r in rows
        if r["server"] == server and r["metric"] == metric and r["status"] == "ok"
    ]


def snapshot_table(rows):
    def med(server, metric):
        return median(values(rows, server, metric))

    def growth(server, kind):
        before = values(rows, server, f"{kind}_before_kb")
        peak = values(rows, server, f"{kind}_peak_kb")
        return median([p - b for p, b in zip(peak, before)])

    mb = 1024.0
    lines = [
        "| measure (median) | ringdb | redis | ringdb/redis |",
        "|---|---:|---:|---:|",
    ]

    def row(label, g, r, digits=2, scale=1.0):
        gs = None if g is None else g / scale
        rs = None if r is None else r / scale
        lines.append(f"| {label} | {fmt(gs, digits)} | {fmt(rs, digits)} | {ratio(g, r)} |")

    row("snapshot file, MB", med("ringdb", "rdb_bytes"), med("redis", "rdb_bytes"), 1, 1e6)
    row("SAVE, s", med("ringdb", "save_s"), med("redis", "save_s"), 3)
    row("start-up load until PONG and loading:0, s", med("ringdb", "load_s"), med("redis", "load_s"), 3)
    row("BGSAVE under SET load, s (end seen by polling INFO)", med("ringdb", "bgsave_s"), med("redis", "bgsave_s"), 3)
    row("RSS before BGSAVE, MB", med("ringdb", "rss_before_kb"), med("redis", "rss_before_kb"), 1, mb)
    row("peak RSS during BGSAVE (server + children), MB", med("ringdb", "rss_peak_kb"), med("redis", "rss_peak_kb"), 1, mb)
    row("peak PSS during BGSAVE (server + children), MB", med("ringdb", "pss_peak_kb"), med("redis", "pss_peak_kb"), 1, mb)
    row("PSS growth during BGSAVE, MB", growth("ringdb", "pss"), growth("redis", "pss"), 1, mb)
    return "\n".join(lines)


def problems(set_rows, snap_rows):
    bad = [r for r in set_rows if r["status"] != "ok"] + [
        r for r in snap_rows if r["status"] not in ("ok",)
    ]
    if not bad:
        return "No errors: every run finished, every load found every key, every BGSAVE reported ok."
    lines = ["Failed runs (left out of the medians):", ""]
    for r in bad:
        if "mode" in r:
            lines.append(f"- SET, appendonly {r['mode']}, -P {r['pipeline']}, {r['server']} rep {r['rep']}: {r['status']}")
        else:
            lines.append(f"- {r['metric']}, {r['server']} rep {r['rep']}: {r['status']}")
    return "\n".join(lines)


def raw_table(snap_rows):
    lines = ["| server | measure | rep | value |", "|---|---|---:|---:|"]
    for r in snap_rows:
        lines.append(f"| {r['server']} | {r['metric']} | {r['rep']} | {r['value']} |")
    return "\n".join(lines)


def section(meta, set_rows, snap_rows):
    settings = meta.get("settings", "?")
    parts = [
        PERSIST_START,
        "## Persistence: append-only log and snapshots (benches/persistence.sh)",
        "",
        f"- Command: `{meta.get('command', '?')}`",
        f"- Settings: `{settings}`",
        f"- Date: {meta.get('date', '?')}; total run time {meta.get('runtime_s', '?')} s; "
        f"load average at start {meta.get('load_start', '?')}, at end {meta.get('load_end', '?')}",
        f"- ringdb: {meta.get('ringdb', '?')}; Redis: {meta.get('redis', '?')}",
        f"- Both servers' directories are fresh directories under one parent on {meta.get('fs', '?')}; "
        "ringdb runs with 1 shard unless SHARDS says otherwise, both with `--save ''`.",
        "",
        "### SET throughput with the append-only log",
        "",
        "`redis-benchmark -t set -r 100000 -c 50 -P {1,16} --csv` against each server started with "
        "`--appendonly no`, or `--appendonly yes --appendfsync {everysec,always}` (both servers the same "
        "flags; ringdb logs each write as a RESTORE of the key's new state, Redis the command). Median "
        "of the runs (failed runs, listed below the tables, left out); rps also shows the range.",
        "",
        set_table(set_rows) if set_rows else "(not run)",
        "",
        "### Snapshots",
        "",
        "Keys `key:00000000`… with 16-byte values loaded with `redis-cli --pipe` (ringdb has no DEBUG "
        "POPULATE). SAVE: wall time of the command. Start-up: the server is stopped and started again "
        "on its snapshot; time from exec until PING answers PONG and INFO persistence says `loading:0` "
        "(polled every 5 ms). BGSAVE: while `redis-benchmark -t set -r 100000 -c 50 -P 16` writes other "
        "keys, memory of the server and its children sampled every 20 ms from /proc until "
        "`rdb_bgsave_in_progress:0`: RSS (VmRSS; a forked child's pages shared copy-on-write count "
        "twice) and PSS (smaps_rollup; shared pages split between sharers, so the memory really used).",
        "",
        snapshot_table(snap_rows) if snap_rows else "(not run)",
        "",
        problems(set_rows, snap_rows),
        "",
        "<details><summary>All snapshot measurements</summary>",
        "",
        raw_table(snap_rows),
        "",
        "</details>",
        PERSIST_END,
    ]
    return "\n".join(parts)


def replace_section(text, block):
    start = text.find(PERSIST_START)
    end = text.find(PERSIST_END)
    if start >= 0 and end > start:
        return text[:start] + block + text[end + len(PERSIST_END) :]
    anchor = text.find("## Errors and crashes")
    if anchor < 0:
        return text.rstrip("\n") + "\n\n" + block + "\n"
    return text[:anchor] + block + "\n\n" + text[anchor:]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    out_dir, results = sys.argv[1], sys.argv[2]
    meta = read_meta(os.path.join(out_dir, "meta.txt"))
    block = section(meta, read_csv(os.path.join(out_dir, "set.csv")), read_csv(os.path.join(out_dir, "snapshot.csv")))
    text = open(results).read() if os.path.exists(results) else "# ringdb vs Redis\n"
    with open(results, "w") as f:
        f.write(replace_section(text, block))


if __name__ == "__main__":
    main()
