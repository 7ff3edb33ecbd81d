#!/usr/bin/env bash
# navigatord's CPU per intent against the raw relay's, for several builds in turn (issue 31): for
# each of ROUNDS rounds, each BIN (a directory holding a release navigatord and navctl) gets a fresh
# navigatord on free 127.0.0.1 ports, driven by this tree's release navload with `--floor` (the
# relay measured right after the run, at the same rate). Prints one line a run: CPU per intent,
# the ratio to the floor, p99 against the floor's p99. More rounds than ./dev bench takes, for a
# machine whose figures move by a fifth from run to run.
#
#   scripts/floor-pairs.sh RATE ROUNDS BIN...        (DURATION=10 SESSIONS=20000 NAVIGATORD_ARGS=)
#
# Needs an otherwise idle machine. navigatord is paused (SIGSTOP) while navload measures the floor
# (--pause-service): its idle threads moved the floor by more than builds differ.
set -euo pipefail
rate=$1
rounds=$2
shift 2
here=$(cd "$(dirname "$0")/.." && pwd)
load=$here/.build-release/release/navload
[ -x "$load" ] || { echo "floor-pairs: build navload first: swift build -c release --scratch-path .build-release --product navload" >&2; exit 2; }
work=$(mktemp -d)
pid=""
# Continued first: navload may have been stopped while it had navigatord paused (--pause-service).
cleanup() { [ -n "$pid" ] && kill -CONT "$pid" 2>/dev/null && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$work"; }
# All of it, even where a step fails (errexit would end it there); and on a signal (Ctrl-C, a
# closed pipe) too, where bash would otherwise exit without it and leave what it started running.
trap 'set +e; cleanup' EXIT
trap 'exit 130' INT TERM HUP PIPE
. "$here/scripts/navigatord-lib.sh"
for _ in $(seq "$rounds"); do
  for bin in "$@"; do
    rm -rf "$work/data" "$work/navigatord.log"
    start_navigatord "$bin" "$work/data" "$work/navigatord.log" floor-pairs
    out=$("$load" --intents "$i" --requests "$r" --commands "$c" --rate "$rate" --duration "${DURATION:-10}" \
      --warmup 2 --sessions "${SESSIONS:-20000}" --floor --pause-service --service-pid "$pid" 2>&1)
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
    echo "$bin $(echo "$out" | grep -E '^navigatord CPU per intent|^p99 / floor p99' | tr -s ' ' | paste -sd '|')"
  done
done
