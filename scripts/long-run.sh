#!/usr/bin/env bash
# A long run at a fixed rate, thread by thread (issue 31): a fresh navigatord from BIN (a directory
# holding a release navigatord and navctl) on free 127.0.0.1 ports, driven by this tree's release
# navload at RATE intents/s over SESSIONS sessions for SECONDS. Every 30 s it prints, for the
# intents of that window, each thread's CPU microseconds an intent (from
# /proc/PID/task/*/stat: user and system time), navigatord's in all, and its RSS: what a
# deployment sees once sessions have filled with what they remember (intent ids and expired
# intents for the dedup window, parked intents for their time to live), which runs of seconds do
# not show. Then navload's report.
#
#   scripts/long-run.sh BIN RATE SECONDS [SESSIONS]        (SESSIONS: 20000; NAVIGATORD_ARGS=)
#
# Needs an otherwise idle machine.
set -euo pipefail
bin=$1
rate=$2
seconds=$3
sessions=${4:-20000}
here=$(cd "$(dirname "$0")/.." && pwd)
navload=$here/.build-release/release/navload
[ -x "$navload" ] || { echo "long-run: build navload first: swift build -c release --scratch-path .build-release --product navload" >&2; exit 2; }
"$here/scripts/machine.sh"
. "$here/scripts/navigatord-lib.sh"
work=$(mktemp -d)
stop_on_exit
start_navigatord "$bin" "$work/data" "$work/navigatord.log" long-run
"$navload" --intents "$i" --requests "$r" --commands "$c" --rate "$rate" --sessions "$sessions" \
  --duration "$seconds" --warmup 0 >"$work/navload.log" 2>&1 &
load=$!
/usr/bin/python3 - "$pid" "$rate" "$seconds" <<'EOF'
import os, sys, time
pid, rate, seconds = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
tick = os.sysconf("SC_CLK_TCK")
def sample():
    threads = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
            fields = open(f"/proc/{pid}/task/{tid}/stat").read().rsplit(")", 1)[1].split()
            threads[name] = threads.get(name, 0) + int(fields[11]) + int(fields[12])
        except OSError:
            pass
    rss = int(open(f"/proc/{pid}/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return time.monotonic(), threads, rss
names = ["nav-flush", "nav-worker-0", "nav-worker-1", "ZMQbg/IO/0"]
print("window (s)   " + "  ".join(f"{n:>12}" for n in names) + "    navigatord  RSS MiB   (CPU µs an intent)")
start, threads, _ = sample()
last = (start, threads)
while last[0] - start < seconds - 1:
    time.sleep(min(30, max(1, seconds - (last[0] - start))))
    now, threads, rss = sample()
    intents = (now - last[0]) * rate
    cpu = lambda name: (threads.get(name, 0) - last[1].get(name, 0)) / tick * 1e6 / intents
    total = (sum(threads.values()) - sum(last[1].values())) / tick * 1e6 / intents
    print(f"{last[0] - start:4.0f}-{now - start:4.0f}   " + "  ".join(f"{cpu(n):12.1f}" for n in names)
          + f"    {total:10.1f}  {rss / 2**20:7.0f}", flush=True)
    last = (now, threads)
EOF
wait "$load"
load=""
grep -v '^ *[0-9.]* s  sent' "$work/navload.log" || true
