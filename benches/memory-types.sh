#!/usr/bin/env bash
# benches/memory-types.sh: memory per data type, for redis-server, valkey-server
# and ringdb (1 and 2 shards) side by side. For each server and each row, a
# fresh server (own temp directory, free port in 7950-7960, `--save ''
# --appendonly no`) is loaded through `redis-cli --pipe`; 3 s later the
# table records VmRSS (/proc/PID/status) and used_memory (INFO memory):
#  1. strings:     1M SET, 12-byte key key:%08d, 16-byte value;
#  2. strings+TTL: the same 1M keys with SET k v EX 100000;
#  3. hashes:      100k keys h:%07d, one HSET each with fields f0..f9, 8-byte values;
#  4. zsets:       100k keys z:%07d, one ZADD each with members m0..m9, scores 1..10;
#  5. stream:      one key s, 1M XADD s * f <8-byte value>.
# The strings row goes on in the same server: DEL of every second key
# ("strings, half deleted") and then FLUSHALL ("strings, flushed"), each
# measured 3 s later.
#
#   benches/memory-types.sh [RINGDB_BINARY] [VALKEY_BINARY]
#   e.g. benches/memory-types.sh target/release/ringdb /work/valkey-8.0.1/src/valkey-server
#   SKIP_VALKEY=1 benches/memory-types.sh   # without valkey
set -euo pipefail
RINGDB=${1:-target/release/ringdb}
VALKEY=${2:-/work/valkey-8.0.1/src/valkey-server}
SKIP_VALKEY=${SKIP_VALKEY:-0}
WORK=$(mktemp -d)
PID=''
trap 'stop_server; rm -rf "$WORK"' EXIT
# shellcheck source=benches/common.sh
. "$(dirname "$0")/common.sh"
ensure_redis
[ -x "$RINGDB" ] || die "no ringdb binary at $RINGDB: cargo build --release"
RINGDB=$(realpath "$RINGDB")
if [ "$SKIP_VALKEY" != 1 ]; then
    if [ ! -x "$VALKEY" ]; then
        cat >&2 <<'EOF'
valkey-server not found. Build valkey 8.0.1 from source, e.g.:
    git clone --branch 8.0.1 --depth 1 https://github.com/valkey-io/valkey /work/valkey-8.0.1
    make -C /work/valkey-8.0.1 -j"$(nproc)" BUILD_TLS=no
(needs gcc, make, pkg-config), then pass its src/valkey-server as the second
argument, or run with SKIP_VALKEY=1 to leave valkey out.
EOF
        die "no valkey-server binary at $VALKEY"
    fi
    VALKEY=$(realpath "$VALKEY")
fi
# A copy taken once: a rebuild of the ringdb binary during the run cannot
# change the server under the later rows.
cp "$RINGDB" "$WORK/ringdb"
cmp -s "$RINGDB" "$WORK/ringdb" || die "$RINGDB changed while it was copied; run again"
RINGDB_VERSION=$("$WORK/ringdb" --version)
PORTS=$(seq 7950 7960)
MB=1048576
START_TIME=$(date +%s)
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- data: one RESP file per row, generated once, loaded into every server.
# emit(n) writes the command a[1..n] in RESP.
AWK_EMIT='function emit(n,   i) { printf "*%d\r\n", n; for (i = 1; i <= n; i++) printf "$%d\r\n%s\r\n", length(a[i]), a[i] }'
ROWS=(strings strings+TTL hashes zsets stream)
gen() {
    case $1 in
        strings) LC_ALL=C awk "$AWK_EMIT"'
            BEGIN { a[1] = "SET"; for (k = 1; k <= 1000000; k++) {
                a[2] = sprintf("key:%08d", k); a[3] = sprintf("val:%012d", k); emit(3) } }' ;;
        strings+TTL) LC_ALL=C awk "$AWK_EMIT"'
            BEGIN { a[1] = "SET"; a[4] = "EX"; a[5] = "100000"; for (k = 1; k <= 1000000; k++) {
                a[2] = sprintf("key:%08d", k); a[3] = sprintf("val:%012d", k); emit(5) } }' ;;
        hashes) LC_ALL=C awk "$AWK_EMIT"'
            BEGIN { a[1] = "HSET"; for (k = 1; k <= 100000; k++) {
                a[2] = sprintf("h:%07d", k)
                for (f = 0; f < 10; f++) { a[3 + 2 * f] = "f" f; a[4 + 2 * f] = sprintf("v%06d%d", k % 1000000, f) }
                emit(22) } }' ;;
        zsets) LC_ALL=C awk "$AWK_EMIT"'
            BEGIN { a[1] = "ZADD"; for (k = 1; k <= 100000; k++) {
                a[2] = sprintf("z:%07d", k)
                for (m = 0; m < 10; m++) { a[3 + 2 * m] = m + 1; a[4 + 2 * m] = "m" m }
                emit(22) } }' ;;
        stream) LC_ALL=C awk "$AWK_EMIT"'
            BEGIN { a[1] = "XADD"; a[2] = "s"; a[3] = "*"; a[4] = "f"; for (k = 1; k <= 1000000; k++) {
                a[5] = sprintf("v%07d", k % 10000000); emit(5) } }' ;;
    esac
}
# Expected DBSIZE, and one more check: "COMMAND ... = VALUE" or "COMMAND ... > VALUE".
expect_keys() { case $1 in strings | strings+TTL) echo 1000000 ;; hashes | zsets) echo 100000 ;; stream) echo 1 ;; esac; }
expect_check() {
    case $1 in
        strings) echo "STRLEN key:01000000 = 16" ;;
        strings+TTL) echo "TTL key:01000000 > 99000" ;;
        hashes) echo "HLEN h:0100000 = 10" ;;
        zsets) echo "ZCARD z:0100000 = 10" ;;
        stream) echo "XLEN s = 1000000" ;;
    esac
}
LC_ALL=C awk "$AWK_EMIT"'
    BEGIN { a[1] = "DEL"; for (k = 2; k <= 1000000; k += 2) { a[2] = sprintf("key:%08d", k); emit(2) } }' \
    >"$WORK/strings-half.resp"
