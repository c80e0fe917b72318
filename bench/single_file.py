#!/usr/bin/env python3
"""Single-file throughput, amped vs peers, side by side.

Each round starts every server in turn (pinned to --server-cpu), drives it with wrk (pinned to
--client-cpu) on each workload, stops it, and moves on; the server order rotates every round so
no server always runs first or last. Reports medians over rounds and ratios to the best peer.

Usage (from the repo root, after `cargo build --release`):
    python3 bench/single_file.py --rounds 5 --duration 5
Writes bench/runs/<date>-single-file/{raw.csv,summary.md,setup.txt}.
"""
import argparse, csv, datetime, os, platform, re, shutil, socket, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def wait_port(port, proc, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close(); return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("server did not open its port")

def render(template, out, **kw):
    text = open(os.path.join(HERE, "peers", template)).read()
    for k, v in kw.items():
        text = text.replace("@" + k + "@", str(v))
    open(out, "w").write(text)

def server_cmd(name, root, port, work, amped_bin):
    """Command line for one server under test; returns (argv, cwd)."""
    if name.startswith("amped"):
        # amped/<arch>[/<flag>[=<value>]]... e.g. amped/amped/--helpers=16
        parts = name.split("/")
        arch = parts[1] if len(parts) > 1 else "amped"
        return [amped_bin, "--arch", arch, "--listen", f"127.0.0.1:{port}", *parts[2:], root]
    if name == "nginx":
        conf = os.path.join(work, "nginx.conf")
        render("nginx.conf.in", conf, DIR=work, ADDR=f"127.0.0.1:{port}", ROOT=root, EXTRA="")
        return ["nginx", "-p", work, "-c", conf]
    if name == "h2o":
        conf = os.path.join(work, "h2o.conf")
        user = "user: root" if os.geteuid() == 0 else ""
        render("h2o.conf.in", conf, DIR=work, HOST="127.0.0.1", PORT=port, ROOT=root, USER=user)
        return ["h2o", "-c", conf]
    if name == "lighttpd":
        conf = os.path.join(work, "lighttpd.conf")
        render("lighttpd.conf.in", conf, DIR=work, HOST="127.0.0.1", PORT=port, ROOT=root)
        return ["lighttpd", "-D", "-f", conf]
    raise SystemExit(f"unknown server {name}")

def wrk(url, duration, conns, close, cpu):
    cmd = ["taskset", "-c", str(cpu), "wrk", "-t1", f"-c{conns}", f"-d{duration}s"]
    if close:
        cmd += ["-H", "Connection: close"]
    out = subprocess.run(cmd + [url], capture_output=True, text=True, timeout=duration + 30).stdout
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    errs = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if not m:
        raise RuntimeError("wrk printed no rate:\n" + out)
    return float(m.group(1)), int(errs.group(1)) if errs else 0

WORKLOADS = [("1KB keep-alive", "f1k.bin", False), ("100KB keep-alive", "f100k.bin", False),
             ("1KB Connection: close", "f1k.bin", True)]

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--servers", default="amped/amped,amped/sped,nginx,h2o")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--connections", type=int, default=50)
    ap.add_argument("--server-cpu", type=int, default=1)
    ap.add_argument("--client-cpu", type=int, default=0)
    ap.add_argument("--amped", default=os.path.join(REPO, "target/release/amped"))
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    servers = [s for s in a.servers.split(",") if s]
    for s in servers:
        tool = "amped" if s.startswith("amped") else s
        if tool != "amped" and not shutil.which(tool):
            sys.exit(f"single_file.py: {tool} is not installed (apt-get install {tool})")
    if not os.path.exists(a.amped):
        sys.exit(f"single_file.py: {a.amped} missing: run cargo build --release first")
    work = tempfile.mkdtemp(prefix="amped-bench-")
    root = os.path.join(work, "root"); os.mkdir(root)
    for name, size in [("f1k.bin", 1024), ("f100k.bin", 100 * 1024)]:
        with open(os.path.join(root, name), "wb") as f:
            f.write(os.urandom(size))
    rows = []
    try:
        for r in range(a.rounds):
            order = servers[r % len(servers):] + servers[:r % len(servers)]
            for s in order:
                port = free_port()
                argv = server_cmd(s, root, port, work, a.amped)
                proc = subprocess.Popen(["taskset", "-c", str(a.server_cpu), *argv], stdout=subprocess.DEVNULL,
                                        stderr=open(os.path.join(work, s.replace("/", "_") + ".stderr"), "a"))
                try:
                    wait_port(port, proc)
                    for wl, path, close in WORKLOADS:
                        rate, non2xx = wrk(f"http://127.0.0.1:{port}/{path}", a.duration, a.connections, close, a.client_cpu)
                        rows.append({"round": r, "server": s, "workload": wl, "req_per_s": rate, "non_2xx": non2xx})
                        print(f"round {r+1}/{a.rounds} {s:24s} {wl:24s} {rate:10.0f} req/s", flush=True)
                finally:
                    proc.terminate()
                    try:
                        proc.wait(10)
                    except subprocess.TimeoutExpired:
                        proc.kill(); proc.wait()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    write_report(a, servers, rows)

