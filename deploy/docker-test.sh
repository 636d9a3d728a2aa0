#!/usr/bin/env bash
# End-to-end test of the ringdb container image, run by a person (not CI) on
# a Linux host with a running Docker daemon, as root (debootstrap needs it)
# or a user in the docker group with a BASE_IMAGE already there.
#
#   deploy/docker-test.sh                      # from anywhere in the repository
#   CARGO_TARGET_DIR=/tmp/t deploy/docker-test.sh
#   RINGDB_BIN=/path/to/ringdb MEMLOCK=-1 deploy/docker-test.sh
#
# What it does, printing a compact transcript (the long logs go to a
# temporary directory it names):
#  1. checks deploy/seccomp-ringdb.json is Docker's default profile plus the
#     three io_uring lines, and that deploy/Dockerfile.prebuilt's runtime
#     stage is deploy/Dockerfile's, word for word;
#  2. builds ringdb (cargo build --release --locked -p ringdb), unless
#     RINGDB_BIN names a binary;
#  3. makes a Debian bookworm base image with `debootstrap --variant=minbase`
#     and `docker import` (no registry needed), unless BASE_IMAGE exists;
#  4. builds the image with deploy/Dockerfile.prebuilt on that base (apt in
#     the build installs redis-tools, so the daemon's build containers must
#     reach DEBIAN_MIRROR) and checks its user, volume, stop signal and
#     health check;
#  5. runs it with --cpuset-cpus, --memory, --ulimit memlock, the seccomp
#     profile and a named volume; waits for the health check; checks the
#     server runs as uid 10001 with the memlock limit asked for; writes keys
#     with redis-cli from the host; `docker restart` (SIGTERM: ringdb saves a
#     snapshot to the volume); checks the keys are back; prints INFO fields;
#  6. stops it, then runs the image, one container at a time, without the
#     profile (the daemon's built-in default) and with Docker's stock
#     default profile (the one Docker 25+ builds in), and checks ringdb
#     refuses to start, with an error naming seccomp in `docker logs`, where
#     io_uring is blocked (and runs where the daemon is older than 25).
# Exits non-zero when any check fails.
#
# Settings (environment variables; defaults in brackets):
#   RINGDB_BIN        a ringdb binary to use instead of building one
#   CARGO_TARGET_DIR  cargo's target directory [<repo>/target]
#   BASE_IMAGE        base image [ringdb-test/bookworm-minbase]; made with
#                     debootstrap when it does not exist (or REBUILD_BASE=1)
#   DEBIAN_MIRROR     for debootstrap [http://deb.debian.org/debian]
#   IMAGE             tag of the image built [ringdb:test]
#   CPUS              --cpuset-cpus [0-1]
#   MEMORY            --memory [512m]
#   MEMLOCK           --ulimit memlock=, bytes, -1 = unlimited [65536]
#   NETWORK           bridge: publish 127.0.0.1:PORT -> 6379 (needs the
#                     daemon's default bridge and iptables); host: run with
#                     --network host, ringdb on 127.0.0.1:PORT (for a daemon
#                     started with --bridge=none --iptables=false) [bridge]
#   PORT              host port [16379]
#   STOP_TIMEOUT      seconds docker restart/stop waits for the save [60]
#   KEEP              1: leave the containers and the volume behind [0]
#
# deploy/seccomp-ringdb.json is moby's profiles/seccomp/default.json as
# vendored in moby/moby at tag docker-v29.7.2 (commit
# 6a43e3d5afddf4111da0f864bbc7cae5d7e95001; github.com/moby/profiles/seccomp
# v0.2.3), with "io_uring_enter", "io_uring_register" and "io_uring_setup"
# added to its first SCMP_ACT_ALLOW list (where Docker 20.10-24 had them;
# Docker 25 removed them, moby/moby#46762). Nothing else differs, so the
# stock profile is that file without its lines that mention io_uring; step 1
# and step 6 rely on that.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
deploy=$repo/deploy
profile=$deploy/seccomp-ringdb.json

BASE_IMAGE=${BASE_IMAGE:-ringdb-test/bookworm-minbase}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
IMAGE=${IMAGE:-ringdb:test}
CPUS=${CPUS:-0-1}
MEMORY=${MEMORY:-512m}
MEMLOCK=${MEMLOCK:-65536}
NETWORK=${NETWORK:-bridge}
PORT=${PORT:-16379}
STOP_TIMEOUT=${STOP_TIMEOUT:-60}
KEEP=${KEEP:-0}
REBUILD_BASE=${REBUILD_BASE:-0}

