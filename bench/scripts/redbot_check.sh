#!/bin/bash
# Runs REDbot (https://redbot.org, from PyPI) against amped with the response-header options
# on (pre-compressed variants, Cache-Control rules, CORS, security headers, a custom 404 page)
# and lists every note REDbot rates BAD or WARN. Loopback only; stops by itself.
# usage: bench/scripts/redbot_check.sh [AMPED_BINARY] [OUT_DIR]
set -euo pipefail
AMPED=${1:-target/release/amped}
OUT=${2:-bench/runs/$(date +%F)-redbot}
VENV=${REDBOT_VENV:-/tmp/redbot-venv}
[ -x "$VENV/bin/redbot" ] || { python3 -m venv "$VENV" && "$VENV/bin/pip" install -q redbot; }
mkdir -p "$OUT"
W=$(mktemp -d /var/tmp/redbot-www.XXXX)
mkdir -p "$W/assets" "$W/docs"
echo '<!doctype html><html><head><title>t</title></head><body><a href="/assets/app.3f2a.js">x</a></body></html>' > "$W/index.html"
head -c 5000 /dev/urandom | base64 > "$W/assets/app.3f2a.js"
gzip -k "$W/assets/app.3f2a.js"
echo "plain text" > "$W/docs/readme.txt"
echo "<h1>not found</h1>" > "$W/404.html"
chmod -R a+rX "$W"
PORT=18555
ARGS=(--listen 127.0.0.1:$PORT --precompressed br,zst,gz
      --cache-control '/assets/*=max-age=31536000, immutable' --cors-origin '*'
      --security-headers --error-page 404=/404.html --allow-root "$W")
"$AMPED" "${ARGS[@]}" > "$OUT/amped.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; rm -rf "$W"' EXIT
sleep 1
echo "amped ${ARGS[*]}" > "$OUT/command.txt"
: > "$OUT/summary.txt"
for u in / /assets/app.3f2a.js /docs/readme.txt /missing /docs; do
  n=$(echo "$u" | tr '/' '_')
  timeout 60 "$VENV/bin/redbot" -o har "http://127.0.0.1:$PORT$u" > "$OUT/har$n.json"
  python3 - "$OUT/har$n.json" "$u" >> "$OUT/summary.txt" <<'PY'
import json, sys
notes = []
def walk(o):
    if isinstance(o, dict):
        if "level" in o and "note_id" in o:
            notes.append((o["level"], o["note_id"], o.get("summary", "")))
        for v in o.values():
            walk(v)
    elif isinstance(o, list):
        for v in o:
            walk(v)
walk(json.load(open(sys.argv[1])))
flagged = [n for n in notes if n[0] in ("BAD", "WARN")]
print(f"{sys.argv[2]}: {len(notes)} notes, BAD {sum(n[0] == 'BAD' for n in notes)}, WARN {len(flagged) - sum(n[0] == 'BAD' for n in notes)}")
for level, note, summary in flagged:
    print(f"  {level} {note}: {summary}")
PY
done
cat "$OUT/summary.txt"
