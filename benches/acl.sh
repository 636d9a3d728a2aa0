#!/usr/bin/env bash
# benches/acl.sh: what the ACL check costs end to end. One ringdb (one
# shard, pinned to CPU 0) serves redis-benchmark (CPU 1) as the default
# user (every command, key and channel: the check is one flag test) and
# as a user with 50 key patterns whose last one matches the benchmark's
# keys (`~app0:*` … `~app48:*`, `~key:*`), alternating run by run. Each
# run reads ringdb's utime+stime before and after for requests per
# server-CPU-second.
#
#   benches/acl.sh [RINGDB_BINARY] [REPS] [REQUESTS]
#   e.g. benches/acl.sh target/release/ringdb 5 1000000
#
# Prints one line per run, then per pipeline the medians and the ratio
# (50 patterns / default user) of throughput and of requests per CPU-s.
set -euo pipefail
RINGDB=${1:-target/release/ringdb}
REPS=${2:-5}
N=${3:-1000000}
NICE=${NICE:--10}
DIR=$(mktemp -d)
RINGDB_PID=''
trap 'kill $RINGDB_PID 2>/dev/null; rm -rf "$DIR"' EXIT
# shellcheck source=benches/common.sh
. "$(dirname "$0")/common.sh"
ensure_redis
[ -x "$RINGDB" ] || die "no ringdb binary at $RINGDB: cargo build --release"
PORT=7831
check_port_free $PORT
taskset -c 0 nice -n "$NICE" "$RINGDB" --port $PORT --bind 127.0.0.1 --shards 1 --save '' \
    --appendonly no --dir "$DIR" >/dev/null 2>&1 &
RINGDB_PID=$!
sleep 1
patterns=()
for i in $(seq 0 48); do patterns+=("~app$i:*"); done
redis-cli -p $PORT ACL SETUSER many on '>pw' +@all "${patterns[@]}" '~key:*' >/dev/null
redis-cli -p $PORT SET key:__rand_int__ x >/dev/null

# pipeline user-args... -> "rps req/cpu-s"
run() {
    local p=$1 t0 t1 csv
    shift
    t0=$(cpu_ticks_total $RINGDB_PID)
    csv=$(taskset -c 1 nice -n "$NICE" redis-benchmark -p $PORT "$@" -t get -n "$N" -r 100000 \
        -c 50 -P "$p" --csv 2>/dev/null | tail -1)
    t1=$(cpu_ticks_total $RINGDB_PID)
    python3 -c "
import csv, io
row = next(csv.reader(io.StringIO('''$csv''')))
print(f'{float(row[1]):.0f} {$N / (($t1 - $t0) / 100):.0f}')"
}

for p in 1 16; do
    rows=""
    for i in $(seq "$REPS"); do
        if (( i % 2 )); then
            d=$(run $p); m=$(run $p --user many -a pw)
        else
            m=$(run $p --user many -a pw); d=$(run $p)
        fi
        echo "P=$p run $i: default $d | 50 patterns $m"
        rows+="$d $m"$'\n'
    done
    python3 -c "
import statistics as st
rows = [list(map(float, l.split())) for l in '''$rows'''.strip().splitlines()]
m = lambda i: st.median(r[i] for r in rows)
ratio = lambda a, b: st.median(r[a] / r[b] for r in rows)
print(f'P=$p: default {m(0):,.0f} req/s, {m(1):,.0f} req/CPU-s | 50 patterns {m(2):,.0f} req/s, {m(3):,.0f} req/CPU-s | ratio throughput {ratio(2, 0):.3f}, per CPU-s {ratio(3, 1):.3f}')"
done