name=ringdb-test
volume=ringdb-test-data
password=test-$RANDOM$RANDOM
work=$(mktemp -d /tmp/ringdb-docker-test.XXXXXX)
failures=0

# ---- transcript helpers -------------------------------------------------------
say() { printf '%s\n' "$*"; }
step() { printf '\n== %s\n' "$*"; }
ok() { printf 'ok    %s\n' "$*"; }
fail() { printf 'FAIL  %s\n' "$*"; failures=$((failures + 1)); }
die() { printf 'FAIL  %s\n' "$*"; failures=$((failures + 1)); finish; }
indent() { sed 's/^/      /'; }
# check DESCRIPTION EXPECTED ACTUAL
check() {
    if [ "$2" = "$3" ]; then ok "$1: $3"; else fail "$1: expected '$2', got '$3'"; fi
}
# Runs a command, its output to a log file; on failure shows the log's tail.
logged() {
    local log=$work/$1 rc=0; shift
    "$@" >"$log" 2>&1 || rc=$?
    if [ "$rc" -ne 0 ]; then
        say "      \$ $*  (exit $rc; last lines of $log:)"
        tail -n 15 "$log" | indent
    fi
    return "$rc"
}
cleanup() {
    if [ "$KEEP" = 1 ]; then
        say "KEEP=1: left containers $name* and volume $volume"
        return
    fi
    docker rm -f -v "$name" "$name-default" "$name-stock" >/dev/null 2>&1 || true
    docker volume rm "$volume" >/dev/null 2>&1 || true
}
finish() {
    finished=1
    trap - EXIT
    cleanup
    say ""
    if [ "$failures" -eq 0 ]; then
        say "RESULT: all checks passed (logs: $work)"
        exit 0
    fi
    say "RESULT: $failures check(s) failed (logs: $work)"
    exit 1
}
finished=0
trap 'say "interrupted"; failures=$((failures + 1)); finish' INT TERM
# set -e stops the script on an unexpected error: say where, clean up.
trap 'say "FAIL  line $LINENO: $BASH_COMMAND (exit $?)"' ERR
trap '[ "$finished" = 1 ] || { failures=$((failures + 1)); finish; }' EXIT

