#!/bin/bash
# RSS of a server after each of N identical loads (1020 keep-alive connections, 10 s each),
# summed over the server and its child processes (mp's workers).
# usage: rss_repeat.sh AMPED ARCH OUT_CSV [N] (ARCH may carry options: "mp --processes 8")
AMPED=$1; ARCH=$2; OUT=$3; N=${4:-5}
W=$(mktemp -d /var/tmp/rss-rep.XXXX); chmod 755 $W
for i in $(seq 1 200); do head -c $((RANDOM * 3)) /dev/urandom > $W/f$i.bin; done
chmod -R a+rX $W
for i in $(seq 1 200); do echo "/f$i.bin"; done > $W/urls
taskset -c 1 $AMPED --arch $ARCH --listen 127.0.0.1:18700 --allow-root --max-connections 4096 $W >/dev/null 2>&1 &
P=$!; sleep 1
# RSS of the server and its children (mp's workers), KiB.
rss() { echo $(( $(awk '/VmRSS/{print $2}' /proc/$P/status) + $(ps -o rss= --ppid $P | awk '{s+=$1} END {print s+0}') )); }
echo "arch,run,rss_kb_after,rss_kb_idle" > $OUT
echo "$ARCH,0,$(rss),$(rss)" >> $OUT
for r in $(seq 1 $N); do
  taskset -c 0 ${AMPLOAD:-target/release/ampload} -c 1020 -d 10s --urls $W/urls --quiet http://127.0.0.1:18700/ >/dev/null 2>&1
  a=$(rss); sleep 3; b=$(rss)
  echo "$ARCH,$r,$a,$b" >> $OUT
done
kill $P; rm -rf $W
cat $OUT
