#!/usr/bin/env bash
# Throwaway PostgreSQL cluster for tests and CI.
#
#   scripts/pg_throwaway.sh start DIR   initdb into DIR/data (unless it exists),
#                                       start on a free loopback port, wait for
#                                       pg_isready, print the URL as the last
#                                       line of stdout (also saved in DIR/url)
#   scripts/pg_throwaway.sh stop DIR    stop the server (the caller removes DIR)
#
# initdb and postgres refuse to run as root. When this script runs as root the
# cluster belongs to the `postgres` system user (created if absent) and every
# server binary runs through `runuser -u postgres --`; DIR must then be
# reachable by that user (a fresh `mktemp -d` under /tmp is). Otherwise the
# binaries run as the calling user. Server binaries are looked up in $PG_BIN,
# then the newest /usr/lib/postgresql/*/bin, then $PATH.
# Diagnostics go to stderr; stdout carries only the URL.
set -euo pipefail

log() { printf 'pg_throwaway: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() { die "usage: $0 start|stop DIR"; }
[[ $# -eq 2 ]] || usage
cmd=$1
dir=$2

find_bindir() {
    if [[ -n "${PG_BIN:-}" ]]; then
        [[ -x "$PG_BIN/initdb" ]] || die "PG_BIN=$PG_BIN has no initdb"
        printf '%s\n' "$PG_BIN"; return
    fi
    local best="" v
    for d in /usr/lib/postgresql/*/bin; do
        [[ -x "$d/initdb" ]] || continue
        v=$(basename "$(dirname "$d")")
        if [[ -z "$best" ]] || (( ${v%%.*} > $(basename "$(dirname "$best")" | cut -d. -f1) )); then
            best=$d
        fi
    done
    if [[ -n "$best" ]]; then printf '%s\n' "$best"; return; fi
    if command -v initdb >/dev/null 2>&1; then
        dirname "$(command -v initdb)"; return
    fi
    die "PostgreSQL server binaries (initdb) not found; install them (apt-get install postgresql) or set PG_BIN"
}

# Run a server binary as the cluster owner, from a directory it can enter.
as_owner() {
    if [[ $EUID -eq 0 ]]; then
        (cd / && runuser -u postgres -- "$@")
    else
        (cd / && "$@")
    fi
}

free_port() {
    local py
    py=$(command -v python3 || command -v python || true)
    [[ -n "$py" ]] || die "python3 is needed to pick a free port"
    "$py" - <<'PY'
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
PY
}

start() {
    local bindir data sock logf port url attempt
    bindir=$(find_bindir)
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    data=$dir/data
    sock=$dir/sock
    logf=$dir/server.log

    if [[ $EUID -eq 0 ]]; then
        if ! id -u postgres >/dev/null 2>&1; then
            log "creating system user postgres"
            useradd -r -M -d /nonexistent -s /usr/sbin/nologin postgres
        fi
        chown postgres: "$dir"
        chmod 700 "$dir"
        runuser -u postgres -- test -w "$dir" \
            || die "user postgres cannot write $dir (is a parent directory closed to it?)"
    fi

    if [[ -f "$data/postmaster.pid" ]] && as_owner "$bindir/pg_ctl" -D "$data" status >/dev/null 2>&1; then
        die "a server is already running on $data"
    fi

    if [[ ! -f "$data/PG_VERSION" ]]; then
        log "initdb $data ($bindir)"
        as_owner "$bindir/initdb" -D "$data" -U postgres -E UTF8 --no-locale \
            --auth-local=trust --auth-host=trust >"$dir/initdb.log" 2>&1 \
            || { cat "$dir/initdb.log" >&2; die "initdb failed"; }
        as_owner mkdir -p "$sock"
        # Later settings win: appended to the generated postgresql.conf.
        cat <<CONF | as_owner tee -a "$data/postgresql.conf" >/dev/null

# --- pg_throwaway.sh ---
listen_addresses = '127.0.0.1'
unix_socket_directories = '$sock'
fsync = on
max_connections = 200
logging_collector = off
CONF
    fi

    for attempt in 1 2 3 4 5; do
        port=$(free_port)
        log "starting server on 127.0.0.1:$port (log: $logf)"
        if as_owner "$bindir/pg_ctl" -D "$data" -l "$logf" -o "-p $port" -w -t 60 start >&2; then
            break
        fi
        log "start attempt $attempt failed; last log lines:"
        tail -n 20 "$logf" >&2 || true
        port=""
    done
    [[ -n "$port" ]] || die "could not start PostgreSQL"

    for _ in $(seq 1 100); do
        if "$bindir/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres; then
            url="postgresql://postgres@127.0.0.1:$port/postgres"
            printf '%s\n' "$url" >"$dir/url"
            log "ready"
            printf '%s\n' "$url"
            return 0
        fi
        sleep 0.1
    done
    tail -n 20 "$logf" >&2 || true
    die "server did not become ready on port $port"
}

stop() {
    local bindir data
    data=$dir/data
    if [[ ! -f "$data/postmaster.pid" ]]; then
        log "no server running on $data"
        return 0
    fi
    bindir=$(find_bindir)
    log "stopping server on $data"
    as_owner "$bindir/pg_ctl" -D "$data" -m fast -w -t 60 stop >&2 \
        || as_owner "$bindir/pg_ctl" -D "$data" -m immediate -w -t 30 stop >&2
}

case $cmd in
    start) start ;;
    stop) stop ;;
    *) usage ;;
esac
