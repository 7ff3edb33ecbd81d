#!/usr/bin/env bash
# Memory of idle HTTP session streams (issue 18): a release navigatord here, 100 streams to warm
# the HTTP path, then N more held open (scripts/open-streams.py); navigatord's RSS growth per
# stream once all have their snapshot. Twice: each stream on a session of its own, then all on
# one session (the per-connection part alone).
#   scripts/bench-streams.sh [N]        (MODE=ws: WebSocket streams; MODE=keepalive: plain connections)
# BIN=DIR uses the navigatord in DIR (an earlier commit's, to compare in one session) instead of
# building this tree's.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-10000}
bin=${BIN:-}
if [ -z "$bin" ]; then
  swift build -c release --scratch-path .build-release --product navigatord >&2
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
rss() { awk '/VmRSS/ { print $2 }' "/proc/$pid/status"; }
for mode in distinct shared; do
  http=$(port)
  rm -rf "$work/data"
  "$bin/navigatord" --intents "tcp://127.0.0.1:$(port)" --requests "tcp://127.0.0.1:$(port)" \
    --commands "tcp://127.0.0.1:$(port)" --metrics "127.0.0.1:$http" --data-directory "$work/data" \
    --log-level warning >"$work/log" 2>&1 &
  pid=$!
  sleep 2
  ONE=warm python3 scripts/open-streams.py 127.0.0.1 "$http" 100 1 >/dev/null
  sleep 2
  before=$(rss)
  one=""; [ "$mode" = shared ] && one=shared
  ONE=$one python3 scripts/open-streams.py 127.0.0.1 "$http" "$n" 20 >"$work/out" 2>&1 &
  opener=$!
  for _ in $(seq 60); do sleep 1; grep -q '^ALL' "$work/out" && break; done
  sleep 3
  after=$(rss)
  echo "$mode sessions: $n streams, navigatord RSS $before -> $after KiB: $(( (after - before) * 1024 / n )) bytes per stream ($(grep 'snapshot after' "$work/out" | tail -1))"
  wait "$opener" || true
  kill "$pid"; wait "$pid" 2>/dev/null || true
  pid=""
done