cli() { REDISCLI_AUTH=$password redis-cli -h 127.0.0.1 -p "$PORT" --no-auth-warning "$@"; }
# Waits up to $2 seconds for container $1's health check to say healthy.
wait_healthy() {
    local i status
    for ((i = 0; i < $2; i++)); do
        status=$(docker inspect -f '{{.State.Status}}/{{if .State.Health}}{{.State.Health.Status}}{{end}}' "$1" 2>/dev/null || echo gone)
        case $status in
            running/healthy) echo "$i"; return 0 ;;
            running/*) sleep 1 ;;
            *) echo "$status"; return 1 ;;
        esac
    done
    echo "$status after $2 s"
    return 1
}
# Waits up to $2 seconds for container $1 to stop running; prints its state.
wait_exited() {
    local i status
    for ((i = 0; i < $2; i++)); do
        status=$(docker inspect -f '{{.State.Status}}' "$1")
        [ "$status" != running ] && [ "$status" != created ] && break
        sleep 1
    done
    docker inspect -f '{{.State.Status}} exit={{.State.ExitCode}}' "$1"
}

say "ringdb container test: $(date -u '+%Y-%m-%d %H:%M:%SZ'), $(uname -sr), $(nproc) CPUs"
say "repo $repo at $(git -C "$repo" log -1 --format='%h %s' 2>/dev/null || echo '?')$(git -C "$repo" diff --quiet HEAD -- 2>/dev/null || echo ' (working tree has changes)')"
say "settings: MEMLOCK=$MEMLOCK CPUS=$CPUS MEMORY=$MEMORY NETWORK=$NETWORK PORT=$PORT BASE_IMAGE=$BASE_IMAGE"

# ---- 0. tools ---------------------------------------------------------------
for tool in docker redis-cli; do
    command -v "$tool" >/dev/null || die "$tool not found (apt-get install docker.io redis-tools)"
done
docker info >/dev/null 2>&1 || die "no Docker daemon answers: $(docker info 2>&1 | tail -n 1)"
daemon_version=$(docker version -f '{{.Server.Version}}')
say "docker daemon $daemon_version, client $(docker version -f '{{.Client.Version}}'), storage $(docker info -f '{{.Driver}}'), cgroup v$(docker info -f '{{.CgroupVersion}}')"
cleanup

# ---- 1. static checks ---------------------------------------------------------
step "1. seccomp profile and Dockerfiles"
[ -f "$profile" ] || die "$profile missing"
if python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$profile" 2>"$work/json.err"; then
    ok "seccomp-ringdb.json parses as JSON"
else
    fail "seccomp-ringdb.json is not JSON: $(cat "$work/json.err")"
fi
grep -v 'io_uring' "$profile" >"$work/seccomp-docker-default.json"
added=$(grep -c '"io_uring_\(setup\|enter\|register\)",$' "$profile" || true)
check "io_uring lines added to Docker's default profile" 3 "$added"
# Each call allowed unconditionally; every other call as in Docker's default
# (nothing else in the file mentions io_uring, see the header).
check "io_uring calls in unconditional allow rules" \
    "io_uring_enter io_uring_register io_uring_setup" \
    "$(python3 -c 'import json, sys
p = json.load(open(sys.argv[1]))
print(" ".join(sorted(n for r in p["syscalls"] for n in r["names"]
    if n.startswith("io_uring") and r["action"] == "SCMP_ACT_ALLOW"
    and not (r.get("args") or r.get("includes") or r.get("excludes")))))' "$profile" 2>&1)"
check "default action" SCMP_ACT_ERRNO \
    "$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["defaultAction"])' "$profile" 2>&1)"
runtime_of() { sed -n '/^# ---- runtime/,$p' "$1"; }
if diff <(runtime_of "$deploy/Dockerfile") <(runtime_of "$deploy/Dockerfile.prebuilt") >"$work/dockerfile.diff"; then
    ok "Dockerfile.prebuilt's runtime stage is Dockerfile's ($(runtime_of "$deploy/Dockerfile" | wc -l) lines)"
else
    fail "Dockerfile.prebuilt's runtime stage differs from Dockerfile's:"; indent <"$work/dockerfile.diff"
fi

# ---- 2. the binary ------------------------------------------------------------
step "2. ringdb binary"
if [ -n "${RINGDB_BIN:-}" ]; then
    bin=$RINGDB_BIN
    say "RINGDB_BIN=$bin (not built here)"
else
    command -v cargo >/dev/null || die "cargo not found; set RINGDB_BIN to a built ringdb"
    target=${CARGO_TARGET_DIR:-$repo/target}
    say "\$ CARGO_TARGET_DIR=$target cargo build --release --locked -p ringdb"
    if (cd "$repo" && logged cargo-build.log env CARGO_TARGET_DIR="$target" cargo build --release --locked -p ringdb); then
        ok "built ($(tail -n 1 "$work/cargo-build.log" | sed 's/^ *//'))"
    else
        die "cargo build failed"
    fi
    bin=$target/release/ringdb
fi
[ -x "$bin" ] || die "$bin is not an executable"
glibc=$(objdump -T "$bin" 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n 1 || true)
say "binary: $(du -h "$bin" | cut -f1), $(stat -c %y "$bin" | cut -d. -f1), needs ${glibc:-glibc ?} (bookworm has 2.36)"

# ---- 3. base image ----------------------------------------------------------
step "3. base image $BASE_IMAGE"
if [ "$REBUILD_BASE" != 1 ] && docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    say "exists ($(docker image inspect -f '{{.Created}}' "$BASE_IMAGE" | cut -d. -f1)); REBUILD_BASE=1 makes it again"
else
    command -v debootstrap >/dev/null || die "debootstrap not found (apt-get install debootstrap)"
    [ "$(id -u)" = 0 ] || die "debootstrap needs root"
    root=$work/rootfs
    say "\$ debootstrap --variant=minbase bookworm $root $DEBIAN_MIRROR"
    logged debootstrap.log debootstrap --variant=minbase bookworm "$root" "$DEBIAN_MIRROR" \
        || die "debootstrap failed"
    # The suites debian:bookworm-slim has, so apt in the build gets security updates.
    cat >"$root/etc/apt/sources.list" <<EOF
