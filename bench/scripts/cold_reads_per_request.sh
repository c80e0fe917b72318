#!/bin/bash
# How many disk reads one cold request costs: the page cache is dropped, then COUNT files of a
# data set that share no directory with each other are fetched one at a time (never two at
# once, so nothing merges or coalesces across requests), and the block device's own counters
# (/sys/block/DEV/stat: reads completed, reads merged, sectors) are read before and after.
# The floor is `cat` of the same files (open + read, nothing else); then amped with its
# defaults and nginx with a plain static config. Root (drop_caches); loopback only.
#
#   bench/scripts/cold_reads_per_request.sh OUT_DIR DATA_DIR [COUNT] [AMPED] [spread|dirs]
#
# `spread` (the default): one file per directory, so every request meets a new directory.
# `dirs`: every file of classes 0-2 of the first directories, in order, so most requests find
# their directory (and perhaps their inode's block) already read.
#
# Writes OUT_DIR/cold-reads.md (a table per run) and OUT_DIR/files.txt (the sample).
# docs/BENCHMARKS.md §3b, session 31: at a cold start under an IOPS cap, every server's
# latency is set by how many reads a cold request takes.
set -euo pipefail
out=${1:?usage: cold_reads_per_request.sh OUT_DIR DATA_DIR [COUNT] [AMPED]}
data=$(realpath "${2:?no data dir}")
count=${3:-200}
amped=${4:-target/release/amped}
mode=${5:-spread}
port=8097
mkdir -p "$out"
out=$(realpath "$out")
dev=$(lsblk -no pkname "$(df --output=source "$data" | tail -1)" 2>/dev/null | head -1)
[ -n "$dev" ] || dev=$(basename "$(df --output=source "$data" | tail -1)")
[ -e "/sys/block/$dev/stat" ] || { echo "cold_reads_per_request.sh: no /sys/block/$dev/stat" >&2; exit 1; }

files=$(find "$data" -mindepth 2 -maxdepth 2 -type f -name 'class[0-2]_*' | sort)
case $mode in
  # One file per directory, the class cycling: no two share a directory block.
  spread) awk -F/ -v n="$count" '{ d = $(NF-1) }
            d != last { last = d; k++; want = "class" (k % 3) "_5" }
            $NF == want { print; if (++m >= n) exit }' <<< "$files" > "$out/files.txt" || true ;;
  dirs) head -n "$count" <<< "$files" > "$out/files.txt" ;;
  *) echo "cold_reads_per_request.sh: mode is spread or dirs, not $mode" >&2; exit 2 ;;
esac
n=$(wc -l < "$out/files.txt")
warm=$(tail -n 1 <<< "$files")
[ "$n" -gt 0 ] || { echo "cold_reads_per_request.sh: no files found under $data" >&2; exit 1; }

stat_now() { awk '{ print $1, $2, $3 }' "/sys/block/$dev/stat"; }
cold() { sync; echo 3 > /proc/sys/vm/drop_caches; sleep 1; }
server=
stop() { [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null || true; server=; }
trap stop EXIT

measure() { # NAME FETCH
  local name=$1 fetch=$2
  cold
  # The fetcher's and the server's own code was dropped too: one fetch of a file outside the
  # sample reads it back before counting (its directory is not the sample's either).
  $fetch "$warm" > /dev/null
  read -r r0 m0 s0 < <(stat_now)
  while read -r f; do
    $fetch "$f" > /dev/null
  done < "$out/files.txt"
  read -r r1 m1 s1 < <(stat_now)
  local reads=$((r1 - r0)) merged=$((m1 - m0)) kb=$(((s1 - s0) / 2))
  printf '| %s | %d | %d | %d | %.2f | %.2f | %.1f |\n' "$name" "$n" "$reads" "$merged" \
    "$(echo "$reads / $n" | bc -l)" "$(echo "($reads + $merged) / $n" | bc -l)" \
    "$(echo "$kb / $n" | bc -l)" >> "$out/cold-reads.md"
}
url_of() { echo "http://127.0.0.1:$port/${1#"$data"/}"; }
fetch_cat() { cat "$1"; }
fetch_http() { curl -sf -o /dev/null "$(url_of "$1")"; }
wait_port() { for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/" && return; sleep 0.05; done; }

{
  echo "Device $dev, $n cold files ($mode) fetched one at a time, $(date -u +%FT%TZ)."
  echo
  echo "| who | files | reads | merged | reads per file | reads + merged per file | KB per file |"
  echo "|---|---:|---:|---:|---:|---:|---:|"
} > "$out/cold-reads.md"

measure cat fetch_cat

"$amped" "$data" --listen "127.0.0.1:$port" > "$out/amped.log" 2>&1 &
server=$!
wait_port
measure "amped (defaults)" fetch_http
stop

if command -v nginx > /dev/null; then
  mkdir -p "$out/nginx"
  rt=$(mktemp -d) # pid and temp directories, removed after
  cat > "$out/nginx/nginx.conf" <<EOF
user root;
worker_processes 1;
pid $rt/nginx.pid;
error_log $out/nginx/error.log warn;
daemon off;
events { worker_connections 1024; }
http {
    access_log off;
    sendfile on;
    open_file_cache max=10000 inactive=60s;
    client_body_temp_path $rt/body;
    proxy_temp_path $rt/proxy;
    fastcgi_temp_path $rt/fastcgi;
    uwsgi_temp_path $rt/uwsgi;
    scgi_temp_path $rt/scgi;
    server { listen 127.0.0.1:$port; root $data; }
}
EOF
  nginx -c "$out/nginx/nginx.conf" &
  server=$!
  wait_port
  measure nginx fetch_http
  stop
  rm -rf "$rt"
fi
# What a blkio IOPS cap charges for the same reads (the lab's `iops` model): the throttle
# counts each bio as it is submitted, before the block layer merges neighbours into requests.
cg=/sys/fs/cgroup/blkio/cold-reads-$$
if [ -d /sys/fs/cgroup/blkio ] && mkdir "$cg" 2> /dev/null; then
  cold
  cat "$warm" > /dev/null
  read -r r0 m0 s0 < <(stat_now)
  bash -c "echo \$\$ > $cg/cgroup.procs; while read -r f; do cat \"\$f\" > /dev/null; done < $out/files.txt"
  read -r r1 m1 s1 < <(stat_now)
  major_minor=$(cat "/sys/block/$dev/dev")
  charged=$(awk -v d="$major_minor" '$1 == d && $2 == "Read" { print $3 }' "$cg/blkio.throttle.io_serviced")
  rmdir "$cg"
  {
    echo
    echo "The same \`cat\` in a blkio cgroup: the device completed $((r1 - r0)) reads ($((m1 - m0)) merged" \
      "into them); the throttle counted ${charged:-?} (what an IOPS cap of the lab's \`iops\` model charges)."
  } >> "$out/cold-reads.md"
fi
cat "$out/cold-reads.md"
