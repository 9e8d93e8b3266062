"""The GPU path (CuPy) checked against the CPU path (NumPy) on one machine, then timed.

    # logits on both devices; every row of the method table, GPU tokens vs CPU
    python -m bench.gpu --task check
    # every row: speedup over autoregressive decoding on the GPU (and the CPU)
    python -m bench.gpu --task speed
    # GPT-2's 124M-1558M shapes: what a speculative step costs on the GPU
    python -m bench.gpu --task large

check: the built-in target and draft and a random 124M shape, on both devices, through a prompt,
one-token steps, a
    rollback and a token tree (and the batched engine over ragged rows): the largest logit
    difference. Then every row of the table at temperature 0 on held-out prompts: the GPU's tokens
    must equal the CPU's and autoregressive decoding's on the GPU; at temperature 1 (rows that
    sample) with the same seed, the share of runs whose tokens equal the CPU's (float32 sums in
    another order can move a draw that sits on a boundary; the law is the same).
speed: every row against autoregressive decoding, back to back on each prompt
(picospec_app.compare), on the GPU and
    on this machine's CPU: tokens per target call, ms per token (medians over prompts), and the
    speedup as the median of the per-prompt ratios of the two runs' times.
large: random weights of GPT-2's 124M-1558M shapes as targets and the 124M shape as the draft: wall
time of a
    draft call, of a target call over 1 and K + 1 tokens (medians over --repeats), and of a
    speculative sampling step (the mean over the steps of --repeats runs of K + 1 tokens). Random
    weights give near-uniform laws that agree often, so their acceptance says nothing of a real pair
    and only the costs are read off; beside them the speedup these costs give at assumed acceptance
    rates alpha (Leviathan et al.'s formula E[tokens] / (K c_d + v), a prediction).
Times are wall-clock between two device synchronisations.
"""
import time

import numpy as np

from picospec_app.load import load_needs
from picospec_app.compare import compare
from picospec_app.run import run_method
from gpt2.backend import get_xp
from picospec_app.machine import thread_policy
from picospec_app.settings import engine_choices
from picospec_cli import Option
from picospec.methods import METHODS, defaults, law
from tools.page import gpu_name, header, measured_command, write_page

TARGET, DRAFT = "tiny-target", "tiny-draft"


def sync_of(device):
    if device == "gpu":
        import cupy
        return cupy.cuda.Stream.null.synchronize
    return lambda: None


def table(head, rows):  # -> markdown lines
    return ["| " + " | ".join(head) + " |",
            "|" + "---|" * len(head)] + ["| " + " | ".join(map(str, r)) + " |"
                                                                        for r in rows]


def engine_steps(model, x, batch=False):
    """The engine's ways of being called, in order -> list of logits arrays: a prompt, four
    one-token steps, a rollback of three tokens re-scored together, and a token tree with one
    accepted path (or, batched, ragged rows)."""
    if batch:
        xs = [x[:20], x[:33], x[:27]]
        out = [model.logits(xs, 2)]
        out.append(model.logits([r + [int(t)] for r, t in zip(xs, x[40:43])]))
        out.append(model.logits([x[:18], x[:34], x[:25]], 3))
        return [np.asarray(a) for a in out]
    out = [model.logits(x[:32], 8)]
    for n in range(33, 37):
        out.append(model.logits(x[:n]))
    out.append(model.logits(x[:34], 3))
    out.append(model.tree(x[:34], x[34:39], [-1, 0, 0, 1, 3]))
    model.accept([0, 1])
    out.append(model.logits(x[:37], 2))
    return out


def logit_check():
    """-> table rows: largest |GPU - CPU| logit over every call, and the logits' scale."""
    from bench.engine import hparams_of, random_params
    from gpt2.engine import BatchGPT2
    from gpt2.engine import GPT2
    from gpt2.load import load_model

    rows = []
    x = [int(t) for t in np.random.default_rng(0).integers(0, 4097, 64)]
    for name in (TARGET, DRAFT, "124M"):
        if name == "124M":
            hp = hparams_of("124M")
            pair = [GPT2(hp, random_params(hp, get_xp(d)), device=d) for d in ("cpu", "gpu")]
        else:
            pair = [load_model(name, d, **engine_choices())[0] for d in ("cpu", "gpu")]
        for batch in (False, True):
            models = [BatchGPT2(m, 3) for m in pair] if batch else pair
            cpu, gpu = (engine_steps(m, x, batch) for m in models)
            diff = max(float(np.abs(a - b).max()) for a, b in zip(cpu, gpu))
            scale = max(float(np.abs(a).max()) for a in cpu)
            rows.append([name,
                         "batched, 3 ragged rows" if batch else "one row (steps, rollback, tree)",
                         f"{diff:.2e}", f"{scale:.1f}", f"{diff / scale:.1e}"])
            print(rows[-1], flush=True)
    return rows


