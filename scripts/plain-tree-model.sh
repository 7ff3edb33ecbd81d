#!/usr/bin/env bash
# Issue 31's tree of plain values, modelled (docs/plain-tree.md): builds
# Prototypes/PlainTree (a package of its own, release) and runs it. It checks that its model gives
# the resolver's outcomes, commands and trees for 200,000 single-screen intents of navload's mix
# over SESSIONS sessions, then times the resolver and the model over them in turns, ROUNDS times,
# and prints each round and the medians. With a variant of the model's dedup ids (scanned,
# indexed, filtered), after the check it times that variant alone (for a profile of it).
#
#   scripts/plain-tree-model.sh [SESSIONS] [ROUNDS] [scanned|indexed|filtered]      (defaults: 1000 5)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
sessions=${1:-1000}
rounds=${2:-5}
only=${3:-}
[[ "$sessions" =~ ^[1-9][0-9]*$ ]] || { echo "plain-tree-model: SESSIONS=$sessions; expected a positive whole number" >&2; exit 64; }
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "plain-tree-model: ROUNDS=$rounds; expected a positive whole number" >&2; exit 64; }
[[ "$only" =~ ^(scanned|indexed|filtered)?$ ]] || { echo "plain-tree-model: $only; expected nothing, or scanned, indexed or filtered (that variant of the model alone)" >&2; exit 64; }
command -v swift >/dev/null 2>&1 || export PATH="/opt/swift/usr/bin:$PATH"
package="$here/Prototypes/PlainTree"
swift build -c release --package-path "$package" -q >&2
"$(swift build -c release --package-path "$package" --show-bin-path)/PlainTree" "$sessions" "$rounds" ${only:+"$only"}