def write_report(a, servers, rows):
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    out = a.out or os.path.join(HERE, "runs", f"{date}-single-file")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "raw.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["round", "server", "workload", "req_per_s", "non_2xx"])
        w.writeheader(); w.writerows(rows)
    med = {}
    for s in servers:
        for wl, _, _ in WORKLOADS:
            vals = [x["req_per_s"] for x in rows if x["server"] == s and x["workload"] == wl]
            med[(s, wl)] = statistics.median(vals) if vals else float("nan")
    peers = [s for s in servers if not s.startswith("amped")]
    lines = ["# Single-file throughput (median req/s over rounds)", "",
             f"Command: `python3 bench/single_file.py --servers {','.join(servers)} --rounds {a.rounds} "
             f"--duration {a.duration} --connections {a.connections}`", "",
             f"Server pinned to CPU {a.server_cpu}, wrk (1 thread, {a.connections} connections) pinned to CPU {a.client_cpu}; "
             f"{a.rounds} interleaved rounds of {a.duration} s per cell.", "",
             "| server | " + " | ".join(wl for wl, _, _ in WORKLOADS) + " |",
             "|---|" + "---:|" * len(WORKLOADS)]
    for s in servers:
        lines.append(f"| {s} | " + " | ".join(f"{med[(s, wl)]:.0f}" for wl, _, _ in WORKLOADS) + " |")
    if peers:
        lines += ["", "Ratio to the best peer (" + ", ".join(peers) + ") on each workload:", "",
                  "| server | " + " | ".join(wl for wl, _, _ in WORKLOADS) + " |", "|---|" + "---:|" * len(WORKLOADS)]
        for s in servers:
            if s.startswith("amped"):
                cells = []
                for wl, _, _ in WORKLOADS:
                    best = max(med[(p, wl)] for p in peers)
                    cells.append(f"{med[(s, wl)] / best:.2f}×")
                lines.append(f"| {s} | " + " | ".join(cells) + " |")
    open(os.path.join(out, "summary.md"), "w").write("\n".join(lines) + "\n")
    setup = [f"date: {datetime.datetime.now(datetime.timezone.utc).isoformat()}", f"kernel: {platform.release()}",
             f"cpus: {os.cpu_count()}", f"argv: {' '.join(sys.argv)}"]
    for tool in ["nginx -v", "h2o --version", "lighttpd -v", "wrk --version"]:
        try:
            p = subprocess.run(tool.split(), capture_output=True, text=True, timeout=5)
            setup.append(f"{tool.split()[0]}: {(p.stdout + p.stderr).strip().splitlines()[0]}")
        except Exception:
            pass
    open(os.path.join(out, "setup.txt"), "w").write("\n".join(setup) + "\n")
    print("\n".join(lines))
    print(f"\nwritten to {out}")

if __name__ == "__main__":
    main()