HALF="strings, half deleted"
FLUSHED="strings, flushed"
REPORTED=(strings "$HALF" "$FLUSHED" strings+TTL hashes zsets stream)
for row in "${ROWS[@]}"; do
    gen "$row" >"$WORK/$row.resp"
    log "generated $row: $(($(stat -c %s "$WORK/$row.resp") / MB)) MiB of RESP"
done

# ---- servers
rss_kb() { awk '/^VmRSS/ {print $2}' /proc/"$PID"/status; }
cli() { redis-cli -p "$PORT" "$@"; }
info_field() { cli info "$1" | tr -d '\r' | awk -F: -v k="$2" '$1 == k {print $2}'; }

# Sets PORT to the first port of 7950-7960 that nothing listens on, starting
# after the one used last (a listener can outlive its process for a moment
# while the kernel tears down the process's io_uring).
PORT=7960
pick_port() {
    local p
    for p in $(seq $((PORT + 1)) 7960) $PORTS; do
        ss -Hltn "sport = :$p" 2>/dev/null | grep -q . && continue
        PORT=$p
        return
    done
    die "no free port in 7950-7960"
}

# start NAME DIR CMD...: starts CMD in DIR on $PORT in the background; $! is
# the server (the subshell execs it; ringdb rewrites its process title, so
# it is not found by name).
start() {
    local name=$1 dir=$2
    shift 2
    check_port_free "$PORT"
    (cd "$dir" && exec "$@" >"$dir/server.log" 2>&1) &
    PID=$!
    for _ in $(seq 200); do
        if cli ping 2>/dev/null | grep -q PONG; then
            local pid
            pid=$(info_field server process_id)
            [ "$pid" = "$PID" ] || die "$name: port $PORT answered from pid $pid, not $PID"
            return
        fi
        kill -0 "$PID" 2>/dev/null || { cat "$dir/server.log" >&2; die "$name exited at start"; }
        sleep 0.05
    done
    die "$name did not answer PING on port $PORT in 10 s"
}
SERVERS=(redis valkey ringdb-1 ringdb-2)
declare -A BEFORE USED_BEFORE RSS USED

