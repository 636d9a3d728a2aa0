#!/usr/bin/env bash
# benches/load.sh: side-by-side load benchmark of ringdb and redis-server.
#
# Runs the same redis-benchmark matrix (SET, GET, INCR, MSET of 10 keys,
# LPUSH, LPOP, SADD, HSET, ZADD, ZPOPMIN, ZRANGE; 50 clients; pipeline 1 and
# 16; random keys) against a redis-server and a ringdb started here on
# loopback, ringdb at 1 shard and then at 2 shards, each row repeated REPS
# times with the two servers interleaved. It also counts the server's CPU
# time per run (utime+stime from /proc/PID/stat), loads 1M keys (12-byte
# keys, 16-byte values), 100k hashes of 10 fields and 100k sorted sets of 10
# members into fresh servers to compare memory, and rewrites
# benches/RESULTS.md and benches/results.svg.
#
# Then, in each phase, it runs the scenarios redis-benchmark cannot measure
# with benches/loadgen.rs (`cargo bench --bench loadgen`) against both
# servers with the same parameters, REPS times each, alternating which
# server goes first: MULTI/EXEC transactions (keys under one hash tag, or
# drawn apart so that with 2 shards they span both), EVALSHA of a flash-sale
# script, PUBLISH fan-out to 1/100/1000 subscribers, GET.WATCH push latency
# with 1 and 1000 watchers, BLPOP wake-up latency and XREADGROUP+XACK. A
# server that lacks a scenario's command is reported "not supported".
# With TESTS="" and the MEM_* settings at 0 only the loadgen scenarios run,
# and report.py rewrites only their section of benches/RESULTS.md.
#
# redis-benchmark 7.0 has no ZRANGE test: the zrange row runs the custom
# command `ZRANGE myzset 0 9` against a sorted set of ZRANGE_MEMBERS members.
# Before every run (probes included) of lpop, zpopmin and zrange, the key it
# reads is seeded afresh with redis-cli --pipe, outside the measurement:
# mylist and myzset get as many elements as the run pops, so that no pop
# meets an empty key.
#
# Usage: benches/load.sh
# Settings (environment variables, defaults in brackets):
#   RUN_SECONDS [5]      target length of one measured run; -n is sized from a probe run
#   REPS [3]             measured runs per row and server (the report shows medians)
#   SHARDS_LIST ["1 2 1:glommio"]  ringdb phases: a shard count, optionally with
#                        the socket backend after a colon (--io-backend; without
#                        one, ringdb's default: uring where the kernel has it)
#   TESTS ["ping_mbulk set get get_64k incr mset lpush lpop sadd hset zadd zpopmin zrange"]
#                        redis-benchmark -t names (ping_mbulk: the socket path's
#                        ceiling), and zrange, get_64k (GET of one 64 KiB
#                        value: large replies), pfadd, pfcount
#                        (custom commands: PFADD hll:R R and PFCOUNT hll:R, R a
#                        random number below KEYSPACE; not in the default set),
#                        geoadd, geosearch (GEOADD points 13.R 38.R m:R, and
#                        GEOSEARCH of the nearest 10 within 10 km in a set of
#                        GEO_MEMBERS points over 2 x 2 degrees; not in the
#                        default set)
#   PIPELINES ["1 16"], CLIENTS [50], KEYSPACE [100000]
#   SCENARIOS ["multi multi-random evalsha evalsha-seckill publish-1 publish-100 publish-1000
#             watch-1 watch-1000 blpop xreadgroup"]  loadgen scenarios ("" = none):
#                        multi (10 INCRs under one hash tag), multi-random (10
#                        INCRs on keys drawn apart), evalsha (flash-sale script,
#                        keys declared), evalsha-seckill (the tutorial's purchase
#                        script verbatim: no key declared, 3 vouchers, a stream),
#                        publish-N (N subscribers), watch-N (N GET.WATCH watchers),
#                        blpop, xreadgroup; CLIENTS closed-loop clients for multi
#                        and evalsha, keys drawn from KEYSPACE
#   LOADGEN_SECONDS [RUN_SECONDS], LOADGEN_WARMUP [1]  measured window and
#                        warm-up of one loadgen run, in seconds
#   ZRANGE_MEMBERS [1000]  members of the sorted set the zrange row reads
#   GEO_MEMBERS [10000]  points of the geospatial index the geosearch row reads
#   MEM_KEYS [1000000]   string keys loaded for the memory comparison (0 = skip)
#   MEM_HASHES [100000], MEM_HASH_FIELDS [10]    hashes loaded for it (0 = skip)
#   MEM_ZSETS [100000], MEM_ZSET_MEMBERS [10]    sorted sets loaded for it (0 = skip)
#   PIN [1]              1 = servers on CPU 0 (ringdb with N shards on CPUs 0..N-1),
#                        redis-benchmark and redis-cli on the last CPU; 0 = no taskset
#   NICE [-10 as root, else 0]  nice value of servers and client: above the
#                        machine's other work, so a shared machine disturbs less
#   RINGDB_PORT [7830], REDIS_PORT [7831]
#   RESULTS [benches/RESULTS.md]  the report to write (a focused run can go to
#                        a file of its own and leave the full report as it is)
# Raw per-run data is kept in benches/out/ (ignored by git).

