#!/usr/bin/env python3
"""From sampler lines (epoch, /sys/block stat fields), 0.5 s windows: requests, merges, MB;
then trimmed-CV ratios over 12 windows, bytes vs requests and bytes vs bios (requests+merges)."""
import sys, statistics as st
rows=[]
for line in open(sys.argv[1]):
    f=line.split(); t=float(f[0]); v=list(map(int,f[1:]))
    rows.append((t, v[0], v[1], v[2]*512))
W=[]
i=0
while i+2 < len(rows):
    a=rows[i]; b=rows[i+2]; dt=b[0]-a[0]
    W.append((a[0], (b[1]-a[1])/dt, (b[2]-a[2])/dt, (b[3]-a[3])/dt)); i+=2
def tcv(xs):
    xs=sorted(xs)[1:-1]; m=st.mean(xs)
    return st.pstdev(xs)/m if m>0 else 0
t0=W[0][0]
for k in range(len(W)):
    w=W[k]
    line=f"{w[0]-t0:7.1f} r/s {w[1]:6.0f} merges/s {w[2]:6.0f} MB/s {w[3]/1e6:6.1f}"
    if k>=11:
        s=W[k-11:k+1]
        if all(x[1]>50 for x in s):
            cb=tcv([x[3] for x in s]); cr=tcv([x[1] for x in s]); cm=tcv([x[1]+x[2] for x in s])
            line+=f"  ratio_req {cb/cr if cr else 99:6.2f} ratio_bio {cb/cm if cm else 99:6.2f}"
    print(line)
