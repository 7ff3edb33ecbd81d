#!/usr/bin/env bash
# The frame fuzzer's long run (Tests/NavigatordTests/FrameFuzzTests.swift): random and
# mutated messages on every socket of a real in-process navigatord (intents, requests, commands),
# raw bytes on each TCP port including HTTP, peers that come and go; every 2,000 messages a probe
# must be answered and resolved, and at the end /healthz and /readyz must answer 200.
#   scripts/fuzz-frames.sh [MESSAGES] [SEED]     defaults: 1,000,000 messages, a random seed
# The seed is printed first: a failure is replayed with the same MESSAGES and SEED.
exec "$(dirname "$0")/fuzz-long-run.sh" "frame fuzzer" FrameFuzzTests FRAME_FUZZ_MESSAGES FRAME_FUZZ_SEED \
  messages "${1:-1000000}" ${2:+"$2"}
