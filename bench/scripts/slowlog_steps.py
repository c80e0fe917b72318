#!/usr/bin/env python3
"""Where the time of amped's logged requests went: reads a `--slow-log` file (one JSON line
per request) and prints, per response-size class, how many requests there were, their
request_time percentiles, and for each step how many requests had it and its mean and p95 ms.

    bench/scripts/slowlog_steps.py SLOW.jsonl [--min-ms MS]

Use with `--slow-sample N` to see the ordinary requests too, not only the slow ones.
"""
import argparse
import json
from collections import defaultdict


def pct(values, p):
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, int(p / 100 * len(s)))]


def size_class(n):
    for limit, name in ((1 << 10, "<1K"), (16 << 10, "1-16K"), (256 << 10, "16-256K"),
                        (4 << 20, "256K-4M")):
        if n < limit:
            return name
    return ">=4M"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log")
    ap.add_argument("--min-ms", type=float, default=0.0,
                    help="only requests at least this slow")
    args = ap.parse_args()
    groups = defaultdict(list)
    with open(args.log) as f:
        for line in f:
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue
            if r.get("request_time", 0) * 1000 < args.min_ms:
                continue
            groups[size_class(r.get("bytes", 0))].append(r)
    for cls in ("<1K", "1-16K", "16-256K", "256K-4M", ">=4M"):
        reqs = groups.get(cls)
        if not reqs:
            continue
        times = [r["request_time"] * 1000 for r in reqs]
        print(f"\n{cls}: {len(reqs)} requests, request_time ms p50 {pct(times, 50):.2f} "
              f"p95 {pct(times, 95):.2f} max {max(times):.2f}")
        steps = defaultdict(list)
        for r in reqs:
            per = defaultdict(float)
            for s in r.get("steps", []):
                key = s["step"] + (f"({s['note']})" if s.get("note") else "")
                per[key] += s.get("ms", 0.0)
            for k, v in per.items():
                steps[k].append(v)
        print(f"  {'step':<28} {'requests':>8} {'mean ms':>9} {'p95 ms':>9}")
        for k, v in sorted(steps.items(), key=lambda kv: -sum(kv[1])):
            print(f"  {k:<28} {len(v):>8} {sum(v) / len(v):>9.3f} {pct(v, 95):>9.3f}")


if __name__ == "__main__":
    main()
