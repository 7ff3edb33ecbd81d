#!/usr/bin/env bash
# navigatord's CPU per streamed batch, one HTTP stream per session (issue 29): a release navigatord
# here (or the one in BIN, an earlier commit's, to compare in one session), then navload at RATE
# intents/s over N sessions, once with N Server-Sent Events streams open (stream k on session k)
# and once without; the difference in navigatord's CPU, over the batches the streams delivered,
# is what a streamed batch costs. Prints one line per run and the difference.
#   scripts/bench-stream-cpu.sh [RATE] [N] [SECONDS]     (defaults 2000 10000 20)
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${1:-2000}
n=${2:-10000}
seconds=${3:-20}
bin=${BIN:-}
if [ -z "$bin" ]; then
  # One product a command: given several --product, swift build builds only the last.
  for product in navigatord navload; do
    swift build -c release --scratch-path .build-release --product "$product" >&2
  done
  bin=.build-release/release
fi
load=.build-release/release/navload
work=$(mktemp -d)
pid=""
cleanup() { [[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$work"; }
# All of it, even where a step fails (errexit would end it there); and on a signal (Ctrl-C, a
# closed pipe) too, where bash would otherwise exit without it and leave what it started running.
trap 'set +e; cleanup' EXIT
trap 'exit 130' INT TERM HUP PIPE
port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
declare -A cpu cpuseconds batches
for streams in "$n" 0; do
  i="tcp://127.0.0.1:$(port)"; r="tcp://127.0.0.1:$(port)"; c="tcp://127.0.0.1:$(port)"; http="127.0.0.1:$(port)"
  rm -rf "$work/data"
  "$bin/navigatord" --intents "$i" --requests "$r" --commands "$c" --metrics "$http" \
    --data-directory "$work/data" --log-level warning ${EXTRA:-} >"$work/log" 2>&1 &
  pid=$!
  sleep 2
  "$load" --intents "$i" --requests "$r" --commands "$c" --http "$http" --service-pid "$pid" --rate "$rate" \
    --duration "$seconds" --warmup 2 --sessions "$n" --streams "$streams" --timeout 120 --report "$work/report.json" \
    >"$work/out" 2>&1 || { cat "$work/out" >&2; exit 1; }
  cpu[$streams]=$(python3 -c "import json; r=json.load(open('$work/report.json'))['run']; print(r['serviceCPU'])")
  cpuseconds[$streams]=$(python3 -c "import json; r=json.load(open('$work/report.json'))['run']; print(r['serviceCPUSeconds'])")
  batches[$streams]=$(python3 -c "import json; r=json.load(open('$work/report.json'))['run']; print(r['streamBatches'])")
  p=$(python3 -c "import json; r=json.load(open('$work/report.json'))['run']; l=r.get('streamLatency') or {}; print(l.get('p50','-'), l.get('p99','-'))")
  grep -E "latency|streams|p99" "$work/out" | head -8 >&2
  echo "$streams streams: navigatord $(printf %.3f "${cpu[$streams]}") cores (${cpuseconds[$streams]} s of CPU), ${batches[$streams]} streamed batches, stream latency p50/p99 µs: $p"
  kill "$pid"; wait "$pid" 2>/dev/null || true
  pid=""
done
python3 -c "
d = ${cpuseconds[$n]} - ${cpuseconds[0]}
b = ${batches[$n]}
print(f'streams add {${cpu[$n]} - ${cpu[0]}:.3f} cores, {d:.2f} s of CPU for {b} streamed batches: {d / b * 1e6:.1f} µs of navigatord CPU per streamed batch' if b > 0 else 'no batches')"
