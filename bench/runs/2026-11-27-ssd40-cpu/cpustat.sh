#!/bin/bash
# per-second per-CPU jiffies deltas: time cpu user nice system idle iowait irq softirq
prev=""
while true; do
  now=$(grep '^cpu[01] ' /proc/stat | tr '\n' ' ')
  echo "$(date +%s) $now"
  sleep 1
done