deb $DEBIAN_MIRROR bookworm main
deb $DEBIAN_MIRROR bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    say "\$ tar -C $root -c . | docker import - $BASE_IMAGE"
    tar -C "$root" -c . | logged import.log docker import -c 'CMD ["bash"]' - "$BASE_IMAGE" \
        || die "docker import failed"
    rm -rf "$root"
    ok "imported $BASE_IMAGE ($(docker image inspect -f '{{.Size}}' "$BASE_IMAGE" | numfmt --to=iec))"
fi

# ---- 4. the image -----------------------------------------------------------
step "4. image $IMAGE (deploy/Dockerfile.prebuilt)"
ctx=$work/context
mkdir -p "$ctx/deploy"
cp "$bin" "$ctx/ringdb"
cp "$deploy/ringdb.toml" "$deploy/docker-entrypoint.sh" "$deploy/ringdb-ping" "$ctx/deploy/"
say "\$ docker build -f deploy/Dockerfile.prebuilt --build-arg BASE_IMAGE=$BASE_IMAGE -t $IMAGE <context>"
logged image-build.log docker build -f "$deploy/Dockerfile.prebuilt" \
    --build-arg "BASE_IMAGE=$BASE_IMAGE" -t "$IMAGE" "$ctx" || die "docker build failed"
ok "built $IMAGE ($(docker image inspect -f '{{.Size}}' "$IMAGE" | numfmt --to=iec))"
check "image user" 10001:10001 "$(docker image inspect -f '{{.Config.User}}' "$IMAGE")"
check "image volumes" "map[/var/lib/ringdb:{}]" "$(docker image inspect -f '{{.Config.Volumes}}' "$IMAGE")"
check "image stop signal" SIGTERM "$(docker image inspect -f '{{.Config.StopSignal}}' "$IMAGE")"
check "image health check" "[CMD /usr/local/bin/ringdb-ping]" "$(docker image inspect -f '{{.Config.Healthcheck.Test}}' "$IMAGE")"
say "redis-cli in the image: $(docker run --rm --entrypoint redis-cli "$IMAGE" --version)"

# ---- 5. run, write, restart, read ---------------------------------------------------
step "5. run with the profile, write, restart, read"
net_args=(-p "127.0.0.1:$PORT:6379")
cmd_args=(--bind 0.0.0.0)
if [ "$NETWORK" = host ]; then
    net_args=(--network host -e "RINGDB_PING_PORT=$PORT")
    cmd_args=(--bind 127.0.0.1 --port "$PORT")
fi
run_args=(--cpuset-cpus "$CPUS" --memory "$MEMORY" --ulimit "memlock=$MEMLOCK"
    -v "$volume:/var/lib/ringdb" -e "RINGDB_REQUIREPASS=$password" "${net_args[@]}")
say "\$ docker run -d --name $name --cpuset-cpus $CPUS --memory $MEMORY --ulimit memlock=$MEMLOCK \\"
say "    --security-opt seccomp=deploy/seccomp-ringdb.json --stop-timeout $STOP_TIMEOUT \\"
say "    -v $volume:/var/lib/ringdb -e RINGDB_REQUIREPASS=*** ${net_args[*]} $IMAGE ${cmd_args[*]}"
docker run -d --name "$name" --security-opt "seccomp=$profile" --stop-timeout "$STOP_TIMEOUT" \
    "${run_args[@]}" "$IMAGE" "${cmd_args[@]}" >/dev/null || die "docker run failed"
if t=$(wait_healthy "$name" 90); then
    ok "healthy after ${t} s (ringdb-ping, the HEALTHCHECK)"
else
    fail "not healthy: $t"
    say "      docker logs $name:"; docker logs "$name" 2>&1 | tail -n 20 | indent
    finish
fi
say "      docker logs (start):"; docker logs "$name" 2>&1 | tail -n 8 | cut -c1-400 | indent
check "redis-cli PING from the host" PONG "$(cli ping 2>&1)"
rc=0; docker exec "$name" /usr/local/bin/ringdb-ping >"$work/ping.out" 2>&1 || rc=$?
check "ringdb-ping exit status (DBSIZE answered by every shard)" 0 "$rc"
rc=0; docker exec -e RINGDB_REQUIREPASS=wrong "$name" /usr/local/bin/ringdb-ping >"$work/ping.out" 2>&1 || rc=$?
check "ringdb-ping with a wrong password: exit status" 1 "$rc"
say "      its message: $(head -c 200 "$work/ping.out" | tr '\n' ' ')"
check "unauthenticated PING" "NOAUTH Authentication required." \
    "$(redis-cli -h 127.0.0.1 -p "$PORT" ping 2>&1 | head -n 1)"
