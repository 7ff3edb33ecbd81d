#!/usr/bin/env bash
# Allocations per intent of the whole service (every thread: reading, resolving, publishing,
# writing the state file), a figure that does not depend on the machine (issue 31): BIN/navigatord
# (BIN a directory holding navigatord, navload and navctl) runs under heaptrack twice on free
# 127.0.0.1 ports, driven by navload at 2,000 intents/s over SESSIONS sessions (default 2,000, so
# that nearly every session exists after the first second), once for SHORT and once for LONG
# seconds (defaults 10 and 30). The difference of their allocation counts over the difference of
# their intents leaves out start-up and the sessions' creation; the sites that make them are
# listed by the deepest frame of the project's own code, per intent.
#
#   scripts/heap-per-intent.sh BIN [SESSIONS] [SHORT] [LONG]
#
# Needs heaptrack (Debian: `apt-get install heaptrack`).
set -euo pipefail
bin=$(cd "$1" && pwd)
sessions=${2:-2000}
short=${3:-10}
long=${4:-30}
command -v heaptrack >/dev/null || { echo "heap-per-intent: heaptrack is not installed (apt-get install heaptrack)" >&2; exit 1; }
port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
work=$(mktemp -d)
ht=""
nd=""
cleanup() {
  [ -n "$nd" ] && kill "$nd" 2>/dev/null
  [ -n "$ht" ] && wait "$ht" 2>/dev/null
  rm -rf "$work"
}
trap 'set +e; cleanup' EXIT
trap 'exit 130' INT TERM HUP PIPE

# One run of SECONDS: writes $work/SECONDS.stacks (allocations by stack) and prints the count.
run() {
  local seconds=$1 i r c
  i="tcp://127.0.0.1:$(port)"; r="tcp://127.0.0.1:$(port)"; c="tcp://127.0.0.1:$(port)"
  heaptrack -o "$work/$seconds" "$bin/navigatord" --intents "$i" --requests "$r" --commands "$c" --metrics off \
    --data-directory "$work/data-$seconds" --log-level warning >"$work/heaptrack-$seconds.log" 2>&1 &
  ht=$!
  for _ in $(seq 1 600); do
    nd=$(pgrep -f "^$bin/navigatord --intents $i" || true)
    [ -n "$nd" ] && "$bin/navctl" stats --requests "$r" >/dev/null 2>&1 && break
    sleep 0.1
  done
  [ -n "$nd" ] || { echo "heap-per-intent: navigatord did not start:" >&2; cat "$work/heaptrack-$seconds.log" >&2; exit 1; }
  "$bin/navload" --intents "$i" --requests "$r" --commands "$c" --rate 2000 --sessions "$sessions" \
    --duration "$seconds" --warmup 0 --service-pid "$nd" >"$work/navload-$seconds.log" 2>&1
  kill -TERM "$nd"; nd=""
  wait "$ht"; ht=""
  heaptrack_print -f "$work/$seconds.zst" --flamegraph-cost-type allocations -F "$work/$seconds.stacks" >/dev/null 2>&1
  grep -E '^achieved rate' "$work/navload-$seconds.log" | sed "s/^/$seconds s: /" >&2
}
run "$short"
run "$long"
/usr/bin/python3 - "$work/$short.stacks" "$work/$long.stacks" "$(( (long - short) * 2000 ))" <<'PY'
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

short, long, intents = load(sys.argv[1]), load(sys.argv[2]), int(sys.argv[3])
difference = {site: long[site] - short.get(site, 0) for site in long}
print(f"allocations per intent: {sum(difference.values()) / intents:.2f} "
      f"(the longer run's less the shorter's, over {intents} intents)")
for site, count in sorted(difference.items(), key=lambda item: -item[1])[:20]:
    print(f"{count / intents:8.3f}  {site}")
PY
