#!/usr/bin/env bash
# benches/persistence.sh: persistence benchmark of ringdb beside redis-server.
#
# In one run, against a ringdb (SHARDS shards, 1 by default) and a
# redis-server started here on loopback, each in a fresh directory of its
# own under one parent directory (same file system):
#
# 1. SET throughput with the append-only log off, on with
#    `appendfsync everysec`, and on with `appendfsync always`:
#    `redis-benchmark -t set -c 50 -P {1,16} -r 100000`, REPS runs per row
#    and server, alternating which server goes first; medians and ratios.
# 2. Snapshots of KEYS string keys (12-byte keys `key:00000000`, 16-byte
#    values, loaded with `redis-cli --pipe`; ringdb has no DEBUG POPULATE):
#    - SAVE: wall time of the command, REPS times per server;
#    - BGSAVE under load: while redis-benchmark runs SETs of other keys
#      (`-t set -c 50 -P 16 -r 100000`), BGSAVE runs to its end; the
#      server's memory is sampled every 20 ms from /proc: RSS of the server
#      process plus its children (Redis forks a child that shares pages
#      copy-on-write, so that sum counts shared pages twice) and PSS of the
#      same processes (each shared page split among its sharers: the memory
#      the machine really spent). Peak and growth over the value before
#      BGSAVE, REPS times per server;
#    - start-up load: the server is stopped and started again on its
#      snapshot; the time from exec until PING answers PONG and INFO says
#      `loading:0`, REPS times per server.
# Results go to benches/out/persistence/ (raw CSV) and into the
# persistence section of benches/RESULTS.md (benches/persistence_report.py),
# which benches/load.sh's report keeps.
#
# Usage: benches/persistence.sh
# Settings (environment variables, defaults in brackets):
#   REPS [3]                 runs per row and server (medians reported)
#   SHARDS [1]               ringdb shards
#   CLIENTS [50]             redis-benchmark clients
#   SET_REQUESTS_P1 [100000], SET_REQUESTS_P16 [500000]  requests per SET run
#   KEYS [5000000]           keys in the snapshot (0 = skip part 2)
#   MODES ["no everysec always"]  log settings of part 1 ("" = skip part 1)
#   PIN [1]                  1 = servers on CPU 0, clients on the last CPU
#   NICE [-10 as root, else 0]
#   RINGDB_PORT [7811], REDIS_PORT [7812]
#   BASE_DIR [benches/out/persistence/data]  parent of the servers' directories

set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

GIVEN=""
for var in REPS SHARDS CLIENTS SET_REQUESTS_P1 SET_REQUESTS_P16 KEYS MODES PIN NICE RINGDB_PORT \
    REDIS_PORT BASE_DIR; do
    if [ -n "${!var+x}" ]; then GIVEN+="$var=$(printf '%q' "${!var}") "; fi
done

REPS=${REPS:-3}
SHARDS=${SHARDS:-1}
CLIENTS=${CLIENTS:-50}
SET_REQUESTS_P1=${SET_REQUESTS_P1:-100000}
SET_REQUESTS_P16=${SET_REQUESTS_P16:-500000}
KEYS=${KEYS:-5000000}
MODES=${MODES-"no everysec always"}
PIN=${PIN:-1}
if [ "$(id -u)" -eq 0 ]; then NICE=${NICE:--10}; else NICE=${NICE:-0}; fi
RINGDB_PORT=${RINGDB_PORT:-7811}
REDIS_PORT=${REDIS_PORT:-7812}
HOST=127.0.0.1

OUT=$ROOT/benches/out/persistence
BASE_DIR=${BASE_DIR:-$OUT/data}
RINGDB=$ROOT/target/release/ringdb
NPROC=$(nproc)
CLIENT_CPU=$((NPROC - 1))
START_TIME=$(date +%s)

# shellcheck source=benches/common.sh
. "$ROOT/benches/common.sh"

ensure_tools() {
    ensure_redis
    log "building ringdb (release)"
    cargo build --release --bin ringdb >&2
}

# ---------------------------------------------------------------- servers

RINGDB_PID=""
REDIS_PID=""

# Waits until the server on `port` answers PONG and reports loading:0;
# prints the seconds since `start` (a `date +%s.%N`).
wait_ready() {
    local port=$1 pid=$2 start=$3
    python3 - "$port" "$pid" "$start" <<'PYTHON'
import os, socket, sys, time
port, pid, start = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])

