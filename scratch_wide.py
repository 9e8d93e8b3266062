import numpy as np, os
import gpt2.backend as bk
from bench.batch import load_pair, load_method, ways
target, draft, prompts = load_pair("tiny")
row, loaded, options = load_method("speculative", "tiny", target, draft, 4)
print(bk.thread_policy(target.n_params), os.cpu_count(), flush=True)
runs = ways(row, loaded, prompts, 8, 48, options, {"temperature": 1.0})
res = {}
widths = (1, 2, 4, 8, 16)
for rep in range(5):
    for w in widths:
        bk.APPLIED["wide"] = w
        for name in ("batch 1", "batch 8"):
            _, _, _, dec = runs[name]()
            res.setdefault((w, name), []).append(dec.wall)
for w in widths:
    b1, b8 = 384 / np.median(res[(w, "batch 1")]), 384 / np.median(res[(w, "batch 8")])
    print(f"wide {w:2d}: batch 1 {b1:.0f} tok/s, batch 8 {b8:.0f} tok/s, ratio {b8 / b1:.2f}x", flush=True)