# measure SERVER ROW: one fresh server, one row of data.
measure() {
    local server=$1 row=$2 dir cmd out errors replies keys check op want got
    case $server in
        redis) cmd=(redis-server) ;;
        valkey) [ "$SKIP_VALKEY" = 1 ] && return; cmd=("$VALKEY") ;;
        ringdb-*) cmd=("$WORK/ringdb" --shards "${server#ringdb-}") ;;
    esac
    dir=$(mktemp -d "$WORK/$server.XXXX")
    pick_port
    start "$server" "$dir" "${cmd[@]}" --port "$PORT" --save '' --appendonly no
    BEFORE[$server,$row]=$(rss_kb)
    USED_BEFORE[$server,$row]=$(info_field memory used_memory)
    out=$(cli --pipe <"$WORK/$row.resp" 2>&1 | tr -d '\r') || true
    errors=$(awk -F'[:,] *' '/^errors:/ {print $2}' <<<"$out")
    replies=$(awk -F'replies: *' '/replies:/ {print $2}' <<<"$out")
    [ "$errors" = 0 ] || { printf '%s\n' "$out" >&2; die "$server refused $errors commands of row $row"; }
    keys=$(cli dbsize)
    [ "$keys" = "$(expect_keys "$row")" ] || die "$server, $row: DBSIZE $keys, expected $(expect_keys "$row")"
    check=$(expect_check "$row")
    op=$(awk '{print $(NF - 1)}' <<<"$check")
    want=${check##* }
    # shellcheck disable=SC2086 # the check's words are the command
    got=$(cli ${check% [=>] *})
    case $op in
        =) [ "$got" = "$want" ] ;;
        '>') [ "$got" -gt "$want" ] ;;
    esac || die "$server, $row: ${check% [=>] *} gave $got, expected $op $want"
    sleep 3
    RSS[$server,$row]=$(rss_kb)
    USED[$server,$row]=$(info_field memory used_memory)
    log "$server $row (port $PORT): $replies replies; RSS $((${BEFORE[$server,$row]} / 1024)) -> $((${RSS[$server,$row]} / 1024)) MiB, used_memory $((${USED[$server,$row]} / MB)) MiB"
    if [ "$row" = strings ]; then
        cli --pipe <"$WORK/strings-half.resp" >/dev/null
        keys=$(cli dbsize)
        [ "$keys" = 500000 ] || die "$server: DBSIZE $keys after deleting half of the strings"
        sleep 3
        RSS[$server,$HALF]=$(rss_kb)
        USED[$server,$HALF]=$(info_field memory used_memory)
        cli flushall >/dev/null
        sleep 3
        RSS[$server,$FLUSHED]=$(rss_kb)
        USED[$server,$FLUSHED]=$(info_field memory used_memory)
    fi
    stop_server
    rm -rf "$dir"
}

for row in "${ROWS[@]}"; do
    for server in "${SERVERS[@]}"; do measure "$server" "$row"; done
done

# ---- report
mb() { awk -v v="$1" -v d="$2" 'BEGIN {printf "%.1f", v / d}'; }
# cell KIND SERVER ROW: KIND is RSS or BEFORE (kB), USED or USED_BEFORE (bytes).
cell() {
    local kind=$1 server=$2 row=$3 v r div=1024
    case $kind in
        RSS) v=${RSS[$server,$row]:-} r=${RSS[redis,$row]} ;;
        BEFORE) v=${BEFORE[$server,$row]:-} r=${BEFORE[redis,$row]} ;;
        USED) v=${USED[$server,$row]:-} r=${USED[redis,$row]} div=$MB ;;
        USED_BEFORE) v=${USED_BEFORE[$server,$row]:-} r=${USED_BEFORE[redis,$row]} div=$MB ;;
    esac
    if [ -z "$v" ]; then printf 'skipped'; return; fi
    printf '%s' "$(mb "$v" "$div")"
    [ "$server" = redis ] || awk -v v="$v" -v r="$r" 'BEGIN {printf " (%.2f)", v / r}'
}
# table KIND ROW...
table() {
    local kind=$1 row server
    shift
    printf '| row |'; for server in "${SERVERS[@]}"; do printf ' %s |' "$server"; done; echo
    printf '|---|'; for _ in "${SERVERS[@]}"; do printf -- '---:|'; done; echo
    for row in "$@"; do
        printf '| %s |' "$row"
        for server in "${SERVERS[@]}"; do printf ' %s |' "$(cell "$kind" "$server" "$row")"; done
        echo
    done
}
valkey_version=skipped
[ "$SKIP_VALKEY" = 1 ] || valkey_version=$("$VALKEY" --version)
echo "# memory by data type: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), total run time $(($(date +%s) - START_TIME)) s"
echo
echo "- redis: $(redis-server --version)"
echo "- valkey: $valkey_version"
echo "- ringdb: $RINGDB_VERSION ($RINGDB)"
echo "- machine: $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo) RAM, Linux $(uname -r); load average (1/5/15 min) at start $LOAD_START, at end $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- every server: --save '' --appendonly no; ringdb-N: --shards N; MB = 2^20 bytes; (x) = ratio to redis"
echo
echo "## RSS after loading (VmRSS, MB)"
echo
table RSS "${REPORTED[@]}"
echo
echo "## used_memory after loading (INFO memory, MB)"
echo
table USED "${REPORTED[@]}"
echo
echo "## RSS before loading (fresh server, MB)"
echo
table BEFORE "${ROWS[@]}"
echo
echo "## used_memory before loading (fresh server, MB)"
echo
table USED_BEFORE "${ROWS[@]}"
