#!/usr/bin/env bash
# libFuzzer over decode + resolve + apply (Sources/navfuzz): each input is a list of
# length-prefixed navigator.v1.Requests applied to one session; a broken invariant, a mirror that
# differs or a state that does not survive its encoding stops the run with the input saved.
#   scripts/fuzz-libfuzzer.sh [SECONDS] [libFuzzer flags...]     default: 3600 seconds
# Built with -sanitize=fuzzer in .build-libfuzzer; the corpus grows in .fuzz-corpus (seeded by
# `navfuzz --seeds`). Replay a saved crash with a normal build: `swift run navfuzz crash-...`.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-3600}"
[ $# -gt 0 ] && shift
command -v swift >/dev/null 2>&1 || export PATH="/opt/swift/usr/bin:$PATH"
./dev deps
# lld: gold fails on this link (an internal error in its DWARF reader).
flags=(-c release --scratch-path .build-libfuzzer -Xswiftc -sanitize=fuzzer -Xswiftc -parse-as-library -Xswiftc -DLIBFUZZER
  -Xswiftc -use-ld=lld)
swift build --product navfuzz "${flags[@]}"
mkdir -p .fuzz-corpus
if [ -z "$(ls -A .fuzz-corpus)" ]; then
  swift build --product navfuzz >/dev/null
  "$(swift build --show-bin-path)/navfuzz" --seeds .fuzz-corpus
fi
"$(swift build "${flags[@]}" --show-bin-path)/navfuzz" -max_total_time="$seconds" -print_final_stats=1 "$@" .fuzz-corpus
