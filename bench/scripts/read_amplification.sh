#!/bin/bash
# How many bytes a server reads from a block device to send N cold large files at once, in a
# memory cgroup (the question behind amped's --kernel-read-ahead, docs/BENCHMARKS.md §3b,
# session 14). Root, cgroup v1 (memory and blkio), curl; peers optional (h2o).
#
#   bench/scripts/read_amplification.sh OUT_DIR [N_FILES] [MEMORY_MIB] [READ_AHEAD_KB...]
#
# Makes N_FILES (16) files of 64 MiB under /var/tmp/amped-read-amp (kept for the next run),
# then for each read-ahead setting of the data's disk (default: the disk's own) and each
# server: drops the page cache, starts the server in fresh cgroups (MEMORY_MIB, default 128;
# a blkio cgroup with a limit of 10^6 reads/s, which caps nothing but makes the kernel count
# the cgroup's reads), fetches every file at once over loopback and prints the bytes read from
# the disk ÷ the bytes sent (1.00: every byte read once), the requests, and the seconds. The
# disk's read-ahead is restored afterwards. Bounded: each fetch times out after 120 s.
# AMPED_VARIANTS: amped's option sets to compare, one a line (default: each architecture with
# --kernel-read-ahead on and off). READ_IOPS: the blkio cgroup's reads per second (default 10^6,
# which caps nothing; e.g. 300 for the lab's IOPS model, so the seconds say what the cap costs).
set -euo pipefail
out=${1:?usage: read_amplification.sh OUT_DIR [N_FILES] [MEMORY_MIB] [READ_AHEAD_KB...]}
n=${2:-16}
mib=${3:-128}
shift $(( $# < 3 ? $# : 3 ))
root=$(cd "$(dirname "$0")/../.." && pwd)
amped=${AMPED:-$root/target/release/amped}
data=/var/tmp/amped-read-amp
port=18089
mkdir -p "$out" "$data"
[ -x "$amped" ] || { echo "read_amplification.sh: no $amped (cargo build --release -p amped)" >&2; exit 1; }
for i in $(seq 1 "$n"); do
  [ -s "$data/f$i" ] || head -c $((64 << 20)) /dev/urandom > "$data/f$i"
done
sync
dev=$(stat -c '%d' "$data")
majmin="$((dev >> 8)):$((dev & 255))"
queue=/sys/dev/block/$majmin/queue
[ -e "$queue/read_ahead_kb" ] || queue=$(dirname "$(readlink -f /sys/dev/block/$majmin)")/queue
own_ra=$(cat "$queue/read_ahead_kb")
settings=("$@")
# amped's option sets, one a line (AMPED_VARIANTS overrides them).
mapfile -t variants <<< "${AMPED_VARIANTS:-$(printf '%s\n' \
  '--arch amped --kernel-read-ahead on' '--arch amped --kernel-read-ahead off' \
  '--arch uring --kernel-read-ahead on' '--arch uring --kernel-read-ahead off' \
  '--arch sped --kernel-read-ahead on' '--arch sped --kernel-read-ahead off')}"
[ ${#settings[@]} -gt 0 ] || settings=("$own_ra")
cg=amped-read-amp-$$
mem=/sys/fs/cgroup/memory/$cg
blk=/sys/fs/cgroup/blkio/$cg
cleanup() {
  echo "$own_ra" > "$queue/read_ahead_kb"
  [ -n "${server:-}" ] && kill "$server" 2>/dev/null || true
  sleep 0.2
  rmdir "$mem" "$blk" 2>/dev/null || true
}
trap cleanup EXIT
mkdir -p "$mem" "$blk"
echo $((mib << 20)) > "$mem/memory.limit_in_bytes"
echo "$majmin ${READ_IOPS:-1000000}" > "$blk/blkio.throttle.read_iops_device"
cat > "$out/h2o.conf" <<EOF
listen:
  host: 127.0.0.1
  port: $port
hosts:
  default:
    paths:
      /:
        file.dir: $data
EOF
counter() { awk '$1 == "'"$majmin"'" && $2 == "Read" { printf "%.0f\n", $3 }' "$blk/blkio.throttle.$1"; }
one() { # LABEL COMMAND...
  local label=$1; shift
  sync; echo 3 > /proc/sys/vm/drop_caches
  bash -c 'echo $$ > '"$mem"'/cgroup.procs; echo $$ > '"$blk"'/cgroup.procs; exec "$@"' _ "$@" \
    > "$out/server.log" 2>&1 &
  server=$!
  for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
  local r0 b0 r1 b1 t0 t1 pids=()
  r0=$(counter io_serviced); b0=$(counter io_service_bytes); t0=$(date +%s.%N)
  for i in $(seq 1 "$n"); do
    curl -s -m 120 -o /dev/null "http://127.0.0.1:$port/f$i" & pids+=($!)
  done
  wait "${pids[@]}" || true
  t1=$(date +%s.%N); r1=$(counter io_serviced); b1=$(counter io_service_bytes)
  kill "$server"; wait "$server" 2>/dev/null || true; server=
  python3 -c "
r, b, sent = $r1 - $r0, $b1 - $b0, $n * (64 << 20)
print(f'| $ra | $label | {b / sent:.2f} | {r} | {b / max(r, 1) / 1e3:.0f} | {$t1 - $t0:.2f} |')"
}
{
  echo "$n cold files of 64 MiB fetched at once, memory cgroup $mib MiB, disk $majmin"
  echo
  echo "| read_ahead_kb | server | read ÷ sent | requests | KB per request | s |"
  echo "|---|---|---:|---:|---:|---:|"
} | tee "$out/results.md"
for ra in "${settings[@]}"; do
  echo "$ra" > "$queue/read_ahead_kb"
  for variant in "${variants[@]}"; do
    read -ra opts <<< "$variant"
    one "amped $variant" "$amped" "${opts[@]}" --listen "127.0.0.1:$port" "$data" \
      | tee -a "$out/results.md"
  done
  if command -v h2o > /dev/null; then
    one h2o h2o -c "$out/h2o.conf" | tee -a "$out/results.md"
  fi
done