def load_rows(device, encoder, store, **choices):
    """{row name: what it needs loaded on `device`} for every row of the method table (REST:
    `store`); choices: how the engines run (over the environment's settings)."""
    from gpt2.load import load_model

    target = load_model(TARGET, device, **{**engine_choices(), **choices})[0]
    out = {}
    for m in METHODS:
        needs = tuple(n for n in m.needs if n != "datastore")
        loaded = load_needs(m._replace(needs=needs), defaults(m), target, TARGET, encoder, DRAFT,
                            device)
        if "datastore" in m.needs:
            loaded["datastore"] = store
        out[m.name] = loaded
    return out


def setup(n_prompts, prompt_tokens):
    from gpt2.train.corpus import heldout_prompts, split_files, stdlib_files, tokenize
    from gpt2.load import load_model
    from picospec.rest import Datastore

    encoder = load_model(TARGET, **engine_choices())[1]
    prompts = heldout_prompts(encoder, n_prompts, prompt_tokens)
    # a small REST datastore: enough to draft from
    files = split_files(stdlib_files())["train"][:300]
    store = Datastore.build(np.array(tokenize(files, encoder), dtype=np.uint16))
    return encoder, prompts, store


def check(n_prompts, n_tokens):
    lines = ["Logits, GPU (CuPy) against CPU (NumPy), the same calls on both:", ""]
    lines += table(["model", "calls", "largest difference", "largest logit", "relative"],
                   logit_check())
    encoder, prompts, store = setup(n_prompts, 48)
    rows = {d: load_rows(d, encoder, store) for d in ("cpu", "gpu")}
    out = []
    for m in METHODS:
        zero = [[run_method(m, x, rows[d][m.name], n_tokens, 0, {"temperature": 0})["output"]
                 for d in ("cpu", "gpu")]
                + [run_method("autoregressive", x, {"target": rows["gpu"][m.name]["target"]},
                              n_tokens, 0, {"temperature": 0})["output"]] for x in prompts]
        same_cpu = sum(g == c for c, g, _ in zero)
        same_ar = sum(g == a for _, g, a in zero)
        if law(m, defaults(m)) == "greedy":
            sampled = "(greedy-only)"
        else:
            pairs = [[run_method(m, x, rows[d][m.name], n_tokens, s, {"temperature": 1.0})["output"]
                      for d in ("cpu", "gpu")] for x in prompts for s in range(2)]
            sampled = f"{sum(c == g for c, g in pairs)}/{len(pairs)}"
        out.append([m.name, f"{same_cpu}/{len(prompts)}", f"{same_ar}/{len(prompts)}", sampled])
        print(out[-1], flush=True)
    lines += ["",
              f"Every row of the method table on {n_prompts} held-out prompts, {n_tokens} new "
              f"tokens, GPU against "
              "CPU (temperature 1: 2 seeds per prompt, the same seed on both devices):", ""]
    lines += table(["method", "T = 0: GPU tokens = CPU tokens",
                    "T = 0: GPU = autoregressive on the GPU",
                    "T = 1: GPU tokens = CPU tokens"], out)
    return lines


def speed(n_prompts, n_tokens):
    encoder, prompts, store = setup(n_prompts, 64)
    rows = {d: load_rows(d, encoder, store) for d in ("cpu", "gpu")}
    for d in rows:  # warm-up: the first GPU calls compile kernels
        run_method("speculative", prompts[0], rows[d]["speculative"], 8, 0, {"temperature": 1.0},
                   K=4)
    out = []
    for m in METHODS:
        if m.name == "autoregressive":
            continue
        # CuPy compiles each kernel at its first use (the row's own, e.g. a tree's): not timed
        for d in rows:
            run_method(m, prompts[0], rows[d][m.name], 8, 0, {"temperature": 0})
        r = {d: compare(m, prompts, rows[d][m.name], n_tokens, [0], {"temperature": 0})
             for d in ("gpu", "cpu")}
        out.append([m.name, f"{r['gpu']['tokens_per_call']:.2f}",
                    f"{r['gpu']['ms_per_token_base']:.2f}",
                    f"{r['gpu']['ms_per_token']:.2f}", f"{r['gpu']['c']:.2f}",
                    f"**{r['gpu']['speedup']:.2f}x**", f"{r['cpu']['ms_per_token_base']:.2f}",
                    f"{r['cpu']['ms_per_token']:.2f}", f"{r['cpu']['speedup']:.2f}x"])
        print(out[-1], flush=True)
    for T in (1.0,):  # speculative sampling proper
        r = {d: compare("speculative", prompts, rows[d]["speculative"], n_tokens, [0, 1],
                        {"temperature": T}, K=4)
             for d in ("gpu", "cpu")}
        out.append([f"speculative, T = {T:g}", f"{r['gpu']['tokens_per_call']:.2f}",
                    f"{r['gpu']['ms_per_token_base']:.2f}", f"{r['gpu']['ms_per_token']:.2f}",
                    f"{r['gpu']['c']:.2f}", f"**{r['gpu']['speedup']:.2f}x**",
                    f"{r['cpu']['ms_per_token_base']:.2f}", f"{r['cpu']['ms_per_token']:.2f}",
                    f"{r['cpu']['speedup']:.2f}x"])
        print(out[-1], flush=True)
    lines = [f"Every row against autoregressive decoding, back to back per prompt, {n_prompts} "
             f"held-out prompts x {n_tokens} new tokens, temperature 0 (last row: 1), the built-in "
             f"pair, each row's default options:", ""]
    return lines + table(["method", "tokens / target call", "GPU autoregressive ms/token",
                          "GPU method ms/token",
                          "GPU verify / 1-token call", "GPU speedup (median of per-prompt ratios)",
                          "CPU autoregressive ms/token", "CPU method ms/token", "CPU speedup"], out)


