# Sourced by the benchmark scripts (long-run.sh, wakeups.sh, floor-pairs.sh): starting a fresh
# navigatord for a measurement.
#
#   stop_on_exit
#       when the script ends, however it ends, stops navload ($load) and navigatord ($pid), those
#       of them that are running (navigatord continued first, in case it was left paused), and
#       removes $work. (floor-pairs.sh has its own.)
#
#   start_navigatord BIN DATA_DIR LOG NAME
#       starts BIN/navigatord on free 127.0.0.1 ports with its state in DATA_DIR, metrics off,
#       warnings and worse into LOG, and the options of NAVIGATORD_ARGS; sets $pid and its
#       endpoints $i (intents), $r (requests), $c (commands); returns once it answers (navctl
#       stats), or exits naming NAME and showing LOG when it does not within 60 s. The caller
#       stops it (its cleanup trap kills $pid).

# A free TCP port of 127.0.0.1.
port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

stop_on_exit() {
  load=""; pid=""
  cleanup() {
    [ -n "$load" ] && kill "$load" 2>/dev/null && wait "$load" 2>/dev/null
    # Continued first: navload may have been stopped while it had navigatord paused
    # (`--floor --pause-service`, as wakeups.sh's FLOOR=1 runs it).
    [ -n "$pid" ] && kill -CONT "$pid" 2>/dev/null && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    rm -rf "$work"
  }
  # All of it, even where a step fails (errexit would end it there); and on a signal (Ctrl-C, a
  # closed pipe) too, where bash would otherwise exit without it and leave what it started running.
  trap 'set +e; cleanup' EXIT
  trap 'exit 130' INT TERM HUP PIPE
}

start_navigatord() {
  local bin=$1 data=$2 log=$3 name=$4 ready="" extra=()
  read -r -a extra <<<"${NAVIGATORD_ARGS:-}"
  i="tcp://127.0.0.1:$(port)"; r="tcp://127.0.0.1:$(port)"; c="tcp://127.0.0.1:$(port)"
  "$bin/navigatord" --intents "$i" --requests "$r" --commands "$c" --metrics off --data-directory "$data" \
    --log-level warning "${extra[@]}" >>"$log" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do
    if "$bin/navctl" stats --requests "$r" >/dev/null 2>&1; then ready=1; break; fi
    sleep 0.1
  done
  [ -n "$ready" ] || { echo "$name: navigatord of $bin did not become ready:" >&2; cat "$log" >&2; exit 1; }
}
