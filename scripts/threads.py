#!/usr/bin/env python3
"""Where an intent's CPU and wake-ups go, thread by thread (issue 31).

    scripts/threads.py PID SECONDS INTENTS_PER_SECOND

Reads each thread of process PID from /proc (its name, the kernel's schedstat: nanoseconds on a
CPU and timeslices run; its voluntary and involuntary context switches) now and SECONDS later,
and prints per thread, for the intents sent meanwhile (INTENTS_PER_SECOND x SECONDS, as navload
keeps its rate): CPU microseconds, timeslices (each a wake-up, or a preemption) and voluntary
switches (the thread went to sleep) per intent, and the process's minor page faults per intent
(its heap growing, or memory given back and taken again). Threads of the same name (the libzmq
I/O threads) are added up. Run it while navload drives navigatord at that rate
(scripts/wakeups.sh does).
"""
import os
import sys
import time


def sample(pid):
    threads = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        base = f"/proc/{pid}/task/{tid}"
        try:
            with open(f"{base}/comm") as f:
                name = f.read().strip()
            with open(f"{base}/schedstat") as f:
                on_cpu, _, slices = (int(x) for x in f.read().split())
            voluntary = involuntary = 0
            with open(f"{base}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches"):
                        voluntary = int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches"):
                        involuntary = int(line.split()[1])
        except OSError:
            continue  # the thread ended meanwhile
        threads[tid] = (name, on_cpu, slices, voluntary, involuntary)
    return threads


def minor_faults(pid):
    with open(f"/proc/{pid}/stat") as f:
        # The fields after the command's closing parenthesis; minflt is the 10th field of all.
        return int(f.read().rsplit(")", 1)[1].split()[7])


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    pid, seconds, rate = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
    before, faults_before = sample(pid), minor_faults(pid)
    time.sleep(seconds)
    after, faults_after = sample(pid), minor_faults(pid)
    intents = rate * seconds
    by_name = {}
    for tid, (name, cpu, slices, vol, invol) in after.items():
        _, cpu0, slices0, vol0, invol0 = before.get(tid, (name, 0, 0, 0, 0))
        total = by_name.setdefault(name, [0, 0, 0, 0])
        for i, delta in enumerate((cpu - cpu0, slices - slices0, vol - vol0, invol - invol0)):
            total[i] += delta
    rows = sorted(by_name.items(), key=lambda item: -item[1][0])
    print(f"{'thread':<16} {'CPU µs/intent':>14} {'slices/intent':>14} {'sleeps/intent':>14} {'preempted/intent':>17}")
    sums = [0, 0, 0, 0]
    for name, (cpu, slices, vol, invol) in rows:
        if cpu == 0 and slices == 0:
            continue
        sums = [a + b for a, b in zip(sums, (cpu, slices, vol, invol))]
        print(f"{name:<16} {cpu / 1000 / intents:>14.2f} {slices / intents:>14.3f} {vol / intents:>14.3f} {invol / intents:>17.3f}")
    cpu, slices, vol, invol = sums
    print(f"{'all':<16} {cpu / 1000 / intents:>14.2f} {slices / intents:>14.3f} {vol / intents:>14.3f} {invol / intents:>17.3f}")
    print(f"({intents:.0f} intents over {seconds:.0f} s; CPU {cpu / 1e9 / seconds:.2f} cores; "
          f"{(faults_after - faults_before) / intents:.3f} minor page faults an intent)")


main()
