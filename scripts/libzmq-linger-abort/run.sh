#!/usr/bin/env bash
# Reproduces libzmq 4.3.4's abort "Resource temporarily unavailable (src/session_base.cpp:260)"
# in a bounded loop, and shows the linger that avoids it (ZeroMQ's Socket.defaultLinger).
# Each round connects a sender and a receiver over tcp://127.0.0.1:*, queues 2,000 two-frame
# messages and closes; an aborted child is counted and replaced.
#   scripts/libzmq-linger-abort/run.sh [ITERATIONS] [SECONDS]    defaults: 10000, 60 per line
set -euo pipefail
cd "$(dirname "$0")"
iterations="${1:-10000}" seconds="${2:-60}"
gcc -O2 -pthread -o /tmp/navigator-linger-race race.c -lzmq
run() { echo "$*: $(timeout $((seconds + 20)) /tmp/navigator-linger-race -n "$iterations" -s "$seconds" "$@" | tr '\n' ' ')"; }
for kind in 0 1 2 3; do  # PUSH->PULL, DEALER->ROUTER, XPUB->SUB, ROUTER->DEALER
  run -k "$kind" -o 0 -L 0      # linger 0: close both, terminate the contexts
  run -k "$kind" -o 0 -L 500    # linger 500 ms
done