set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

# The settings given in the environment, to print the exact command line.
GIVEN=""
for var in RUN_SECONDS REPS SHARDS_LIST TESTS PIPELINES CLIENTS KEYSPACE ZRANGE_MEMBERS GEO_MEMBERS MEM_KEYS \
    MEM_HASHES MEM_HASH_FIELDS MEM_ZSETS MEM_ZSET_MEMBERS SCENARIOS LOADGEN_SECONDS LOADGEN_WARMUP \
    PIN NICE RINGDB_PORT REDIS_PORT RESULTS; do
    if [ -n "${!var+x}" ]; then GIVEN+="$var=$(printf '%q' "${!var}") "; fi
done

RUN_SECONDS=${RUN_SECONDS:-5}
REPS=${REPS:-3}
SHARDS_LIST=${SHARDS_LIST:-"1 2 1:glommio"}
TESTS=${TESTS-"ping_mbulk set get get_64k incr mset lpush lpop sadd hset zadd zpopmin zrange"}
PIPELINES=${PIPELINES:-"1 16"}
CLIENTS=${CLIENTS:-50}
KEYSPACE=${KEYSPACE:-100000}
ZRANGE_MEMBERS=${ZRANGE_MEMBERS:-1000}
GEO_MEMBERS=${GEO_MEMBERS:-10000}
MEM_KEYS=${MEM_KEYS:-1000000}
MEM_HASHES=${MEM_HASHES:-100000}
MEM_HASH_FIELDS=${MEM_HASH_FIELDS:-10}
MEM_ZSETS=${MEM_ZSETS:-100000}
MEM_ZSET_MEMBERS=${MEM_ZSET_MEMBERS:-10}
SCENARIOS=${SCENARIOS-"multi multi-random evalsha evalsha-seckill publish-1 publish-100 publish-1000 watch-1 watch-1000 blpop xreadgroup"}
LOADGEN_SECONDS=${LOADGEN_SECONDS:-$RUN_SECONDS}
LOADGEN_WARMUP=${LOADGEN_WARMUP:-1}
PIN=${PIN:-1}
if [ "$(id -u)" -eq 0 ]; then NICE=${NICE:--10}; else NICE=${NICE:-0}; fi
RINGDB_PORT=${RINGDB_PORT:-7830}
REDIS_PORT=${REDIS_PORT:-7831}
RESULTS=${RESULTS:-benches/RESULTS.md}
HOST=127.0.0.1

OUT=$ROOT/benches/out
RINGDB=$ROOT/target/release/ringdb
LOADGEN=""  # the loadgen bench executable, found by build_loadgen
CLK_TCK=$(getconf CLK_TCK)
NPROC=$(nproc)
CLIENT_CPU=$((NPROC - 1))

# shellcheck source=benches/common.sh
. "$ROOT/benches/common.sh"

# ---------------------------------------------------------------- servers

RINGDB_PID=""
REDIS_PID=""
LAST_RPS=0
LAST_STATUS=ok

wait_ready() {
    local port=$1 pid=$2
    for _ in $(seq 1 200); do
        kill -0 "$pid" 2>/dev/null || die "server on port $port exited at start-up"
        if [ "$(redis-cli -h $HOST -p "$port" ping 2>/dev/null)" = PONG ]; then
            return
        fi
        sleep 0.05
    done
    die "server on port $port did not answer PING"
}

start_redis() {
    check_port_free "$REDIS_PORT"
    # shellcheck disable=SC2046
    $(server_pin 1) redis-server --port "$REDIS_PORT" --bind $HOST --save '' --appendonly no \
        --daemonize no --logfile "$OUT/redis.log" &
    REDIS_PID=$!
    wait_ready "$REDIS_PORT" "$REDIS_PID"
}

