#!/usr/bin/env bash
# benches/memory-return.sh: RSS (/proc/PID/status VmRSS) as a user watches
# it, for ringdb (1 and 2 shards) and redis-server side by side:
#  1. N idle connections (each answered one PING): RSS per connection, and
#     RSS 3 s after they all closed;
#  2. 1M SETs (12-byte key, 16-byte value) through `redis-cli --pipe`, then
#     FLUSHALL: RSS before, loaded (with used_memory) and 3 s after.
#
#   benches/memory-return.sh [RINGDB_BINARY] [N]
#   e.g. benches/memory-return.sh target/release/ringdb 10000
set -euo pipefail
RINGDB=${1:-target/release/ringdb}
N=${2:-10000}
DIR=$(mktemp -d)
PID=''
trap 'kill $PID 2>/dev/null; rm -rf "$DIR"' EXIT
# shellcheck source=benches/common.sh
. "$(dirname "$0")/common.sh"
ensure_redis
[ -x "$RINGDB" ] || die "no ringdb binary at $RINGDB: cargo build --release"
RINGDB=$(realpath "$RINGDB")
ulimit -n "$(ulimit -Hn)"
PORT=7861
check_port_free $PORT

rss() { awk '/VmRSS/ {print int($2 / 1024)}' /proc/"$PID"/status; }
start() {
    (cd "$DIR" && exec "$@" >/dev/null 2>&1) &
    PID=$!
    for _ in $(seq 100); do redis-cli -p $PORT ping 2>/dev/null | grep -q PONG && return; sleep 0.05; done
    die "$* did not start"
}
stop() { kill "$PID"; wait "$PID" 2>/dev/null || true; PID=''; sleep 0.5; }

idle() {
    python3 - "$PORT" "$N" "$PID" <<'EOF'
import socket, sys, time, resource
port, n, pid = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
def rss():
    return next(int(l.split()[1]) for l in open(f'/proc/{pid}/status') if l.startswith('VmRSS'))
before = rss()
socks = [socket.create_connection(('127.0.0.1', port)) for _ in range(n)]
for s in socks: s.sendall(b'PING\r\n')
for s in socks: s.recv(16)
time.sleep(1); during = rss()
for s in socks: s.close()
time.sleep(3); after = rss()
print(f"  {n} idle connections: {(during - before) * 1024 / n:,.0f} bytes each; RSS "
      f"{before / 1024:.1f} -> {during / 1024:.1f} MiB, 3 s after they closed {after / 1024:.1f} MiB")
EOF
}

flush() {
    local before loaded used after
    before=$(rss)
    seq 1 1000000 | awk '{printf "*3\r\n$3\r\nSET\r\n$16\r\nkey:%012d\r\n$16\r\nvvvvvvvvvvvvvvvv\r\n", $1}' \
        | redis-cli -p $PORT --pipe >/dev/null
    sleep 2
    loaded=$(rss)
    used=$(redis-cli -p $PORT info memory | tr -d '\r' | awk -F: '/^used_memory:/ {print int($2 / 1048576)}')
    redis-cli -p $PORT flushall >/dev/null
    sleep 3
    after=$(rss)
    echo "  1M keys: RSS $before MiB -> $loaded MiB (used_memory $used MiB) -> 3 s after FLUSHALL $after MiB"
}

for server in "redis-server" "ringdb 1" "ringdb 2"; do
    echo "$server"
    case $server in
        redis-server) cmd=(redis-server --port $PORT --save '' --appendonly no --maxclients 100000) ;;
        *) cmd=("$RINGDB" --port $PORT --shards "${server#ringdb }" --save '' --maxclients 100000) ;;
    esac
    start "${cmd[@]}"; idle; stop
    start "${cmd[@]}"; flush; stop
done
