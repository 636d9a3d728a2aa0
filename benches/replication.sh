#!/usr/bin/env bash
# benches/replication.sh: replication measured as a user sees it, with
# ringdb and redis-server side by side in one run.
#
#   benches/replication.sh [KEYS] [REPS]
#
# 1. Full sync of KEYS keys (DEBUG POPULATE, 100-byte values; default 1M):
#    primary → replica for ringdb → ringdb, ringdb → redis-server and
#    redis-server → redis-server (diskless, delay 0), from REPLICAOF until
#    the replica's offset reaches the primary's; the primary's peak RSS
#    during the sync against its RSS before.
# 2. Writes with a replica attached: `redis-benchmark SET -P 16 -d 100`
#    on a fresh primary without a replica, then on a fresh one with one,
#    REPS times alternating (default 5), medians: throughput, requests per
#    second of the primary's CPU time, the replica's lag in bytes at the
#    end of each run with a replica.
#
# ringdb runs with its defaults on this machine's CPUs (2 shards here);
# both servers are built or installed first. Long: not for CI.
set -euo pipefail
cd "$(dirname "$0")/.."
source benches/common.sh
KEYS=${1:-1000000}
REPS=${2:-5}
RINGDB=${RINGDB:-target/release/ringdb}
[ -x "$RINGDB" ] || cargo build --release
ensure_redis
DIR=$(mktemp -d)
trap 'pkill -f "ringdb \*:74[0-9][0-9]" 2>/dev/null; pkill -f "redis-server.*:74[0-9][0-9]" 2>/dev/null; rm -rf "$DIR"' EXIT

start() { # kind port
    local kind=$1 port=$2
    check_port_free "$port"
    mkdir -p "$DIR/$port"
    if [ "$kind" = ringdb ]; then
        (cd "$DIR/$port" && "$OLDPWD/$RINGDB" --port "$port" --save "" --enable-debug-command yes \
            --repl-diskless-sync-delay 0 --loglevel warning >/dev/null 2>&1 &)
    else
        (cd "$DIR/$port" && redis-server --port "$port" --save "" --enable-debug-command yes \
            --repl-diskless-load on-empty-db \
            --repl-diskless-sync-delay 0 --loglevel warning --daemonize no >/dev/null 2>&1 &)
    fi
    for _ in $(seq 1 200); do redis-cli -p "$port" ping >/dev/null 2>&1 && return; sleep 0.05; done
    die "$kind on $port did not start"
}
stop() { redis-cli -p "$1" shutdown nosave >/dev/null 2>&1 || true; sleep 0.3; }
field() { redis-cli -p "$1" info "$2" | tr -d '\r' | sed -n "s/^$3://p"; }
pid_of() { field "$1" server process_id; }
rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }

# Seconds from REPLICAOF until the replica has the primary's offset; the
# primary's peak RSS meanwhile.
sync_time() { # primary-kind replica-kind
    local p=7401 r=7402
    start "$1" $p
    redis-cli -p $p debug populate "$KEYS" key 100 >/dev/null
    start "$2" $r
    local ppid before peak t0 t1
    ppid=$(pid_of $p)
    before=$(rss_kb "$ppid")
    peak=$before
    t0=$(date +%s.%N)
    redis-cli -p $r replicaof 127.0.0.1 $p >/dev/null
    while :; do
        local now link off want
        now=$(rss_kb "$ppid"); [ "$now" -gt "$peak" ] && peak=$now
        link=$(field $r replication master_link_status)
        off=$(field $r replication slave_repl_offset)
        want=$(field $p replication master_repl_offset)
        if [ "$link" = up ] && [ "${off:-0}" -ge "${want:-1}" ]; then break; fi
        sleep 0.05
    done
    t1=$(date +%s.%N)
    local keys
    keys=$(redis-cli -p $r dbsize)
    printf '| %s → %s | %d | %.2f s | %d MB | %d MB |\n' "$1" "$2" "$keys" \
        "$(echo "$t1 - $t0" | bc)" $((before / 1024)) $((peak / 1024))
    stop $r; stop $p
}

echo "## Full sync of $KEYS keys (100-byte values), diskless"
echo
echo "| primary → replica | keys on the replica | time | primary RSS before | primary peak RSS |"
echo "|---|---|---|---|---|"
sync_time ringdb ringdb
sync_time ringdb redis
sync_time redis redis
echo

bench() { # port → requests per second of SET -P 16 -d 100
    redis-benchmark -p "$1" -q -t set -P 16 -d 100 -n 1000000 -r 100000 -c 50 2>/dev/null \
        | tr '\r' '\n' | sed -n 's/^SET: \([0-9.]*\) requests per second.*/\1/p' | tail -1
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
# "req/s req-per-primary-CPU-second" of one run on the primary at $1.
measured() {
    local ppid a rps b
    ppid=$(pid_of "$1")
    a=$(cpu_ticks "$ppid")
    rps=$(bench "$1")
    b=$(cpu_ticks "$ppid")
    echo "$rps $(echo "1000000 * $(getconf CLK_TCK) / ($b - $a)" | bc)"
}

echo "## SET -P 16 -d 100 with and without a replica ($REPS alternating runs, medians)"
echo
echo "Throughput, and requests per second of the primary's own CPU time (the"
echo "replica shares this machine's CPUs: the second column shows what"
echo "feeding a replica costs the primary itself)."
echo
echo "| primary | replica | without (req/s) | with (req/s) | with/without | req per primary CPU-s without | with | with/without | lag at the end (bytes) |"
echo "|---|---|---|---|---|---|---|---|---|"
for pair in "ringdb ringdb" "ringdb redis" "redis redis"; do
    set -- $pair
    p=7411 r=7412
    without=() with=() cpu_without=() cpu_with=() lags=()
    for _ in $(seq 1 "$REPS"); do
        # A fresh primary each time: one that has had a replica keeps
        # feeding its backlog for repl-backlog-ttl.
        start "$1" $p
        read -r rps per_cpu <<<"$(measured $p)"
        without+=("$rps") cpu_without+=("$per_cpu")
        stop $p
        start "$1" $p
        start "$2" $r
        redis-cli -p $r replicaof 127.0.0.1 $p >/dev/null
        for _ in $(seq 1 200); do
            [ "$(field $r replication master_link_status)" = up ] && break; sleep 0.05
        done
        read -r rps per_cpu <<<"$(measured $p)"
        with+=("$rps") cpu_with+=("$per_cpu")
        lags+=($(( $(field $p replication master_repl_offset) - $(field $r replication slave_repl_offset) )))
        stop $r; stop $p
    done
    w=$(printf '%s\n' "${without[@]}" | median)
    v=$(printf '%s\n' "${with[@]}" | median)
    cw=$(printf '%s\n' "${cpu_without[@]}" | median)
    cv=$(printf '%s\n' "${cpu_with[@]}" | median)
    l=$(printf '%s\n' "${lags[@]}" | median)
    printf '| %s | %s | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f | %s |\n' "$1" "$2" "$w" "$v" \
        "$(echo "$v / $w" | bc -l)" "$cw" "$cv" "$(echo "$cv / $cw" | bc -l)" "$l"
done