# $1 is a phase of SHARDS_LIST: "N" or "N:backend".
start_ringdb() {
    local phase=$1 shards=${1%%:*} backend=auto
    [ "$phase" = "$shards" ] || backend=${phase#*:}
    check_port_free "$RINGDB_PORT"
    # shellcheck disable=SC2046
    # As redis-server: no snapshots, no log, and a directory of its own (a
    # dump.rdb left in the working directory would be loaded at start).
    $(server_pin "$shards") "$RINGDB" --port "$RINGDB_PORT" --bind $HOST --shards "$shards" \
        --io-backend "$backend" --save '' --appendonly no --dir "$OUT" >>"$OUT/ringdb-$phase.log" 2>&1 &
    RINGDB_PID=$!
    wait_ready "$RINGDB_PORT" "$RINGDB_PID"
}

stop_pid() {
    local pid=$1
    [ -n "$pid" ] || return 0
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

stop_servers() {
    stop_pid "$RINGDB_PID"
    RINGDB_PID=""
    stop_pid "$REDIS_PID"
    REDIS_PID=""
}
on_exit() {
    stop_servers
    restore_priority
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------- measuring

# utime+stime of a process, all threads, in clock ticks. The command name in
# field 2 may hold spaces, so fields are counted after its closing ')'.
cpu_ticks() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || { echo 0; return; }
    stat=${stat##*) }
    awk '{ print $12 + $13 }' <<<"$stat"
}

# Busy and steal ticks summed over all CPUs, from the "cpu" line of /proc/stat.
system_ticks() {
    awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $9; exit }' /proc/stat
}

vm_rss_kb() {
    awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"
}

# ---------------------------------------------------------------- data

# Writes a RESP stream of commands to stdout, for redis-cli --pipe:
#   strings N     N SETs: 12-byte keys key:00000000, 16-byte values
#   hashes N F    N HSETs of F fields: keys hash:00000000, fields field:0,
#                 field:1, …, 16-byte values
#   zsets N M     N ZADDs of M members: keys zset:00000000, 14-byte members
#                 m:000000000000, integer scores
#   list KEY N    LPUSH KEY with N 3-byte elements, 1000 a command
#   zset KEY N    ZADD KEY with N members element:I (score I), 1000 a command
gen_resp() {
    python3 - "$@" <<'PYTHON'
import sys

out = sys.stdout.buffer


def command(*words):
    parts = [b"*%d\r\n" % len(words)]
    for w in words:
        parts.append(b"$%d\r\n%s\r\n" % (len(w), w))
    return b"".join(parts)


def strings(n):
    for i in range(int(n)):
        yield command(b"SET", b"key:%08d" % i, b"val:%012d" % i)


def hashes(n, fields):
    f = int(fields)
    for i in range(int(n)):
        pairs = []
        for j in range(f):
            pairs += [b"field:%d" % j, b"val:%012d" % (i * f + j)]
        yield command(b"HSET", b"hash:%08d" % i, *pairs)


def zsets(n, members):
    m = int(members)
    for i in range(int(n)):
        pairs = []
        for j in range(m):
            pairs += [b"%d" % (i * m + j), b"m:%012d" % (i * m + j)]
        yield command(b"ZADD", b"zset:%08d" % i, *pairs)


def batches(n):
    n = int(n)
    for start in range(0, n, 1000):
        yield range(start, min(start + 1000, n))


def seed_list(key, n):
    for batch in batches(n):
        yield command(b"LPUSH", key.encode(), *[b"xxx"] * len(batch))


def seed_zset(key, n):
    for batch in batches(n):
        pairs = []
        for i in batch:
            pairs += [b"%d" % i, b"element:%d" % i]
        yield command(b"ZADD", key.encode(), *pairs)


def seed_geo(key, n):
    # Points spread over 2 x 2 degrees (about 176 x 222 km) around 14, 38,
    # from a fixed sequence so that both servers hold the same ones.
    import random
    rng = random.Random(7)
    for batch in batches(n):
        triples = []
        for i in batch:
            triples += [b"%.6f" % rng.uniform(13, 15), b"%.6f" % rng.uniform(37, 39), b"p:%d" % i]
        yield command(b"GEOADD", key.encode(), *triples)


kinds = {"strings": strings, "hashes": hashes, "zsets": zsets, "list": seed_list, "zset": seed_zset, "geo": seed_geo}
chunk = []
for c in kinds[sys.argv[1]](*sys.argv[2:]):
    chunk.append(c)
    if len(chunk) == 10000:
        out.write(b"".join(chunk))
        chunk.clear()
out.write(b"".join(chunk))
PYTHON
}

# The redis-benchmark arguments that select a test: `-t TEST`, or for zrange
# (which redis-benchmark 7.0 lacks) a custom command.
test_args() {
    case $1 in
        zrange) echo "ZRANGE myzset 0 9" ;;
        get_64k) echo "GET big64k" ;;
        pfadd) echo "PFADD hll:__rand_int__ __rand_int__" ;;
        pfcount) echo "PFCOUNT hll:__rand_int__" ;;
        geoadd) echo "GEOADD points 13.__rand_int__ 38.__rand_int__ m:__rand_int__" ;;
        geosearch) echo "GEOSEARCH geo FROMLONLAT 14 38 BYRADIUS 10 km ASC COUNT 10" ;;
        *) echo "-t $1" ;;
    esac
}

