#!/usr/bin/env bash
# Where a run's p99 comes from (issue 31): a fresh navigatord from BIN (a directory holding a
# release navigatord and navctl) on free 127.0.0.1 ports, driven by this tree's release navload at
# RATE intents/s over SESSIONS sessions for DURATION seconds with `--latency-log`; with TRACE=1 the
# scheduler is traced meanwhile (`perf record -e sched:sched_switch,sched:sched_wakeup -a -k mono`;
# it costs some of the latency it looks at). Then scripts/stalls.py says how the slowest 1 % of
# the batches fall in time (spread, or bunched into stalls) and, traced, what ran on each core
# during the worst stalls and which threads waited to run.
#
#   scripts/stalls.sh BIN [RATE] [OUT]      (defaults: 10000 /tmp/stalls; DURATION=10 SESSIONS=20000
#                                            TRACE=0 NAVIGATORD_ARGS=)
#
# Needs an otherwise idle machine; TRACE=1 needs perf (Debian's linux-perf) and root.
set -euo pipefail
bin=$1
rate=${2:-10000}
out=${3:-/tmp/stalls}
here=$(cd "$(dirname "$0")/.." && pwd)
load=$here/.build-release/release/navload
[ -x "$load" ] || { echo "stalls: build navload first: swift build -c release --scratch-path .build-release --product navload" >&2; exit 2; }
if [ "${TRACE:-0}" = 1 ] && ! command -v perf >/dev/null; then
  echo "stalls: TRACE=1 needs perf: apt-get install linux-perf" >&2; exit 2
fi
mkdir -p "$out"
work=$(mktemp -d)
pid=""
tracer=""
cleanup() {
  [ -n "$tracer" ] && kill -INT "$tracer" 2>/dev/null && wait "$tracer" 2>/dev/null
  [ -n "$pid" ] && kill -CONT "$pid" 2>/dev/null && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$work"
}
trap 'set +e; cleanup' EXIT
trap 'exit 130' INT TERM HUP PIPE
. "$here/scripts/navigatord-lib.sh"
start_navigatord "$bin" "$work/data" "$work/navigatord.log" stalls
echo "$pid" > "$out/navigatord.pid"
rm -f "$out/sched.data" "$out/sched.txt"
if [ "${TRACE:-0}" = 1 ]; then
  perf record -q -e sched:sched_switch,sched:sched_wakeup -a -k mono -o "$out/sched.data" 2>"$out/perf.log" &
  tracer=$!
  sleep 0.5
  kill -0 "$tracer" 2>/dev/null || { echo "stalls: perf record did not start:" >&2; cat "$out/perf.log" >&2; exit 1; }
fi
# CLOCK_REALTIME less CLOCK_MONOTONIC: the latency log's start is on the first, perf's on the second.
/usr/bin/python3 -c 'import time; print(time.clock_gettime_ns(time.CLOCK_REALTIME) - time.clock_gettime_ns(time.CLOCK_MONOTONIC))' \
  > "$out/clock-offset"
"$load" --intents "$i" --requests "$r" --commands "$c" --rate "$rate" --duration "${DURATION:-10}" --warmup 2 \
  --sessions "${SESSIONS:-20000}" --service-pid "$pid" --latency-log "$out/latency.csv" 2>&1 \
  | grep -E '^latency|^navigatord CPU'
if [ -n "$tracer" ]; then
  kill -INT "$tracer"; wait "$tracer" || true; tracer=""
  perf script -i "$out/sched.data" -F comm,pid,tid,cpu,time,event,trace --ns > "$out/sched.txt" 2>/dev/null
fi
/usr/bin/python3 "$here/scripts/stalls.py" "$out"
