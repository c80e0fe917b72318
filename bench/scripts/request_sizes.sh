#!/bin/bash
# The sizes of the read requests a block device is given while a command runs, by the thread
# that issued them (the kernel's block_rq_issue trace event; root, tracefs). Under a blkio IOPS
# cap every request counts as one read whatever its size, so this says who spends the cap on
# what (docs/BENCHMARKS.md §3b, session 15).
#
#   bench/scripts/request_sizes.sh OUT_DIR COMMAND [ARGS...]
#
# Writes OUT_DIR/requests.trace (the raw events) and OUT_DIR/requests.md (per thread name:
# requests, MB, KB per request, and the count per size class). Requests dispatched by the
# throttle or the block layer's own workers show as kworker threads.
set -euo pipefail
out=${1:?usage: request_sizes.sh OUT_DIR COMMAND [ARGS...]}
shift
[ $# -gt 0 ] || { echo "request_sizes.sh: no command" >&2; exit 2; }
t=/sys/kernel/tracing
[ -e "$t/events/block/block_rq_issue/enable" ] || t=/sys/kernel/debug/tracing
[ -e "$t/events/block/block_rq_issue/enable" ] || { echo "request_sizes.sh: no tracefs" >&2; exit 1; }
mkdir -p "$out"
reader=
cleanup() {
  echo 0 > "$t/tracing_on"
  echo 0 > "$t/events/block/block_rq_issue/enable"
  [ -n "$reader" ] && kill "$reader" 2>/dev/null || true
}
trap cleanup EXIT
echo 0 > "$t/tracing_on"
echo > "$t/trace"
echo 65536 > "$t/buffer_size_kb"
echo 1 > "$t/events/block/block_rq_issue/enable"
cat "$t/trace_pipe" > "$out/requests.trace" &
reader=$!
echo 1 > "$t/tracing_on"
status=0
"$@" || status=$?
sleep 1
cleanup
reader=
python3 - "$out/requests.trace" > "$out/requests.md" <<'PY'
import collections, re, sys
classes = [(16 << 10, "≤16K"), (128 << 10, "≤128K"), (1 << 20, "≤1M"), (2 << 20, "≤2M"), (1 << 62, ">2M")]
count, size, by = collections.Counter(), collections.Counter(), collections.defaultdict(collections.Counter)
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r"block_rq_issue: \S+ (\S+) (\d+) \(\) \d+ \+ \d+ .*\[(.*)\]$", line)
    if not m or "R" not in m.group(1):
        continue
    b, who = int(m.group(2)), re.sub(r"[-_:]?\d+[A-Z]?$", "", m.group(3))
    count[who] += 1
    size[who] += b
    by[who][next(name for top, name in classes if b <= top)] += 1
print("| thread | requests | MB | KB per request | " + " | ".join(n for _, n in classes) + " |")
print("|---|---:|---:|---:|" + "---:|" * len(classes))
for who in sorted(count, key=lambda w: -size[w]):
    cells = " | ".join(str(by[who][n]) for _, n in classes)
    print(f"| {who} | {count[who]} | {size[who] / 1e6:.0f} | {size[who] / count[who] / 1e3:.0f} | {cells} |")
PY
cat "$out/requests.md"
exit "$status"