# Seeds the key a test reads before a run of `requests` requests (outside
# the measurement) and prints what went wrong, if anything: the pops get
# exactly as many elements as they pop, zrange a sorted set of
# ZRANGE_MEMBERS members.
seed_test() {
    local port=$1 test=$2 requests=$3
    local key kind count card got
    case $test in
        lpop) key=mylist kind=list count=$requests card=llen ;;
        zpopmin) key=myzset kind=zset count=$requests card=zcard ;;
        zrange) key=myzset kind=zset count=$ZRANGE_MEMBERS card=zcard ;;
        geosearch) key=geo kind=geo count=$GEO_MEMBERS card=zcard ;;
        get_64k)
            head -c 65536 /dev/zero | tr '\0' x | redis-cli -h $HOST -p "$port" -x set big64k >/dev/null 2>&1 || true
            got=$(redis-cli -h $HOST -p "$port" strlen big64k 2>&1 | head -c 200)
            [ "$got" = 65536 ] || echo "seed big64k: strlen $got, wanted 65536"
            return 0 ;;
        *) return 0 ;;
    esac
    redis-cli -h $HOST -p "$port" del "$key" >/dev/null 2>&1 || true
    # shellcheck disable=SC2046
    gen_resp "$kind" "$key" "$count" | $(client_pin) redis-cli -h $HOST -p "$port" --pipe >/dev/null 2>&1 || true
    got=$(redis-cli -h $HOST -p "$port" "$card" "$key" 2>&1 | tr -d ',' | head -c 200)
    [ "$got" = "$count" ] || echo "seed $key: $card $got, wanted $count"
}

RAW=$OUT/raw.csv
RAW_HEADER="shards,server,test,pipeline,rep,requests,rps,avg_ms,min_ms,p50_ms,p95_ms,p99_ms,max_ms,wall_s,server_cpu_s,client_cpu_s,busy_cpu_s,steal_cpu_s,load1,status"

# One redis-benchmark run. Sets LAST_RPS and LAST_STATUS (ok / what went
# wrong) and appends a row to raw.csv unless rep is "probe".
bench_once() {
    local shards=$1 server=$2 port=$3 pid=$4 test=$5 pipeline=$6 requests=$7 rep=$8
    local tag="$OUT/runs/$shards-$server-$test-P$pipeline-$rep"
    local before after sys_before sys_after load1 seeded rc=0
    seeded=$(seed_test "$port" "$test" "$requests")
    load1=$(cut -d' ' -f1 /proc/loadavg)
    before=$(cpu_ticks "$pid")
    sys_before=$(system_ticks)
    local TIMEFORMAT='%R %U %S'
    # shellcheck disable=SC2046
    { time $(client_pin) redis-benchmark -h $HOST -p "$port" -n "$requests" \
        -r "$KEYSPACE" -c "$CLIENTS" -P "$pipeline" --csv $(test_args "$test") >"$tag.csv" 2>"$tag.err" \
        || rc=$?; } 2>"$tag.time"
    sys_after=$(system_ticks)
    after=$(cpu_ticks "$pid")

    LAST_STATUS=ok
    if ! kill -0 "$pid" 2>/dev/null; then
        LAST_STATUS="server exited"
    elif [ "$rc" -ne 0 ]; then
        LAST_STATUS="redis-benchmark exit $rc"
    fi
    [ -z "$seeded" ] || LAST_STATUS="$LAST_STATUS; $seeded"
    # redis-benchmark warns when CONFIG GET fails (ringdb may not have it); any
    # other line on stderr is worth reporting.
    local errs
    errs=$(grep -v 'Could not fetch server CONFIG' "$tag.err" | tr '\n' ' ' | tr -d ',' || true)
    [ -z "$errs" ] || LAST_STATUS="$LAST_STATUS; stderr: ${errs:0:200}"

    local row
    row=$(sed -n 2p "$tag.csv" | tr -d '"' | cut -d, -f2-)
    [ -n "$row" ] || row="0,0,0,0,0,0,0"
    local wall cuser csys
    read -r wall cuser csys <"$tag.time"
    local vals
    vals=$(awk -v b="$before" -v a="$after" -v sb="${sys_before% *}" -v sa="${sys_after% *}" \
        -v tb="${sys_before#* }" -v ta="${sys_after#* }" -v t="$CLK_TCK" -v cu="$cuser" -v cs="$csys" \
        'BEGIN { printf "%.2f,%.3f,%.2f,%.2f", (a - b) / t, cu + cs, (sa - sb) / t, (ta - tb) / t }')
    if [ "$rep" != probe ]; then
        echo "$shards,$server,$test,$pipeline,$rep,$requests,$row,$wall,$vals,$load1,\"$LAST_STATUS\"" >>"$RAW"
    fi
    LAST_RPS=${row%%,*}
}