def ask(cmd):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(cmd)
        data = b""
        while not data.endswith(b"\r\n") or (data.startswith(b"$") and data.count(b"\r\n") < 2):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        return data

deadline = time.time() + 600
while time.time() < deadline:
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit("server exited at start-up")
    try:
        if ask(b"PING\r\n").startswith(b"+PONG") and b"loading:0" in ask(b"INFO persistence\r\n"):
            print("%.3f" % (time.time() - start))
            sys.exit(0)
    except OSError:
        pass
    time.sleep(0.005)
sys.exit("server did not answer")
PYTHON
}

# start_server NAME DIR [extra flags...]: starts ringdb or redis on its port
# with its directory; sets READY_S to the seconds until it was ready.
READY_S=""
start_server() {
    local name=$1 dir=$2
    shift 2
    local start
    mkdir -p "$dir"
    if [ "$name" = ringdb ]; then
        check_port_free "$RINGDB_PORT"
        start=$(date +%s.%N)
        # shellcheck disable=SC2046
        $(server_pin "$SHARDS") "$RINGDB" --port "$RINGDB_PORT" --bind $HOST --shards "$SHARDS" \
            --save '' --dir "$dir" "$@" >>"$OUT/ringdb.log" 2>&1 &
        RINGDB_PID=$!
        READY_S=$(wait_ready "$RINGDB_PORT" "$RINGDB_PID" "$start") || die "ringdb did not start"
    else
        check_port_free "$REDIS_PORT"
        start=$(date +%s.%N)
        # shellcheck disable=SC2046
        $(server_pin 1) redis-server --port "$REDIS_PORT" --bind $HOST --save '' --daemonize no \
            --dir "$dir" --logfile "$OUT/redis.log" "$@" &
        REDIS_PID=$!
        READY_S=$(wait_ready "$REDIS_PORT" "$REDIS_PID" "$start") || die "redis-server did not start"
    fi
}

stop_pid() {
    local pid=$1
    [ -n "$pid" ] || return 0
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

stop_server() {
    if [ "$1" = ringdb ]; then
        stop_pid "$RINGDB_PID"
        RINGDB_PID=""
    else
        stop_pid "$REDIS_PID"
        REDIS_PID=""
    fi
}

LOAD_PID=""
on_exit() {
    stop_pid "$LOAD_PID"
    stop_server ringdb
    stop_server redis
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

port_of() { if [ "$1" = ringdb ]; then echo "$RINGDB_PORT"; else echo "$REDIS_PORT"; fi; }
pid_of() { if [ "$1" = ringdb ]; then echo "$RINGDB_PID"; else echo "$REDIS_PID"; fi; }

# The two servers, in the order of rep $1 (alternating).
order() { if [ $(($1 % 2)) -eq 1 ]; then echo "ringdb redis"; else echo "redis ringdb"; fi; }

info_field() {
    redis-cli -h $HOST -p "$(port_of "$1")" info persistence | tr -d '\r' | awk -F: -v f="$2" '$1 == f { print $2 }'
}

# ---------------------------------------------------------------- part 1: SET

SET_CSV=$OUT/set.csv

set_run() {
    local name=$1 mode=$2 pipeline=$3 rep=$4 requests
    requests=$SET_REQUESTS_P1
    [ "$pipeline" = 1 ] || requests=$SET_REQUESTS_P16
    local tag="$OUT/runs/set-$mode-P$pipeline-$name-$rep"
    local rc=0
    # shellcheck disable=SC2046
    $(client_pin) redis-benchmark -h $HOST -p "$(port_of "$name")" -t set -n "$requests" -r 100000 \
        -c "$CLIENTS" -P "$pipeline" --csv >"$tag.csv" 2>"$tag.err" || rc=$?
    local row
    row=$(sed -n 2p "$tag.csv" | tr -d '"' | cut -d, -f2-)
    [ -n "$row" ] || row="0,0,0,0,0,0,0"
    local status=ok
    [ "$rc" -eq 0 ] || status="redis-benchmark exit $rc"
    kill -0 "$(pid_of "$name")" 2>/dev/null || status="server exited"
    echo "$mode,$pipeline,$name,$rep,$requests,$row,$status" >>"$SET_CSV"
    log "SET appendonly=$mode P=$pipeline $name rep $rep: ${row%%,*} rps"
}

part_set() {
    echo "mode,pipeline,server,rep,requests,rps,avg_ms,min_ms,p50_ms,p95_ms,p99_ms,max_ms,status" >"$SET_CSV"
    local mode flags
    for mode in $MODES; do
        case $mode in
            no) flags=(--appendonly no) ;;
            *) flags=(--appendonly yes --appendfsync "$mode") ;;
        esac
        rm -rf "$BASE_DIR/set-ringdb" "$BASE_DIR/set-redis"
        start_server ringdb "$BASE_DIR/set-ringdb" "${flags[@]}"
        start_server redis "$BASE_DIR/set-redis" "${flags[@]}"
        local pipeline rep name
        for pipeline in 1 16; do
            for rep in $(seq 1 "$REPS"); do
                for name in $(order "$rep"); do
                    set_run "$name" "$mode" "$pipeline" "$rep"
                done
            done
        done
        stop_server ringdb
        stop_server redis
        rm -rf "$BASE_DIR/set-ringdb" "$BASE_DIR/set-redis"
    done
}

