#!/usr/bin/env bash
# Where an intent's CPU and wake-ups go, thread by thread (issue 31): a fresh navigatord from BIN
# (a directory holding navigatord, navload and navctl) on free 127.0.0.1 ports, driven by navload
# at RATE intents/s over SESSIONS sessions; after WARMUP seconds, scripts/threads.py reads every
# navigatord thread's CPU, timeslices and context switches over SECONDS and prints them per intent.
#
#   scripts/wakeups.sh BIN [RATE] [SECONDS] [SESSIONS]      (defaults: 2000 10 20000)
#
# NAVIGATORD_ARGS: more navigatord options ("--workers 1").
set -euo pipefail
bin=$1
rate=${2:-2000}
seconds=${3:-10}
sessions=${4:-20000}
warmup=3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/navigatord-lib.sh"
work=$(mktemp -d)
stop_on_exit
start_navigatord "$bin" "$work/data" "$work/navigatord.log" wakeups
"$bin/navload" --intents "$i" --requests "$r" --commands "$c" --rate "$rate" --sessions "$sessions" \
  --duration $((seconds + warmup + 2)) --warmup 0 >"$work/navload.log" 2>&1 &
load=$!
sleep "$warmup"
echo "navigatord at $rate intents/s over $sessions sessions ${NAVIGATORD_ARGS:-}"
/usr/bin/python3 "$here/threads.py" "$pid" "$seconds" "$rate"
wait "$load"; load=""
tail -n 3 "$work/navload.log" | sed 's/^/navload: /'