# Requests for one measured run: enough for RUN_SECONDS at the faster of the
# two probed rates, rounded up to a thousand.
size_run() {
    awk -v a="$1" -v b="$2" -v s="$RUN_SECONDS" 'BEGIN {
        r = (a > b ? a : b) * s; n = int((r + 999) / 1000) * 1000;
        if (n < 10000) n = 10000; print n }'
}

run_row() {
    local shards=$1 test=$2 pipeline=$3
    local probe_n=20000
    [ "$pipeline" -eq 1 ] || probe_n=100000
    local probe_redis probe_ringdb requests
    bench_once "$shards" redis "$REDIS_PORT" "$REDIS_PID" "$test" "$pipeline" "$probe_n" probe
    probe_redis=$LAST_RPS
    bench_once "$shards" ringdb "$RINGDB_PORT" "$RINGDB_PID" "$test" "$pipeline" "$probe_n" probe
    probe_ringdb=$LAST_RPS
    requests=$(size_run "$probe_redis" "$probe_ringdb")
    log "shards=$shards $test -P $pipeline: probe redis $probe_redis rps, ringdb $probe_ringdb rps; -n $requests"
    for rep in $(seq 1 "$REPS"); do
        # Alternate which server goes first, so drift in background load
        # does not always favour the same one.
        local order="redis ringdb"
        [ $((rep % 2)) -eq 1 ] || order="ringdb redis"
        for server in $order; do
            local port=$REDIS_PORT pid=$REDIS_PID
            if [ "$server" = ringdb ]; then port=$RINGDB_PORT pid=$RINGDB_PID; fi
            bench_once "$shards" "$server" "$port" "$pid" "$test" "$pipeline" "$requests" "$rep"
            log "  rep $rep $server: $LAST_RPS rps ($LAST_STATUS)"
            if ! kill -0 "$pid" 2>/dev/null; then
                log "  $server died; restarting it"
                if [ "$server" = ringdb ]; then start_ringdb "$shards"; else start_redis; fi
            fi
        done
    done
}

# ---------------------------------------------------------------- loadgen

LOADGEN_CSV=$OUT/loadgen.csv
# loadgen's CSV columns (CSV_HEADER in benches/loadgen/measure.rs); every run
# prints its header line too, and it is checked against this one.
LOADGEN_HEADER="scenario,variant,unit,ops,seconds,rate,p50_ms,p99_ms,max_ms,samples,server_cpu_s,client_cpu_s,status"

# The loadgen arguments of a scenario of SCENARIOS.
scenario_args() {
    case $1 in
        multi) echo "multi --keys tagged --commands 10 --clients $CLIENTS" ;;
        multi-random) echo "multi --keys random --commands 10 --clients $CLIENTS" ;;
        evalsha) echo "evalsha --script flash-sale --clients $CLIENTS" ;;
        evalsha-seckill) echo "evalsha --script seckill --items 3 --clients $CLIENTS" ;;
        publish-[0-9]*) echo "publish --subscribers ${1#publish-}" ;;
        watch-[0-9]*) echo "watch-latency --watchers ${1#watch-}" ;;
        blpop) echo "blpop-latency" ;;
        xreadgroup) echo "xreadgroup" ;;
        *) die "unknown loadgen scenario $1 (see SCENARIOS in benches/load.sh)" ;;
    esac
}

