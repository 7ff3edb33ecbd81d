#!/usr/bin/env bash
# A throwaway PostgreSQL server for tests and benchmarks: Debian's postgresql package (installed
# by ./dev deps when missing), a new cluster in a temporary directory owned by an unprivileged
# user, listening on a free port of 127.0.0.1 only, password authentication (SCRAM).
#
#   scripts/postgres.sh run COMMAND [ARGS...]
#       starts a server, runs COMMAND with NAVIGATOR_TEST_POSTGRES set to its URL
#       (postgresql://navigator:PASSWORD@127.0.0.1:PORT/navigator), stops the server and removes
#       its directory when COMMAND ends (or fails, or is interrupted); exits with COMMAND's status.
#   scripts/postgres.sh start DIR
#       starts a server whose files live in DIR (created; must not exist) and prints its URL;
#       it runs until `scripts/postgres.sh stop DIR`. For benchmarks and trying things by hand.
#   scripts/postgres.sh stop DIR
#       stops that server and removes DIR.
#   scripts/postgres.sh halt DIR      stops that server (fast shutdown), keeping DIR
#   scripts/postgres.sh kill DIR      kills that server and its backends (SIGKILL), keeping DIR
#   scripts/postgres.sh resume DIR    starts a halted or killed server again, on its port
#       For the fault tests: the database going away under load and coming back.
#
# Environment: POSTGRES_FAST=1 turns fsync off (tests: nothing here outlives a test run, and
# navigatord's durability tests kill navigatord; the fault tests that kill PostgreSQL start a
# server of their own without it). Benchmarks leave it unset.
# POSTGRES_OPTIONS: more server settings, as `-c name=value ...` (benchmarks load
# pg_stat_statements to count statements).
set -euo pipefail

