#!/usr/bin/env bash
# The HTTP API against its OpenAPI document: schemathesis (from PyPI, in a virtual environment
# under .build) sends generated and mutated requests to a real navigatord started here on
# ephemeral 127.0.0.1 ports and fails on any 5xx, any response the document does not describe
# (status, content type, body schema, headers), and any request that breaks the document but
# is accepted. The stream path is left out: its response does not end. Needs a built navigatord
# (BIN, default .build/debug).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.build/debug}
version=4.32.5
venv=.build/schemathesis-$version
if [ ! -x "$venv/bin/schemathesis" ]; then
  if ! python3 -m venv "$venv" >/dev/null 2>&1; then
    # Debian's python3 has venv in a package of its own.
    scripts/apt-install.sh python3-venv
    rm -rf "$venv"
    python3 -m venv "$venv"
  fi
  "$venv/bin/pip" install -q "schemathesis==$version"
fi
work=$(mktemp -d)
pid=""
cleanup() { [[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$work"; }
# All of it, even where a step fails (errexit would end it there); and on a signal (Ctrl-C, a
# closed pipe) too, where bash would otherwise exit without it and leave what it started running.
trap 'set +e; cleanup' EXIT
trap 'exit 130' INT TERM HUP PIPE
port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
http="127.0.0.1:$(port)"
"$BIN/navigatord" --intents "tcp://127.0.0.1:$(port)" --requests "tcp://127.0.0.1:$(port)" \
  --commands "tcp://127.0.0.1:$(port)" --metrics "$http" --data-directory "$work/data" --log-level error &
pid=$!
for _ in $(seq 100); do
  /usr/bin/python3 -c "import urllib.request, sys; urllib.request.urlopen('http://$http/readyz', timeout=1)" 2>/dev/null && break
  kill -0 "$pid" 2>/dev/null || { echo "schemathesis.sh: navigatord did not start" >&2; exit 1; }
  sleep 0.1
done
"$venv/bin/schemathesis" run "http://$http/v1/openapi.json" \
  --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,response_headers_conformance,negative_data_rejection \
  --exclude-path '/v1/sessions/{id}/stream' --max-examples 50 --seed 1 --request-timeout 10 --warnings off
