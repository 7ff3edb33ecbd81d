#!/usr/bin/env bash
# Same-session comparison of this tree against an earlier commit (issue 16): builds both in
# release (the earlier one in a git worktree under .bench/), then runs each figure for both,
# alternating, ROUNDS times, each service run on a fresh navigatord on free 127.0.0.1 ports. The
# load generator of every service run is this tree's navload, so only navigatord differs; the
# resolver figure uses each build's own navload, both at once, one on each core
# (scripts/resolver-pairs.sh), and adds their ratio (resolver.new_over_old).
#
#   scripts/bench.sh [--against COMMIT] [--rounds N] [--quick]     (./dev bench passes its args)
#
# NEW_ARGS and OLD_ARGS add navigatord options to one side's runs: `--against HEAD` with
# NEW_ARGS="--workers 1" compares a setting on one build.
#
# Prints one line per run and, at the end, the median of each figure for both builds. Needs an
# otherwise idle machine: pause fuzzers and builds.
set -euo pipefail
cd "$(dirname "$0")/.."

against=HEAD~1
rounds=3
quick=0
while [ $# -gt 0 ]; do
  case "$1" in
    --against) against=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    *) echo "bench: unknown argument $1; expected --against COMMIT, --rounds N or --quick" >&2; exit 64 ;;
  esac
done
commit=$(git rev-parse --verify "$against^{commit}") || { echo "bench: $against is not a commit" >&2; exit 2; }

scripts/machine.sh
echo "bench: building this tree and $(git log -1 --format='%h %s' "$commit" | cut -c1-70) in release" >&2
swift build -c release --scratch-path .build-release --product navigatord >&2
swift build -c release --scratch-path .build-release --product navload >&2
mkdir -p .bench
if [ ! -d .bench/old ] || [ "$(git -C .bench/old rev-parse HEAD 2>/dev/null)" != "$commit" ]; then
  git worktree remove --force .bench/old >/dev/null 2>&1 || rm -rf .bench/old
  git worktree add --detach .bench/old "$commit" >&2
fi
(cd .bench/old && swift build -c release --scratch-path ../../.build-release-old --product navigatord >&2 &&
  swift build -c release --scratch-path ../../.build-release-old --product navload >&2)

