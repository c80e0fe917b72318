#!/usr/bin/env python3
"""What `perf trace` costs a peer: nginx (amplab's config, one worker) on CPU 1, one cached
1 KiB file, ampload keep-alive on CPU 0, rounds alternating untraced and traced with the
flags amplab's outside profile uses (crates/lab/src/experiments/outside_profile.rs).

Usage: sudo bench/scripts/perf_trace_overhead.py OUT_DIR [--rounds N] [--secs S] [--ampload PATH]
Writes OUT_DIR/rounds.csv and prints medians and ranges. Needs root (perf trace -p).
"""
import argparse, csv, json, os, shutil, signal, socket, statistics, subprocess, sys, tempfile, time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PERF = ["perf", "trace", "-S", "--syscalls", "-e", "sched:sched_switch",
        "--filter", "prev_state == 1 || prev_state == 2", "--duration", "1"]


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--secs", type=float, default=3.0)
    ap.add_argument("--ampload", default=os.path.join(REPO, "target/release/ampload"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="perf-overhead-")
    root = os.path.join(work, "www"); os.makedirs(root)
    with open(os.path.join(root, "one.bin"), "wb") as f:
        f.write(os.urandom(1024))
    port = free_port()
    conf = open(os.path.join(REPO, "crates/lab/peers/nginx.conf.in")).read()
    for k, v in {"@USER@": "user root;", "@DIR@": work, "@ADDR@": f"127.0.0.1:{port}",
                 "@ROOT@": root, "@MAIN@": "", "@EXTRA@": ""}.items():
        conf = conf.replace(k, v)
    open(os.path.join(work, "nginx.conf"), "w").write(conf)
    nginx = subprocess.Popen(["taskset", "-c", "1", "nginx", "-p", work, "-e",
                              os.path.join(work, "startup.log"), "-c", os.path.join(work, "nginx.conf")],
                             start_new_session=True)
    time.sleep(1.0)
    pids = subprocess.run(["pgrep", "-g", str(nginx.pid)], capture_output=True, text=True).stdout.split()
    url = f"http://127.0.0.1:{port}/one.bin"
    rows = []
    try:
        for r in range(a.rounds):
            for traced in ([False, True] if r % 2 == 0 else [True, False]):
                perf = None
                if traced:
                    perf = subprocess.Popen(PERF + ["-p", ",".join(pids), "-o", os.path.join(work, "t.txt")],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    time.sleep(0.5)
                out = subprocess.run(["taskset", "-c", "0", a.ampload, "-c", "50", "-d", f"{a.secs}s",
                                      "--json", "--quiet", url], capture_output=True, text=True)
                if perf:
                    perf.send_signal(signal.SIGINT); perf.wait(60)
                d = json.loads(out.stdout)
                rows.append({"round": r, "traced": traced, "rps": d["rps"],
                             "p50_ms": d["latency_us"]["p50"] / 1000,
                             "loadavg": open("/proc/loadavg").read().split()[0]})
                print(rows[-1], flush=True)
    finally:
        os.killpg(nginx.pid, signal.SIGTERM); nginx.wait(10)
        shutil.rmtree(work, ignore_errors=True)
    with open(os.path.join(a.out, "rounds.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0])); w.writeheader(); w.writerows(rows)
    off = [x["rps"] for x in rows if not x["traced"]]
    on = [x["rps"] for x in rows if x["traced"]]
    ratios = [b / a_ for a_, b in zip(off, on)]
    print(f"untraced req/s: median {statistics.median(off):.0f} (range {min(off):.0f}-{max(off):.0f})")
    print(f"traced   req/s: median {statistics.median(on):.0f} (range {min(on):.0f}-{max(on):.0f})")
    print(f"traced/untraced per round: median {statistics.median(ratios):.2f} (range {min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    sys.exit(main())
