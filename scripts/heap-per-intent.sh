#!/usr/bin/env bash
# Allocations per intent of the whole service (every thread: reading, resolving, publishing,
# writing the state file), a figure that does not depend on the machine (issue 31): BIN/navigatord
# (BIN a directory holding navigatord, navload and navctl) runs under heaptrack twice on free
# 127.0.0.1 ports, driven by navload at 2,000 intents/s over SESSIONS sessions (default 2,000, so
# that nearly every session exists after the first second), once for SHORT and once for LONG
# seconds (defaults 10 and 30). The difference of their allocation counts over the difference of
# the intents navload sent leaves out start-up and the sessions' creation; the sites that make them
# are listed by the deepest frame of the project's own code, per intent.
#
#   scripts/heap-per-intent.sh BIN [SESSIONS] [SHORT] [LONG]
#
# NAVIGATORD_ARGS: more navigatord options. Needs heaptrack (Debian: `apt-get install heaptrack`).
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: scripts/heap-per-intent.sh BIN [SESSIONS] [SHORT] [LONG]" >&2; exit 64; }
bin=$(cd "$1" && pwd)
sessions=${2:-2000}
short=${3:-10}
long=${4:-30}
rate=2000
[ "$short" -lt "$long" ] || { echo "heap-per-intent: SHORT ($short s) must be shorter than LONG ($long s)" >&2; exit 64; }
command -v heaptrack >/dev/null || { echo "heap-per-intent: heaptrack is not installed (apt-get install heaptrack)" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
. "$here/navigatord-lib.sh"  # port()
work=$(mktemp -d)
ht=""
nd=""
cleanup() {
  # navigatord is heaptrack's child; stopped, it lets heaptrack write its file and end.
  [ -n "$ht" ] && pkill -TERM -P "$ht" 2>/dev/null
  [ -n "$ht" ] && wait "$ht" 2>/dev/null
  rm -rf "$work"
}
trap 'set +e; cleanup' EXIT
trap 'exit 130' INT TERM HUP PIPE

# One run of SECONDS: writes $work/SECONDS.stacks (allocations by stack) and $work/SECONDS.sent
# (the intents navload sent).
run() {
  local seconds=$1 i r c ready="" extra=()
  read -r -a extra <<<"${NAVIGATORD_ARGS:-}"
  i="tcp://127.0.0.1:$(port)"; r="tcp://127.0.0.1:$(port)"; c="tcp://127.0.0.1:$(port)"
  heaptrack -o "$work/$seconds" "$bin/navigatord" --intents "$i" --requests "$r" --commands "$c" --metrics off \
    --data-directory "$work/data-$seconds" --log-level warning "${extra[@]}" >"$work/heaptrack-$seconds.log" 2>&1 &
  ht=$!
  for _ in $(seq 1 600); do
    nd=$(pgrep -P "$ht" -x navigatord || true)
    if [ -n "$nd" ] && "$bin/navctl" stats --requests "$r" >/dev/null 2>&1; then ready=1; break; fi
    sleep 0.1
  done
  [ -n "$ready" ] || { echo "heap-per-intent: navigatord did not become ready:" >&2; cat "$work/heaptrack-$seconds.log" >&2; exit 1; }
  "$bin/navload" --intents "$i" --requests "$r" --commands "$c" --rate "$rate" --sessions "$sessions" \
    --duration "$seconds" --warmup 0 --service-pid "$nd" >"$work/navload-$seconds.log" 2>&1
  kill -TERM "$nd" 2>/dev/null || { echo "heap-per-intent: navigatord ended during the $seconds s run:" >&2; cat "$work/heaptrack-$seconds.log" >&2; exit 1; }
  wait "$ht"; ht=""
  # heaptrack compresses with zstd when it is installed, with gzip otherwise.
  local recorded="" file
  for file in "$work/$seconds.zst" "$work/$seconds.gz"; do
    [ -f "$file" ] && recorded=$file
  done
  [ -n "$recorded" ] || { echo "heap-per-intent: heaptrack wrote no file:" >&2; cat "$work/heaptrack-$seconds.log" >&2; exit 1; }
  heaptrack_print -f "$recorded" --flamegraph-cost-type allocations -F "$work/$seconds.stacks" >/dev/null
  # "achieved rate  1999 intents/s (60000 sent, …)"
  sed -n 's/^achieved rate.*(\([0-9]*\) sent.*/\1/p' "$work/navload-$seconds.log" >"$work/$seconds.sent"
  [ -s "$work/$seconds.sent" ] || { echo "heap-per-intent: navload did not say what it sent:" >&2; cat "$work/navload-$seconds.log" >&2; exit 1; }
  echo "$seconds s: $(grep -E '^achieved rate' "$work/navload-$seconds.log")" >&2
}
run "$short"
run "$long"
/usr/bin/python3 - "$work/$short.stacks" "$work/$long.stacks" "$(cat "$work/$short.sent")" "$(cat "$work/$long.sent")" <<'PY'
import collections, re, sys

def load(path):
    sites = collections.Counter()
    for line in open(path):
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not count.isdigit():
            continue
        frames = [frame for frame in stack.split(";") if frame]
        site = next((frame.split(" ")[0][:110] for frame in reversed(frames)
                     if re.match(r"\$s\d+(Navigator\w+|ZeroMQ|Locking|Postgres)", frame)), None)
        sites[site or "elsewhere: " + (frames[-1][:60] if frames else "?")] += int(count)
    return sites

short, long = load(sys.argv[1]), load(sys.argv[2])
intents = int(sys.argv[4]) - int(sys.argv[3])
if intents <= 0:
    sys.exit(f"heap-per-intent: the longer run sent {sys.argv[4]} intents, the shorter {sys.argv[3]}; expected more")
difference = {site: long.get(site, 0) - short.get(site, 0) for site in set(long) | set(short)}
print(f"allocations per intent: {sum(difference.values()) / intents:.2f} "
      f"(the longer run's less the shorter's, over the {intents} intents more it was sent)")
for site, count in sorted(difference.items(), key=lambda item: -item[1])[:20]:
    print(f"{count / intents:8.3f}  {site}")
PY
