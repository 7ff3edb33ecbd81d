#!/usr/bin/env bash
# What an acknowledged request waits while intents load the service (issue 31): a fresh
# navigatord from BIN (a directory holding a release navigatord, navctl and navload) on free
# 127.0.0.1 ports, driven by navload at RATE intents/s over 20,000 sessions; after 3 s, a client
# written from docs/wire-protocol.md (Python: one DEALER on the requests endpoint) sends COUNT
# acknowledged intents 20 ms apart, each waiting for its reply (its session's change committed),
# over 50 sessions of its own, and prints their round trips' p50 / p90 / p99 / max. Then navload's
# latency line for the intents of the whole run (navload's own figure). Installs python3-zmq,
# python3-protobuf and protobuf-compiler when missing.
#
#   scripts/bench-acks.sh BIN [RATE] [COUNT]        (defaults: 10000 300; NAVIGATORD_ARGS=)
#
# Needs an otherwise idle machine. Compare builds by running it for each in turn.
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 3 ]; then
  echo "usage: scripts/bench-acks.sh BIN [RATE] [COUNT]" >&2
  exit 64
fi
bin=$1
rate=${2:-10000}
count=${3:-300}
for p in navigatord navctl navload; do
  [ -x "$bin/$p" ] || { echo "bench-acks: no $p in $bin; expected a directory holding release builds of navigatord, navctl and navload" >&2; exit 64; }
done
[[ "$rate" =~ ^[1-9][0-9]*$ ]] || { echo "bench-acks: RATE=$rate; expected whole intents a second" >&2; exit 64; }
[[ "$count" =~ ^[1-9][0-9]*$ ]] || { echo "bench-acks: COUNT=$count; expected a whole number of requests" >&2; exit 64; }
here=$(cd "$(dirname "$0")" && pwd)
"$here/apt-install.sh" python3-zmq python3-protobuf protobuf-compiler
. "$here/navigatord-lib.sh"
work=$(mktemp -d)
stop_on_exit
protoc -I "$here/../proto" --python_out="$work" "$here"/../proto/navigator/v1/*.proto
cat >"$work/acks.py" <<'PY'
import sys, time
import zmq
from navigator.v1 import service_pb2

endpoint, count = sys.argv[1], int(sys.argv[2])
dealer = zmq.Context().socket(zmq.DEALER)
dealer.rcvtimeo = 10000
dealer.linger = 0
dealer.connect(endpoint)
took = []
for k in range(count):
    request = service_pb2.Request(request_id=str(k))
    request.intent.id = f"ack-{k}"
    request.intent.session = f"acks-{k % 50}"
    request.intent.url = f"app://chat/{k}"
    started = time.perf_counter()
    dealer.send_multipart([b"", request.SerializeToString()])
    try:
        frames = dealer.recv_multipart()
    except zmq.Again:
        sys.exit(f"bench-acks: no reply to request {k} within 10 s; expected navigatord to answer every acknowledged intent")
    took.append((time.perf_counter() - started) * 1e6)
    reply = service_pb2.Reply()
    reply.ParseFromString(frames[-1])
    if reply.request_id != str(k) or reply.WhichOneof("kind") != "resolved":
        sys.exit(f"bench-acks: request {k} was answered {reply}; expected its resolution (a committed change)")
    time.sleep(0.02)
took.sort()
at = lambda q: took[min(len(took) - 1, int(q * len(took)))]
print(f"acknowledged requests: {len(took)}, round trip p50 / p90 / p99 / max "
      f"{at(.5):.0f} / {at(.9):.0f} / {at(.99):.0f} / {took[-1]:.0f} µs")
PY
start_navigatord "$bin" "$work/data" "$work/navigatord.log" bench-acks
# Long enough for the requests: 3 s before them, then COUNT × (20 ms + a round trip).
seconds=$((5 + count / 40))
"$bin/navload" --intents "$i" --requests "$r" --commands "$c" --rate "$rate" --sessions 20000 \
  --duration "$seconds" --warmup 2 >"$work/navload.log" 2>&1 &
load=$!
sleep 3
PYTHONPATH="$work" /usr/bin/python3 "$work/acks.py" "$r" "$count"
kill -0 "$load" 2>/dev/null || echo "bench-acks: navload had finished before the last request: its last ones ran without the load" >&2
wait "$load"; load=""
grep -E '^latency p50' "$work/navload.log" | sed "s/^/navload, intents at $rate\/s: /"
