#!/bin/bash
# Cached 1 KiB and 100 KiB keep-alive over HTTPS: amped against nginx, both also over plain
# HTTP (what TLS costs each), interleaved rounds, servers pinned to CPU 1, wrk to CPU 0.
# Both speak TLS 1.3 with TLS_AES_256_GCM_SHA384 to wrk (OpenSSL's first choice; each
# server follows the client's order) and one self-signed P-256 ECDSA certificate.
# Besides requests a second (which other work on a shared machine moves a lot), each run
# records the server's CPU time (utime + stime of the process and its children, from /proc)
# per request: what serving a request costs, much less sensitive to the machine's load.
# On a machine shared with other work, NICE=-5 (as root) gives servers and wrk the edge over
# niced builds.
# usage: [NICE=N] tls_vs_nginx.sh AMPED_BIN OUT_DIR [ROUNDS] [SECONDS] [CONNECTIONS]
set -euo pipefail
PRIO="nice -n ${NICE:-0}"
AMPED=$1; OUT=$2; ROUNDS=${3:-5}; SECS=${4:-8}; CONNS=${5:-50}
mkdir -p "$OUT"
WORK=$(mktemp -d /var/tmp/tls-bench.XXXX); chmod 755 "$WORK"
WWW=$WORK/www; mkdir -p "$WWW" "$WORK/nginx"
head -c 1024 /dev/urandom > "$WWW/1k.bin"; head -c 102400 /dev/urandom > "$WWW/100k.bin"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 7 \
  -subj /CN=localhost -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>/dev/null

# nginx: the lab's peer configuration (crates/lab/peers/nginx.conf.in: one worker, sendfile,
# open_file_cache, no access log) plus an HTTPS server on the same root.
cat > "$WORK/nginx/nginx.conf" <<EOF
worker_processes  1;
worker_rlimit_nofile 20000;
pid        $WORK/nginx/nginx.pid;
error_log  $WORK/nginx/error.log warn;
daemon off;
events { worker_connections 16384; }
http {
    include       /etc/nginx/mime.types;
    default_type  application/octet-stream;
    access_log    off;
    sendfile      on;
    tcp_nopush    on;
    tcp_nodelay   on;
    keepalive_timeout  65;
    keepalive_requests 1000000;
    open_file_cache          max=10000 inactive=60s;
    open_file_cache_valid    60s;
    open_file_cache_min_uses 1;
    server_tokens off;
    client_body_temp_path $WORK/nginx/client_body;
    proxy_temp_path $WORK/nginx/proxy_temp;
    fastcgi_temp_path $WORK/nginx/fastcgi_temp;
    uwsgi_temp_path $WORK/nginx/uwsgi_temp;
    scgi_temp_path $WORK/nginx/scgi_temp;
    ssl_certificate     $WORK/cert.pem;
    ssl_certificate_key $WORK/key.pem;
    ssl_protocols       TLSv1.3;
    ssl_session_cache   shared:SSL:1m;
    server { listen 127.0.0.1:18091 backlog=4096; root $WWW; }
    server { listen 127.0.0.1:18444 ssl backlog=4096; root $WWW; }
}
EOF
cp "$WORK/nginx/nginx.conf" "$OUT/nginx.conf"

$PRIO taskset -c 1 nginx -c "$WORK/nginx/nginx.conf" >/dev/null 2>&1 & NGINX=$!
$PRIO taskset -c 1 "$AMPED" --allow-root --listen 127.0.0.1:18090 "$WWW" >/dev/null 2>&1 & PLAIN=$!
$PRIO taskset -c 1 "$AMPED" --allow-root --listen 127.0.0.1:18443 \
  --tls-cert "$WORK/cert.pem" --tls-key "$WORK/key.pem" "$WWW" >/dev/null 2>&1 & TLS=$!
trap 'kill $NGINX $PLAIN $TLS 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"' EXIT
sleep 1

# What each TLS server negotiates with an OpenSSL client (recorded with the run).
for port in 18443 18444; do
  echo "port $port: $(openssl s_client -connect 127.0.0.1:$port -alpn http/1.1 </dev/null 2>/dev/null \
    | grep -E '^(New|Protocol|ALPN)' | tr '\n' ' ')"
done > "$OUT/negotiated.txt"
cat "$OUT/negotiated.txt"

