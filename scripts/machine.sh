#!/usr/bin/env bash
# One line of what this machine is, for the head of a benchmark's output: cores, CPU model,
# memory, kernel, its preemption mode and timer rate, and the idle driver with its halt polling
# (on a VM, guest halt polling moved navigatord's CPU an intent by a tenth: BENCHMARKS.md).
# Facts the kernel does not expose are left out, not guessed.
#
#   scripts/machine.sh
set -uo pipefail
cores=$(nproc)
model=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
memory=$(awk '/^MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)
line="machine: $cores cores${model:+ ($model)}, $memory, kernel $(uname -r)"
preempt=/sys/kernel/debug/sched/preempt
if [ -r "$preempt" ]; then
  # The mode in use is the one in parentheses: "none (voluntary) full".
  mode=$(sed -n 's/.*(\([a-z]*\)).*/\1/p' "$preempt" 2>/dev/null)
  [ -n "$mode" ] && line+=", preempt $mode"
fi
config=/boot/config-$(uname -r)
if [ -r "$config" ]; then
  hz=$(sed -n 's/^CONFIG_HZ=//p' "$config" 2>/dev/null)
  [ -n "$hz" ] && line+=", HZ $hz"
fi
idle=/sys/devices/system/cpu/cpuidle/current_driver
if [ -r "$idle" ]; then
  line+=", idle driver $(cat "$idle")"
  poll=/sys/module/haltpoll/parameters/guest_halt_poll_ns
  [ "$(cat "$idle")" = haltpoll ] && [ -r "$poll" ] && line+=" (guest_halt_poll_ns $(cat "$poll"))"
fi
echo "$line"
