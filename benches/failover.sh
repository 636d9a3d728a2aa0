#!/usr/bin/env bash
# benches/failover.sh: how long a redis-sentinel failover leaves writes
# refused, ringdb and redis-server side by side in one run.
#
#   benches/failover.sh [REPS] [DOWN_AFTER_MS]
#
# For each server kind: a primary and one replica of the same kind, one
# redis-sentinel (quorum 1, down-after-milliseconds DOWN_AFTER_MS, default
# 3000, as the issue measured Redis). A writer SETs through redis-cli once
# every 10 ms against whatever Sentinel names as primary; the primary is
# killed with SIGKILL, and the time from the kill to the first write the
# new primary accepts is the failover time. REPS runs each (default 3),
# alternating kinds; medians. Long: not for CI.
set -euo pipefail
cd "$(dirname "$0")/.."
source benches/common.sh
REPS=${1:-3}
DOWN_AFTER=${2:-3000}
RINGDB=${RINGDB:-target/release/ringdb}
[ -x "$RINGDB" ] || cargo build --release
ensure_redis
command -v redis-sentinel >/dev/null || die "redis-sentinel is needed (apt install redis-sentinel)"
DIR=$(mktemp -d)
trap 'pkill -9 -f "ringdb \*:74[2-3][0-9]" 2>/dev/null; pkill -9 -f "redis-server.*:74[2-3][0-9]" 2>/dev/null; pkill -9 -f "redis-sentinel.*:7439" 2>/dev/null; rm -rf "$DIR"' EXIT

start() { # kind port [replicaof-port]
    local kind=$1 port=$2 of=${3:-}
    check_port_free "$port"
    mkdir -p "$DIR/$port"
    local follow=()
    [ -n "$of" ] && follow=(--replicaof 127.0.0.1 "$of")
    if [ "$kind" = ringdb ]; then
        (cd "$DIR/$port" && exec "$OLDPWD/$RINGDB" --port "$port" --save "" \
            --repl-diskless-sync-delay 0 --loglevel warning "${follow[@]}" >/dev/null 2>&1 &)
    else
        (cd "$DIR/$port" && exec redis-server --port "$port" --save "" \
            --repl-diskless-sync-delay 0 --loglevel warning "${follow[@]}" >/dev/null 2>&1 &)
    fi
    for _ in $(seq 1 200); do redis-cli -p "$port" ping >/dev/null 2>&1 && return; sleep 0.05; done
    die "$kind on $port did not start"
}
field() { redis-cli -p "$1" info "$2" | tr -d '\r' | sed -n "s/^$3://p"; }
now_ms() { date +%s%3N; }

# Milliseconds from SIGKILL of the primary to the first accepted write.
failover() { # kind
    local p=7421 r=7422 s=7439
    start "$1" $p
    start "$1" $r $p
    for _ in $(seq 1 200); do
        [ "$(field $r replication master_link_status)" = up ] && break; sleep 0.05
    done
    cat >"$DIR/sentinel.conf" <<EOF
port $s
bind 127.0.0.1
dir $DIR
sentinel monitor m 127.0.0.1 $p 1
sentinel down-after-milliseconds m $DOWN_AFTER
sentinel failover-timeout m 10000
EOF
    (exec redis-sentinel "$DIR/sentinel.conf" >/dev/null 2>&1 &)
    for _ in $(seq 1 400); do
        [ "$(redis-cli -p $s sentinel replicas m 2>/dev/null | grep -c "^$r$")" -ge 1 ] && break
        sleep 0.05
    done
    local killed
    killed=$(now_ms)
    pkill -9 -f "(ringdb \*|redis-server .*):$p" || true
    while :; do
        local primary
        primary=$(redis-cli -p $s sentinel get-master-addr-by-name m 2>/dev/null | sed -n 2p)
        if [ "$primary" = $r ] && [ "$(redis-cli -p $r set k v 2>/dev/null)" = OK ]; then
            break
        fi
        [ $(($(now_ms) - killed)) -lt 60000 ] || die "$1: no failover within 60 s"
        sleep 0.01
    done
    echo $(($(now_ms) - killed))
    pkill -9 -f "redis-sentinel.*:$s" || true
    pkill -9 -f "(ringdb \*|redis-server .*):$r" || true
    sleep 0.5
    rm -f "$DIR/sentinel.conf"
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

ringdb=() redis=()
for _ in $(seq 1 "$REPS"); do
    ringdb+=("$(failover ringdb)")
    redis+=("$(failover redis)")
done
echo "## Sentinel failover after kill -9 (quorum 1, down-after $DOWN_AFTER ms, $REPS runs each, alternating)"
echo
echo "| servers | kill → first write accepted (median) | runs (ms) |"
echo "|---|---|---|"
printf '| ringdb | %s ms | %s |\n' "$(printf '%s\n' "${ringdb[@]}" | median)" "${ringdb[*]}"
printf '| redis-server | %s ms | %s |\n' "$(printf '%s\n' "${redis[@]}" | median)" "${redis[*]}"
