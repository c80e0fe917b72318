#!/usr/bin/env python3
"""Access log (combined+time): latency by response size class, and the slowest requests."""
import sys, re
rows=[]
for line in open(sys.argv[1]):
    m = re.search(r'" (\d{3}) (\d+|-) .* ([0-9.]+)$', line.rstrip())
    if not m: continue
    size = int(m.group(2)) if m.group(2)!='-' else 0
    rows.append((size, float(m.group(3)), line.split('"')[1]))
classes=[(0,1e5),(1e5,1e6),(1e6,1e7),(1e7,1e9)]
for lo,hi in classes:
    t=sorted(r[1] for r in rows if lo<=r[0]<hi)
    if not t: continue
    q=lambda p: t[min(len(t)-1,int(p*len(t)))]
    print(f"{int(lo):>10}-{int(hi):<10} n={len(t):5} p50={q(.5):7.3f} p95={q(.95):7.3f} max={t[-1]:7.3f} mean={sum(t)/len(t):.3f}")
print("slowest:")
for r in sorted(rows,key=lambda r:-r[1])[:15]: print(f"  {r[1]:7.2f}s {r[0]/1e6:8.2f}MB {r[2][:60]}")
