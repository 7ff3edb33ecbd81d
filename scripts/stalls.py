#!/usr/bin/env python3
"""How a run's slowest 1 % of batches fall in time (scripts/stalls.sh OUT): in how many of the
run's 10-ms windows of due times they come, and the windows with most of them. With a scheduler
trace (OUT/sched.txt), for the worst windows: what ran on each core from 3 ms before the window to
15 ms after it, and the longest waits to run (woken, not yet on a core).

    scripts/stalls.py OUT [WINDOWS]        (default: the 6 worst windows)
"""
import collections
import re
import sys

out = sys.argv[1]
shown = int(sys.argv[2]) if len(sys.argv) > 2 else 6
with open(f"{out}/latency.csv") as log:
    header = log.readline()
    rows = [tuple(float(field) for field in line.split(",")) for line in log if line.strip()]
start = int(re.search(r"is (\d+) ns", header).group(1))
latencies = sorted(latency for _, latency in rows)
p99 = latencies[int(len(latencies) * 0.99)]
windows = collections.Counter(int(due // 10) for due, _ in rows)
slow = collections.Counter(int(due // 10) for due, latency in rows if latency >= p99)
print(f"{len(rows)} batches; p50 {latencies[len(latencies) // 2]:.0f} µs, p99 {p99:.0f} µs, max {latencies[-1]:.0f} µs")
print(f"the {sum(slow.values())} at or above the p99 come in {len(slow)} of the {len(windows)} 10-ms windows of due times")
held = 0
for rank, (_, count) in enumerate(slow.most_common(), 1):
    held += count
    if rank in (5, 10, 20, 50):
        print(f"  the {rank} worst windows hold {held / sum(slow.values()):.0%} of them")
worst = [window for window, _ in slow.most_common(shown)]
for window in worst:
    late = max(latency for due, latency in rows if int(due // 10) == window)
    print(f"  due {window * 10} ms: {slow[window]} of its {windows[window]} batches, the slowest {late:.0f} µs")

try:
    trace = open(f"{out}/sched.txt")
except FileNotFoundError:
    sys.exit(0)
offset = int(open(f"{out}/clock-offset").read())
service = int(open(f"{out}/navigatord.pid").read())
line_rx = re.compile(r"^\s*(.+?)\s+(\d+)/(\d+)\s+\[(\d+)\]\s+([\d.]+): sched:(\w+): (.*)$")
switch_rx = re.compile(r"prev_comm=(.*) prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> next_comm=(.*) next_pid=(\d+)")
wake_rx = re.compile(r"comm=(.*) pid=(\d+) prio=\d+ target_cpu=(\d+)")
process = {}  # tid: its process's id, from the events it was running for
lines = []
for line in trace:
    if match := line_rx.match(line):
        lines.append(match.groups())
        process[int(match.group(3))] = int(match.group(2))


def name(thread, tid):
    return f"navigatord:{thread}" if process.get(int(tid)) == service else thread


running = {}  # core: (thread, since)
spans = []  # (from, to, core, thread)
woken = {}  # tid: when
waits = []  # (woken, ran, thread, core)
for _, _, _, core, at, event, rest in lines:
    core, at = int(core), float(at)
    if event == "sched_switch" and (switch := switch_rx.match(rest)):
        if core in running:
            spans.append((running[core][1], at, core, running[core][0]))
        thread = name(switch.group(4), switch.group(5))
        running[core] = (thread, at)
        tid = int(switch.group(5))
        if tid in woken:
            waits.append((woken.pop(tid), at, thread, core))
    elif event == "sched_wakeup" and (wake := wake_rx.match(rest)):
        woken[int(wake.group(2))] = at
if not spans:
    sys.exit("stalls: the trace holds no context switches")
first, last = spans[0][0], spans[-1][1]
busy = collections.defaultdict(float)
for begin, end, _, thread in spans:
    busy[thread] += end - begin
print(f"\nthe trace: {last - first:.1f} s; the busiest threads (cores)")
for thread, seconds in sorted(busy.items(), key=lambda item: -item[1])[:10]:
    print(f"  {thread:29s} {seconds / (last - first):.3f}")
for window in worst:
    begin = (start + window * 10e6 - offset) / 1e9 - 0.003
    end = begin + 0.018
    share = collections.defaultdict(float)
    for span_begin, span_end, core, thread in spans:
        if span_end >= begin and span_begin <= end:
            share[(core, thread)] += min(span_end, end) - max(span_begin, begin)
    print(f"\ndue {window * 10} ms ({slow[window]} slow): on the cores from 3 ms before to 15 ms after")
    for (core, thread), seconds in sorted(share.items(), key=lambda item: -item[1])[:8]:
        print(f"  cpu{core} {thread:29s} {seconds * 1000:6.2f} ms")
    longest = sorted(
        ((ran - at, thread, core, at) for at, ran, thread, core in waits if begin <= ran <= end and ran - at > 0.0005),
        reverse=True)[:5]
    for waited, thread, core, at in longest:
        print(f"  {thread} waited {waited * 1000:.2f} ms for cpu{core} (woken {(at - begin) * 1000:.2f} ms in)")
