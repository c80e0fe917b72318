"""SPECweb99-like file sets and Zipf request traces, generated reproducibly from a seed.

Layout: dir00000/ … each with class{0..3}_{1..9}; class c file i has size base[c]*i bytes with
base = 102, 1024, 10240, 102400 (so a directory holds ~5.12 MB). Requests: directory by
Zipf(alpha=1), class by the 35/50/14/1 % mix, file within the class by Zipf over the 9 files.
"""
import bisect, itertools, json, os, random

BASES = [102, 1024, 10240, 102400]
CLASS_MIX = [0.35, 0.50, 0.14, 0.01]
DIR_BYTES = sum(b * i for b in BASES for i in range(1, 10))

def dirs_for(total_bytes):
    return max(1, round(total_bytes / DIR_BYTES))

def make_fileset(root, total_bytes, seed=1):
    """Creates the set under root (reused when a previous call made the same one)."""
    n = dirs_for(total_bytes)
    marker = root.rstrip("/") + ".params.json"
    params = {"dirs": n, "seed": seed, "dir_bytes": DIR_BYTES}
    if os.path.exists(marker) and json.load(open(marker)) == params:
        return n
    rng = random.Random(seed)
    block = bytes(rng.getrandbits(8) for _ in range(1 << 16)) * 16  # 1 MiB of noise
    for d in range(n):
        path = os.path.join(root, f"dir{d:05d}")
        os.makedirs(path, exist_ok=True)
        for c, base in enumerate(BASES):
            for i in range(1, 10):
                size = base * i
                off = rng.randrange(0, len(block) - size) if size < len(block) else 0
                with open(os.path.join(path, f"class{c}_{i}"), "wb") as f:
                    f.write(block[off:off + size])
    with open(marker, "w") as f:
        json.dump(params, f)
    return n

def zipf_cdf(n, alpha=1.0):
    w = [1.0 / (k ** alpha) for k in range(1, n + 1)]
    return list(itertools.accumulate(w)), sum(w)

def make_trace(n_dirs, n_requests, seed=1):
    """A list of URL paths drawn as described in the module doc."""
    rng = random.Random(seed)
    dcdf, dtot = zipf_cdf(n_dirs)
    fcdf, ftot = zipf_cdf(9)
    ccdf = list(itertools.accumulate(CLASS_MIX))
    out = []
    for _ in range(n_requests):
        d = bisect.bisect_left(dcdf, rng.random() * dtot)
        c = min(bisect.bisect_left(ccdf, rng.random()), 3)
        i = bisect.bisect_left(fcdf, rng.random() * ftot) + 1
        out.append(f"/dir{min(d, n_dirs - 1):05d}/class{c}_{i}")
    return out
