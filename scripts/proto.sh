#!/usr/bin/env bash
# Regenerates the Swift code for proto/navigator/v1/*.proto into Sources/NavigatorWire/Generated,
# with Debian's protoc and protoc-gen-swift built from the swift-protobuf dependency (so the
# generator always matches the runtime library).
#   scripts/proto.sh          regenerate in place
#   scripts/proto.sh --check  regenerate into a temporary directory and fail if the committed
#                             files differ in any byte
set -euo pipefail
cd "$(dirname "$0")/.."

mode=write
case "${1:-}" in
  "") ;;
  --check) mode=check ;;
  *) echo "usage: scripts/proto.sh [--check]" >&2; exit 2 ;;
esac

command -v protoc >/dev/null || { echo "protoc not found: install protobuf-compiler (./dev deps)" >&2; exit 1; }

swift build --product protoc-gen-swift >/dev/null
plugin="$(swift build --product protoc-gen-swift --show-bin-path)/protoc-gen-swift"

generated=Sources/NavigatorWire/Generated
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

# Sorted input order and DropPath naming make the output independent of the file system.
mapfile -t protos < <(cd proto && find navigator -name '*.proto' | LC_ALL=C sort)
protoc --plugin=protoc-gen-swift="$plugin" \
  --proto_path=proto \
  --swift_opt=Visibility=Public \
  --swift_opt=FileNaming=DropPath \
  --swift_out="$out" \
  "${protos[@]}"

if [ "$mode" = check ]; then
  if diff -r --exclude=README.md "$generated" "$out" >/dev/null; then
    echo "proto: generated Swift matches proto/ ($(ls "$out" | wc -l) files)"
  else
    echo "proto: Sources/NavigatorWire/Generated is out of date with proto/; run scripts/proto.sh" >&2
    diff -r --exclude=README.md "$generated" "$out" | head -40 >&2
    exit 1
  fi
else
  find "$generated" -name '*.pb.swift' -delete
  cp "$out"/*.pb.swift "$generated"/
  echo "proto: wrote $(ls "$out" | wc -l) files to $generated"
fi