new_bin=.build-release/release
old_bin=.build-release-old/release
load=$new_bin/navload
work=$(mktemp -d)
pid=""
# Continued first: navload may have been stopped while it had navigatord paused (--pause-service).
cleanup() { [ -n "$pid" ] && kill -CONT "$pid" 2>/dev/null && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$work"; }
# All of it, even where a step fails (errexit would end it there); and on a signal (Ctrl-C, a
# closed pipe) too, where bash would otherwise exit without it and leave what it started running.
trap 'set +e; cleanup' EXIT
trap 'exit 130' INT TERM HUP PIPE

port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# run LABEL BIN FIGURE navload-args...: one service run; appends "LABEL FIGURE value" lines.
service_run() {
  local label=$1 bin=$2 figure=$3
  shift 3
  local i r c
  i="tcp://127.0.0.1:$(port)"; r="tcp://127.0.0.1:$(port)"; c="tcp://127.0.0.1:$(port)"
  rm -rf "$work/data"
  local extra=()
  if [ "$label" = new ]; then read -r -a extra <<<"${NEW_ARGS:-}"; else read -r -a extra <<<"${OLD_ARGS:-}"; fi
  "$bin/navigatord" --intents "$i" --requests "$r" --commands "$c" --metrics off \
    --data-directory "$work/data" --log-level warning "${extra[@]}" >"$work/navigatord.log" 2>&1 &
  pid=$!
  "$load" --intents "$i" --requests "$r" --commands "$c" --service-pid "$pid" --timeout 300 "$@" >"$work/out" 2>&1 || true
  local hwm
  hwm=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
  kill -TERM "$pid"; wait "$pid" || true; pid=""
  local rate cpu per p99 ratios
  rate=$(awk '/^service throughput +[0-9]/ {print $3}' "$work/out")
  cpu=$(awk '/^navigatord CPU  / {print $3}' "$work/out")
  # Numbers only: a run navload could not account for says "unknown", which awk would read as 0.
  per=$(awk '/^navigatord CPU per intent +[0-9]/ {print $5}' "$work/out")
  p99=$(awk '/^latency p50 \/ p90 \/ p99/ {print $11}' "$work/out")
  echo "$label $figure.throughput ${rate:-0}" >>"$work/figures"
  echo "$label $figure.cpu_us_per_intent ${per:-0}" >>"$work/figures"
  echo "$label $figure.p99_us ${p99:-0}" >>"$work/figures"
  echo "$label $figure.peak_rss_kib ${hwm:-0}" >>"$work/figures"
  # The ratios navload reports with --floor and --baseline: measured in the same run, so they
  # carry between machines where the absolute figures do not.
  ratios=""
  local cpu_floor p99_floor baseline
  cpu_floor=$(awk '/^navigatord CPU per intent \/ floor:/ {print $7}' "$work/out")
  p99_floor=$(awk '/^p99 \/ floor p99:/ {print $5}' "$work/out")
  baseline=$(awk '/^service throughput \/ baseline:/ {sub("%", "", $5); print $5 / 100}' "$work/out")
  if [ -n "$cpu_floor" ]; then
    echo "$label $figure.cpu_per_intent_over_floor $cpu_floor" >>"$work/figures"
    ratios+=" cpu/floor=$cpu_floor"
  fi
  if [ -n "$p99_floor" ]; then
    echo "$label $figure.p99_over_floor_p99 $p99_floor" >>"$work/figures"
    ratios+=" p99/floor_p99=$p99_floor"
  fi
  if [ -n "$baseline" ]; then
    echo "$label $figure.throughput_over_baseline $baseline" >>"$work/figures"
    ratios+=" throughput/baseline=$baseline"
  fi
  echo "$label $figure throughput=${rate:-?} cpu=${cpu:-?} cpu_us_per_intent=${per:-?} p99_us=${p99:-?} peak_rss_kib=$hwm$ratios"
}

resolver_run() {
  local label=$1 bin=$2 ops
  ops=$("$bin/navload" resolver --duration "$([ $quick = 1 ] && echo 2 || echo 5)" --sessions 1000 --seed 1 2>&1 |
    awk '/^rate:/ {print $2; exit}')
  echo "$label resolver ops_per_second=${ops:-?}"
  echo "$label resolver.ops_per_second ${ops:-0}" >>"$work/figures"
}

# The resolver alone, both builds at once, one on each core, then swapped
# (scripts/resolver-pairs.sh): each run's two rates and their ratio, new ÷ old, which moves far
# less between rounds than either rate on a noisy machine. One build after the other on one core.
resolver_pair() {
  if [ "$(nproc)" -lt 2 ]; then
    resolver_run new "$new_bin"
    resolver_run old "$old_bin"
    return
  fi
  local out
  out=$(DURATION="$([ $quick = 1 ] && echo 2 || echo 5)" scripts/resolver-pairs.sh "$old_bin" "$new_bin" 1)
  echo "$out" | grep '^pair'
  # "pair 1, old on core 0: old 109086/s  new 109108/s  new/old 1.000"
  echo "$out" | awk '/^pair/ {
    printf "old resolver.ops_per_second %d\nnew resolver.ops_per_second %d\nnew resolver.new_over_old %s\n", $8, $10, $12
  }' >>"$work/figures"
}

# Issue 31's figures: saturation against the raw PUSH->PULL baseline; 2,000/s and 10,000/s over
# 20,000 sessions against the raw relay floor at the same rate (CPU per intent and p99).
saturation=(--rate 400000 --duration 4 --warmup 1 --baseline)
moderate=(--rate 2000 --duration 10 --warmup 2 --sessions 20000 --floor --pause-service)
high=(--rate 10000 --duration 10 --warmup 2 --sessions 20000 --floor --pause-service)
if [ $quick = 1 ]; then
  moderate=(--rate 2000 --duration 5 --warmup 1 --sessions 20000 --floor --pause-service)
  high=(--rate 10000 --duration 5 --warmup 1 --sessions 20000 --floor --pause-service)
fi

for round in $(seq 1 "$rounds"); do
  echo "== round $round of $rounds"
  resolver_pair
  # The builds in turn, each first in every other round: on some VMs the build that runs second
  # in a round tends to see the higher p99 (floor-pairs.sh).
  sides="new old"; [ $((round % 2)) = 0 ] && sides="old new"
  for side in $sides; do
    bin=$([ $side = new ] && echo $new_bin || echo $old_bin)
    service_run "$side" "$bin" saturation "${saturation[@]}"
    service_run "$side" "$bin" moderate "${moderate[@]}"
    service_run "$side" "$bin" high "${high[@]}"
  done
done

echo "== medians over $rounds rounds (new = this tree, old = $(git rev-parse --short "$commit"))"
for figure in $(awk '{print $2}' "$work/figures" | sort -u); do
  for side in new old; do
    median=$(awk -v s="$side" -v f="$figure" '$1 == s && $2 == f {print $3}' "$work/figures" | sort -g |
      awk '{v[NR]=$1} END {if (NR == 0) print "?"; else if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}')
    # A ratio of the two (new ÷ old) is kept on the new side only.
    [ "$side" = old ] && [ "$median" = "?" ] && continue
    printf "%-36s %-4s %s\n" "$figure" "$side" "$median"
  done
done
