#!/usr/bin/env bash
# The resolver alone, two builds at the same time, one on each core, then the cores swapped:
# `navload resolver` of OLD and of NEW (release build directories holding navload) run side by
# side, so the machine's slow spells (on a noisy VM one build's rate moves by a fifth between
# rounds) fall on both alike and their ratio moves far less than either rate.
#
#   scripts/resolver-pairs.sh OLD_DIR NEW_DIR [PAIRS]      (DURATION=3 seconds a run)
#
# Prints each run's two rates and NEW ÷ OLD, then the median ratio. Needs two cores and an
# otherwise idle machine: pause builds and other benchmarks.
set -euo pipefail
old=${1:?usage: resolver-pairs.sh OLD_DIR NEW_DIR [PAIRS]}
new=${2:?usage: resolver-pairs.sh OLD_DIR NEW_DIR [PAIRS]}
pairs=${3:-3}
duration=${DURATION:-3}
for dir in "$old" "$new"; do
  [ -x "$dir/navload" ] || { echo "resolver-pairs: no navload in $dir; expected a release build directory" >&2; exit 2; }
done
[ "$(nproc)" -ge 2 ] || { echo "resolver-pairs: needs two cores, this machine has $(nproc)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

run() { # CORE DIR OUT
  taskset -c "$1" "$2/navload" resolver --duration "$duration" --sessions 1000 --seed 1 >"$3" 2>&1
}
rate() { awk '/^rate:/ {print $2; exit}' "$1"; }

ratios=()
for pair in $(seq 1 "$pairs"); do
  for cores in "0 1" "1 0"; do
    set -- $cores
    run "$1" "$old" "$work/old" &
    pid=$!
    run "$2" "$new" "$work/new"
    wait "$pid"
    o=$(rate "$work/old")
    n=$(rate "$work/new")
    [ -n "$o" ] && [ -n "$n" ] || { echo "resolver-pairs: a run printed no rate:" >&2; cat "$work/old" "$work/new" >&2; exit 1; }
    ratio=$(awk -v n="$n" -v o="$o" 'BEGIN {printf "%.3f", n / o}')
    ratios+=("$ratio")
    echo "pair $pair, old on core $1: old $o/s  new $n/s  new/old $ratio"
  done
done
printf '%s\n' "${ratios[@]}" | sort -g |
  awk '{v[NR]=$1} END {m = NR % 2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2; printf "median new/old over %d runs: %.3f (%s to %s)\n", NR, m, v[1], v[NR]}'
