#!/bin/bash
# Samples /sys/block/vda/stat every 250 ms with a timestamp until $1 seconds pass.
end=$(( $(date +%s) + $1 ))
while [ $(date +%s) -lt $end ]; do echo "$(date +%s.%N) $(cat /sys/block/vda/stat)"; sleep 0.25; done