status=$(docker exec "$name" cat /proc/1/status || true)
check "uids of pid 1 (ringdb, real/effective/saved/fs)" "10001 10001 10001 10001" \
    "$(awk '/^Uid:/ {print $2, $3, $4, $5}' <<<"$status")"
check "pid 1 is" ringdb "$(awk '/^Name:/ {print $2}' <<<"$status")"
check "Cpus_allowed_list of pid 1" "$CPUS" "$(awk '/^Cpus_allowed_list:/ {print $2}' <<<"$status")"
want_memlock=$MEMLOCK; [ "$MEMLOCK" = -1 ] && want_memlock=unlimited
check "Max locked memory of pid 1 (soft)" "$want_memlock" \
    "$(docker exec "$name" cat /proc/1/limits | awk '/^Max locked memory/ {print $4}')"
check "seccomp mode of pid 1 (2 = filter)" 2 "$(awk '/^Seccomp:/ {print $2}' <<<"$status")"

# 1000 strings, a hash, a list, a set, and one key with a TTL.
{
    for i in $(seq 1 1000); do echo "SET key:$i value-$i"; done
    echo "HSET user:1 name ada lang rust"
    echo "RPUSH queue a b c"
    echo "SADD tags x y z"
    echo "SET session:1 alive EX 3600"
} | cli >"$work/writes.out" 2>&1
check "replies to the 1004 writes (all OK or counts)" 1004 "$(grep -cE '^(OK|[0-9]+)$' "$work/writes.out" || true)"
before=$(cli dbsize 2>&1 || true)
check "DBSIZE after writes" 1004 "$before"
changes=$(cli info persistence 2>&1 | tr -d '\r' | awk -F: '/^rdb_changes_since_last_save:/ {print $2}' || true)
say "      rdb_changes_since_last_save before restart: $changes"

say "\$ docker restart -t $STOP_TIMEOUT $name   # SIGTERM, then a new start on the same volume"
started=$(date +%s)
docker restart -t "$STOP_TIMEOUT" "$name" >/dev/null || fail "docker restart failed"
say "      restart returned after $(($(date +%s) - started)) s"
if t=$(wait_healthy "$name" 90); then ok "healthy again after ${t} s"; else fail "not healthy after restart: $t"; fi
logs=$(docker logs "$name" 2>&1 || true)
say "      docker logs (the stop and the new start):"
grep -iE 'SIGTERM|shutdown|saving|saved|exit|bye|loaded|loading|ready to accept|error|warn' <<<"$logs" \
    | tail -n 12 | cut -c1-200 | indent
if grep -q 'Saving the final RDB snapshot' <<<"$logs"; then
    ok "ringdb saved on SIGTERM"
else
    fail "no 'Saving the final RDB snapshot' in docker logs"
fi
# 0: ringdb exited by itself after the save; 137 would be Docker's SIGKILL
# after the stop timeout.
check "exit code of the stopped run (docker events)" 0 \
    "$(docker events --since "$started" --until "$(date +%s)" --filter "container=$name" \
        --filter event=die --format '{{.Actor.Attributes.exitCode}}' | head -n 1)"
check "DBSIZE after restart" "$before" "$(cli dbsize 2>&1)"
check "GET key:1" value-1 "$(cli get key:1 2>&1)"
check "GET key:1000" value-1000 "$(cli get key:1000 2>&1)"
check "HGET user:1 lang" rust "$(cli hget user:1 lang 2>&1)"
check "LRANGE queue 0 -1" "a b c" "$(cli lrange queue 0 -1 2>&1 | paste -sd' ')"
check "SCARD tags" 3 "$(cli scard tags 2>&1)"
ttl=$(cli ttl session:1 2>&1 || true)
if [ "$ttl" -gt 3500 ] 2>/dev/null && [ "$ttl" -le 3600 ]; then ok "TTL session:1 kept: $ttl"; else fail "TTL session:1: $ttl"; fi
say "      the volume (docker exec $name ls -ln /var/lib/ringdb):"
docker exec "$name" ls -ln /var/lib/ringdb | indent

