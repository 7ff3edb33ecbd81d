#!/usr/bin/env bash
# The frame fuzzer's long run (Tests/NavigatorServiceTests/FrameFuzzTests.swift): random and
# mutated messages on every socket of a real in-process navigatord (intents, requests, commands),
# raw bytes on each TCP port including HTTP, peers that come and go; every 2,000 messages a probe
# must be answered and resolved, and at the end /healthz and /readyz must answer 200.
#   scripts/fuzz-frames.sh [MESSAGES] [SEED]     defaults: 1,000,000 messages, a random seed
# The seed is printed first: a failure is replayed with the same MESSAGES and SEED. Built in
# release mode (with testing enabled) in .build-fuzz, apart from the debug build.
set -euo pipefail
cd "$(dirname "$0")/.."
messages="${1:-1000000}"
seed="${2:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}"
command -v swift >/dev/null 2>&1 || export PATH="/opt/swift/usr/bin:$PATH"
./dev deps
echo "frame fuzzer: $messages messages, seed $seed"
started=$(date +%s)
FRAME_FUZZ_MESSAGES="$messages" FRAME_FUZZ_SEED="$seed" SWIFT_BACKTRACE="${SWIFT_BACKTRACE:-enable=no}" \
  swift test -c release -Xswiftc -enable-testing --scratch-path .build-fuzz --filter FrameFuzzTests
echo "frame fuzzer: $messages messages from seed $seed passed in $(( $(date +%s) - started )) s"
