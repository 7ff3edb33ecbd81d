#!/usr/bin/env bash
# A long run of one of the fuzz test suites, built in release mode (with testing enabled) in
# .build-fuzz, apart from the debug build; the seed is printed first, so a failure is replayed
# with the same count and seed. Used by fuzz-semantic.sh and fuzz-frames.sh:
#   scripts/fuzz-long-run.sh NAME SUITE COUNT_VARIABLE SEED_VARIABLE WHAT COUNT [SEED]
set -euo pipefail
cd "$(dirname "$0")/.."
name="$1" suite="$2" count_variable="$3" seed_variable="$4" what="$5" count="$6"
seed="${7:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}"
command -v swift >/dev/null 2>&1 || export PATH="/opt/swift/usr/bin:$PATH"
./dev deps
echo "$name: $count $what, seed $seed"
started=$(date +%s)
env "$count_variable=$count" "$seed_variable=$seed" SWIFT_BACKTRACE="${SWIFT_BACKTRACE:-enable=no}" \
  swift test -c release -Xswiftc -enable-testing --scratch-path .build-fuzz --filter "$suite"
echo "$name: $count $what from seed $seed passed in $(( $(date +%s) - started )) s"
