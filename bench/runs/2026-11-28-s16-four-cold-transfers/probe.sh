#!/bin/bash
# probe.sh COMMAND : drop caches, run COMMAND (stdout discarded) in blkio cgroup s16, print the
# read bios and bytes it cost (blkio.throttle.io_serviced / io_service_bytes deltas).
set -e
cg=/sys/fs/cgroup/blkio/s16; mkdir -p $cg
dev=$(lsblk -no MAJ:MIN /dev/vda | head -1 | tr -d ' ')
[ -n "$IOPS" ] && echo "$dev $IOPS" > $cg/blkio.throttle.read_iops_device
get() { awk -v d=$dev '$1==d && $2=="Read"{print $3}' $cg/$1; }
sync; echo 3 > /proc/sys/vm/drop_caches
r0=$(get blkio.throttle.io_serviced); b0=$(get blkio.throttle.io_service_bytes); r0=${r0:-0}; b0=${b0:-0}
t0=$(date +%s.%N)
mc=/sys/fs/cgroup/memory/s16; mkdir -p $mc; echo ${MEM:-8G} > $mc/memory.limit_in_bytes
bash -c "echo \$\$ > $cg/tasks; echo \$\$ > $mc/tasks; exec $1" > /dev/null
t1=$(date +%s.%N)
r=$(( $(get blkio.throttle.io_serviced) - r0 )); b=$(( $(get blkio.throttle.io_service_bytes) - b0 ))
printf '%-70s reads=%6d MB=%6d KB/read=%5d s=%.2f\n' "$1" $r $((b/1000000)) $((b/(r>0?r:1)/1000)) $(echo "$t1 - $t0" | bc)
