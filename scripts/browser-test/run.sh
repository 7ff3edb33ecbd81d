#!/usr/bin/env bash
# The live session page in headless Chromium against a real navigatord (scripts/browser-test/
# page_test.py). Installs Debian's chromium and chromium-driver when missing (nothing downloads
# a browser of its own). Screenshots of each step go to $SHOTS (default: a new directory under
# /tmp, printed). Needs a built navigatord and navctl (BIN, default .build/debug).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-.build/debug}
scripts/apt-install.sh chromium chromium-driver
work=$(mktemp -d)
SHOTS=${SHOTS:-$(mktemp -d /tmp/navigator-page-XXXXXX)}
mkdir -p "$SHOTS"
pid=""
driver=""
cleanup() {
  # navigatord may have been started again by restart.sh (not a child of this shell): kill it
  # and wait until it is gone either way.
  if [[ -n $pid ]]; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  if [[ -n $driver ]]; then kill "$driver" 2>/dev/null || true; wait "$driver" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
intents="tcp://127.0.0.1:$(port)"; requests="tcp://127.0.0.1:$(port)"; commands="tcp://127.0.0.1:$(port)"
http="127.0.0.1:$(port)"
start() {
  "$BIN/navigatord" --intents "$intents" --requests "$requests" --commands "$commands" --metrics "$http" \
    --data-directory "$work/data" --log-level warning >>"$work/navigatord.log" 2>&1 &
  pid=$!
  # The test kills it with -9 on purpose: no job notice for that.
  disown "$pid"
  echo "$pid" >"$work/pid"
  for _ in $(seq 100); do
    /usr/bin/python3 -c "import urllib.request; urllib.request.urlopen('http://$http/readyz', timeout=1)" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "browser-test: navigatord did not start:" >&2
  cat "$work/navigatord.log" >&2
  return 1
}
start
# kill -9, then start again on the same ports and state (the page must find its way back).
cat >"$work/restart.sh" <<RESTART
kill -9 \$(cat "$work/pid"); sleep 0.5
"$BIN/navigatord" --intents "$intents" --requests "$requests" --commands "$commands" --metrics "$http" \
  --data-directory "$work/data" --log-level warning >>"$work/navigatord.log" 2>&1 &
echo \$! >"$work/pid"
for _ in \$(seq 100); do
  /usr/bin/python3 -c "import urllib.request; urllib.request.urlopen('http://$http/readyz', timeout=1)" 2>/dev/null && exit 0
  sleep 0.1
done
exit 1
RESTART
driverPort=$(port)
chromedriver --port="$driverPort" >"$work/chromedriver.log" 2>&1 &
driver=$!
for _ in $(seq 100); do
  /usr/bin/python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$driverPort/status', timeout=1)" 2>/dev/null && break
  sleep 0.1
done
status=0
/usr/bin/python3 scripts/browser-test/page_test.py "http://127.0.0.1:$driverPort" "http://$http" "$SHOTS" \
  "$BIN/navctl" "$requests" "bash $work/restart.sh" "$BIN/navload" "$intents" "$commands" || status=$?
# The navigatord started by restart.sh is not $pid any more.
pid=$(cat "$work/pid")
if [ "$status" -ne 0 ]; then
  echo "browser-test: navigatord's log:" >&2
  cat "$work/navigatord.log" >&2
fi
exit "$status"
