#!/usr/bin/env bash
# benches/memlock.sh: what a low locked-memory limit costs ringdb. Run as
# root: each server runs as user nobody (root's CAP_IPC_LOCK would exempt
# io_uring from the limit) under `ulimit -l` of
#   8192 KiB  this host's default: full size (rings, 1 MiB registered buffers)
#    400 KiB  full-size rings, no registered buffers
#     64 KiB  Docker's default: small rings (64 entries; network ring 64/128)
# 1. Start-up: time from exec to the first PONG, 1 and 2 shards, REPS runs
#    each (median, max).
# 2. GET and SET at P=1 and P=16 (redis-benchmark -c 50, and -c 500 at
#    P=16 to fill the small completion ring): one shard pinned to CPU 0,
#    redis-benchmark on CPU 1, the three limits alternating run by run;
#    medians of throughput and of requests per server-CPU-second, and each
#    limit's ratio to 8192 KiB (median of per-run ratios).
#
#   benches/memlock.sh [RINGDB_BINARY] [REPS] [REQUESTS]
#   e.g. benches/memlock.sh target/release/ringdb 5 1000000
set -euo pipefail
RINGDB=${1:-target/release/ringdb}
REPS=${2:-5}
N=${3:-1000000}
NICE=${NICE:--10}
DIR=$(mktemp -d)
chmod 777 "$DIR"
PID=''
trap 'kill -9 $PID 2>/dev/null; rm -rf "$DIR"' EXIT
# shellcheck source=benches/common.sh
. "$(dirname "$0")/common.sh"
ensure_redis
[ -x "$RINGDB" ] || die "no ringdb binary at $RINGDB: cargo build --release"
[ "$(id -u)" = 0 ] || die "run as root (the servers run as nobody under each limit)"
cp "$RINGDB" "$DIR/ringdb"
chmod 755 "$DIR/ringdb"
PORT=7841
check_port_free $PORT
LIMITS="8192 400 64"

# limit shards cpu -> starts a server as nobody, sets PID
start() {
    bash -c "ulimit -l $1; cd $DIR; exec taskset -c $3 nice -n $NICE setpriv --reuid=65534 --regid=65534 \
        --clear-groups $DIR/ringdb --port $PORT --bind 127.0.0.1 --shards $2 --save '' --appendonly no \
        --dir $DIR --logfile $DIR/log-$1" &
    PID=$!
}
stop() { kill -9 "$PID" 2>/dev/null; wait "$PID" 2>/dev/null || true; PID=''; sleep 0.3; }

echo "# start-up to first reply (ms): median, max of $REPS"
for shards in 1 2; do
    for limit in $LIMITS; do
        times=""
        for _ in $(seq "$REPS"); do
            t=$(python3 - "$limit" "$shards" "$DIR" $PORT <<'EOF'
import socket, subprocess, sys, time
limit, shards, d, port = sys.argv[1:5]
cmd = (f"ulimit -l {limit}; cd {d}; exec setpriv --reuid=65534 --regid=65534 --clear-groups "
       f"{d}/ringdb --port {port} --bind 127.0.0.1 --shards {shards} --save '' --dir {d} --logfile {d}/start.log")
t0 = time.perf_counter()
p = subprocess.Popen(["bash", "-c", cmd])
while True:
    try:
        s = socket.create_connection(("127.0.0.1", int(port)), timeout=1)
        s.sendall(b"PING\r\n")
        if s.recv(16).startswith(b"+PONG"):
            break
    except OSError:
        time.sleep(0.0005)
print(f"{(time.perf_counter() - t0) * 1000:.1f}")
p.kill(); p.wait()
EOF
)
            times+="$t "
            sleep 0.3
        done
        python3 -c "
import statistics as st
t = [float(x) for x in '$times'.split()]
print(f'shards=$shards memlock=${limit}KiB: median {st.median(t):.1f} ms, max {max(t):.1f} ms')"
    done
done
grep -h "locked memory" "$DIR"/start.log | tail -1 | cut -c40- || true

# test pipeline clients -> "rps req/cpu-s"
run() {
    local t0 t1 csv
    t0=$(cpu_ticks_total "$PID")
    csv=$(taskset -c 1 nice -n "$NICE" redis-benchmark -p $PORT -t "$1" -n "$N" -r 100000 \
        -c "$3" -P "$2" -d 16 --csv 2>/dev/null | tail -1)
    t1=$(cpu_ticks_total "$PID")
    python3 -c "
import csv, io
row = next(csv.reader(io.StringIO('''$csv''')))
print(f'{float(row[1]):.0f} {$N / (($t1 - $t0) / 100):.0f}')"
}

echo "# throughput: one shard on CPU 0, redis-benchmark on CPU 1"
for spec in "set 1 50" "get 1 50" "set 16 50" "get 16 50" "get 16 500"; do
    read -r test p clients <<<"$spec"
    rows=""
    for i in $(seq "$REPS"); do
        order=$LIMITS
        (( i % 2 )) || order=$(echo "$LIMITS" | tr ' ' '\n' | tac | tr '\n' ' ')
        declare -A got=()
        for limit in $order; do
            start "$limit" 1 0
            for _ in $(seq 100); do redis-cli -p $PORT ping 2>/dev/null | grep -q PONG && break; sleep 0.05; done
            redis-cli -p $PORT set key:__rand_int__ x >/dev/null
            got[$limit]=$(run "$test" "$p" "$clients")
            stop
        done
        echo "$test P=$p c=$clients run $i: 8192 ${got[8192]} | 400 ${got[400]} | 64 ${got[64]}"
        rows+="${got[8192]} ${got[400]} ${got[64]}"$'\n'
    done
    python3 -c "
import statistics as st
rows = [list(map(float, l.split())) for l in '''$rows'''.strip().splitlines()]
m = lambda i: st.median(r[i] for r in rows)
ratio = lambda a, b: st.median(r[a] / r[b] for r in rows)
print(f'$test P=$p c=$clients: 8192 KiB {m(0):,.0f} req/s {m(1):,.0f} req/CPU-s | '
      f'400 KiB {m(2):,.0f} ({ratio(2, 0):.3f}) {m(3):,.0f} ({ratio(3, 1):.3f}) | '
      f'64 KiB {m(4):,.0f} ({ratio(4, 0):.3f}) {m(5):,.0f} ({ratio(5, 1):.3f})')"
done
