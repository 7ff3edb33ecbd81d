#!/usr/bin/env bash
# Runs client.py (a Python client written from docs/wire-protocol.md) against a secure navigatord started
# here on ephemeral 127.0.0.1 ports, with keys made by navctl keygen. Needs a built navigatord
# and navctl (BIN, default .build/debug), python3-zmq and python3-protobuf (installed if missing).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-.build/debug}
scripts/apt-install.sh python3-zmq python3-protobuf
work=$(mktemp -d)
pid=""
cleanup() { [[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
protoc -I proto --python_out="$work" proto/navigator/v1/*.proto
for name in server alice; do "$BIN/navctl" keygen "$name" --directory "$work" >/dev/null; done
cat >"$work/access.yaml" <<YAML
clients:
  - name: alice
    key: "$(cat "$work/alice.pub")"
    role: shell
    sessions: ["alice"]
YAML
port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
requests="tcp://127.0.0.1:$(port)"
"$BIN/navigatord" --secret-key-file "$work/server.key" --access-file "$work/access.yaml" \
  --intents "tcp://127.0.0.1:$(port)" --requests "$requests" --commands "tcp://127.0.0.1:$(port)" \
  --metrics off --data-directory "$work/data" --log-level warning &
pid=$!
PYTHONPATH="$work" /usr/bin/python3 scripts/secure-python-client/client.py \
  "$requests" "$work/server.pub" "$work/alice.key" alice bob