# ---------------------------------------------------------------- part 2: snapshots

SNAP_CSV=$OUT/snapshot.csv

# A RESP stream of KEYS SETs: key:00000000 → val:000000000000.
gen_keys() {
    python3 - "$1" <<'PYTHON'
import sys
n = int(sys.argv[1])
out = sys.stdout.buffer
chunk = []
for i in range(n):
    chunk.append(b"*3\r\n$3\r\nSET\r\n$12\r\nkey:%08d\r\n$16\r\nval:%012d\r\n" % (i, i))
    if len(chunk) == 100000:
        out.write(b"".join(chunk))
        chunk.clear()
out.write(b"".join(chunk))
PYTHON
}

# The memory of a process and its children, in kB: "rss pss".
memory_kb() {
    local pid=$1 p rss=0 pss=0 r s
    for p in $pid $(pgrep -P "$pid" || true); do
        r=$(awk '/^VmRSS:/ { print $2 }' "/proc/$p/status" 2>/dev/null || echo 0)
        s=$(awk '/^Pss:/ { print $2 }' "/proc/$p/smaps_rollup" 2>/dev/null || echo 0)
        rss=$((rss + ${r:-0}))
        pss=$((pss + ${s:-0}))
    done
    echo "$rss $pss"
}

snap_row() { echo "$1,$2,$3,$4,$5" >>"$SNAP_CSV"; }

save_run() {
    local name=$1 rep=$2 t0 t1 reply
    t0=$(date +%s.%N)
    reply=$(redis-cli -h $HOST -p "$(port_of "$name")" save)
    t1=$(date +%s.%N)
    [ "$reply" = OK ] || die "$name SAVE: $reply"
    local secs
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
    snap_row "$name" save_s "$rep" "$secs" ok
    log "SAVE $name rep $rep: $secs s"
}

