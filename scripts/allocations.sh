#!/usr/bin/env bash
# Allocation thresholds of the hot path (issue 16), with ordo-one/benchmark (Benchmarks/): builds
# the benchmarks in release, runs them and compares each one's p90 malloc count with
# Benchmarks/Thresholds (at most 1 % more passes). Exit status 1 on a regression.
#   scripts/allocations.sh            check
#   scripts/allocations.sh --update   run and write the thresholds anew (commit them, saying why)
set -euo pipefail
cd "$(dirname "$0")/../Benchmarks"
case "${1:-}" in
  "") operation=check ;;
  --update) operation=update ;;
  *) echo "allocations: unknown argument $1; expected --update or nothing" >&2; exit 64 ;;
esac
swift package --allow-writing-to-package-directory benchmark thresholds "$operation" --no-progress
if [ "$operation" = update ]; then
  # Allocation counts only: throughput moves with the machine and is never a threshold.
  for file in Thresholds/*.json; do
    /usr/bin/python3 - "$file" <<'PY'
import json, sys
path = sys.argv[1]
kept = {k: v for k, v in json.load(open(path)).items() if k != "throughput"}
open(path, "w").write(json.dumps(kept, indent=2, sort_keys=True) + "\n")
PY
  done
fi