bindir() {
  local dir
  for dir in /usr/lib/postgresql/*/bin; do
    if [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then
      echo "$dir"
      return 0
    fi
  done
  echo "postgres.sh: no PostgreSQL server found under /usr/lib/postgresql (run ./dev deps)" >&2
  return 1
}

# The unprivileged user that owns the cluster: the server refuses to run as root. Debian's
# package creates `postgres`; without it, `nobody`.
owner() {
  if [ "$(id -u)" -ne 0 ]; then
    id -un
  elif id postgres >/dev/null 2>&1; then
    echo postgres
  else
    echo nobody
  fi
}

as_owner() {
  local user="$1"
  shift
  if [ "$(id -un)" = "$user" ]; then
    "$@"
  else
    runuser -u "$user" -- "$@"
  fi
}

free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

start() {
  local dir="$1"
  if [ -e "$dir" ]; then
    echo "postgres.sh: $dir exists; expected a path for a new server's files" >&2
    return 1
  fi
  local bin user password
  bin="$(bindir)"
  user="$(owner)"
  mkdir -p "$dir"
  chmod 700 "$dir"
  if ! as_owner "$user" test -x "$(dirname "$dir")"; then
    rmdir "$dir"
    echo "postgres.sh: $user cannot enter $(dirname "$dir"); expected a directory it can reach (chmod o+x, or a path under /tmp)" >&2
    return 1
  fi
  password="$(/usr/bin/python3 -c 'import secrets; print(secrets.token_hex(16))')"
  (umask 077 && printf '%s\n' "$password" >"$dir/password")
  chown -R "$user" "$dir"
  if ! as_owner "$user" "$bin/initdb" --pgdata="$dir/data" --username=navigator --pwfile="$dir/password" \
    --auth=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1; then
    echo "postgres.sh: initdb failed:" >&2
    cat "$dir/initdb.log" >&2
    return 1
  fi
  local options="-c listen_addresses=127.0.0.1 -c unix_socket_directories=$dir -c max_connections=200"
  if [ "${POSTGRES_FAST:-}" = 1 ]; then options="$options -c fsync=off -c full_page_writes=off"; fi
  options="$options ${POSTGRES_OPTIONS:-}"
  local port attempt
  for attempt in 1 2 3 4 5; do
    port="$(free_port)"
    # A port taken between choosing it and binding it: try another.
    if as_owner "$user" "$bin/pg_ctl" --pgdata="$dir/data" --log="$dir/server.log" --wait --timeout=60 \
      -o "$options -c port=$port" start >/dev/null 2>&1; then
      echo "$port" >"$dir/port"
      PGPASSWORD="$password" "$bin/psql" -h 127.0.0.1 -p "$port" -U navigator -d postgres -q -v ON_ERROR_STOP=1 \
        -c "CREATE DATABASE navigator" >/dev/null
      echo "postgresql://navigator:$password@127.0.0.1:$port/navigator"
      return 0
    fi
  done
  echo "postgres.sh: the server did not start; its log:" >&2
  cat "$dir/server.log" >&2 || true
  return 1
}

stop() {
  local dir="$1"
  [ -d "$dir" ] || return 0
  if [ -f "$dir/data/postmaster.pid" ]; then
    as_owner "$(stat -c %U "$dir/data")" "$(bindir)/pg_ctl" --pgdata="$dir/data" --mode=immediate --wait stop \
      >/dev/null 2>&1 || true
  fi
  rm -rf "$dir"
}

halt() {
  local dir="$1"
  as_owner "$(stat -c %U "$dir/data")" "$(bindir)/pg_ctl" --pgdata="$dir/data" --mode=fast --wait stop >/dev/null
}

kill_server() {
  local dir="$1" pid
  pid="$(head -1 "$dir/data/postmaster.pid")"
  # The backends first (children of the postmaster), then the postmaster: nothing shuts down
  # cleanly, as when the machine or the container dies.
  pkill -KILL -P "$pid" || true
  kill -KILL "$pid"
  while kill -0 "$pid" 2>/dev/null || pgrep -P "$pid" >/dev/null; do sleep 0.05; done
}

resume() {
  local dir="$1" options
  options="-c listen_addresses=127.0.0.1 -c unix_socket_directories=$dir -c max_connections=200"
  if [ "${POSTGRES_FAST:-}" = 1 ]; then options="$options -c fsync=off -c full_page_writes=off"; fi
  options="$options ${POSTGRES_OPTIONS:-} -c port=$(cat "$dir/port")"
  as_owner "$(stat -c %U "$dir/data")" "$(bindir)/pg_ctl" --pgdata="$dir/data" --log="$dir/server.log" --wait \
    --timeout=60 -o "$options" start >/dev/null
}

command="${1:-}"
[ $# -gt 0 ] && shift
case "$command" in
  run)
    [ $# -gt 0 ] || { echo "postgres.sh run: expected a command to run" >&2; exit 2; }
    dir="$(mktemp -d /tmp/navigator-postgres.XXXXXX)"
    rmdir "$dir"
    trap 'stop "$dir"' EXIT
    trap 'exit 130' INT TERM
    url="$(start "$dir")"
    status=0
    NAVIGATOR_TEST_POSTGRES="$url" "$@" || status=$?
    # A failed run: what the server said of itself (a backend that died, a restart, a refusal)
    # is part of the story.
    if [ "$status" -ne 0 ] && [ -f "$dir/server.log" ]; then
      echo "postgres.sh: the run failed (status $status); the shared server's log, its warnings and worse:" >&2
      grep -E "WARNING|ERROR|FATAL|PANIC|terminated|server process|database system" "$dir/server.log" \
        | grep -vE "duplicate key|canceling statement due to user request" | tail -40 >&2 || true
    fi
    exit "$status"
    ;;
  start)
    [ $# -eq 1 ] || { echo "postgres.sh start: expected the directory for the server's files" >&2; exit 2; }
    start "$1"
    ;;
  stop)
    [ $# -eq 1 ] || { echo "postgres.sh stop: expected the directory given to start" >&2; exit 2; }
    stop "$1"
    ;;
  halt | kill | resume)
    [ $# -eq 1 ] && [ -d "$1/data" ] || { echo "postgres.sh $command: expected the directory given to start" >&2; exit 2; }
    case "$command" in halt) halt "$1" ;; kill) kill_server "$1" ;; resume) resume "$1" ;; esac
    ;;
  *)
    sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
