#!/usr/bin/env python3
"""The cost of `--debox` (BENCHMARKS §8): one cached 1 KiB file, keep-alive, ampload on CPU 0
with 50 connections, the servers on CPU 1, three servers side by side: the build before
issue 10, this build without `--debox`, this build with it. Rounds interleave them (order
rotated each round). Each run records requests/s and the server's CPU time per request
(utime + stime of the whole process from /proc/PID/stat, 10 ms ticks), which a shared
machine moves less than throughput.

Usage: bench/scripts/debox_overhead.py BEFORE_AMPED THIS_AMPED OUT_DIR [--rounds N] [--secs S]
       [--ampload PATH]
Writes OUT_DIR/rounds.csv and OUT_DIR/summary.txt (medians, ranges, ratios to `off`).
"""
import argparse, csv, json, os, shutil, signal, socket, statistics, subprocess, sys, tempfile, time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def cpu_ticks(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])  # utime, stime (fields 14, 15)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("before"); ap.add_argument("this"); ap.add_argument("out")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--secs", type=float, default=5.0)
    ap.add_argument("--ampload", default=os.path.join(REPO, "target/release/ampload"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    www = tempfile.mkdtemp(prefix="debox-overhead-", dir="/var/tmp")
    os.chmod(www, 0o755)
    with open(os.path.join(www, "1k.bin"), "wb") as f:
        f.write(os.urandom(1024))
    builds = {"before": (a.before, []), "off": (a.this, []), "on": (a.this, ["--debox", "--stats-path", "/.s"])}
    procs = {}
    try:
        for name, (binary, extra) in builds.items():
            port = free_port()
            p = subprocess.Popen(["taskset", "-c", "1", binary, "--listen", f"127.0.0.1:{port}", *extra, www],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            procs[name] = (p, port)
        time.sleep(1.5)
        names = list(builds)
        rows = []
        for r in range(a.rounds):
            order = names[r % 3:] + names[:r % 3]
            for name in order:
                p, port = procs[name]
                t0 = cpu_ticks(p.pid)
                out = subprocess.run(["taskset", "-c", "0", a.ampload, "-c", "50", "-d", f"{a.secs}s",
                                      "--warmup", "1s", "--json", "--quiet", f"http://127.0.0.1:{port}/1k.bin"],
                                     capture_output=True, text=True)
                ticks = cpu_ticks(p.pid) - t0
                d = json.loads(out.stdout)
                # The warm-up's requests are not in d["requests"] but its CPU is in the ticks:
                # count its requests at the measured rate (1 s of warm-up).
                reqs = d["requests"] * (a.secs + 1.0) / a.secs
                row = {"round": r + 1, "server": name, "rps": round(d["rps"]),
                       "p50_ms": d["latency_us"]["p50"] / 1000, "p99_ms": d["latency_us"]["p99"] / 1000,
                       "cpu_us_per_req": round(ticks * 10000 / max(reqs, 1), 2),
                       "loadavg": open("/proc/loadavg").read().split()[0]}
                rows.append(row)
                print(row, flush=True)
    finally:
        for p, _ in procs.values():
            p.send_signal(signal.SIGTERM)
        for p, _ in procs.values():
            p.wait(10)
        shutil.rmtree(www, ignore_errors=True)
    with open(os.path.join(a.out, "rounds.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0])); w.writeheader(); w.writerows(rows)
    lines = []
    for field in ["rps", "cpu_us_per_req", "p50_ms", "p99_ms"]:
        for name in names:
            v = [x[field] for x in rows if x["server"] == name]
            lines.append(f"{field:15} {name:7} median {statistics.median(v):10.3f}  range {min(v):.3f}-{max(v):.3f}")
    for field in ["rps", "cpu_us_per_req"]:
        for name in ["before", "on"]:
            ratios = []
            for r in range(1, a.rounds + 1):
                get = lambda n: next(x[field] for x in rows if x["round"] == r and x["server"] == n)
                ratios.append(get(name) / get("off"))
            lines.append(f"{field:15} {name}/off per round: median {statistics.median(ratios):.3f}  range {min(ratios):.3f}-{max(ratios):.3f}")
    text = "\n".join(lines) + "\n"
    open(os.path.join(a.out, "summary.txt"), "w").write(text)
    print(text)


if __name__ == "__main__":
    sys.exit(main())