# One loadgen run: appends its CSV line, prefixed with shards, server,
# scenario name and rep, to loadgen.csv, and sets LAST_STATUS.
loadgen_once() {
    local shards=$1 server=$2 port=$3 pid=$4 scenario=$5 rep=$6
    local tag="$OUT/runs/loadgen-$shards-$server-$scenario-$rep" line rc=0
    # shellcheck disable=SC2046
    $(client_pin) "$LOADGEN" $(scenario_args "$scenario") --host $HOST --port "$port" \
        --server-pid "$pid" --seconds "$LOADGEN_SECONDS" --warmup "$LOADGEN_WARMUP" \
        --keyspace "$KEYSPACE" --header >"$tag.csv" 2>"$tag.err" || rc=$?
    if [ -s "$tag.csv" ] && [ "$(head -n 1 "$tag.csv")" != "$LOADGEN_HEADER" ]; then
        die "loadgen's CSV columns are not LOADGEN_HEADER's: $(head -n 1 "$tag.csv")"
    fi
    line=$(sed -n 2p "$tag.csv")
    if [ -z "$line" ]; then
        # No result line: the generator itself failed; keep the columns.
        local why
        why=$(tr '\n"' '  ' <"$tag.err" | head -c 200)
        line="$scenario,,,0,0,0,0,0,0,0,,,\"error: loadgen exit $rc: $why\""
    fi
    LAST_STATUS=$(sed -n 's/.*,"\(.*\)"$/\1/p' <<<"$line")
    kill -0 "$pid" 2>/dev/null || LAST_STATUS="server exited"
    echo "$shards,$server,$scenario,$rep,$line" >>"$LOADGEN_CSV"
}

# Runs one scenario REPS times on each server, alternating which goes first.
loadgen_row() {
    local shards=$1 scenario=$2
    log "shards=$shards loadgen $scenario: $(scenario_args "$scenario")"
    for rep in $(seq 1 "$REPS"); do
        local order="redis ringdb"
        [ $((rep % 2)) -eq 1 ] || order="ringdb redis"
        for server in $order; do
            local port=$REDIS_PORT pid=$REDIS_PID
            if [ "$server" = ringdb ]; then port=$RINGDB_PORT pid=$RINGDB_PID; fi
            loadgen_once "$shards" "$server" "$port" "$pid" "$scenario" "$rep"
            log "  rep $rep $server: $(tail -n 1 "$OUT/runs/loadgen-$shards-$server-$scenario-$rep.err")"
            if ! kill -0 "$pid" 2>/dev/null; then
                log "  $server died; restarting it"
                if [ "$server" = ringdb ]; then start_ringdb "$shards"; else start_redis; fi
            fi
        done
    done
}

# ---------------------------------------------------------------- memory

# The memory data sets, one a line: name, number of keys, gen_resp's
# arguments. A data set of 0 keys is skipped.
memory_datasets() {
    echo "strings $MEM_KEYS strings $MEM_KEYS"
    echo "hashes $MEM_HASHES hashes $MEM_HASHES $MEM_HASH_FIELDS"
    echo "zsets $MEM_ZSETS zsets $MEM_ZSETS $MEM_ZSET_MEMBERS"
}

info_field() {
    redis-cli -h $HOST -p "$1" info memory 2>/dev/null | tr -d '\r' | awk -F: -v f="$2" '$1 == f { print $2 }'
}

# Reads back the first and last key of a data set; prints "got|expected".
spot_check() {
    local dataset=$1 port=$2 keys=$3
    local last=$((keys - 1)) got expect
    local cli=(redis-cli -h $HOST -p "$port")
    case $dataset in
        strings)
            got=$("${cli[@]}" get key:00000000 2>&1)/$("${cli[@]}" get "$(printf 'key:%08d' "$last")" 2>&1)
            expect=val:000000000000/$(printf 'val:%012d' "$last")
            ;;
        hashes)
            got=$("${cli[@]}" hget hash:00000000 field:0 2>&1)/$("${cli[@]}" hlen "$(printf 'hash:%08d' "$last")" 2>&1)
            expect=val:000000000000/$MEM_HASH_FIELDS
            ;;
        zsets)
            got=$("${cli[@]}" zscore zset:00000000 m:000000000000 2>&1)/$("${cli[@]}" zcard "$(printf 'zset:%08d' "$last")" 2>&1)
            expect=0/$MEM_ZSET_MEMBERS
            ;;
    esac
    echo "$got|$expect"
}