bgsave_run() {
    local name=$1 rep=$2 port pid
    port=$(port_of "$name")
    pid=$(pid_of "$name")
    local before
    before=$(memory_kb "$pid")
    # shellcheck disable=SC2046
    $(client_pin) redis-benchmark -h $HOST -p "$port" -t set -n 100000000 -r 100000 -c "$CLIENTS" \
        -P 16 -q >/dev/null 2>&1 &
    LOAD_PID=$!
    sleep 1
    local t0 t1 peak_rss=0 peak_pss=0 m rss pss
    t0=$(date +%s.%N)
    redis-cli -h $HOST -p "$port" bgsave >/dev/null
    while :; do
        m=$(memory_kb "$pid")
        rss=${m% *}
        pss=${m#* }
        [ "$rss" -le "$peak_rss" ] || peak_rss=$rss
        [ "$pss" -le "$peak_pss" ] || peak_pss=$pss
        if [ "$(info_field "$name" rdb_bgsave_in_progress)" = 0 ]; then break; fi
        sleep 0.02
    done
    t1=$(date +%s.%N)
    stop_pid "$LOAD_PID"
    LOAD_PID=""
    local status
    status=$(info_field "$name" rdb_last_bgsave_status)
    snap_row "$name" bgsave_s "$rep" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')" "$status"
    snap_row "$name" rss_before_kb "$rep" "${before% *}" ok
    snap_row "$name" pss_before_kb "$rep" "${before#* }" ok
    snap_row "$name" rss_peak_kb "$rep" "$peak_rss" ok
    snap_row "$name" pss_peak_kb "$rep" "$peak_pss" ok
    log "BGSAVE $name rep $rep: RSS ${before% *} -> peak $peak_rss kB, PSS ${before#* } -> peak $peak_pss kB ($status)"
}

load_run() {
    local name=$1 rep=$2 secs
    stop_server "$name"
    start_server "$name" "$BASE_DIR/snap-$name" --appendonly no
    secs=$READY_S
    local keys
    keys=$(redis-cli -h $HOST -p "$(port_of "$name")" dbsize)
    local status=ok
    [ "$keys" = "$KEYS" ] || status="loaded $keys keys"
    snap_row "$name" load_s "$rep" "$secs" "$status"
    log "start-up load $name rep $rep: $secs s ($keys keys)"
}

part_snapshot() {
    echo "server,metric,rep,value,status" >"$SNAP_CSV"
    rm -rf "$BASE_DIR/snap-ringdb" "$BASE_DIR/snap-redis"
    start_server ringdb "$BASE_DIR/snap-ringdb" --appendonly no
    start_server redis "$BASE_DIR/snap-redis" --appendonly no
    local name
    for name in ringdb redis; do
        log "loading $KEYS keys into $name"
        # shellcheck disable=SC2046
        gen_keys "$KEYS" | $(client_pin) redis-cli -h $HOST -p "$(port_of "$name")" --pipe >/dev/null
        [ "$(redis-cli -h $HOST -p "$(port_of "$name")" dbsize)" = "$KEYS" ] || die "$name: keys missing"
    done
    local rep
    for rep in $(seq 1 "$REPS"); do
        for name in $(order "$rep"); do save_run "$name" "$rep"; done
    done
    for name in ringdb redis; do
        local file
        file=$(find "$BASE_DIR/snap-$name" -maxdepth 1 -name 'dump*.rdb' -printf '%s\n' | awk '{ s += $1 } END { print s }')
        snap_row "$name" rdb_bytes 1 "$file" ok
    done
    for rep in $(seq 1 "$REPS"); do
        for name in $(order "$rep"); do load_run "$name" "$rep"; done
    done
    # Last: BGSAVE under load writes keys of the load into the snapshot.
    for rep in $(seq 1 "$REPS"); do
        for name in $(order "$rep"); do bgsave_run "$name" "$rep"; done
    done
    stop_server ringdb
    stop_server redis
    rm -rf "$BASE_DIR/snap-ringdb" "$BASE_DIR/snap-redis"
}

# ---------------------------------------------------------------- main

mkdir -p "$OUT/runs" "$BASE_DIR"
: >"$OUT/ringdb.log"
ensure_tools
META=$OUT/meta.txt
{
    echo "command=${GIVEN}benches/persistence.sh"
    echo "settings=REPS=$REPS SHARDS=$SHARDS CLIENTS=$CLIENTS SET_REQUESTS_P1=$SET_REQUESTS_P1 SET_REQUESTS_P16=$SET_REQUESTS_P16 KEYS=$KEYS MODES=\"$MODES\" PIN=$PIN NICE=$NICE"
    echo "date=$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "nproc=$NPROC"
    echo "load_start=$(cut -d' ' -f1-3 /proc/loadavg)"
    echo "ringdb=$("$RINGDB" --version) (git $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates || echo ', uncommitted changes'))"
    echo "redis=$(redis-server --version)"
    echo "fs=$(df -T "$BASE_DIR" | awk 'NR == 2 { print $2 " (" $1 ")" }')"
} >"$META"
if [ -n "$MODES" ]; then part_set; fi
if [ "$KEYS" -gt 0 ]; then part_snapshot; fi
{
    echo "load_end=$(cut -d' ' -f1-3 /proc/loadavg)"
    echo "runtime_s=$(($(date +%s) - START_TIME))"
} >>"$META"
python3 "$ROOT/benches/persistence_report.py" "$OUT" "$ROOT/benches/RESULTS.md"
log "done: benches/RESULTS.md (persistence section)"
