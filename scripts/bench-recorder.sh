#!/usr/bin/env bash
# The flight recorder's cost on the hot path (issue 33): a fresh navigatord from BIN (a directory
# holding navigatord, navload and navctl) on free 127.0.0.1 ports, with the recorder off and at
# SIZE entries in turn, ROUNDS times; each run is `navload run --rate RATE --duration 10
# --warmup 2 --sessions 20000`. Prints navigatord's CPU per intent and the latency of each run.
#
#   scripts/bench-recorder.sh BIN [SIZE] [ROUNDS] [RATE]      (defaults: 4096 3 2000)
set -euo pipefail
bin=$1
size=${2:-4096}
rounds=${3:-3}
rate=${4:-2000}
work=$(mktemp -d)
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
# All of it, even where a step fails (errexit would end it there); and on a signal (Ctrl-C, a
# closed pipe) too, where bash would otherwise exit without it and leave what it started running.
trap 'set +e; cleanup' EXIT
trap 'exit 130' INT TERM HUP PIPE
port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
for round in $(seq "$rounds"); do
  for entries in 0 "$size"; do
    i="tcp://127.0.0.1:$(port)"; r="tcp://127.0.0.1:$(port)"; c="tcp://127.0.0.1:$(port)"; h="127.0.0.1:$(port)"
    rm -rf "$work/data"; mkdir -p "$work/data"
    "$bin/navigatord" --intents "$i" --requests "$r" --commands "$c" --http "$h" --data-directory "$work/data" \
      --flight-recorder-intents "$entries" --log-level warning >"$work/navigatord.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do
      if "$bin/navctl" stats --requests "$r" >/dev/null 2>&1; then break; fi
      sleep 0.1
    done
    "$bin/navload" run --intents "$i" --requests "$r" --commands "$c" --service-pid "$pid" \
      --rate "$rate" --duration 10 --warmup 2 --sessions 20000 >"$work/load.txt" 2>&1
    echo "round $round, recorder $entries: $(grep -E 'navigatord CPU per intent|latency p50' "$work/load.txt" | tr -s ' ' | paste -sd '|')"
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
  done
done
