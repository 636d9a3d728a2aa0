#!/usr/bin/env bash
# benches/evict.sh: writes under `maxmemory` with eviction, ringdb beside
# redis-server, in one run.
#
# Both servers get `maxmemory MAXMEMORY` and `maxmemory-policy POLICY`, are
# pinned to CPU 0 (ringdb with 1 shard) and filled past the limit first;
# then `redis-benchmark -t set -r KEYSPACE -d 100 -c 50 -P {1,16}` (pinned
# to the last CPU) writes random keys of a keyspace far larger than fits,
# so that nearly every write evicts. REPS runs per row and server,
# alternating which server goes first. Per run: throughput, server CPU
# seconds (utime+stime from /proc/PID/stat), requests per server-CPU-second,
# and at the end used_memory against maxmemory and evicted_keys. Prints a
# Markdown table of medians and ratios (ringdb / Redis) to paste into
# benches/RESULTS.md.
#
# Usage: benches/evict.sh
# Settings (environment variables, defaults in brackets):
#   MAXMEMORY [64mb], POLICY [allkeys-lru], KEYSPACE [10000000]
#   REQUESTS [1000000] per run, REPS [5], PIPELINES ["1 16"]
#   PIN [1], NICE [-10 as root, else 0], RINGDB_PORT [7821], REDIS_PORT [7822]
set -euo pipefail
cd "$(dirname "$0")/.."
MAXMEMORY=${MAXMEMORY:-64mb}
POLICY=${POLICY:-allkeys-lru}
KEYSPACE=${KEYSPACE:-10000000}
REQUESTS=${REQUESTS:-1000000}
REPS=${REPS:-5}
PIPELINES=${PIPELINES:-"1 16"}
PIN=${PIN:-1}
NPROC=$(nproc)
CLIENT_CPU=$((NPROC - 1))
if [ "$(id -u)" -eq 0 ]; then NICE=${NICE:--10}; else NICE=${NICE:-0}; fi
RINGDB_PORT=${RINGDB_PORT:-7821}
REDIS_PORT=${REDIS_PORT:-7822}
# shellcheck source=benches/common.sh
source benches/common.sh
ensure_redis
cargo build --release --quiet
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$work"' EXIT

check_port_free "$RINGDB_PORT"
check_port_free "$REDIS_PORT"
mkdir -p "$work/ringdb" "$work/redis"
$(server_pin 1) target/release/ringdb --port "$RINGDB_PORT" --shards 1 --pin-cpus no \
    --save "" --dir "$work/ringdb" --loglevel warning \
    --maxmemory "$MAXMEMORY" --maxmemory-policy "$POLICY" >"$work/ringdb.log" 2>&1 &
pids+=($!)
ringdb_pid=$!
$(server_pin 1) redis-server --port "$REDIS_PORT" --save "" --appendonly no \
    --dir "$work/redis" --maxmemory "$MAXMEMORY" --maxmemory-policy "$POLICY" \
    >"$work/redis.log" 2>&1 &
pids+=($!)
redis_pid=$!
for port in "$RINGDB_PORT" "$REDIS_PORT"; do
    for _ in $(seq 1 100); do
        redis-cli -p "$port" ping >/dev/null 2>&1 && break
        sleep 0.1
    done
done

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# One run: prints "requests_per_sec cpu_seconds".
run() {
    local port=$1 pid=$2 p=$3 before after rps
    before=$(cpu_ticks "$pid")
    rps=$($(client_pin) redis-benchmark -p "$port" -t set -r "$KEYSPACE" -d 100 -c 50 \
        -P "$p" -n "$REQUESTS" --csv | awk -F'"' '/"SET"/ {print $4}')
    after=$(cpu_ticks "$pid")
    echo "$rps $(awk -v a="$after" -v b="$before" -v t="$(getconf CLK_TCK)" 'BEGIN {print (a - b) / t}')"
}

log "filling both servers past maxmemory $MAXMEMORY ($POLICY)"
run "$RINGDB_PORT" "$ringdb_pid" 16 >/dev/null
run "$REDIS_PORT" "$redis_pid" 16 >/dev/null

results="$work/results"
for p in $PIPELINES; do
    for rep in $(seq 1 "$REPS"); do
        order=("ringdb $RINGDB_PORT $ringdb_pid" "redis $REDIS_PORT $redis_pid")
        [ $((rep % 2)) -eq 0 ] && order=("${order[1]}" "${order[0]}")
        for entry in "${order[@]}"; do
            read -r name port pid <<<"$entry"
            read -r rps cpu <<<"$(run "$port" "$pid" "$p")"
            echo "$name $p $rps $cpu" >>"$results"
            log "P=$p run $rep $name: $rps req/s, $cpu CPU-s"
        done
    done
done

field() { redis-cli -p "$1" info "$2" | tr -d '\r' | awk -F: -v f="$3" '$1 == f {print $2}'; }
echo "maxmemory $MAXMEMORY, policy $POLICY, SET -r $KEYSPACE -d 100 -c 50, $REQUESTS requests per run, medians of $REPS; server on CPU 0, redis-benchmark on CPU $CLIENT_CPU"
echo
python3 - "$results" "$REQUESTS" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, p, rps, cpu = line.split()
    rows.setdefault((int(p), name), []).append((float(rps), int(sys.argv[2]) / float(cpu)))
print("| pipeline | ringdb req/s | Redis req/s | ratio | ringdb req/CPU-s | Redis req/CPU-s | ratio |")
print("|---|---:|---:|---:|---:|---:|---:|")
for p in sorted({k[0] for k in rows}):
    r = rows[(p, "ringdb")]; s = rows[(p, "redis")]
    m = lambda v, i: statistics.median(x[i] for x in v)
    print(f"| {p} | {m(r,0):,.0f} | {m(s,0):,.0f} | {m(r,0)/m(s,0):.2f} | {m(r,1):,.0f} | {m(s,1):,.0f} | {m(r,1)/m(s,1):.2f} |")
PY
echo
for s in "ringdb $RINGDB_PORT" "Redis $REDIS_PORT"; do
    read -r name port <<<"$s"
    echo "- $name: used_memory $(field "$port" memory used_memory) of maxmemory $(field "$port" memory maxmemory), evicted_keys $(field "$port" stats evicted_keys), keys $(redis-cli -p "$port" dbsize)"
done
