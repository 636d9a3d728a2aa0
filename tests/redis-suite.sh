#!/usr/bin/env bash
# Redis's own test suite, in its own mode, against ringdb and redis-server.
#
#   tests/redis-suite.sh [-s ringdb|redis|both] [-n SHARDS] [UNIT ...]
#
# The suite starts the server itself for every test block, from its
# generated redis.conf plus per-test overrides, exactly as it starts
# src/redis-server: here src/redis-server is ringdb (with --shards N
# appended), or the installed redis-server for the comparison. Units are
# tests/unit/... names without .tcl (default: every unit and unit/type).
#
# It needs, and fetches nothing at run time:
#   REDIS_SRC  a Redis 7.0.15 source tree, for its tests/ directory only:
#              curl -LO https://download.redis.io/releases/redis-7.0.15.tar.gz
#              tar xzf redis-7.0.15.tar.gz   (default: ../redis-7.0.15)
#   tclsh 8.5+ (apt install tcl), redis-server, redis-cli, redis-benchmark
#              (apt install redis-server redis-tools) of 7.0.15.
#   RINGDB     the ringdb binary (default: target/release/ringdb).
#
# Per unit it prints passed/failed counts for each server, and it counts as
# failures what the suite itself cannot see: a ringdb panic in any server
# log, and a server process left running after the unit.
# FLAGS overrides the runner flags (default below); OUT keeps the logs.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
SERVERS=both SHARDS=2
while getopts "s:n:" o; do
    case $o in
        s) SERVERS=$OPTARG ;;
        n) SHARDS=$OPTARG ;;
        *) sed -n 2,25p "$0"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
REDIS_SRC=${REDIS_SRC:-$ROOT/../redis-7.0.15}
RINGDB=$(realpath "${RINGDB:-target/release/ringdb}")
FLAGS=${FLAGS:---singledb --durable --tags -needs:repl --clients 2 --timeout 120}
FLAGS="$FLAGS --baseport ${BASEPORT:-21111}"
OUT=${OUT:-$(mktemp -d /tmp/redis-suite.XXXX)}
[ -d "$REDIS_SRC/tests/unit" ] || { echo "REDIS_SRC=$REDIS_SRC has no tests/unit: see the header"; exit 2; }
command -v tclsh >/dev/null || { echo "tclsh is missing (apt install tcl)"; exit 2; }
for tool in redis-server redis-cli redis-benchmark; do
    command -v $tool >/dev/null || { echo "$tool is missing (apt install redis-server redis-tools)"; exit 2; }
done
[ -x "$RINGDB" ] || { echo "no ringdb binary at $RINGDB: cargo build --release"; exit 2; }

# One tree per server: the suite's tests/ copied, src/ holding the tools.
tree() {
    local server=$1 dir=$OUT/tree-$1
    rm -rf "$dir"; mkdir -p "$dir/src"
    cp -r "$REDIS_SRC/tests" "$REDIS_SRC/runtest" "$dir/"
    ln -s "$(command -v redis-cli)" "$dir/src/redis-cli"
    ln -s "$(command -v redis-benchmark)" "$dir/src/redis-benchmark"
    if [ "$server" = ringdb ]; then
        # --shards goes right after the config file (the first argument
        # when it does not start with `-`), so that it never becomes a
        # value of the suite's last option (`redis-server --port`); at the
        # end when words without `--` follow the file (they start a
        # directive of their own, `redis-server a.conf loglevel verbose`).
        cat > "$dir/src/redis-server" <<EOF
#!/bin/sh
case "\$1" in
    -v|--version|-h|--help|--test-memory|--print-config) exec $RINGDB "\$@" ;;
    -*|'') exec $RINGDB --shards $SHARDS "\$@" ;;
esac
conf=\$1; shift
case "\$1" in
    --*|'') exec $RINGDB "\$conf" --shards $SHARDS "\$@" ;;
    *) exec $RINGDB "\$conf" "\$@" --shards $SHARDS ;;
esac
EOF
        printf '#!/bin/sh\nexec %s check-aof "$@"\n' "$RINGDB" > "$dir/src/redis-check-aof"
        chmod +x "$dir/src/redis-server" "$dir/src/redis-check-aof"
    else
        ln -s "$(command -v redis-server)" "$dir/src/redis-server"
        command -v redis-check-aof >/dev/null && ln -s "$(command -v redis-check-aof)" "$dir/src/redis-check-aof"
    fi
    echo "$dir"
}

units=("$@")
if [ ${#units[@]} = 0 ]; then
    while read -r f; do units+=("${f%.tcl}"); done < <(cd "$REDIS_SRC/tests" && ls unit/*.tcl unit/type/*.tcl)
fi
case $SERVERS in both) list="redis ringdb" ;; *) list=$SERVERS ;; esac
declare -A TREE
for s in $list; do TREE[$s]=$(tree $s); done

count() { sed 's/\x1b\[[0-9;]*m//g' "$1" | grep -c "$2"; }
printf "%-32s" unit; for s in $list; do printf "%16s" "$s ok/err"; done; echo
total_fail=0
for unit in "${units[@]}"; do
    printf "%-32s" "$unit"
    for s in $list; do
        dir=${TREE[$s]} log=$OUT/$s-${unit//\//_}.log
        rm -rf "$dir/tests/tmp"; mkdir -p "$dir/tests/tmp"
        (cd "$dir" && timeout ${UNIT_TIMEOUT:-1800} ./runtest $FLAGS --single "$unit" >"$log" 2>&1)
        ok=$(count "$log" '^\[ok\]') err=$(count "$log" '^\[err\]\|^\[exception\]\|^\[timeout\]\|^\[TIMEOUT\]')
        if [ $s = ringdb ]; then
            # What the suite cannot see: panics in the logs, servers left behind.
            panics=$(grep -l "panicked at" "$dir"/tests/tmp/*/std* 2>/dev/null | wc -l)
            left=$(pgrep -f "^$RINGDB" | wc -l)
            [ "$left" -gt 0 ] && pkill -9 -f "^$RINGDB"
            if [ "$panics" -gt 0 ] || [ "$left" -gt 0 ]; then
                echo "PANIC/LEFT $unit: panics=$panics left=$left" >> "$OUT/problems.txt"
                grep -h -A3 "panicked at" "$dir"/tests/tmp/*/std* >> "$OUT/problems.txt" 2>/dev/null
                err=$((err + panics + left))
            fi
            total_fail=$((total_fail + err))
        fi
        printf "%16s" "$ok/$err"
    done
    echo
done
echo "logs: $OUT"
[ -f "$OUT/problems.txt" ] && { echo "problems:"; cat "$OUT/problems.txt"; }
exit 0
