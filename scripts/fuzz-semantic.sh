#!/usr/bin/env bash
# The semantic fuzzer's long run (Tests/NavigatorFuzzTests): random intents, client events,
# expiry passes, reloads, flushes, packing and restarts through the service's own session step,
# store and state file, checked after every step.
#   scripts/fuzz-semantic.sh [STEPS] [SEED]     defaults: 10,000,000 steps, a random seed
# The seed is printed first: a failure is replayed with the same STEPS and SEED. Built in release
# mode (with testing enabled) in .build-fuzz, apart from the debug build.
set -euo pipefail
cd "$(dirname "$0")/.."
steps="${1:-10000000}"
seed="${2:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}"
command -v swift >/dev/null 2>&1 || export PATH="/opt/swift/usr/bin:$PATH"
./dev deps
echo "semantic fuzzer: $steps steps, seed $seed"
started=$(date +%s)
FUZZ_STEPS="$steps" FUZZ_SEED="$seed" SWIFT_BACKTRACE="${SWIFT_BACKTRACE:-enable=no}" \
  swift test -c release -Xswiftc -enable-testing --scratch-path .build-fuzz --filter SemanticFuzzTests
echo "semantic fuzzer: $steps steps from seed $seed passed in $(( $(date +%s) - started )) s"
