#!/usr/bin/env bash
# benches/tls.sh: ringdb against redis-server 7.0 over TLS, with
# redis-benchmark --tls, GET and SET at P=1 and P=16, as benches/ab.sh
# compares builds: both servers run at once pinned to CPU 0 (ringdb with
# one shard), redis-benchmark on CPU 1, the order alternates run by run,
# and each run reads both servers' utime+stime (/proc/PID/task/*/stat)
# before and after for requests per server-CPU-second. ringdb also
# serves its plain port in the same process: at P=16 a plaintext run of
# the same test gives its CPU per request without TLS.
#
#   benches/tls.sh [RINGDB_BINARY] [REPS] [REQUESTS_P1] [REQUESTS_P16]
#   e.g. benches/tls.sh target/release/ringdb 5 100000 1000000
#
# RINGDB_ARGS adds ringdb options (e.g. "--spin-before-park 0").
#
# Certificates are made with the openssl CLI as Redis's
# utils/gen-test-certs.sh makes them (RSA 2048, a CA); both servers run
# with --tls-auth-clients no, so redis-benchmark needs only the CA.
# Prints one line per run, then per test and pipeline the medians:
# requests/s, p50/p99 (ms), requests per server-CPU-second, and the
# ratios ringdb/Redis and, at P=16, ringdb TLS CPU per request over
# ringdb plaintext CPU per request.
set -euo pipefail
RINGDB=${1:-target/release/ringdb}
REPS=${2:-5}
N1=${3:-100000}
N16=${4:-1000000}
NICE=${NICE:--10}
DIR=$(mktemp -d)
REDIS_PID='' RINGDB_PID=''
trap 'kill $REDIS_PID $RINGDB_PID 2>/dev/null; rm -rf "$DIR"' EXIT
# shellcheck source=benches/common.sh
. "$(dirname "$0")/common.sh"
ensure_redis
command -v openssl >/dev/null || die "openssl is missing (apt install openssl)"
[ -x "$RINGDB" ] || die "no ringdb binary at $RINGDB: cargo build --release"

openssl genrsa -out "$DIR/ca.key" 2048 2>/dev/null
openssl req -x509 -new -nodes -sha256 -key "$DIR/ca.key" -days 3650 \
    -subj '/O=ringdb bench/CN=Certificate Authority' -out "$DIR/ca.crt"
openssl genrsa -out "$DIR/server.key" 2048 2>/dev/null
printf '[s]\nkeyUsage = digitalSignature, keyEncipherment\nsubjectAltName = IP:127.0.0.1\n' \
    >"$DIR/ext.cnf"
openssl req -new -sha256 -subj '/O=ringdb bench/CN=Server' -key "$DIR/server.key" |
    openssl x509 -req -sha256 -CA "$DIR/ca.crt" -CAkey "$DIR/ca.key" -CAcreateserial \
        -days 365 -extfile "$DIR/ext.cnf" -extensions s -out "$DIR/server.crt" 2>/dev/null
TLS=(--tls-cert-file "$DIR/server.crt" --tls-key-file "$DIR/server.key"
    --tls-ca-cert-file "$DIR/ca.crt" --tls-auth-clients no)

# Ports: Redis TLS 7821; ringdb TLS 7822 and plain 7823.
for p in 7821 7822 7823; do check_port_free $p; done
mkdir -p "$DIR/redis" "$DIR/ringdb"
taskset -c 0 nice -n "$NICE" redis-server --port 0 --tls-port 7821 --bind 127.0.0.1 \
    "${TLS[@]}" --save '' --appendonly no --dir "$DIR/redis" >/dev/null 2>&1 &
REDIS_PID=$!
taskset -c 0 nice -n "$NICE" "$RINGDB" --port 7823 --tls-port 7822 --bind 127.0.0.1 \
    --shards 1 "${TLS[@]}" --save '' --appendonly no --dir "$DIR/ringdb" ${RINGDB_ARGS:-} \
    >/dev/null 2>&1 &
RINGDB_PID=$!
sleep 1

# port pid test pipeline requests tls(1|0) -> "rps p50 p99 req/cpu-s"
run() {
    local u0 s0 u1 s1 csv tls=()
    [ "$6" = 1 ] && tls=(--tls --cacert "$DIR/ca.crt")
    read -r u0 s0 < <(cpu_ticks "$2")
    csv=$(taskset -c 1 nice -n "$NICE" redis-benchmark -p "$1" "${tls[@]}" -t "$3" -n "$5" \
        -r 100000 -c 50 -P "$4" --csv 2>/dev/null | tail -1)
    read -r u1 s1 < <(cpu_ticks "$2")
    # "test","rps","avg","min","p50","p95","p99","max"
    python3 -c "
import csv, io
row = next(csv.reader(io.StringIO('''$csv''')))
n = $5; cpu = ($u1 - $u0 + $s1 - $s0) / 100
print(f'{float(row[1]):.0f} {row[4]} {row[6]} {n / cpu:.0f}')"
}

declare -A rows
for test in get set; do
    for p in 1 16; do
        n=$N1; [ "$p" = 16 ] && n=$N16
        for i in $(seq "$REPS"); do
            if (( i % 2 )); then
                g=$(run 7822 $RINGDB_PID $test $p "$n" 1); r=$(run 7821 $REDIS_PID $test $p "$n" 1)
            else
                r=$(run 7821 $REDIS_PID $test $p "$n" 1); g=$(run 7822 $RINGDB_PID $test $p "$n" 1)
            fi
            plain=""
            [ "$p" = 16 ] && plain=$(run 7823 $RINGDB_PID $test $p "$n" 0)
            echo "$test P=$p run $i: ringdb-tls $g | redis-tls $r${plain:+ | ringdb-plain $plain}"
            rows[$test,$p]+="$g;$r;${plain:--};"$'\n'
        done
    done
done

echo
echo "| test | P | ringdb TLS req/s | Redis TLS req/s | ringdb p50/p99 ms | Redis p50/p99 ms | ringdb req/CPU-s | Redis req/CPU-s | ringdb/Redis per CPU-s | ringdb plain req/CPU-s | TLS/plain CPU per req |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for test in get set; do
    for p in 1 16; do
        python3 -c "
import statistics as st
rows = [l.split(';') for l in '''${rows[$test,$p]}'''.strip().splitlines()]
g = [list(map(float, r[0].split())) for r in rows]
r = [list(map(float, r[1].split())) for r in rows]
plain = [float(x[2].split()[3]) for x in rows if x[2] != '-']
m = lambda xs, i: st.median(x[i] for x in xs)
ratio = st.median(a[3] / b[3] for a, b in zip(g, r))
pl = f'{st.median(plain):,.0f}' if plain else '-'
tp = f'{st.median(p / a[3] for a, p in zip(g, plain)):.2f}' if plain else '-'
print(f'| $test | $p | {m(g,0):,.0f} | {m(r,0):,.0f} | {m(g,1):.3f}/{m(g,2):.3f} | {m(r,1):.3f}/{m(r,2):.3f} | {m(g,3):,.0f} | {m(r,3):,.0f} | {ratio:.2f} | {pl} | {tp} |')"
    done
done
