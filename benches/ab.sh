#!/usr/bin/env bash
# benches/ab.sh: one ringdb build against another (a change's cost), as
# benches/load.sh compares ringdb with Redis: both 1-shard servers run at
# once pinned to CPU 0, redis-benchmark on CPU 1, runs alternate which
# build goes first, and each run prints both builds' requests per second
# and per server-CPU-second (utime+stime of all threads, /proc/PID/stat).
# The last line is the median of the paired new/old ratios; on a shared
# machine single runs spread by ±25%, so use 7 or more.
#
#   benches/ab.sh OLD_BINARY NEW_BINARY [TEST] [PIPELINE] [REQUESTS] [REPS]
#   e.g. benches/ab.sh /tmp/old/ringdb target/release/ringdb set 16 1500000 9
#
# OLD_BINARY may be redis-server (run with --save '' --appendonly no on CPU
# 0): ringdb against Redis, paired the same way. Each redis-benchmark run
# also prints the server's user and system CPU microseconds per request,
# which says whether a difference is the kernel's work or the server's own.
#
# SHARDS=2 runs 2-shard servers on CPUs 0 and 1 instead (redis-benchmark
# still on CPU 1, as benches/load.sh's 2-shard rows).
#
# OLD_ARGS and NEW_ARGS add server options to one side (then OLD and NEW
# may be the same binary), e.g. comparing a setting:
#   NEW_ARGS="--spin-before-park 20" benches/ab.sh B B get 1 300000 9
#
# BENCH_ARGS adds redis-benchmark options, e.g. BENCH_ARGS="-d 65536" for
# 64 KB values.
#
# A TEST of the form `loadgen:ARGS` runs the loadgen bench instead
# (`cargo bench --bench loadgen -- ARGS --seconds 3`, PIPELINE and REQUESTS
# ignored) and compares its operations per server-CPU-second, e.g.
#   benches/ab.sh OLD NEW 'loadgen:publish --subscribers 100' 0 0 7
# (LOADGEN=PATH runs that loadgen executable instead of building one).
set -euo pipefail
OLD=${1:?old ringdb binary}
NEW=${2:?new ringdb binary}
TEST=${3:-get}
PIPELINE=${4:-16}
REQUESTS=${5:-1000000}
REPS=${6:-7}
NICE=${NICE:--10}
SHARDS=${SHARDS:-1}
CPUS=0-$((SHARDS - 1))
DIR=$(mktemp -d)
trap 'kill $OLD_PID $NEW_PID 2>/dev/null; rm -rf "$DIR"' EXIT

start() { # binary port dir extra-options
    mkdir -p "$3"
    local cpus=$CPUS shards=(--shards "$SHARDS")
    if [[ $(basename "$1") == redis-server ]]; then cpus=0; shards=(); fi
    # shellcheck disable=SC2086
    taskset -c "$cpus" nice -n "$NICE" "$1" --port "$2" --bind 127.0.0.1 "${shards[@]}" --save '' \
        --appendonly no --dir "$3" $4 >/dev/null 2>&1 &
}
# shellcheck source=benches/common.sh
. "$(dirname "$0")/common.sh"
# A server of an earlier comparison may still hold its port for a moment.
check_port_free 7811; check_port_free 7812
start "$OLD" 7811 "$DIR/old" "${OLD_ARGS:-}"; OLD_PID=$!
start "$NEW" 7812 "$DIR/new" "${NEW_ARGS:-}"; NEW_PID=$!
sleep 1

if [[ $TEST == loadgen:* ]]; then
    build_loadgen
fi
run() { # port pid -> "rps req/cpu-s user-us/req sys-us/req"
    if [[ $TEST == loadgen:* ]]; then
        # CSV columns: ... ops(4) seconds(5) rate(6) ... server_cpu_s(11)
        # shellcheck disable=SC2086
        taskset -c 1 nice -n "$NICE" "$LOADGEN" ${TEST#loadgen:} --port "$1" --seconds 3 \
            --server-pid "$2" 2>/dev/null | grep -v '^[^,]* \[' | tail -1 |
            awk -F, '{printf "%.0f %.0f - -\n", $6, $4 / $11}'
        return
    fi
    local u0 s0 t0 t1 u1 s1
    read -r u0 s0 < <(cpu_ticks "$2"); t0=$(date +%s.%N)
    taskset -c 1 nice -n "$NICE" redis-benchmark -p "$1" -t "$TEST" -n "$REQUESTS" -r 100000 \
        -c 50 -P "$PIPELINE" ${BENCH_ARGS:-} -q >/dev/null 2>&1
    t1=$(date +%s.%N); read -r u1 s1 < <(cpu_ticks "$2")
    python3 -c "n = $REQUESTS; u = ($u1 - $u0) / 100; s = ($s1 - $s0) / 100
print(f'{n / ($t1 - $t0):.0f} {n / (u + s):.0f} {u / n * 1e6:.2f} {s / n * 1e6:.2f}')"
}
ratios=()
for i in $(seq "$REPS"); do
    if (( i % 2 )); then o=$(run 7811 $OLD_PID); n=$(run 7812 $NEW_PID)
    else n=$(run 7812 $NEW_PID); o=$(run 7811 $OLD_PID); fi
    read -r o_rps o_cpu o_user o_sys <<<"$o"; read -r n_rps n_cpu n_user n_sys <<<"$n"
    echo "old rps $o_rps req/cpu-s $o_cpu user/sys us/req $o_user/$o_sys" \
        "| new rps $n_rps req/cpu-s $n_cpu user/sys us/req $n_user/$n_sys"
    ratios+=("$(python3 -c "print($n_cpu / $o_cpu)")")
done
python3 -c "import statistics,sys; r=[float(x) for x in sys.argv[1:]]; \
print(f'{\"$TEST\"} P={$PIPELINE}: new/old req per server-CPU-second, median of {len(r)} pairs: {statistics.median(r):.3f} (range {min(r):.2f}-{max(r):.2f})')" "${ratios[@]}"
