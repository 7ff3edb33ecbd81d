#!/usr/bin/env bash
# One navigatord on SQLite against one and three on PostgreSQL, same load, alternating (issue
# 17): the release builds of this tree, a throwaway PostgreSQL server with its default settings
# (fsync on) and pg_stat_statements loaded, a fresh state file or database for every run. Per
# run: navload's report (throughput, latency, navigatord's CPU per intent — with three instances,
# navload follows all three and adds their CPU up) and, on PostgreSQL, the statements,
# transactions and rows written per intent and the PostgreSQL server's own CPU per intent (its
# processes, from /proc). Three instances share the two cores with navload and PostgreSQL, and
# the intents are sent to all three in turn (two thirds are forwarded to their owner).
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
pids=()
cleanup() {
  [ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null && wait "${pids[@]}" 2>/dev/null
  scripts/postgres.sh stop "$db"
  rm -rf "$work"
}
# All of it, even where a step fails (errexit would end it there); and on a signal (Ctrl-C, a
# closed pipe) too, where bash would otherwise exit without it and leave what it started running.
trap 'set +e; cleanup' EXIT
trap 'exit 130' INT TERM HUP PIPE
admin=$(POSTGRES_OPTIONS="-c shared_preload_libraries=pg_stat_statements" scripts/postgres.sh start "$db")
psql "$admin" -qc "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"
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
# Transactions, rows written and statements run in the bench database so far.
stats() {
  psql "$admin" -Atc "SELECT d.xact_commit, d.tup_inserted + d.tup_updated,
      (SELECT coalesce(sum(calls), 0) FROM pg_stat_statements s WHERE s.dbid = d.datid)
    FROM pg_stat_database d WHERE d.datname = 'bench'"
}

# run STORE FIGURE navload-args...   (STORE: sqlite, postgresql, or postgresql3 for three instances)
run() {
  local store=$1 figure=$2
  shift 2
  local n=1 k storeArgs=() intents=() requests=() commands=()
  [ "$store" = postgresql3 ] && n=3
  rm -rf "$work"/data*
  if [ "$store" != sqlite ]; then
    psql "$admin" -qc "DROP DATABASE IF EXISTS bench WITH (FORCE)" -c "CREATE DATABASE bench"
  fi
  pids=()
  for k in $(seq 1 "$n"); do
    intents+=("tcp://127.0.0.1:$(port)"); requests+=("tcp://127.0.0.1:$(port)"); commands+=("tcp://127.0.0.1:$(port)")
    storeArgs=()
    if [ "$store" != sqlite ]; then
      storeArgs=(--store "${admin%/navigator}/bench" --instance-id "bench-$k" --cluster-endpoint "tcp://127.0.0.1:$(port)")
    fi
    "$bin/navigatord" --intents "${intents[-1]}" --requests "${requests[-1]}" --commands "${commands[-1]}" \
      --metrics off --data-directory "$work/data$k" --log-level warning "${storeArgs[@]}" >"$work/navigatord$k.log" 2>&1 &
    pids+=($!)
  done
  # The first lease rounds (PostgreSQL: three instances even out their shares) before the load.
  sleep $((n == 1 ? 2 : 6))
  local before_stats before_cpu pidArgs=() intentArgs=()
  [ "$n" = 1 ] && pidArgs=(--service-pid "${pids[0]}")
  for k in "${intents[@]}"; do intentArgs+=(--intents "$k"); done
  if [ "$store" != sqlite ]; then before_stats=$(stats); before_cpu=$(pg_cpu); fi
  "$bin/navload" "${intentArgs[@]}" --requests "${requests[0]}" --commands "${commands[0]}" "${pidArgs[@]}" \
    --timeout 300 "$@" >"$work/out" 2>&1 || true
  local through cpu per p99
  through=$(awk '/^service throughput / { print $3; exit }' "$work/out")
  cpu=$(awk '/^navigatord CPU  / { print $3; exit }' "$work/out")
  per=$(awk '/^navigatord CPU per intent/ { print $5; exit }' "$work/out")
  p99=$(awk '/^latency p50/ { print $(NF-1); exit }' "$work/out")
  local extra=""
  if [ "$store" != sqlite ]; then
    local after_stats after_cpu sent
    after_stats=$(stats); after_cpu=$(pg_cpu)
    sent=$(awk '/^accounted/ { print $4 }' "$work/out")
    extra=$(awk -v b="$before_stats" -v a="$after_stats" -v cb="$before_cpu" -v ca="$after_cpu" -v n="$sent" 'BEGIN {
      split(b, x, "|"); split(a, y, "|")
      printf " | %.3f statements, %.3f transactions, %.3f rows written, %.1f µs PostgreSQL CPU per intent", (y[3]-x[3])/n, (y[1]-x[1])/n, (y[2]-x[2])/n, (ca-cb)*1e6/n }')
  fi
  echo "$store $figure: $through intents/s, navigatord $cpu cores = $per µs/intent, p99 $p99 µs$extra"
  if ! grep -q '^navigatord instances' "$work/out" || [ "$(awk '/^navigatord instances/ { print $3; exit }' "$work/out")" != "$n" ]; then
    echo "  (navload did not follow $n instances:)" >&2
    cat "$work/out" >&2
  fi
  kill "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null || true
  pids=()
}

duration=20
[ "$quick" = 1 ] && duration=8
for round in $(seq 1 "$rounds"); do
  for store in sqlite postgresql postgresql3; do
    run "$store" saturation --rate 100000 --duration 5 --warmup 1
    run "$store" "2000/s" --rate 2000 --duration "$duration" --warmup 2 --sessions 20000
  done
done
