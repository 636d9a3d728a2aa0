#!/usr/bin/env bash
# benches/scale.sh: how ringdb's throughput grows with its shard count, on
# whatever machine it runs (written for a 16-core one).
#
# The server gets CPUs 0..H-1 and the load generator CPUs H..2H-1, H being
# half the CPUs. For each shard count 1, 2, 4, 8, … up to H, a fresh ringdb
# pinned to its first S CPUs is filled with KEYS keys (12-byte key, 16-byte
# value; `DEBUG POPULATE`) and loaded by redis-benchmark with one thread per
# load CPU (`--threads`), CLIENTS connections, random keys over the KEYS
# keyspace, GET and SET at pipeline 1 and 16. The same load runs against
# redis-server (on CPU 0) and, when VALKEY names a binary,
# `valkey-server --io-threads H` on the server CPUs. Each row is REPS runs,
# the servers alternating; the table shows medians of throughput, p99 (ms)
# and requests per server-CPU-second (utime+stime of every thread,
# /proc/PID/task/*/stat), and each shard count's throughput over ringdb's
# 1-shard throughput.
#
#   benches/scale.sh [RINGDB_BINARY]
#   e.g. VALKEY=/work/valkey-8.0.1/src/valkey-server benches/scale.sh target/release/ringdb
# Settings (environment, defaults in brackets): KEYS [10000000],
# REQUESTS [2000000 at P=16, REQUESTS/8 at P=1], CLIENTS [50 per load
# thread], REPS [3], TESTS ["get set"], PIPELINES ["1 16"], VALKEY [none].
# On a machine of fewer than 4 CPUs only the 1-shard row can run; the script
# says so and goes on.
set -euo pipefail
RINGDB=${1:-target/release/ringdb}
KEYS=${KEYS:-10000000}
REQUESTS=${REQUESTS:-2000000}
REPS=${REPS:-3}
TESTS=${TESTS:-get set}
PIPELINES=${PIPELINES:-1 16}
VALKEY=${VALKEY:-}
# shellcheck source=benches/common.sh
. "$(dirname "$0")/common.sh"
ensure_redis
[ -x "$RINGDB" ] || die "no ringdb binary at $RINGDB: cargo build --release"
RINGDB=$(realpath "$RINGDB")
NPROC=$(nproc)
HALF=$((NPROC / 2))
[ "$HALF" -ge 1 ] || HALF=1
LOAD_CPUS="$HALF-$((NPROC - 1))"
[ "$NPROC" -ge 2 ] || LOAD_CPUS=0
THREADS=$((NPROC - HALF))
[ "$THREADS" -ge 1 ] || THREADS=1
CLIENTS=${CLIENTS:-$((50 * THREADS))}
[ "$HALF" -ge 2 ] || log "only $NPROC CPUs: the 1-shard row alone fits in half of them"
PORT=7870
DIR=$(mktemp -d)
PID=''
trap 'stop_server; rm -rf "$DIR"' EXIT

# start NAME CMD...: a fresh server on $PORT, filled with $KEYS keys.
start() {
    check_port_free $PORT
    local name=$1
    shift
    rm -rf "${DIR:?}/data" && mkdir -p "$DIR/data"
    (cd "$DIR/data" && exec "$@" >"$DIR/server.log" 2>&1) &
    PID=$!
    for _ in $(seq 200); do
        redis-cli -p $PORT ping 2>/dev/null | grep -q PONG && break
        sleep 0.05
    done
    redis-cli -p $PORT ping 2>/dev/null | grep -q PONG || die "$name did not start: $(tail -3 "$DIR/server.log")"
    redis-cli -p $PORT debug populate "$KEYS" key 16 >/dev/null \
        || die "$name: DEBUG POPULATE failed"
}

# measure TEST P: "rps p99 req-per-cpu-s" of one redis-benchmark run.
measure() {
    local n=$REQUESTS t0 t1 c0 c1 csv
    [ "$2" = 1 ] && n=$((REQUESTS / 8))
    c0=$(cpu_ticks_total "$PID"); t0=$(date +%s.%N)
    csv=$(taskset -c "$LOAD_CPUS" redis-benchmark -p $PORT -t "$1" -n "$n" -r "$KEYS" \
        -c "$CLIENTS" -P "$2" --threads "$THREADS" --csv 2>/dev/null | tail -1)
    t1=$(date +%s.%N); c1=$(cpu_ticks_total "$PID")
    python3 - "$csv" "$n" "$t0" "$t1" "$c0" "$c1" <<'EOF'
import sys
row = [f.strip('"') for f in sys.argv[1].split(',')]
n, t0, t1, c0, c1 = int(sys.argv[2]), *map(float, sys.argv[3:7])
cpu = max(c1 - c0, 1) / 100
print(f"{n / (t1 - t0):.0f} {float(row[6]):.3f} {n / cpu:.0f}")
EOF
}

# Server rows: name and command, ringdb at each shard count first.
names=(); cmds=()
s=1
while [ "$s" -le "$HALF" ]; do
    names+=("ringdb $s shard(s)")
    cmds+=("taskset -c 0-$((s - 1)) $RINGDB --port $PORT --shards $s --save '' --appendonly no --enable-debug-command yes")
    s=$((s * 2))
done
names+=("redis-server")
cmds+=("taskset -c 0 redis-server --port $PORT --save '' --appendonly no --enable-debug-command yes")
if [ -n "$VALKEY" ]; then
    [ -x "$VALKEY" ] || die "VALKEY=$VALKEY is not an executable"
    names+=("valkey --io-threads $HALF")
    cmds+=("taskset -c 0-$((HALF - 1)) $VALKEY --port $PORT --save '' --appendonly no --enable-debug-command yes --io-threads $HALF")
fi

log "$NPROC CPUs: servers on 0-$((HALF - 1)), redis-benchmark --threads $THREADS on $LOAD_CPUS, $CLIENTS clients, $KEYS keys"
echo "| server | test | P | requests/s | p99 ms | requests per server-CPU-second | × ringdb 1 shard |"
echo "|---|---|---:|---:|---:|---:|---:|"
for test in $TESTS; do
    for p in $PIPELINES; do
        declare -A rps=() p99=() per_cpu=()
        for rep in $(seq "$REPS"); do
            # Alternate the order of the servers from one repetition to the next.
            order=$(seq 0 $((${#names[@]} - 1)))
            (( rep % 2 )) || order=$(echo "$order" | tac)
            for i in $order; do
                eval "start \"\${names[$i]}\" ${cmds[$i]}"
                read -r r l c < <(measure "$test" "$p")
                rps[$i]+="$r "; p99[$i]+="$l "; per_cpu[$i]+="$c "
                stop_server
            done
        done
        base=''
        for i in $(seq 0 $((${#names[@]} - 1))); do
            read -r mr ml mc < <(python3 -c "import statistics as s,sys
v=[list(map(float,a.split())) for a in sys.argv[1:]]
print(*(s.median(x) for x in v))" "${rps[$i]}" "${p99[$i]}" "${per_cpu[$i]}")
            [ -n "$base" ] || base=$mr
            printf '| %s | %s | %s | %.0f | %.3f | %.0f | %.2f |\n' "${names[$i]}" "$test" "$p" \
                "$mr" "$ml" "$mc" "$(python3 -c "print($mr / $base)")"
        done
        unset rps p99 per_cpu
    done
done
