#!/usr/bin/env python3
"""Disk-bound latency at a fixed request rate: amped (amped, sped) vs nginx, h2o, lighttpd.

The papers' disk is emulated (needs root and cgroup v1): each server runs in a memory cgroup
(`memory.limit_in_bytes`, default 128 MiB, which also bounds its page cache) and a blkio cgroup
(`blkio.throttle.read_iops_device`, default 300 reads/s on the disk holding the data). The page
cache is dropped before each server, which is then warmed up at the offered rate and measured
with ampload in open loop (latency from the intended send time), over persistent connections,
on a SPECweb99-like file set with a Zipf trace (bench/fileset.py).

Usage (root, after `cargo build --release`):
    python3 bench/disk_bound.py --dataset-mb 2048 --rate 1000 --connections 1020
Writes bench/runs/<date>-disk-bound/{raw.csv,summary.md,setup.txt}.
"""
import argparse, csv, datetime, json, os, platform, shutil, statistics, subprocess, sys, tempfile, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fileset
from single_file import free_port, wait_port, server_cmd, REPO, HERE

CG = "amped-bench"

def cgroup_setup(mem_bytes, iops, dev):
    mem = f"/sys/fs/cgroup/memory/{CG}"; blk = f"/sys/fs/cgroup/blkio/{CG}"
    os.makedirs(mem, exist_ok=True); os.makedirs(blk, exist_ok=True)
    open(f"{mem}/memory.limit_in_bytes", "w").write(str(mem_bytes))
    open(f"{blk}/blkio.throttle.read_iops_device", "w").write(f"{dev} {iops}")
    return mem, blk

def disk_of(path):
    st = os.stat(path)
    major, minor = os.major(st.st_dev), os.minor(st.st_dev)
    # A partition's throttle must name the whole disk.
    sysfs = f"/sys/dev/block/{major}:{minor}"
    if os.path.exists(os.path.join(sysfs, "partition")):
        parent = os.path.basename(os.path.dirname(os.path.realpath(sysfs)))
        major, minor = open(f"/sys/class/block/{parent}/dev").read().strip().split(":")
    return f"{major}:{minor}"

def drop_caches():
    subprocess.run(["sync"], check=True)
    open("/proc/sys/vm/drop_caches", "w").write("3\n")

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--servers", default="amped/amped/--helpers=16,amped/sped,nginx,h2o,lighttpd")
    ap.add_argument("--dataset-mb", type=int, default=2048)
    ap.add_argument("--data-dir", default="/var/tmp/amped-diskbound")
    ap.add_argument("--memory-mb", type=int, default=128)
    ap.add_argument("--read-iops", type=int, default=300)
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--connections", type=int, default=1020)
    ap.add_argument("--warmup", type=int, default=15)
    ap.add_argument("--duration", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--server-cpu", type=int, default=1)
    ap.add_argument("--client-cpu", type=int, default=0)
    ap.add_argument("--amped", default=os.path.join(REPO, "target/release/amped"))
    ap.add_argument("--ampload", default=os.path.join(REPO, "target/release/ampload"))
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("disk_bound.py: needs root (cgroups and drop_caches)")
    servers = [s for s in a.servers.split(",") if s]
    root = os.path.join(a.data_dir, "root")
    os.makedirs(root, exist_ok=True)
    print(f"file set: {a.dataset_mb} MB under {root} …", flush=True)
    n_dirs = fileset.make_fileset(root, a.dataset_mb * 1_000_000)
    trace = fileset.make_trace(n_dirs, a.rate * (a.warmup + a.duration) * 2, seed=7)
    work = tempfile.mkdtemp(prefix="amped-disk-")
    trace_file = os.path.join(work, "trace.txt")
    open(trace_file, "w").write("\n".join(trace) + "\n")
    dev = disk_of(root)
    mem, blk = cgroup_setup(a.memory_mb << 20, a.read_iops, dev)
    rows = []
    try:
        for r in range(a.rounds):
            order = servers[r % len(servers):] + servers[:r % len(servers)]
            for s in order:
                rows.append(run_one(a, s, root, work, trace_file, mem, blk, r))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report(a, servers, rows, dev, n_dirs)

def run_one(a, s, root, work, trace_file, mem, blk, r):
    port = free_port()
    argv = server_cmd(s, root, port, work, a.amped)
    drop_caches()
    inner = " ".join(f"'{x}'" for x in ["taskset", "-c", str(a.server_cpu), *argv])
    sh = f"echo $$ > {mem}/cgroup.procs && echo $$ > {blk}/cgroup.procs && exec {inner}"
    proc = subprocess.Popen(["sh", "-c", sh], stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, s.replace("/", "_") + ".stderr"), "a"))
    try:
        wait_port(port, proc)
        cmd = ["taskset", "-c", str(a.client_cpu), a.ampload, f"http://127.0.0.1:{port}", "--urls", trace_file,
               "--rate", str(a.rate), "--connections", str(a.connections), "--warmup", f"{a.warmup}s",
               "--duration", f"{a.duration}s", "--timeout", "30s", "--json", "--quiet"]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.warmup + a.duration + 120)
        if p.returncode not in (0, 1) or not p.stdout.strip():
            raise RuntimeError(f"ampload failed ({p.returncode}): {p.stderr.strip()}")
        j = json.loads(p.stdout)
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill(); proc.wait()
    lat = j["latency_us"]
    row = {"round": r, "server": s, "achieved_rps": j.get("rps"), "ok": j.get("ok"), "errors": sum(j.get("errors", {}).values()),
           "p5_ms": lat["p5"] / 1000, "p50_ms": lat["p50"] / 1000, "p95_ms": lat["p95"] / 1000,
           "p99_ms": lat["p99"] / 1000, "mean_ms": lat["mean"] / 1000, "max_ms": lat["max"] / 1000}
    print(f"round {r+1} {s:50s} p50 {row['p50_ms']:8.2f} ms  p95 {row['p95_ms']:9.2f} ms  mean {row['mean_ms']:8.2f} ms  "
          f"{row['achieved_rps']:.0f} req/s  errors {row['errors']}", flush=True)
    return row