step "INFO"
{
    cli info server; cli info memory; cli info persistence; cli info clients
} 2>&1 | tr -d '\r' | grep -E '^(redis_version|ringdb[a-z_]*|os|arch_bits|multiplexing_api|process_id|tcp_port|uptime_in_seconds|executable|config_file|io_threads_active|shards|used_memory_human|used_memory_rss_human|used_memory_peak_human|maxmemory_human|maxmemory_policy|mem_allocator|total_system_memory_human|rdb_last_save_time|rdb_last_bgsave_status|rdb_changes_since_last_save|loading|connected_clients|maxclients):' \
    | indent
say "      docker stats: $(docker stats --no-stream --format '{{.CPUPerc}} cpu, {{.MemUsage}}, {{.PIDs}} pids' "$name")"

# ---- 6. without the profile -------------------------------------------------
step "6. without the io_uring profile"
# One ringdb at a time: every container runs it as uid 10001, and the kernel
# counts io_uring's locked memory per user, across containers, against each
# process's own RLIMIT_MEMLOCK; with a small MEMLOCK a second ringdb would
# fail for lack of locked memory, not because of seccomp.
say "\$ docker stop -t $STOP_TIMEOUT $name"
docker stop -t "$STOP_TIMEOUT" "$name" >/dev/null || fail "docker stop $name failed"
# No network (nothing connects to these) and no named volume: only whether
# ringdb starts. First the daemon's own default profile (Docker 25+ blocks
# io_uring in it, older Dockers allow it), then Docker's stock default
# profile (what Docker 25+ builds in), given as a file.
neg_args=(--network none --cpuset-cpus "$CPUS" --memory "$MEMORY" --ulimit "memlock=$MEMLOCK"
    -e "RINGDB_REQUIREPASS=$password")
for c in "$name-default" "$name-stock"; do
    if [ "$c" = "$name-default" ]; then
        say "\$ docker run -d --name $c --network none --cpuset-cpus $CPUS --memory $MEMORY --ulimit memlock=$MEMLOCK $IMAGE"
        docker run -d --name "$c" "${neg_args[@]}" "$IMAGE" --bind 127.0.0.1 >/dev/null \
            || fail "docker run $c failed"
    else
        say "\$ docker run -d --name $c --security-opt seccomp=<deploy/seccomp-ringdb.json minus io_uring = Docker's default> (same flags) $IMAGE"
        docker run -d --name "$c" --security-opt "seccomp=$work/seccomp-docker-default.json" \
            "${neg_args[@]}" "$IMAGE" --bind 127.0.0.1 >/dev/null || fail "docker run $c failed"
    fi
    state=$(wait_exited "$c" 10)
    refusal=$(docker logs "$c" 2>&1 | grep -iE 'io_uring|seccomp|Operation not permitted' | head -n 3 | cut -c1-400 || true)
    # Clear: the error names seccomp, not only io_uring or the memlock limit.
    clear=no; grep -qi seccomp <<<"$refusal" && clear=yes
    say "   $c: $state"
    [ -n "$refusal" ] && indent <<<"$refusal"
    case $c in
        *-stock)
            if [[ $state == exited* && $state != *exit=0 && $clear == yes ]]; then
                ok "with Docker's stock default profile ringdb stops, and its error names seccomp"
            else
                fail "with Docker's stock default profile: $state, an error that names seccomp: $clear; logs:"
                docker logs "$c" 2>&1 | tail -n 8 | indent
            fi
            ;;
        *-default)
            if [ "${daemon_version%%.*}" -ge 25 ] 2>/dev/null; then
                if [[ $state == exited* && $clear == yes ]]; then
                    ok "daemon $daemon_version's built-in profile blocks io_uring, and ringdb says so"
                else
                    fail "daemon $daemon_version's built-in profile: expected a refusal naming seccomp, got $state"
                fi
            elif [[ $state == running* ]]; then
                ok "daemon $daemon_version (older than 25): its built-in profile still allows io_uring, so ringdb runs"
            else
                fail "daemon $daemon_version (older than 25) allows io_uring, yet ringdb stopped; last log lines:"
                docker logs "$c" 2>&1 | tail -n 5 | cut -c1-300 | indent
            fi
            docker stop -t "$STOP_TIMEOUT" "$c" >/dev/null 2>&1 || true
            ;;
    esac
done

finish
