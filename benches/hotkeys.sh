#!/usr/bin/env bash
# Hot-key benchmarks (issue 8), against a release ringdb with 2 shards:
#  1. skewed GET load — one key takes half of the GETs (half of the
#     clients ask for it), the rest are uniform over 100 000 keys — with
#     hotkeys-replicate-reads off and on (the same rule counts the hot key
#     in both);
#  2. uniform GET load with no rule vs a rule that counts every key (the
#     cost of counting).
# Prints one markdown table row per run (median of REPS runs).
# Usage: benches/hotkeys.sh   (BIN, PORT, N, REPS, PIPELINE overridable)
set -euo pipefail
BIN=${BIN:-target/release/ringdb}
PORT=${PORT:-7805}
N=${N:-400000}
REPS=${REPS:-3}
PIPELINE=${PIPELINE:-16}
OUT=${OUT:-/tmp/hotkeys-bench}
mkdir -p "$OUT"

start() {
  # The previous server's port can take a moment to be free again.
  for _ in $(seq 20); do
    "$BIN" --port "$PORT" --shards 2 --pin-cpus no --loglevel warning --save '' --dir "$OUT" "$@" >"$OUT/server.log" 2>&1 &
    SERVER=$!
    for _ in $(seq 100); do
      kill -0 "$SERVER" 2>/dev/null || break
      redis-cli -p "$PORT" ping >/dev/null 2>&1 && return
      sleep 0.1
    done
    sleep 1
  done
  echo "server did not start" >&2; exit 1
}
stop() { kill "$SERVER"; wait "$SERVER" 2>/dev/null || true; }

# rps and p99 of a redis-benchmark --csv file (second line).
field() { tail -1 "$1" | tr -d '"' | cut -d, -f"$2"; }

fill() {
  redis-benchmark -p "$PORT" -t set -n 200000 -r 100000 -c 50 -P 16 -q >/dev/null 2>&1
  redis-cli -p "$PORT" set hot:item 1234567890 >/dev/null
}

# Skewed: 25 clients GET the hot key, 25 GET uniform keys, at once.
skewed() {
  redis-benchmark -p "$PORT" -c 25 -n $((N / 2)) -P "$PIPELINE" --csv GET hot:item >"$OUT/hot.csv" 2>/dev/null &
  local hot=$!
  redis-benchmark -p "$PORT" -c 25 -n $((N / 2)) -r 100000 -P "$PIPELINE" --csv GET key:__rand_int__ >"$OUT/rest.csv" 2>/dev/null
  wait "$hot"
  echo "$(field "$OUT/hot.csv" 2) $(field "$OUT/rest.csv" 2) $(field "$OUT/hot.csv" 7) $(field "$OUT/rest.csv" 7)"
}

uniform() {
  redis-benchmark -p "$PORT" -c 50 -n "$N" -r 100000 -P "$PIPELINE" --csv GET key:__rand_int__ >"$OUT/uniform.csv" 2>/dev/null
  echo "$(field "$OUT/uniform.csv" 2) $(field "$OUT/uniform.csv" 7)"
}

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

HOT_RULE="hot PREFIX hot: INTERVAL 1 THRESHOLD 1000 DURATION 10 COUNT reads"
ALL_RULE="all PREFIX key: INTERVAL 1 THRESHOLD 1000000 DURATION 1"

echo "| load | configuration | total GET/s | hot-key GET/s | other GET/s | p99 ms (hot clients) | p99 ms (other clients) |"
echo "|---|---|---:|---:|---:|---:|---:|"
for replicate in no yes; do
  start --hotkeys-replicate-reads "$replicate" --hotkeys-rules "$HOT_RULE"
  fill
  rows=()
  for _ in $(seq "$REPS"); do rows+=("$(skewed)"); done
  replica_reads=$(redis-cli -p "$PORT" info hotkeys | tr -d '\r' | awk -F: '/hotkeys_replica_reads/ {print $2}')
  stop
  col() { printf '%s\n' "${rows[@]}" | awk -v c="$1" '{print $c}' | median; }
  hot=$(col 1); rest=$(col 2)
  total=$(awk -v a="$hot" -v b="$rest" 'BEGIN {printf "%.0f", a + b}')
  echo "| skewed (50% one key) | replicate-reads $replicate (copy reads: $replica_reads) | $total | $hot | $rest | $(col 3) | $(col 4) |"
done
for rules in none all; do
  if [ "$rules" = none ]; then start; else start --hotkeys-rules "$ALL_RULE"; fi
  fill
  rows=()
  for _ in $(seq "$REPS"); do rows+=("$(uniform)"); done
  tracked=$(redis-cli -p "$PORT" info hotkeys | tr -d '\r' | awk -F: '/hotkeys_tracked_keys/ {print $2}')
  stop
  col() { printf '%s\n' "${rows[@]}" | awk -v c="$1" '{print $c}' | median; }
  echo "| uniform | rules: $rules (tracked keys: $tracked) | $(col 1) | | | | $(col 2) |"
done
