#!/usr/bin/env python3
"""Writes a Common Log Format access log in which a few large files are popular: the small
files of heavy-tail.clf (its /site/ pages, lognormal around 12 KB, up to 1 MB) with 3 % of the
requests turned into requests for one of three 40 MB downloads (a release everyone fetches).
Session 25 found the page policy reading such files around the page cache every time
(docs/BENCHMARKS.md §3b). Deterministic. Usage: make_crowd_clf.py IN OUT (IN: heavy-tail.clf)."""
import random, re, sys

rng = random.Random(25)
out = []
for line in open(sys.argv[1]):
    if "/media/" in line or "/dl/" in line:  # the small files only
        continue
    if rng.random() < 0.03:
        i = rng.randrange(3)
        line = re.sub(r'"GET \S+ HTTP/1.1" 200 \d+', f'"GET /release/r{i}.iso HTTP/1.1" 200 40000000', line)
    out.append(line)
with open(sys.argv[2], "w") as f:
    f.writelines(out)
print(f"{len(out)} requests, {sum('/release/' in l for l in out)} for the 40 MB files", file=sys.stderr)
