#!/usr/bin/env bash
# The semantic fuzzer's long run (Tests/NavigatorFuzzTests): random intents, client events,
# expiry passes, reloads, flushes, packing and restarts through the service's own session step,
# store and state file, checked after every step.
#   scripts/fuzz-semantic.sh [STEPS] [SEED]     defaults: 10,000,000 steps, a random seed
# The seed is printed first: a failure is replayed with the same STEPS and SEED.
exec "$(dirname "$0")/fuzz-long-run.sh" "semantic fuzzer" SemanticFuzzTests FUZZ_STEPS FUZZ_SEED steps \
  "${1:-10000000}" ${2:+"$2"}
