# benches/common.sh: helpers the side-by-side benchmark scripts share
# (benches/load.sh, benches/persistence.sh, benches/ab.sh). Sourced; the
# helpers that run servers expect NICE, PIN, NPROC and CLIENT_CPU to be set
# by the script.

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# User and system CPU ticks (10 ms) of every thread of process $1, and
# their sum: a server's CPU time for requests per server-CPU-second.
cpu_ticks() { awk '{u += $14; s += $15} END {print u, s}' /proc/"$1"/task/*/stat; }
cpu_ticks_total() { awk '{t += $14 + $15} END {print t}' /proc/"$1"/task/*/stat; }

# Stops the server whose PID is in $PID (SIGTERM, SIGKILL after 10 s) and
# clears PID; nothing when PID is empty.
stop_server() {
    [ -n "${PID:-}" ] || return 0
    kill "$PID" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
    PID=''
}

ensure_redis() {
    if command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null \
        && command -v redis-cli >/dev/null; then
        return
    fi
    log "installing redis-server and redis-tools with apt"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get install -y redis-server redis-tools \
        || { $sudo apt-get update && $sudo apt-get install -y redis-server redis-tools; }
}

# Refuses to start on a port something already listens on: ringdb binds with
# SO_REUSEPORT, so a stray listener would silently share the load. Waits up
# to 10 s first: a listener can outlive its process for a moment while the
# kernel tears down the process's io_uring.
check_port_free() {
    local i
    for i in $(seq 1 200); do
        ss -Hltn "sport = :$1" 2>/dev/null | grep -q . || {
            [ "$i" -eq 1 ] || log "port $1 became free after $(((i - 1) * 50)) ms"
            return 0
        }
        sleep 0.05
    done
    die "port $1 is already in use"
}

# The command prefix for a server with n shards: its nice value, and CPUs
# 0..n-1 unless PIN=0. nice and taskset exec, so $! is the server's PID.
server_pin() {
    local n=$1
    [ "$n" -le "$NPROC" ] || n=$NPROC
    printf 'nice -n %s ' "$NICE"
    [ "$PIN" = 1 ] && printf 'taskset -c 0-%s' "$((n - 1))"
    echo
}

client_pin() {
    printf 'nice -n %s ' "$NICE"
    [ "$PIN" = 1 ] && printf 'taskset -c %s' "$CLIENT_CPU"
    echo
}

# Builds the loadgen bench (release profile) and sets LOADGEN to its
# executable, as cargo reports it. A LOADGEN already set to an executable
# is used as it is (a copy taken once, so that editing the sources while a
# long comparison runs cannot rebuild the load generator under it).
build_loadgen() {
    [ -x "${LOADGEN:-}" ] && return
    LOADGEN=$(cargo bench --bench loadgen --no-run --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "loadgen" and m.get("executable"):
        print(m["executable"])')
    [ -x "$LOADGEN" ] || die "could not build the loadgen bench (cargo bench --bench loadgen --no-run)"
}
