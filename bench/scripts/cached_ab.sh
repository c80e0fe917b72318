#!/bin/bash
# Cached 1 KiB and 100 KiB keep-alive: two amped builds side by side, interleaved, pinned.
# usage: cached_ab.sh OLD_AMPED NEW_AMPED OUT_DIR [ROUNDS]
set -euo pipefail
OLD=$1; NEW=$2; OUT=$3; ROUNDS=${4:-5}
LOAD=${AMPLOAD:-target/release/ampload}
mkdir -p "$OUT"; WWW=$(mktemp -d /var/tmp/cached-ab.XXXX); chmod 755 "$WWW"
head -c 1024 /dev/urandom > "$WWW/1k.bin"; head -c 102400 /dev/urandom > "$WWW/100k.bin"
start() { taskset -c 1 "$1" --listen "127.0.0.1:$2" "$WWW" >/dev/null 2>&1 & echo $!; }
P1=$(start "$OLD" 18081); P2=$(start "$NEW" 18082); sleep 1
trap 'kill $P1 $P2 2>/dev/null; rm -rf "$WWW"' EXIT
echo "round,build,file,rps,mbps,p50_ms,p99_ms" > "$OUT/results.csv"
for r in $(seq 1 "$ROUNDS"); do
  for f in 1k.bin 100k.bin; do
    for pair in "old:18081" "new:18082"; do
      b=${pair%%:*}; port=${pair##*:}
      [ $((r % 2)) -eq 0 ] && { [ "$b" = old ] && pair=new:18082 || pair=old:18081; b=${pair%%:*}; port=${pair##*:}; }
      j=$(taskset -c 0 "$LOAD" -c 50 -d 10s --warmup 2s --json --quiet "http://127.0.0.1:$port/$f")
      echo "$j" > "$OUT/r$r-$b-$f.json"
      python3 - "$r" "$b" "$f" "$OUT/r$r-$b-$f.json" >> "$OUT/results.csv" <<'PY'
import json,sys
d=json.load(open(sys.argv[4]))
lat=d["latency_us"]
mbps=d["body_bytes"]*8/d["duration_s"]/1e6
print(f'{sys.argv[1]},{sys.argv[2]},{sys.argv[3]},{d["rps"]:.0f},{mbps:.1f},{lat["p50"]/1000},{lat["p99"]/1000}')
PY
    done
  done
done
cat "$OUT/results.csv"
