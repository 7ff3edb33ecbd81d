#!/usr/bin/env bash
# Soak (issue 16): a fresh navigatord from BIN (a directory holding navigatord and navload) on free
# 127.0.0.1 ports, RATE intents/s over SESSIONS sessions for SECONDS, sampling navigatord's RSS and
# CPU every 10 s (navload --soak); then navigatord is stopped and started again on the same state
# file, and its memory once ready, less that of an empty navigatord, over the sessions restored,
# is the memory a session takes at rest (once unchanged for the dedup window, REST_SECONDS after
# the load): as RSS, and as anonymous memory only (RSS also counts code pages the run touched,
# which are not per session), with the packed sessions' bytes and blocks from /metrics. Prints
# navload's report and those figures.
#
#   scripts/soak.sh BIN [RATE] [SESSIONS] [SECONDS]      (defaults: 3000 20000 1200)
set -euo pipefail
bin=$1
rate=${2:-3000}
sessions=${3:-20000}
seconds=${4:-1200}
load=${NAVLOAD:-$bin/navload}
ctl=${NAVCTL:-$bin/navctl}
work=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$work"; }
# All of it, even where a step fails (errexit would end it there); and on a signal (Ctrl-C, a
# closed pipe) too, where bash would otherwise exit without it and leave what it started running.
trap 'set +e; cleanup' EXIT
trap 'exit 130' INT TERM HUP PIPE
port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
i="tcp://127.0.0.1:$(port)"; r="tcp://127.0.0.1:$(port)"; c="tcp://127.0.0.1:$(port)"; h="127.0.0.1:$(port)"
# NAVIGATORD_ARGS: more navigatord options (for a shorter run: "--dedup-window-seconds 120" with
# REST_SECONDS=450).
read -r -a extra <<<"${NAVIGATORD_ARGS:-}"
start() {
  "$bin/navigatord" --intents "$i" --requests "$r" --commands "$c" --http "$h" \
    --data-directory "$work/data" --log-level warning "${extra[@]}" >>"$work/navigatord.log" 2>&1 &
  pid=$!
  # Ready once it answers a stats request.
  for _ in $(seq 1 600); do
    if "$ctl" stats --requests "$r" >/dev/null 2>&1; then return; fi
    sleep 0.1
  done
  echo "soak: navigatord did not become ready" >&2; exit 1
}
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
# Anonymous memory only: RSS also counts the pages of navigatord's code and libraries that a run
# has touched and an empty navigatord has not (file-backed, shared, not per session).
anon_kib() { awk '/^Anonymous/ {print $2}' "/proc/$1/smaps_rollup"; }

# An empty navigatord's RSS, for the difference.
start
empty=$(rss_kib "$pid")
emptyAnon=$(anon_kib "$pid")
kill -TERM "$pid"; wait "$pid" || true; pid=""
rm -rf "$work/data"

start
"$load" --intents "$i" --requests "$r" --commands "$c" --service-pid "$pid" --timeout 300 \
  --rate "$rate" --sessions "$sessions" --duration "$seconds" --warmup 0 --soak 10
loadEnd=$(date +%s)
kill -TERM "$pid"; wait "$pid" || true; pid=""
bytes=$(stat -c %s "$work/data/navigator.sqlite")
start
# "navigatord V: N workers, S sessions, ..."
held=$("$ctl" stats --requests "$r" | sed -n 's/.* \([0-9][0-9]*\) sessions.*/\1/p' | head -1)
# At rest means settled: the parked intents whose time ran out while it was down expire at the
# start, which unpacks their sessions until they are idle again (packIdleAfterSeconds, 30 s)
# and packed; those parked less than their time to live (5 min by default) before the stop
# expire later, one by one. Measured once nothing is parked, every session is packed again
# (navigator_sessions_packed) and the RSS has not moved for 10 s (at most 7 minutes; else as it
# is then, with what is still parked).
# A session at rest has also been unchanged for the dedup window (600 s): then it has forgotten
# the intent ids and expired intents it remembered, and keeps its tree (docs/operations.md),
# packed compact. An intent parked just before the stop expires up to its time to live (300 s)
# later, and is remembered for the window after that: REST_SECONDS (default 930: both, and one
# round of packing; 450 with "--dedup-window-seconds 120") after the load ended.
sleep 30
rest=$((loadEnd + ${REST_SECONDS:-930} - $(date +%s)))
[ "$rest" -gt 0 ] && sleep "$rest"
metric() {
  /usr/bin/python3 -c 'import sys, urllib.request
for line in urllib.request.urlopen("http://" + sys.argv[1] + "/metrics").read().decode().splitlines():
    if line.startswith(sys.argv[2] + " "): print(int(float(line.split()[-1])))' "$h" "$1" 2>/dev/null || true
}
previous=0; stable=0
for _ in $(seq 1 78); do
  sleep 5
  after=$(rss_kib "$pid")
  parked=$("$ctl" stats --requests "$r" | sed -n 's/.* \([0-9][0-9]*\) parked.*/\1/p' | head -1)
  packedCount=$(metric navigator_sessions_packed)
  if [ "${packedCount:-$held}" != "$held" ]; then stable=0; previous=$after; continue; fi
  if [ "${parked:-1}" = 0 ] && [ "$after" -le $((previous + previous / 100)) ] && [ "$after" -ge $((previous - previous / 100)) ]; then
    stable=$((stable + 1)); [ $stable -ge 2 ] && break
  else
    stable=0
  fi
  previous=$after
done
echo "state file                 $bytes bytes for $held sessions ($((bytes / (held > 0 ? held : 1))) bytes each)"
anon=$(anon_kib "$pid")
packed=$(/usr/bin/python3 - "$h" <<'PY' 2>/dev/null || echo "not reported"
import sys, urllib.request
text = urllib.request.urlopen("http://" + sys.argv[1] + "/metrics").read().decode()
values = {}
for line in text.splitlines():
    if line.startswith("navigator_packed_session_bytes{"):
        values[line.split('"')[1]] = float(line.split()[-1])
print("%.0f KiB of packed sessions in %.0f KiB of blocks" % (values["sessions"] / 1024, values["blocks"] / 1024))
PY
)
echo "RSS at rest                $after KiB after a restart ($parked still parked), $empty KiB empty: $(((after - empty) * 1024 / (held > 0 ? held : 1))) bytes a session"
echo "packed at rest             ${packedCount:-?} of $held sessions; $packed"
echo "anonymous memory at rest   $anon KiB, $emptyAnon KiB empty: $(((anon - emptyAnon) * 1024 / (held > 0 ? held : 1))) bytes a session (code pages left out)"
