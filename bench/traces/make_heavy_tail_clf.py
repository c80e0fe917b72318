#!/usr/bin/env python3
"""Writes a synthetic Common Log Format access log with a heavy tail of large files, shaped
like the small website of issue 9 (10 000 requests, ~1 500 files from 1 KB to ~69 MB, ~45
requests for files over 10 MB). Deterministic. Usage: make_heavy_tail_clf.py OUT [SEED [LARGE_SHARE
[LARGE_MAX_MB]]] (defaults 9, 0.0045, 69: heavy-tail.clf; heavy-tail-b.clf is 13, 0.01, 100)."""
import math, random, sys

seed = int(sys.argv[2]) if len(sys.argv) > 2 else 9
large_share = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0045
large_max = int(float(sys.argv[4]) * 1_000_000) if len(sys.argv) > 4 else 69_000_000
rng = random.Random(seed)
files = []
for i in range(1400):  # pages, images, scripts: lognormal around 12 KB, 1 KB .. 1 MB
    size = int(min(max(math.exp(rng.gauss(math.log(12_000), 1.3)), 1_000), 1_000_000))
    files.append((f"/site/f{i:04}.html", size))
for i in range(60):  # downloads 1-10 MB
    files.append((f"/dl/m{i:02}.zip", rng.randint(1_000_000, 10_000_000)))
for i in range(40):  # media 10-69 MB
    files.append((f"/media/v{i:02}.mp4", rng.randint(10_000_000, large_max)))

small, mid, large = files[:1400], files[1400:1460], files[1460:]
weights = [1 / (k + 1) ** 0.9 for k in range(len(small))]
lines = []
n_large = n_mid = 0
for t in range(10_000):
    r = rng.random()
    if r < large_share:
        path, size = rng.choice(large); n_large += 1
    elif r < large_share + 0.0155:
        path, size = rng.choice(mid); n_mid += 1
    else:
        path, size = rng.choices(small, weights)[0]
    sec = t // 5
    stamp = f"24/Nov/2026:{10 + sec // 3600:02}:{sec // 60 % 60:02}:{sec % 60:02} +0000"
    lines.append(f'192.0.2.{t % 200} - - [{stamp}] "GET {path} HTTP/1.1" 200 {size}\n')
with open(sys.argv[1], "w") as out:
    out.writelines(lines)
print(f"{len(lines)} requests, {len(files)} files, {n_large} over 10 MB, {n_mid} of 1-10 MB", file=sys.stderr)
