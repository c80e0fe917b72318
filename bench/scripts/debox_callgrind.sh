#!/bin/bash
# Instructions per request of amped on a cached 1 KiB keep-alive load, counted by callgrind
# (repeatable on a shared machine, unlike time): each server is run twice, for N1 and N2
# requests, and (I(N2) - I(N1)) / (N2 - N1) cancels start-up and shutdown.
# usage: debox_callgrind.sh LABEL AMPED [AMPED_OPTIONS...]   (env: N1, N2, AMPLOAD, PORT)
# With --debox, pass --debox-stall-ms 10000 too: under valgrind every call is ~50x slower, so at
# the default 1 ms threshold a varying number of socket calls count as stalls (and a stall's
# report costs thousands of instructions), which makes the count depend on the machine's load.
set -euo pipefail
LABEL=$1; BIN=$2; shift 2
N1=${N1:-10000}; N2=${N2:-50000}; LOAD=${AMPLOAD:-target/release/ampload}; PORT=${PORT:-18555}
WWW=$(mktemp -d /var/tmp/debox-cg.XXXX); chmod 755 "$WWW"; head -c 1024 /dev/urandom > "$WWW/1k.bin"
trap 'rm -rf "$WWW"' EXIT
count() {
  local n=$1 log; shift; log=$(mktemp)
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$BIN" --listen "127.0.0.1:$PORT" "$@" "$WWW" >"$log" 2>&1 &
  local vp=$! tries=0
  # valgrind starts slowly on a busy machine: wait until the port accepts (up to 2 min)
  until (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; do
    tries=$((tries + 1)); [ $tries -le 240 ] && kill -0 $vp 2>/dev/null || { echo "amped did not start: $(tail -3 "$log")" >&2; exit 1; }
    sleep 0.5
  done
  "$LOAD" -c 10 -n "$n" "http://127.0.0.1:$PORT/1k.bin" >/dev/null 2>&1 || { echo "ampload failed" >&2; kill -INT $vp; exit 1; }
  kill -INT $vp; wait $vp || true
  grep -o 'Collected : [0-9]*' "$log" | grep -o '[0-9]*$'; rm -f "$log"
}
a=$(count "$N1" "$@"); b=$(count "$N2" "$@")
echo "$LABEL $N1:$a $N2:$b per_request:$(( (b - a) / (N2 - N1) ))"
