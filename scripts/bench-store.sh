#!/usr/bin/env bash
# One navigatord on SQLite against one on PostgreSQL, same load, alternating (issue 17): the
# release builds of this tree, a throwaway PostgreSQL server with its default settings (fsync on),
# a fresh state file or database for every run. Per run: navload's report (throughput, latency,
# navigatord's CPU per intent) and, on PostgreSQL, the database's transactions and rows written
# per intent and the PostgreSQL server's own CPU per intent (its processes, from /proc).
#
#   scripts/bench-store.sh [--rounds N] [--quick]
#
# Needs an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=2
quick=0
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    *) echo "bench-store: unknown argument $1; expected --rounds N or --quick" >&2; exit 64 ;;
  esac
done

swift build -c release --scratch-path .build-release --product navigatord >&2
swift build -c release --scratch-path .build-release --product navload >&2
bin=.build-release/release
work=$(mktemp -d)
chmod 711 "$work"  # the server's unprivileged user must reach its directory inside
db="$work/postgres"
pid=""
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  scripts/postgres.sh stop "$db"
  rm -rf "$work"
}
trap cleanup EXIT
admin=$(scripts/postgres.sh start "$db")
port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# CPU seconds (user + system) of the PostgreSQL server's processes.
pg_cpu() {
  local total=0 p
  for p in $(pgrep -u postgres -f "$db/data" || true) $(pgrep -u postgres -P "$(head -1 "$db/data/postmaster.pid")" || true); do
    [ -r "/proc/$p/stat" ] || continue
    total=$(awk -v t="$total" '{ print t + $14 + $15 }' "/proc/$p/stat")
  done
  awk -v t="$total" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.3f", t / hz }'
}
stats() { psql "$admin" -Atc "SELECT xact_commit, tup_inserted + tup_updated FROM pg_stat_database WHERE datname = 'bench'"; }

# run STORE FIGURE navload-args...
run() {
  local store=$1 figure=$2
  shift 2
  local i r c storeArgs=()
  i="tcp://127.0.0.1:$(port)"; r="tcp://127.0.0.1:$(port)"; c="tcp://127.0.0.1:$(port)"
  rm -rf "$work/data"
  if [ "$store" = postgresql ]; then
    psql "$admin" -qc "DROP DATABASE IF EXISTS bench WITH (FORCE)" -c "CREATE DATABASE bench"
    storeArgs=(--store "${admin%/navigator}/bench" --cluster-endpoint "tcp://127.0.0.1:$(port)")
  fi
  "$bin/navigatord" --intents "$i" --requests "$r" --commands "$c" --metrics off --data-directory "$work/data" \
    --log-level warning "${storeArgs[@]}" >"$work/navigatord.log" 2>&1 &
  pid=$!
  sleep 2  # the first lease round (PostgreSQL) before the load
  local before_stats before_cpu
  if [ "$store" = postgresql ]; then before_stats=$(stats); before_cpu=$(pg_cpu); fi
  "$bin/navload" --intents "$i" --requests "$r" --commands "$c" --service-pid "$pid" --timeout 300 "$@" \
    >"$work/out" 2>&1 || true
  local through cpu per p99
  through=$(awk '/^service throughput / { print $3; exit }' "$work/out")
  cpu=$(awk '/^navigatord CPU  / { print $3; exit }' "$work/out")
  per=$(awk '/^navigatord CPU per intent/ { print $5; exit }' "$work/out")
  p99=$(awk '/^latency p50/ { print $(NF-1); exit }' "$work/out")
  local extra=""
  if [ "$store" = postgresql ]; then
    local after_stats after_cpu sent
    after_stats=$(stats); after_cpu=$(pg_cpu)
    sent=$(awk '/^accounted/ { print $4 }' "$work/out")
    extra=$(awk -v b="$before_stats" -v a="$after_stats" -v cb="$before_cpu" -v ca="$after_cpu" -v n="$sent" 'BEGIN {
      split(b, x, "|"); split(a, y, "|")
      printf " | %.3f transactions, %.3f rows written, %.1f µs PostgreSQL CPU per intent", (y[1]-x[1])/n, (y[2]-x[2])/n, (ca-cb)*1e6/n }')
  fi
  echo "$store $figure: $through intents/s, navigatord $cpu cores = $per µs/intent, p99 $p99 µs$extra"
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true
  pid=""
}

duration=20
[ "$quick" = 1 ] && duration=8
for round in $(seq 1 "$rounds"); do
  for store in sqlite postgresql; do
    run "$store" saturation --rate 100000 --duration 5 --warmup 1
    run "$store" "2000/s" --rate 2000 --duration "$duration" --warmup 2 --sessions 20000
  done
done