# Loads data set `dataset` (`keys` keys, from $OUT/load-DATASET.resp) into
# the server on `port` and appends a row to mem.csv.
measure_memory() {
    local dataset=$1 keys=$2 label=$3 port=$4 pid=$5
    local rss0 rss1 used pipe_out t0 t1 check
    sleep 0.5
    rss0=$(vm_rss_kb "$pid")
    t0=$(date +%s.%N)
    # shellcheck disable=SC2046
    # redis-cli --pipe prints each error reply, then three summary lines
    # (errors counted), and exits non-zero after errors: keep the summary.
    pipe_out=$($(client_pin) redis-cli -h $HOST -p "$port" --pipe <"$OUT/load-$dataset.resp" 2>&1 \
        | tail -n 3 | tr '\n' ' ') || true
    t1=$(date +%s.%N)
    sleep 1
    rss1=$(vm_rss_kb "$pid")
    used=$(info_field "$port" used_memory)
    [ -n "$used" ] || used=NA
    check=$(spot_check "$dataset" "$port" "$keys")
    local status=ok
    [ "${check%|*}" = "${check#*|}" ] || status="spot check got ${check%|*}"
    kill -0 "$pid" 2>/dev/null || status="server exited"
    log "memory $dataset $label: rss ${rss0} kB -> ${rss1} kB, used_memory $used; pipe: $pipe_out; $status"
    echo "$dataset,$label,$keys,$rss0,$rss1,$used,$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }'),\"${pipe_out//\"/}\",\"${status//\"/}\"" >>"$OUT/mem.csv"
}

# Each data set goes into a freshly started redis-server, then into a fresh
# ringdb for each shard count.
memory_phase() {
    local dataset keys gen
    echo "dataset,server,keys,rss_before_kb,rss_after_kb,used_memory,load_s,pipe_output,status" >"$OUT/mem.csv"
    while read -r dataset keys gen; do
        [ "$keys" -gt 0 ] || continue
        log "memory: generating $dataset ($gen)"
        # shellcheck disable=SC2086
        gen_resp $gen >"$OUT/load-$dataset.resp"
        start_redis
        measure_memory "$dataset" "$keys" redis "$REDIS_PORT" "$REDIS_PID"
        stop_servers
        for shards in $SHARDS_LIST; do
            # Memory does not depend on the socket backend.
            [ "${shards%%:*}" = "$shards" ] || continue
            start_ringdb "$shards"
            measure_memory "$dataset" "$keys" "ringdb-$shards" "$RINGDB_PORT" "$RINGDB_PID"
            stop_servers
        done
        rm -f "$OUT/load-$dataset.resp"
    done < <(memory_datasets)
}

# ---------------------------------------------------------------- metadata

write_meta() {
    local f=$OUT/meta.txt
    local settings="RUN_SECONDS=$RUN_SECONDS REPS=$REPS SHARDS_LIST=\"$SHARDS_LIST\" TESTS=\"$TESTS\" PIPELINES=\"$PIPELINES\" CLIENTS=$CLIENTS KEYSPACE=$KEYSPACE ZRANGE_MEMBERS=$ZRANGE_MEMBERS GEO_MEMBERS=$GEO_MEMBERS MEM_KEYS=$MEM_KEYS MEM_HASHES=$MEM_HASHES MEM_HASH_FIELDS=$MEM_HASH_FIELDS MEM_ZSETS=$MEM_ZSETS MEM_ZSET_MEMBERS=$MEM_ZSET_MEMBERS SCENARIOS=\"$SCENARIOS\" LOADGEN_SECONDS=$LOADGEN_SECONDS LOADGEN_WARMUP=$LOADGEN_WARMUP PIN=$PIN NICE=$NICE"
    {
        printf 'command\t%s\n' "${GIVEN}benches/load.sh${*:+ $*}"
        printf 'settings\t%s\n' "$settings"
        printf 'date\t%s\n' "$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
        printf 'nproc\t%s\n' "$NPROC"
        printf 'kernel\t%s\n' "$(uname -sr)"
        printf 'cpu\t%s\n' "$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
        printf 'memory\t%s\n' "$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
        printf 'ringdb\t%s\n' "$("$RINGDB" --version) (git $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates Cargo.toml Cargo.lock || echo ', uncommitted changes'))"
        printf 'rustc\t%s\n' "$(rustc --version)"
        printf 'redis\t%s\n' "$(redis-server --version)"
        printf 'redis-benchmark\t%s\n' "$(redis-benchmark --version)"
        printf 'pin\t%s\n' "$PIN"
        printf 'nice\t%s\n' "$NICE"
        printf 'client_cpu\t%s\n' "$CLIENT_CPU"
        printf 'clk_tck\t%s\n' "$CLK_TCK"
    } >"$f"
}

