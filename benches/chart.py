#!/usr/bin/env python3
"""Draws benches/results.svg from the summary of benches/load.sh.

usage: chart.py SUMMARY_CSV OUT_SVG

One group of bars per benchmark row (shards, test, pipeline): ringdb/redis
throughput ratio and ringdb/redis requests-per-CPU-second ratio, with a line
at 1.0 (parity). Standard library only: the SVG is written by hand.
"""

import csv
import math
import sys
from xml.sax.saxutils import escape

SERIES = [("rps_ratio", "throughput (rps)", "#3b6fb6"), ("per_cpu_ratio", "requests per server-CPU-second", "#e08a2c")]
BAR_W = 20
GROUP_GAP = 18
LEFT, RIGHT, TOP, BOTTOM = 60, 20, 50, 110
PLOT_H = 300


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def y_max(rows):
    top = max([float(r[key]) for r in rows for key, _, _ in SERIES] + [1.0])
    step = 0.5 if top <= 3 else 1.0
    return math.ceil(top * 1.1 / step) * step, step


def text(x, y, s, size=11, anchor="middle", extra=""):
    return f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" {extra}>{escape(s)}</text>'


def draw(rows):
    group_w = BAR_W * len(SERIES) + GROUP_GAP
    plot_w = group_w * len(rows)
    width, height = LEFT + plot_w + RIGHT, TOP + PLOT_H + BOTTOM
    top, step = y_max(rows)
    y = lambda v: TOP + PLOT_H - v / top * PLOT_H
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        text(LEFT, 20, "ringdb / redis-server, median of runs (above 1.0: ringdb ahead)", 14, "start",
             'font-weight="bold"'),
    ]
    for i, (_, label, color) in enumerate(SERIES):
        lx = LEFT + i * 260
        out.append(f'<rect x="{lx}" y="30" width="12" height="12" fill="{color}"/>')
        out.append(text(lx + 18, 40, label, 12, "start"))
    tick = 0.0
    while tick <= top + 1e-9:
        out.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="#ddd"/>')
        out.append(text(LEFT - 6, y(tick) + 4, f"{tick:.1f}", 11, "end"))
        tick += step
    out.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(1):.1f}" y2="{y(1):.1f}" stroke="#c00" '
               'stroke-dasharray="5,3"/>')
    for g, row in enumerate(rows):
        gx = LEFT + g * group_w + GROUP_GAP / 2
        for i, (key, _, color) in enumerate(SERIES):
            v = float(row[key])
            bx = gx + i * BAR_W
            out.append(f'<rect x="{bx:.1f}" y="{y(v):.1f}" width="{BAR_W - 2}" height="{y(0) - y(v):.1f}" '
                       f'fill="{color}"><title>{escape(row["test"])} -P {row["pipeline"]}, {row["shards"]} '
                       f'shard(s): {v:.2f}</title></rect>')
            out.append(text(bx + (BAR_W - 2) / 2, y(v) - 3, f"{v:.2f}", 8))
        cx = gx + BAR_W * len(SERIES) / 2
        label = f'{row["test"].split(" ")[0]} -P{row["pipeline"]}'
        out.append(text(cx, TOP + PLOT_H + 14, label, 10, "end",
                        f'transform="rotate(-40 {cx:.1f} {TOP + PLOT_H + 14})"'))
    # Brackets naming the shard count of each run of groups.
    start = 0
    for g in range(1, len(rows) + 1):
        if g == len(rows) or rows[g]["shards"] != rows[start]["shards"]:
            x0 = LEFT + start * group_w + 4
            x1 = LEFT + g * group_w - 4
            by = TOP + PLOT_H + 70
            out.append(f'<line x1="{x0}" x2="{x1}" y1="{by}" y2="{by}" stroke="#555"/>')
            n = rows[start]["shards"]
            out.append(text((x0 + x1) / 2, by + 16, f"ringdb {n} shard{'s' if n != '1' else ''}", 12))
            start = g
    out.append(f'<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{TOP + PLOT_H}" stroke="#333"/>')
    out.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(0):.1f}" y2="{y(0):.1f}" stroke="#333"/>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    rows = read_rows(sys.argv[1])
    if not rows:
        sys.exit("chart.py: no rows in " + sys.argv[1])
    with open(sys.argv[2], "w") as f:
        f.write(draw(rows))


if __name__ == "__main__":
    main()
