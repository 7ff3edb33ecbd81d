#!/usr/bin/env bash
# The HTTP API's acknowledged intents (issue 29): a release navigatord here (or the one in BIN, an
# earlier commit's, to compare in one session) and `navload http` at RATE intents/s on
# CONNECTIONS keep-alive connections for SECONDS; prints navload's report (latency from each
# intent's due time to its whole response, statuses, navigatord's CPU).
#   scripts/bench-http.sh [RATE] [SECONDS] [CONNECTIONS]     (defaults 200 20 4)
# (navigatord is started with --metrics, the alias of --http, which builds before issue 29 know.)
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${1:-200}
seconds=${2:-20}
connections=${3:-4}
bin=${BIN:-}
if [ -z "$bin" ]; then
  # One product a command: given several --product, swift build builds only the last.
  for product in navigatord navload; do
    swift build -c release --scratch-path .build-release --product "$product" >&2
  done
  bin=.build-release/release
fi
work=$(mktemp -d)
pid=""
cleanup() { [[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$work"; }
# All of it, even where a step fails (errexit would end it there); and on a signal (Ctrl-C, a
# closed pipe) too, where bash would otherwise exit without it and leave what it started running.
trap 'set +e; cleanup' EXIT
trap 'exit 130' INT TERM HUP PIPE
port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
http="127.0.0.1:$(port)"
"$bin/navigatord" --intents "tcp://127.0.0.1:$(port)" --requests "tcp://127.0.0.1:$(port)" \
  --commands "tcp://127.0.0.1:$(port)" --metrics "$http" --data-directory "$work/data" --log-level warning \
  >"$work/log" 2>&1 &
pid=$!
for _ in $(seq 100); do curl -sf "http://$http/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
.build-release/release/navload http --http "$http" --rate "$rate" --duration "$seconds" --warmup 2 \
  --connections "$connections" --service-pid "$pid"
