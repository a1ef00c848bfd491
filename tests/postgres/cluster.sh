#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for tests: its own data directory, a free port on 127.0.0.1,
# run as an unprivileged user (initdb refuses root), trust authentication for the one role. The
# data directory is made under /tmp (that user must reach it); DIR keeps its path.
#   tests/postgres/cluster.sh start DIR   prints the URL (postgres://hindsight@127.0.0.1:PORT/postgres)
#   tests/postgres/cluster.sh stop DIR
set -euo pipefail
action=${1:?start or stop}
dir=$(realpath -m "${2:?a directory for the cluster}")

bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$bin" ] && [ -x "$bin/initdb" ] || { echo "no PostgreSQL server found (apt-get install postgresql)" >&2; exit 1; }

as_user() {
    if [ "$(id -u)" = 0 ]; then
        local user=postgres
        id "$user" >/dev/null 2>&1 || user=nobody
        runuser -u "$user" -- "$@"
    else
        "$@"
    fi
}

case "$action" in
    start)
        mkdir -p "$dir"
        data=$(mktemp -d /tmp/hindsight-pg.XXXXXX)
        echo "$data" >"$dir/data-dir"
        if [ "$(id -u)" = 0 ]; then
            if id postgres >/dev/null 2>&1; then chown postgres "$data"; else chown nobody "$data"; fi
        fi
        as_user "$bin/initdb" -D "$data/data" -U hindsight --auth=trust --no-sync -E UTF8 >"$dir/initdb.log" 2>&1 ||
            { cat "$dir/initdb.log" >&2; exit 1; }
        port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
        as_user "$bin/pg_ctl" -D "$data/data" -l "$data/server.log" -w -t 60 \
            -o "-p $port -k $data -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" start >/dev/null ||
            { cat "$data/server.log" >&2; exit 1; }
        echo "postgres://hindsight@127.0.0.1:$port/postgres"
        ;;
    stop)
        data=$(cat "$dir/data-dir" 2>/dev/null || true)
        if [ -n "$data" ] && [ -d "$data/data" ]; then
            as_user "$bin/pg_ctl" -D "$data/data" -m immediate stop >/dev/null 2>&1 || true
            rm -rf "$data"
        fi
        ;;
    *)
        echo "usage: $0 start|stop DIR" >&2
        exit 2
        ;;
esac