def large(repeats, K=4, alphas=(0.6, 0.7, 0.8)):
    from bench.engine import hparams_of, random_params
    from gpt2.engine import GPT2
    from picospec.speculative import speculative_sampling
    from picospec.theory import expected_tokens_per_call

    xp, sync = get_xp("gpu"), sync_of("gpu")
    draft = GPT2(hparams_of("124M"), random_params(hparams_of("124M"), xp, seed=1), device="gpu")
    x = [int(t) for t in np.random.default_rng(2).integers(0, 50257, 160)]
    out = []

    def wall(f):
        times = []
        for _ in range(repeats):
            sync()
            start = time.perf_counter()
            f()
            sync()
            times.append(time.perf_counter() - start)
        return float(np.median(times))

    for size in ("124M", "355M", "774M", "1558M"):
        target = GPT2(hparams_of(size), random_params(hparams_of(size), xp), device="gpu")
        target(x[:128]), draft(x[:128])
        # one new token's law after a 128-token cache (rolled back each time)
        t1 = wall(lambda: target(x[:129]))
        # as a step calls them: probabilities, on the host
        tk = wall(lambda: target(x[:128 + K + 1], K + 1))
        td = wall(lambda: draft(x[:129]))
        stats = []
        sync()
        start = time.perf_counter()
        # runs of K + 1 new tokens: one step when every draft is accepted, else more
        for i in range(repeats):
            speculative_sampling(x[:128], draft, target, K + 1, K, np.random.default_rng(i),
                                 stats=stats, temperature=1.0)
        sync()
        t_step = (time.perf_counter() - start) / len(stats)  # mean wall time of one step
        # drafts per step (fewer near the run's end)
        drafted = float(np.mean([s["drafted"] for s in stats]))
        c_d, v = td / t1, tk / t1
        predicted = [expected_tokens_per_call(a, K) / (K * c_d + v) for a in alphas]
        out.append([size, f"{t1 * 1e3:.2f}", f"{tk * 1e3:.2f} ({v:.2f}x)",
                    f"{td * 1e3:.2f} (c_d = {c_d:.2f})",
                    f"{t_step * 1e3:.2f} ({drafted:.1f} drafts: model "
                    f"{(drafted * td + tk) * 1e3:.2f})"] + [f"{p:.2f}x" for p in predicted])
        print(out[-1], flush=True)
        target = None  # its memory freed before the next size
        xp.get_default_memory_pool().free_all_blocks()
    lines = [f"Random weights, GPU, 128-token cache, K = {K}, draft = the 124M shape; ms wall: "
             f"calls are medians of {repeats}, the step is the mean over the steps of {repeats} "
             f"runs. The speedup columns are predictions from the measured costs at an assumed "
             f"alpha, not measurements:", ""]
    return lines + table(["target", "1-token call ms", f"{K + 1}-token call ms (/ 1 token)",
                          "draft call ms",
                          "speculative step ms (measured; model: drafts x t_draft + t_verify)"]
                         + [f"predicted speedup, alpha = {a}" for a in alphas], out)


def main(task="check", n_prompts=4, n_tokens=32, repeats=9, out=None):
    get_xp("gpu")  # no CuPy or no GPU: one clear line before any work
    top = header(thread_policy(0))
    print(top, flush=True)
    import cupy

    runtime = cupy.cuda.runtime.runtimeGetVersion()
    gpu = f"GPU: {gpu_name(cupy)}, CuPy {cupy.__version__}, CUDA runtime {runtime}"
    print(gpu, flush=True)
    lines = {"check": lambda: check(n_prompts, n_tokens),
             "speed": lambda: speed(n_prompts, n_tokens * 2),
             "large": lambda: large(repeats)}[task]()
    line = f"`{measured_command()}`"
    text = "\n".join([gpu, "", line, ""] + lines)
    print(text)
    if out:
        write_page(out, text, top)


OPTIONS = [
    Option("task", str, "check",
           "check (GPU against CPU), speed (every row's speedup), large (124M-1558M costs)",
           choices=("check", "speed", "large")),
    Option("n_prompts", int, 4, "held-out prompts", low=1),
    Option("n_tokens", int, 32, "new tokens per run (speed: twice this)", low=2),
    Option("repeats", int, 9, "timed repeats per cost (large)", low=1),
    Option("out", "out", None, "also write the tables as a results page (docs/results/)"),
]

if __name__ == "__main__":
    from picospec_cli import command

    command(main, OPTIONS)
