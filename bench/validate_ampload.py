#!/usr/bin/env python3
"""Validates ampload against load generators nobody here wrote (issue 4's benchmark).

One amped server (`--arch sped`, pinned to --server-cpu) serves a 1 KiB file; each round runs,
interleaved and pinned to --client-cpu (one core each):
  * closed loop, keep-alive, 50 connections: wrk -t1 vs ampload -t1 (req/s);
  * one request per connection: ab -n N -c 50 -H 'Connection: close' vs ampload --close (conn/s);
  * fixed rate with latency correction: oha -q R --latency-correction vs ampload --rate R
    (p50/p90/p99 latency).
Prints medians and ratios and writes them to bench/runs/<date>-ampload-validation/.

Usage (from the repo root, after `cargo build --release -p amped -p ampload`; needs wrk, ab and
oha — `cargo install oha`):  python3 bench/validate_ampload.py --rounds 5
"""
import argparse, datetime, json, os, re, shutil, socket, statistics, subprocess, sys, tempfile, time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def run(cmd, timeout=120):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{cmd[3]} failed: {p.stderr.strip()[:300]}")
    return p.stdout

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--close-requests", type=int, default=20000)
    ap.add_argument("--rate", type=int, default=5000)
    ap.add_argument("--server-cpu", type=int, default=1)
    ap.add_argument("--client-cpu", type=int, default=0)
    a = ap.parse_args()
    oha = shutil.which("oha") or os.path.expanduser("~/.cargo/bin/oha")
    for tool in ["wrk", "ab", oha]:
        if not shutil.which(tool) and not os.path.exists(tool):
            sys.exit(f"validate_ampload.py: {tool} is not installed")
    amped = os.path.join(REPO, "target/release/amped"); ampload = os.path.join(REPO, "target/release/ampload")
    root = tempfile.mkdtemp(prefix="ampload-val-")
    os.chmod(root, 0o755)
    open(os.path.join(root, "f1k.bin"), "wb").write(os.urandom(1024))
    port = free_port(); url = f"http://127.0.0.1:{port}/f1k.bin"
    server = subprocess.Popen(["taskset", "-c", str(a.server_cpu), amped, "--arch", "sped", "--listen", f"127.0.0.1:{port}", root],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pin = ["taskset", "-c", str(a.client_cpu)]
    res = {k: [] for k in ["wrk_rps", "ampload_rps", "ab_cps", "ampload_cps", "oha_p50", "oha_p90", "oha_p99",
                           "ampload_p50", "ampload_p90", "ampload_p99", "oha_rps", "ampload_rate_rps"]}
    try:
        time.sleep(0.5)
        d = str(a.duration)
        for r in range(a.rounds):
            out = run(pin + ["wrk", "-t1", "-c50", f"-d{d}s", url])
            res["wrk_rps"].append(float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)))
            j = json.loads(run(pin + [ampload, url, "-t", "1", "-c", "50", "-d", f"{d}s", "--json", "--quiet"]))
            res["ampload_rps"].append(j["rps"])
            out = run(pin + ["ab", "-q", "-n", str(a.close_requests), "-c", "50", "-H", "Connection: close", url])
            res["ab_cps"].append(float(re.search(r"Requests per second:\s+([\d.]+)", out).group(1)))
            j = json.loads(run(pin + [ampload, url, "--close", "-c", "50", "-n", str(a.close_requests), "--json", "--quiet"]))
            res["ampload_cps"].append(j["conn_per_s"])
            o = json.loads(run(pin + [oha, "-z", f"{d}s", "-c", "50", "-q", str(a.rate), "--latency-correction", "--no-tui",
                                      "--output-format", "json", url]))
            for q, k in [("p50", "p50"), ("p90", "p90"), ("p99", "p99")]:
                res[f"oha_{q}"].append(o["latencyPercentiles"][k] * 1e3)
            res["oha_rps"].append(o["summary"]["requestsPerSec"])
            j = json.loads(run(pin + [ampload, url, "-c", "50", "--rate", str(a.rate), "-d", f"{d}s", "--json", "--quiet"]))
            for q in ["p50", "p90", "p99"]:
                res[f"ampload_{q}"].append(j["latency_us"][q] / 1e3)
            res["ampload_rate_rps"].append(j["rps"])
            print(f"round {r + 1}/{a.rounds}: " + ", ".join(f"{k} {v[-1]:.3g}" for k, v in res.items()), flush=True)
    finally:
        server.terminate(); server.wait()
        shutil.rmtree(root, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in res.items()}
    lines = ["# ampload validation (medians over rounds)", "",
             f"Command: `python3 bench/validate_ampload.py --rounds {a.rounds} --duration {a.duration} "
             f"--close-requests {a.close_requests} --rate {a.rate}`", "",
             f"amped --arch sped on CPU {a.server_cpu}, 1 KiB file; every generator on CPU {a.client_cpu}, one thread, "
             f"50 connections; {a.rounds} interleaved rounds.", "",
             "| measure | reference | ampload | ratio |", "|---|---:|---:|---:|",
             f"| closed loop keep-alive req/s (wrk) | {med['wrk_rps']:.0f} | {med['ampload_rps']:.0f} | {med['ampload_rps'] / med['wrk_rps']:.2f} |",
             f"| one request per connection, conn/s (ab) | {med['ab_cps']:.0f} | {med['ampload_cps']:.0f} | {med['ampload_cps'] / med['ab_cps']:.2f} |",
             f"| fixed rate {a.rate}/s: achieved req/s (oha) | {med['oha_rps']:.0f} | {med['ampload_rate_rps']:.0f} | {med['ampload_rate_rps'] / med['oha_rps']:.2f} |"]
    for q in ["p50", "p90", "p99"]:
        lines.append(f"| fixed rate {a.rate}/s: {q} latency ms (oha --latency-correction) | {med['oha_' + q]:.3f} | "
                     f"{med['ampload_' + q]:.3f} | {med['ampload_' + q] / med['oha_' + q]:.2f} |")
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    out = os.path.join(REPO, "bench", "runs", f"{date}-ampload-validation")
    os.makedirs(out, exist_ok=True)
    open(os.path.join(out, "summary.md"), "w").write("\n".join(lines) + "\n")
    json.dump(res, open(os.path.join(out, "raw.json"), "w"), indent=1)
    print("\n".join(lines)); print(f"\nwritten to {out}")

if __name__ == "__main__":
    main()
