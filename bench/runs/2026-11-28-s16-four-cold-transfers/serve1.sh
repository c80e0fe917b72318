#!/bin/bash
# serve1.sh FILE [AMPED OPTS...]: start amped over /var/tmp/s16 on :18080, fetch FILE once, stop.
f=$1; shift
${AMPED:-/work/bin-s16/amped} --listen 127.0.0.1:18080 --allow-root --error-log off "$@" /var/tmp/s16 &
p=$!
for i in $(seq 50); do curl -s -o /dev/null http://127.0.0.1:18080/nonexistent && break; sleep 0.05; done
curl -s -o /dev/null http://127.0.0.1:18080/$f
kill $p; wait $p 2>/dev/null
