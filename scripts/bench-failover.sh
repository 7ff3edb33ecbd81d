#!/usr/bin/env bash
# Failover time (issue 17): three release navigatord instances on a throwaway PostgreSQL
# (scripts/postgres.sh, default lease 5 s); five times, kill -9 the instance serving session
# "probe" and time until another instance resolves an acknowledged intent for it (retrying
# every 50 ms), then restart the killed one. Prints one line per kill.
set -uo pipefail
cd "$(dirname "$0")/.."
bin=.build-release/release
work=$(mktemp -d)
chmod 711 "$work"
db="$work/postgres"
declare -a pids
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  scripts/postgres.sh stop "$db"
  rm -rf "$work"
}
# All of it, even where a step fails (errexit would end it there); and on a signal (Ctrl-C, a
# closed pipe) too, where bash would otherwise exit without it and leave what it started running.
trap 'set +e; cleanup' EXIT
trap 'exit 130' INT TERM HUP PIPE
export NAVIGATOR_STORE=$(scripts/postgres.sh start "$db")
start() {
  local n=$1
  $bin/navigatord --instance-id "nav-$n" --intents "tcp://127.0.0.1:7${n}01" --requests "tcp://127.0.0.1:7${n}02" \
    --commands "tcp://127.0.0.1:7${n}03" --cluster-endpoint "tcp://127.0.0.1:7${n}04" --metrics off \
    --log-level warning --data-directory "$work/data-$n" >"$work/nav-$n.log" 2>&1 &
  pids[$n]=$!
}
owner() {
  psql "$NAVIGATOR_STORE" -Atc "SELECT owner FROM navigator_leases WHERE partition =
    (SELECT partition FROM navigator_sessions WHERE id = 'probe')"
}
for n in 1 2 3; do start "$n"; done
sleep 6
$bin/navctl send --wait --session probe --requests tcp://127.0.0.1:7102 settings >/dev/null
sleep 1.5  # written behind
for kill in 1 2 3 4 5; do
  n=$(owner); n=${n#nav-}
  other=$((n % 3 + 1))
  kill -9 "${pids[$n]}"; wait "${pids[$n]}" 2>/dev/null
  t0=$(date +%s.%N)
  until $bin/navctl send --wait --timeout 1 --session probe --requests "tcp://127.0.0.1:7${other}02" home \
    >"$work/probe" 2>&1 && grep -q 'resolved\|ignored' "$work/probe"; do sleep 0.05; done
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" -v k="$kill" -v n="$n" -v o="$other" \
    'BEGIN { printf "kill %d: nav-%d killed; probe resolved through nav-%d after %.2f s\n", k, n, o, b - a }'
  $bin/navctl send --wait --session probe --requests "tcp://127.0.0.1:7${other}02" settings >/dev/null 2>&1
  start "$n"
  sleep 7  # the restarted instance waits for its predecessor's row, then takes its share
done