meta_add() { printf '%s\t%s\n' "$1" "$2" >>"$OUT/meta.txt"; }

# With autogroup scheduling (kernel.sched_autogroup_enabled=1) a nice value
# only ranks processes within their session's group, and every busy session
# gets an equal share of the CPUs. So a negative NICE is also given to this
# session's group, which holds the servers and the client.
# The group may hold more than this script (the shell that started it), so
# its old value is put back on exit.
AUTOGROUP_NICE=""

raise_priority() {
    [ "$NICE" -lt 0 ] || return 0
    [ "$(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null)" = 1 ] || return 0
    local old
    old=$(sed -n 's/.* nice //p' "/proc/$$/autogroup" 2>/dev/null) || return 0
    if echo "$NICE" 2>/dev/null >"/proc/$$/autogroup"; then
        AUTOGROUP_NICE=$old
        meta_add autogroup "$(cat "/proc/$$/autogroup") (was nice $old)"
    fi
}

restore_priority() {
    [ -n "$AUTOGROUP_NICE" ] || return 0
    echo "$AUTOGROUP_NICE" >"/proc/$$/autogroup" 2>/dev/null || true
    AUTOGROUP_NICE=""
}

# Whether this ringdb answers CONFIG GET and INFO (other work in progress);
# the report words its caveats from these.
probe_ringdb_features() {
    grep -q '^ringdb_config_get' "$OUT/meta.txt" && return 0
    local config info
    config=$(redis-cli -h $HOST -p "$RINGDB_PORT" config get save 2>&1 | head -1)
    info=$(redis-cli -h $HOST -p "$RINGDB_PORT" info memory 2>&1 | tr -d '\r' | grep -c '^used_memory:' || true)
    case $config in ERR*) meta_add ringdb_config_get no ;; *) meta_add ringdb_config_get yes ;; esac
    if [ "$info" -gt 0 ]; then meta_add ringdb_info_memory yes; else meta_add ringdb_info_memory no; fi
}

# ---------------------------------------------------------------- main

main() {
    ensure_redis
    log "building ringdb (release)"
    cargo build --release
    if [ -n "$SCENARIOS" ]; then
        log "building the loadgen bench (release)"
        build_loadgen
    fi
    rm -rf "$OUT"
    mkdir -p "$OUT/runs"
    write_meta "$@"
    raise_priority
    meta_add load_start "$(cut -d' ' -f1-3 /proc/loadavg)"
    echo "$RAW_HEADER" >"$RAW"
    echo "shards,server,name,rep,$LOADGEN_HEADER" >"$LOADGEN_CSV"
    local started=$SECONDS
    for shards in $SHARDS_LIST; do
        log "phase: ringdb with $shards shard(s) beside redis-server"
        : >"$OUT/ringdb-$shards.log"
        start_redis
        start_ringdb "$shards"
        probe_ringdb_features
        for test in $TESTS; do
            for pipeline in $PIPELINES; do
                run_row "$shards" "$test" "$pipeline"
            done
        done
        for scenario in $SCENARIOS; do
            loadgen_row "$shards" "$scenario"
        done
        stop_servers
    done
    memory_phase
    meta_add load_end "$(cut -d' ' -f1-3 /proc/loadavg)"
    meta_add runtime_s "$((SECONDS - started))"
    python3 benches/report.py "$OUT" "$RESULTS"
    # A run of loadgen scenarios only leaves the redis-benchmark chart as it was.
    # The chart belongs to the full report (RESULTS.md links it).
    if [ -n "$TESTS" ] && [ "$RESULTS" = benches/RESULTS.md ]; then
        python3 benches/chart.py "$OUT/summary.csv" benches/results.svg
    fi
    log "done in $((SECONDS - started)) s: $RESULTS"
}

# Sourcing the script (to call its functions one by one) runs nothing.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    main "$@"
fi
