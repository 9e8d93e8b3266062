"""Engine benchmark: what one decoding step costs, and what scoring M tokens at once costs.

    python -m bench.engine                      # random weights of the 124M and 355M shapes, on this machine
    python -m bench.engine --sizes 124M --device gpu

1. Decode latency of one new token after a 128-token cache, beside the memory-bandwidth roofline: a decode step must
   read every weight once, so it cannot beat weight_bytes / bandwidth. Bandwidth is measured in the same run, as the
   rate of a matrix-vector product over a matrix far larger than the caches (what a decode step does).
2. The cost of scoring M new tokens in one forward relative to one token, M = 1..16: speculative decoding verifies
   K drafts in one forward of K + 1 tokens and only pays off when that costs little more than one token.
Medians over repeats; the machine is shared and noisy, so ratios are measured side by side in one run.
"""
import time

import numpy as np

from gpt2.backend import DEVICES, get_xp, to_numpy
from gpt2.cli import Option
from gpt2.engine import GPT2
from gpt2.train import flatten

SHAPES = {"124M": dict(n_layer=12, n_embd=768, n_head=12), "355M": dict(n_layer=24, n_embd=1024, n_head=16)}


def random_params(hparams, xp, seed=0):  # GPT-2's initialisation, generated on the device in float32
    rng = np.random.default_rng(seed)
    C, V = hparams["n_embd"], hparams["n_vocab"]

    def w(*shape):
        return xp.asarray(rng.standard_normal(shape, dtype=np.float32) * 0.02)

    def ln():
        return {"g": xp.ones(C, dtype="float32"), "b": xp.zeros(C, dtype="float32")}

    def lin(i, o):
        return {"w": w(i, o), "b": xp.zeros(o, dtype="float32")}

    blocks = [{"ln_1": ln(), "attn": {"c_attn": lin(C, 3 * C), "c_proj": lin(C, C)}, "ln_2": ln(),
               "mlp": {"c_fc": lin(C, 4 * C), "c_proj": lin(4 * C, C)}} for _ in range(hparams["n_layer"])]
    return {"wte": w(V, C), "wpe": w(hparams["n_ctx"], C), "blocks": blocks, "ln_f": ln()}


def median_time(f, repeats, sync):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        f()
        sync()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def bandwidth(xp, sync, repeats):  # bytes/s of a matrix-vector product over a 512 MiB float32 matrix
    a = xp.ones((8192, 16384), dtype="float32")
    v = xp.ones(16384, dtype="float32")
    a @ v
    return a.nbytes / median_time(lambda: a @ v, repeats, sync)


def bench(size, device, n_cache, Ms, repeats):
    xp = get_xp(device)
    sync = (lambda: xp.cuda.Stream.null.synchronize()) if device == "gpu" else (lambda: None)
    hparams = dict(n_vocab=50257, n_ctx=1024, **SHAPES[size])
    model = GPT2(hparams, random_params(hparams, xp), device=device)
    weight_bytes = sum(to_numpy(a).nbytes for a in flatten(model.params).values()) - model.params["wpe"].nbytes
    x = [int(t) for t in np.random.default_rng(1).integers(0, 50257, n_cache + max(Ms))]
    model(x[:n_cache])

    def step(M):  # roll back to the 128-token cache, then score M new tokens in one forward
        return lambda: model.logits(x[:n_cache + M], M)

    times = {M: median_time(step(M), repeats, sync) for M in Ms}
    bw = bandwidth(xp, sync, repeats)
    return {"size": size, "device": device, "weight_MB": weight_bytes / 1e6, "bandwidth_GBps": bw / 1e9,
            "roofline_ms": weight_bytes / bw * 1e3, "decode_ms": times[1] * 1e3,
            "cost_vs_1": {M: times[M] / times[1] for M in Ms}}




def main(sizes=("124M", "355M"), device="cpu", n_cache=128, max_M=16, repeats=9):
    """Decode latency beside the bandwidth roofline, and the cost of scoring M tokens per forward, M = 1..max_M."""
    n_ctx = 1024  # GPT-2's context: the cache and the M new tokens must fit in it
    if n_cache + max_M > n_ctx:
        raise ValueError(f"--n_cache {n_cache} + --max_M {max_M} exceeds GPT-2's context of {n_ctx} tokens")
    get_xp(device)  # --device gpu without CuPy or a GPU: one clear line before any work
    Ms = list(range(1, max_M + 1))
    sizes = sizes.split(",") if isinstance(sizes, str) else list(sizes)
    rows = [bench(s, device, n_cache, Ms, repeats) for s in sizes]
    print(f"| shape | device | weights MB | bandwidth GB/s | roofline ms | decode ms ({n_cache}-token cache) | decode / roofline |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['size']} | {r['device']} | {r['weight_MB']:.0f} | {r['bandwidth_GBps']:.1f} | {r['roofline_ms']:.1f} "
              f"| {r['decode_ms']:.1f} | {r['decode_ms'] / r['roofline_ms']:.2f}x |")
    print()
    print("| shape | " + " | ".join(f"M={M}" for M in Ms) + " |")
    print("|---|" + "---|" * len(Ms))
    for r in rows:
        print(f"| {r['size']} | " + " | ".join(f"{r['cost_vs_1'][M]:.2f}" for M in Ms) + " |")


OPTIONS = [
    Option("sizes", "strs", ["124M", "355M"], "GPT-2 shapes to measure (random weights): " + ", ".join(SHAPES),
           choices=tuple(SHAPES)),
    Option("device", str, "cpu", "cpu (NumPy) or gpu (CuPy)", choices=DEVICES),
    Option("n_cache", int, 128, "tokens already in the KV cache before each measured forward", low=1),
    Option("max_M", int, 16, "measure forwards of M = 1 .. max_M new tokens", low=1),
    Option("repeats", int, 9, "timed repeats per measurement (the median is reported)", low=1),
]

if __name__ == "__main__":
    from gpt2.cli import command

    command(main, OPTIONS)