def report(a, servers, rows, dev, n_dirs):
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    out = a.out or os.path.join(HERE, "runs", f"{date}-disk-bound")
    os.makedirs(out, exist_ok=True)
    keys = list(rows[0].keys())
    with open(os.path.join(out, "raw.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys); w.writeheader(); w.writerows(rows)
    cols = ["p5_ms", "p50_ms", "p95_ms", "p99_ms", "mean_ms", "achieved_rps", "errors"]
    med = {s: {c: statistics.median([x[c] for x in rows if x["server"] == s]) for c in cols} for s in servers}
    lines = ["# Disk-bound latency at a fixed rate (medians over rounds)", "",
             f"Command: `python3 bench/disk_bound.py --servers {','.join(servers)} --dataset-mb {a.dataset_mb} "
             f"--memory-mb {a.memory_mb} --read-iops {a.read_iops} --rate {a.rate} --connections {a.connections} "
             f"--warmup {a.warmup} --duration {a.duration} --rounds {a.rounds}`", "",
             f"SPECweb99-like set of {n_dirs} directories (~{a.dataset_mb} MB), Zipf trace; each server in a memory cgroup "
             f"of {a.memory_mb} MiB and a blkio cgroup throttled to {a.read_iops} reads/s on {dev}; page cache dropped before "
             f"each server; {a.warmup} s warm-up then {a.duration} s measured at {a.rate} req/s over {a.connections} "
             f"keep-alive connections (ampload open loop, latency from the intended send time). Server on CPU "
             f"{a.server_cpu}, ampload on CPU {a.client_cpu}.", "",
             "| server | p5 ms | p50 ms | p95 ms | p99 ms | mean ms | req/s | errors |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for s in servers:
        m = med[s]
        lines.append(f"| {s} | {m['p5_ms']:.2f} | {m['p50_ms']:.2f} | {m['p95_ms']:.1f} | {m['p99_ms']:.1f} | "
                     f"{m['mean_ms']:.1f} | {m['achieved_rps']:.0f} | {m['errors']:.0f} |")
    peers = [s for s in servers if not s.startswith("amped")]
    if peers:
        best95 = min(med[p]["p95_ms"] for p in peers); bestmean = min(med[p]["mean_ms"] for p in peers)
        lines += ["", f"Best peer p95 {best95:.1f} ms, best peer mean {bestmean:.1f} ms.", ""]
        for s in servers:
            if s.startswith("amped"):
                lines.append(f"- {s}: p95 {best95 / max(med[s]['p95_ms'], 1e-3):.1f}× lower, mean "
                             f"{bestmean / max(med[s]['mean_ms'], 1e-3):.1f}× lower than the best peer")
    open(os.path.join(out, "summary.md"), "w").write("\n".join(lines) + "\n")
    open(os.path.join(out, "setup.txt"), "w").write(
        f"date: {datetime.datetime.now(datetime.timezone.utc).isoformat()}\nkernel: {platform.release()}\n"
        f"argv: {' '.join(sys.argv)}\n")
    print("\n".join(lines)); print(f"\nwritten to {out}")

if __name__ == "__main__":
    main()