# CPU ticks (1/100 s) used so far by the processes $@ and their children.
ticks() {
  python3 - "$@" <<'PY'
import os, sys
total = 0
for pid in sys.argv[1:]:
    kids = open(f"/proc/{pid}/task/{pid}/children").read().split()
    for p in [pid] + kids:
        f = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
        total += int(f[11]) + int(f[12])
print(total)
PY
}
pid_of() { case $1 in amped-tls) echo $TLS;; amped-plain) echo $PLAIN;; *) echo $NGINX;; esac; }

SERVERS="amped-tls:https://127.0.0.1:18443 nginx-tls:https://127.0.0.1:18444 amped-plain:http://127.0.0.1:18090 nginx-plain:http://127.0.0.1:18091"
echo "round,server,file,rps,mbps,p50_ms,p99_ms,cpu_us_per_req" > "$OUT/results.csv"
for r in $(seq 1 "$ROUNDS"); do
  order=$SERVERS
  [ $((r % 2)) -eq 0 ] && order=$(echo "$SERVERS" | tr ' ' '\n' | tac | tr '\n' ' ')
  for f in 1k.bin 100k.bin; do
    for s in $order; do
      name=${s%%:*}; url=${s#*:}
      t0=$(ticks "$(pid_of "$name")")
      $PRIO taskset -c 0 wrk -t1 -c"$CONNS" -d"${SECS}s" --latency "$url/$f" > "$OUT/r$r-$name-$f.txt"
      t1=$(ticks "$(pid_of "$name")")
      python3 - "$r" "$name" "$f" "$OUT/r$r-$name-$f.txt" $((t1 - t0)) >> "$OUT/results.csv" <<'PY'
import re, sys
t = open(sys.argv[4]).read()
def ms(v, u):
    return float(v) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[u]
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", t).group(1))
tr = re.search(r"Transfer/sec:\s+([\d.]+)(\w+)", t)
mb = float(tr.group(1)) * {"B": 1 / 2**20, "KB": 1 / 1024, "MB": 1, "GB": 1024}[tr.group(2)] * 8 * 1.048576
p = {k: ms(v, u) for k, v, u in re.findall(r"^\s+(50|99)%\s+([\d.]+)(us|ms|s)\s*$", t, re.M)}
errs = re.search(r"Non-2xx or 3xx responses: (\d+)|Socket errors: (.*)", t)
if errs:
    print(f"# {sys.argv[2]} {sys.argv[3]} round {sys.argv[1]}: {errs.group(0)}", file=sys.stderr)
n = int(re.search(r"(\d+) requests in", t).group(1))
cpu_us = int(sys.argv[5]) * 10_000 / max(n, 1)
print(f"{sys.argv[1]},{sys.argv[2]},{sys.argv[3]},{rps:.0f},{mb:.1f},{p['50']:.3f},{p['99']:.3f},{cpu_us:.1f}")
PY
    done
  done
done
python3 - "$OUT/results.csv" > "$OUT/summary.txt" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print("server        file      median rps   min..max rps      median p50 ms  median p99 ms  median CPU µs/req (min..max)")
for f in ["1k.bin", "100k.bin"]:
    for s in ["amped-tls", "nginx-tls", "amped-plain", "nginx-plain"]:
        # A run in which wrk completed nothing (the machine stalled it) is left out, and counted.
        r = [x for x in rows if x["server"] == s and x["file"] == f and float(x["rps"]) > 0]
        failed = sum(1 for x in rows if x["server"] == s and x["file"] == f) - len(r)
        rps = sorted(float(x["rps"]) for x in r)
        p50 = statistics.median(float(x["p50_ms"]) for x in r)
        p99 = statistics.median(float(x["p99_ms"]) for x in r)
        cpu = sorted(float(x["cpu_us_per_req"]) for x in r)
        print(f"{s:13} {f:9} {statistics.median(rps):10.0f}   {rps[0]:7.0f}..{rps[-1]:<7.0f}  {p50:12.3f}  {p99:12.3f}"
              f"  {statistics.median(cpu):8.1f} ({cpu[0]:.1f}..{cpu[-1]:.1f})"
              + (f"  [{failed} run(s) with no request left out]" if failed else ""))
PY
cat "$OUT/summary.txt"
