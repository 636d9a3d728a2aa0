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
# SHARDS=2 runs 2-shard servers on CPUs 0 and 1 instead (redis-benchmark
# still on CPU 1, as benches/load.sh's 2-shard rows).
#
# OLD_ARGS and NEW_ARGS add server options to one side (then OLD and NEW
# may be the same binary), e.g. comparing a setting:
#   NEW_ARGS="--spin-before-park 20" benches/ab.sh B B get 1 300000 9
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
    # shellcheck disable=SC2086
    taskset -c "$CPUS" nice -n "$NICE" "$1" --port "$2" --bind 127.0.0.1 --shards "$SHARDS" --save '' \
        --appendonly no --dir "$3" $4 >/dev/null 2>&1 &
}
start "$OLD" 7811 "$DIR/old" "${OLD_ARGS:-}"; OLD_PID=$!
start "$NEW" 7812 "$DIR/new" "${NEW_ARGS:-}"; NEW_PID=$!
sleep 1

ticks() { # CPU ticks of every thread of a process
    awk '{print $14 + $15}' /proc/"$1"/task/*/stat | awk '{s += $1} END {print s}'
}
# shellcheck source=benches/common.sh
. "$(dirname "$0")/common.sh"
if [[ $TEST == loadgen:* ]]; then
    build_loadgen
fi
run() { # port pid -> "rps req/cpu-s"
    if [[ $TEST == loadgen:* ]]; then
        # CSV columns: ... ops(4) seconds(5) rate(6) ... server_cpu_s(11)
        # shellcheck disable=SC2086
        taskset -c 1 nice -n "$NICE" "$LOADGEN" ${TEST#loadgen:} --port "$1" --seconds 3 \
            --server-pid "$2" 2>/dev/null | grep -v '^[^,]* \[' | tail -1 |
            awk -F, '{printf "%.0f %.0f\n", $6, $4 / $11}'
        return
    fi
    local c0 t0 t1 c1
    c0=$(ticks "$2"); t0=$(date +%s.%N)
    taskset -c 1 nice -n "$NICE" redis-benchmark -p "$1" -t "$TEST" -n "$REQUESTS" -r 100000 \
        -c 50 -P "$PIPELINE" -q >/dev/null 2>&1
    t1=$(date +%s.%N); c1=$(ticks "$2")
    python3 -c "print(f'{$REQUESTS/($t1-$t0):.0f} {$REQUESTS/(($c1-$c0)/100):.0f}')"
}
ratios=()
for i in $(seq "$REPS"); do
    if (( i % 2 )); then o=$(run 7811 $OLD_PID); n=$(run 7812 $NEW_PID)
    else n=$(run 7812 $NEW_PID); o=$(run 7811 $OLD_PID); fi
    echo "old rps/req-per-cpu-s $o | new $n"
    ratios+=("$(python3 -c "print(${n#* }/${o#* })")")
done
python3 -c "import statistics,sys; r=[float(x) for x in sys.argv[1:]]; \
print(f'{\"$TEST\"} P={$PIPELINE}: new/old req per server-CPU-second, median of {len(r)} pairs: {statistics.median(r):.3f} (range {min(r):.2f}-{max(r):.2f})')" "${ratios[@]}"
