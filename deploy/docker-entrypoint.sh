#!/bin/sh
# Container entrypoint: starts ringdb with /etc/ringdb/ringdb.toml and the
# flags given as arguments (the image's CMD is `--bind 0.0.0.0`).
#
# A password comes from the file named by RINGDB_REQUIREPASS_FILE (a Docker
# or Kubernetes secret) or from RINGDB_REQUIREPASS. It is appended to a copy
# of the config in /run/ringdb (mode 0600) rather than passed as a flag, so
# it does not show in the process list; the variable is removed from the
# server's environment.
set -eu

conf=/etc/ringdb/ringdb.toml
run_dir=/run/ringdb

password=""
if [ -n "${RINGDB_REQUIREPASS_FILE:-}" ]; then
    password=$(cat "$RINGDB_REQUIREPASS_FILE")
elif [ -n "${RINGDB_REQUIREPASS:-}" ]; then
    password=$RINGDB_REQUIREPASS
fi
unset RINGDB_REQUIREPASS RINGDB_REQUIREPASS_FILE

if [ -n "$password" ]; then
    case $password in
        *"
"*)
            echo "docker-entrypoint: the password must be a single line" >&2
            exit 1
            ;;
    esac
    # A TOML basic string: escape backslashes and double quotes.
    escaped=$(printf '%s' "$password" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g')
    umask 077
    {
        cat "$conf"
        printf '\nrequirepass = "%s"\n' "$escaped"
    } >"$run_dir/ringdb.toml"
    conf=$run_dir/ringdb.toml
fi

exec /usr/local/bin/ringdb "$conf" "$@"
