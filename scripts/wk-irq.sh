#!/usr/bin/env bash
# Where an intent's CPU and wake-ups go, thread by thread (issue 31): a fresh navigatord from BIN
# (a directory holding navigatord, navload and navctl) on free 127.0.0.1 ports, driven by navload
# at RATE intents/s over SESSIONS sessions; after WARMUP seconds, scripts/threads.py reads every
# navigatord thread's CPU, timeslices and context switches over SECONDS and prints them per intent.
#
#   scripts/wakeups.sh BIN [RATE] [SECONDS] [SESSIONS]      (defaults: 2000 10 20000)
#
# WARMUP: seconds of load before the reading (default 3; over 20,000 sessions at 2,000/s about
# half the intents of the first ten seconds open a session, 5 % after 30 s).
# NAVIGATORD_ARGS: more navigatord options ("--workers 1"). FLOOR=1: navload measures the raw
# relay's floor right after (`--floor --pause-service`), and the relay's threads are read the same
# way while it relays at the same rate: the two side by side, thread by thread. FLOOR_WORK=N (with
# FLOOR=1): the relay spins N µs on each message before publishing it (`navload --floor-work`).
# FLOOR_BATCHES=1 (with FLOOR=1): the relay publishes each message as navigatord publishes a batch,
# three frames of a batch's mean sizes (`navload --floor-batches`).
set -euo pipefail
bin=$1
rate=${2:-2000}
seconds=${3:-10}
sessions=${4:-20000}
warmup=${WARMUP:-3}
[[ "$warmup" =~ ^[0-9]+$ ]] || { echo "wakeups: WARMUP=$warmup; expected whole seconds" >&2; exit 64; }
[[ "${FLOOR_WORK:-0}" =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "wakeups: FLOOR_WORK=$FLOOR_WORK; expected microseconds" >&2; exit 64; }
floor_work=no
[[ "${FLOOR_WORK:-0}" =~ ^0*([.]0*)?$ ]] || floor_work=yes
[[ "${FLOOR_BATCHES:-0}" =~ ^[01]$ ]] || { echo "wakeups: FLOOR_BATCHES=$FLOOR_BATCHES; expected 0 or 1" >&2; exit 64; }
if [ "${FLOOR_BATCHES:-0}" = 1 ] && [ "${FLOOR:-0}" != 1 ]; then
  echo "wakeups: FLOOR_BATCHES=1 sets how the floor's relay publishes; expected FLOOR=1 with it" >&2
  exit 64
fi
if [ "$floor_work" = yes ] && [ "${FLOOR:-0}" != 1 ]; then
  echo "wakeups: FLOOR_WORK sets the floor's work a message; expected FLOOR=1 with it" >&2
  exit 64
fi
here=$(cd "$(dirname "$0")" && pwd)
. "$here/navigatord-lib.sh"
work=$(mktemp -d)
stop_on_exit
start_navigatord "$bin" "$work/data" "$work/navigatord.log" wakeups
floor=()
[ "${FLOOR:-0}" = 1 ] && floor=(--floor --pause-service --service-pid "$pid" --floor-work "${FLOOR_WORK:-0}")
[ "${FLOOR_BATCHES:-0}" = 1 ] && floor+=(--floor-batches)
"$bin/navload" --intents "$i" --requests "$r" --commands "$c" --rate "$rate" --sessions "$sessions" \
  --duration $((seconds + warmup + 2)) --warmup 0 "${floor[@]}" >"$work/navload.log" 2>&1 &
load=$!
sleep "$warmup"
echo "navigatord at $rate intents/s over $sessions sessions ${NAVIGATORD_ARGS:-}"
/tmp/irq.sh 4 "$rate" & irq=$!; perf stat -e "syscalls:sys_enter_madvise,syscalls:sys_enter_munmap,syscalls:sys_enter_mmap,syscalls:sys_enter_brk,syscalls:sys_enter_mprotect" -p "$pid" -- sleep 4 2>&1 | grep syscalls; wait $irq
if [ "${FLOOR:-0}" = 1 ]; then
  # navload starts the relay (`navload relay`) once the run is over.
  relay=""
  for _ in $(seq 1 600); do
    relay=$(pgrep -P "$load" -f ' relay( |$)' || true)  # navload's own child, not another run's
    [ -n "$relay" ] && break
    sleep 0.1
  done
  [ -n "$relay" ] || { echo "wakeups: the floor's relay never started" >&2; exit 1; }
  # The floor relays for 10 s at most: read 7 of them, once it is under way.
  sleep 2
  shape=""
  [ "${FLOOR_BATCHES:-0}" = 1 ] && shape=" publishing batches"
  flags=""
  [ "${FLOOR_BATCHES:-0}" = 1 ] && flags=" --floor-batches"
  if [ "$floor_work" = no ]; then
    echo "the raw relay$shape (navload --floor$flags) at $rate messages/s"
  else
    echo "the relay spinning $FLOOR_WORK µs on each message$shape (navload --floor --floor-work$flags) at $rate messages/s"
  fi
  /tmp/irq.sh 4 "$rate" & irq=$!; perf stat -e "syscalls:sys_enter_madvise,syscalls:sys_enter_munmap,syscalls:sys_enter_mmap,syscalls:sys_enter_brk" -p "$relay" -- sleep 4 2>&1 | grep syscalls; wait $irq
fi
wait "$load"; load=""
grep -E '^navigatord CPU per intent|^floor: (raw|libzmq)' "$work/navload.log" | sed 's/^/navload: /'
[ "${FLOOR:-0}" = 1 ] || tail -n 3 "$work/navload.log" | sed 's/^/navload: /'
