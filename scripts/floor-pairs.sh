#!/usr/bin/env bash
# navigatord's CPU per intent against the raw relay's, for several builds in turn (issue 31): for
# each of ROUNDS rounds (the builds in the given order, then reversed, in turn), each BIN (a
# directory holding a release navigatord and navctl) gets a fresh navigatord on free 127.0.0.1
# ports, driven by this tree's release navload with `--floor` (the relay measured right after the
# run, at the same rate). Prints one line a run: CPU per intent, the ratio to the floor, p99
# against the floor's p99. More rounds than ./dev bench takes, for a machine whose figures move by
# a fifth from run to run.
#
#   scripts/floor-pairs.sh RATE ROUNDS BIN...        (DURATION=10 SESSIONS=20000 NAVIGATORD_ARGS=)
#
# Needs an otherwise idle machine. navigatord is paused (SIGSTOP) while navload measures the floor
# (--pause-service): its idle threads moved the floor by more than builds differ. Ends with each
# build's median ratios and the floor's spread over all runs, with a warning when the floor itself
# moved so much that its ratios say little (on some VMs its p99 moves tenfold between runs).
set -euo pipefail
rate=$1
rounds=$2
shift 2
here=$(cd "$(dirname "$0")/.." && pwd)
load=$here/.build-release/release/navload
[ -x "$load" ] || { echo "floor-pairs: build navload first: swift build -c release --scratch-path .build-release --product navload" >&2; exit 2; }
"$here/scripts/machine.sh"
work=$(mktemp -d)
pid=""
# Continued first: navload may have been stopped while it had navigatord paused (--pause-service).
cleanup() { [ -n "$pid" ] && kill -CONT "$pid" 2>/dev/null && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$work"; }
# All of it, even where a step fails (errexit would end it there); and on a signal (Ctrl-C, a
# closed pipe) too, where bash would otherwise exit without it and leave what it started running.
trap 'set +e; cleanup' EXIT
trap 'exit 130' INT TERM HUP PIPE
. "$here/scripts/navigatord-lib.sh"
builds=("$@")
for round in $(seq "$rounds"); do
  # Each round in the other order: on a VM where the build that runs second in a round tends to
  # see a higher p99 (fourteen rounds on VM-29: eleven of them), a fixed order would hand one
  # build that effect in every round.
  order=("${builds[@]}")
  if (( round % 2 == 0 )); then
    order=(); for (( k=${#builds[@]}-1; k>=0; k-- )); do order+=("${builds[k]}"); done
  fi
  for bin in "${order[@]}"; do
    rm -rf "$work/data" "$work/navigatord.log"
    start_navigatord "$bin" "$work/data" "$work/navigatord.log" floor-pairs
    out=$("$load" --intents "$i" --requests "$r" --commands "$c" --rate "$rate" --duration "${DURATION:-10}" \
      --warmup 2 --sessions "${SESSIONS:-20000}" --floor --pause-service --service-pid "$pid" 2>&1)
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
    line="$bin $(echo "$out" | grep -E '^navigatord CPU per intent|^p99 / floor p99' | tr -s ' ' | paste -sd '|')"
    echo "$line"
    echo "$line" >> "$work/results"
  done
done
/usr/bin/python3 - "$work/results" <<'PY'
import re, statistics, sys
runs = {}
floor_us, floor_p99 = [], []
for line in open(sys.argv[1]):
    build = line.split(" ", 1)[0]
    cpu = re.search(r"CPU per intent / floor: ([0-9.]+) \(([0-9.]+) / ([0-9.]+) µs\)", line)
    p99 = re.search(r"p99 / floor p99: ([0-9.]+) \(([0-9]+) / ([0-9]+) µs\)", line)
    if not cpu or not p99:
        print(f"floor-pairs: no figures in: {line.strip()}")
        continue
    runs.setdefault(build, []).append((float(cpu.group(1)), float(p99.group(1))))
    floor_us.append(float(cpu.group(3)))
    floor_p99.append(int(p99.group(3)))
def spread(values):
    return f"median {statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})"
for build, figures in runs.items():
    print(f"summary {build}: CPU ÷ floor {spread([c for c, _ in figures])}, "
          f"p99 ÷ floor p99 {spread([p for _, p in figures])}, {len(figures)} runs")
if floor_us:
    us_ratio = max(floor_us) / min(floor_us)
    p99_ratio = max(floor_p99) / max(1, min(floor_p99))
    print(f"floor over all runs: {min(floor_us):.1f}–{max(floor_us):.1f} µs a message (×{us_ratio:.2f}), "
          f"p99 {min(floor_p99)}–{max(floor_p99)} µs (×{p99_ratio:.1f})")
    if p99_ratio > 3:
        print(f"warning: the floor's p99 moved ×{p99_ratio:.1f} between runs: p99 ratios from this machine "
              "compare nothing; compare CPU ratios of builds within a round")
    if us_ratio > 1.3:
        print(f"warning: the floor's CPU per message moved ×{us_ratio:.2f} between runs: compare builds within "
              "a round, not across rounds")
PY
