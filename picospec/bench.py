"""One benchmark harness for every method: tokens per target call and wall-clock speedup against autoregressive
decoding measured in the same run, beside the theory's prediction.

    python -m picospec.bench                       # the built-in models, held-out prompts, README's tables
    python -m picospec.bench --sweep_K 1,2,3,4,6,8 # the seeds' Figure 1: time per token, acceptance vs K

For every prompt and seed, autoregressive decoding and the method run back to back, each from a cold cache, so the
speedup is a ratio of two measurements taken side by side; tables report the median over prompts and seeds and the
spread (25th-75th percentile). alpha (acceptance of one draft token) is measured on the same prompts with
picospec.theory.estimate_alpha, and c (draft call time / target call time) from the runs themselves.
Shapes: none; this file only times things.
"""
import time

import numpy as np

from picospec.autoregressive import autoregressive_sampling
from picospec.blockwise import blockwise_decoding
from picospec.greedy import greedy_decoding
from picospec.medusa import medusa_decoding
from picospec.prompt_lookup import prompt_lookup_decoding
from picospec.rest import rest_decoding
from picospec.speculative import speculative_sampling
from picospec.theory import estimate_alpha, expected_tokens_per_call


class Timed:
    """A model with a call counter and a stopwatch."""

    def __init__(self, model):
        self.model, self.calls, self.seconds = model, 0, 0.0

    def __call__(self, x, n=1):
        start = time.perf_counter()
        out = self.model(x, n)
        self.seconds += time.perf_counter() - start
        self.calls += 1
        return out

    def logits(self, x, n=1, **kw):  # the richer interface of tree methods, timed and counted alike
        return self._timed(self.model.logits, x, n, **kw)

    def tree(self, x, tokens, parents, **kw):
        return self._timed(self.model.tree, x, tokens, parents, **kw)

    def accept(self, path):
        start = time.perf_counter()
        self.model.accept(path)
        self.seconds += time.perf_counter() - start

    def _timed(self, f, *args, **kw):
        start = time.perf_counter()
        out = f(*args, **kw)
        self.seconds += time.perf_counter() - start
        self.calls += 1
        return out


def run_method(method, x, draft, target, N, K, seed, options, **method_options):
    """One timed run from cold caches -> output ids, seconds, calls and time per model, per-step stats."""
    for model in (draft, target):
        getattr(model, "reset", lambda: None)()  # neither run may reuse the other's cached work
    method_options = dict(method_options)
    d, t, stats, rng = Timed(draft), Timed(target), [], np.random.default_rng(seed)
    start = time.perf_counter()
    if method == "autoregressive":
        out = autoregressive_sampling(x, t, N, rng, stats=stats, **options)
    elif method == "speculative":
        out = speculative_sampling(x, d, t, N, K, rng, stats=stats, **options)
    elif method == "greedy":
        out = greedy_decoding(x, d, t, N, K, stats=stats, **method_options)
    elif method == "prompt_lookup":
        out = prompt_lookup_decoding(x, t, N, rng, stats=stats, **method_options, **options)
    elif method == "medusa":
        out = medusa_decoding(x, t, method_options.pop("heads"), N, rng, stats=stats, **method_options, **options)
    elif method == "blockwise":
        out = blockwise_decoding(x, t, method_options["heads"], N, K, merged=method_options.get("merged", True),
                                 stats=stats)
    elif method == "rest":
        out = rest_decoding(x, t, N, rng, stats=stats, **method_options, **options)
    elif method == "lookahead":
        from picospec.lookahead import lookahead_decoding

        out = lookahead_decoding(x, t, N, rng, stats=stats, **method_options, **options)
    else:
        raise ValueError(f"unknown method {method!r}")
    seconds = time.perf_counter() - start
    return {"output": out, "seconds": seconds, "target_calls": t.calls, "draft_calls": d.calls,
            "tokens_per_call": N / t.calls, "target_s": t.seconds, "draft_s": d.seconds, "stats": stats}


def per_position_acceptance(stats, K):
    """P(draft t accepted | drafts before it accepted), t = 1..K, over full-K steps."""
    steps = [s for s in stats if s["K"] == K]
    reached = [sum(1 for s in steps if s["accepted"] >= t) for t in range(K)]
    return [sum(1 for s in steps if s["accepted"] >= t + 1) / r if r else float("nan") for t, r in enumerate(reached)]


def compare(method, prompts, draft, target, N, K, seeds, options, **method_options):
    rows = []
    for x in prompts:
        for seed in seeds:
            base = run_method("autoregressive", x, draft, target, N, K, seed, options)
            run = run_method(method, x, draft, target, N, K, seed, options, **method_options)
            rows.append({"speedup": base["seconds"] / run["seconds"], **run, "base": base})
    tpc = [r["tokens_per_call"] for r in rows]
    speedup = [r["speedup"] for r in rows]
    c = np.median([r["draft_s"] / max(r["draft_calls"], 1) for r in rows]) / np.median(  # 0 with no draft model
        [r["base"]["target_s"] / r["base"]["target_calls"] for r in rows])
    verify = np.median([r["target_s"] / r["target_calls"] for r in rows]) / np.median(
        [r["base"]["target_s"] / r["base"]["target_calls"] for r in rows])
    stats = [s for r in rows for s in r["stats"]]
    drafted, accepted = sum(s["K"] for s in stats), sum(s["accepted"] for s in stats)
    return {"tokens_per_call": float(np.median(tpc)), "tokens_per_call_mean": float(np.mean(tpc)),
            "speedup": float(np.median(speedup)), "speedup_iqr": np.percentile(speedup, [25, 75]).tolist(),
            "c": float(c), "verify_cost": float(verify), "acceptance": accepted / max(drafted, 1),
            "per_position": per_position_acceptance(stats, K),
            "ms_per_token": 1e3 * float(np.median([r["seconds"] for r in rows])) / N,
            "ms_per_token_base": 1e3 * float(np.median([r["base"]["seconds"] for r in rows])) / N,
            "ms_per_loop": 1e3 * float(np.median([r["seconds"] / len(r["stats"]) for r in rows]))}


def measure_alpha(draft, target, prompts, N, options):
    """alpha on the prompts followed by the target's own continuation (what decoding actually visits)."""
    values = []
    for x in prompts:
        for model in (draft, target):
            getattr(model, "reset", lambda: None)()
        seq = autoregressive_sampling(x, target, N, np.random.default_rng(0), **options)
        values.append(estimate_alpha(draft, target, seq[len(x) - 1:], **options))
    return float(np.mean(values))


def main(drafts="tiny-draft,ngram", target="tiny-target", K=4, temperatures="0,1", n_prompts=8, prompt_tokens=64,
         n_tokens=64, seeds=2, sweep_K=None, prompt_lookup=False, out=None):
    from gpt2.corpus import heldout_prompts
    from gpt2.load import load_model

    target_model, encoder = load_model(target)
    prompts = heldout_prompts(encoder, n_prompts, prompt_tokens)
    drafts = drafts.split(",") if isinstance(drafts, str) else list(drafts)
    temps = [float(t) for t in str(temperatures).split(",")] if not isinstance(temperatures, (list, tuple)) else temperatures
    lines = [f"`python -m picospec.bench --drafts {','.join(drafts)} --K {K} --temperatures {','.join(map(str, temps))} "
             f"--n_prompts {n_prompts} --n_tokens {n_tokens} --seeds {seeds}`", "",
             "| draft | T | method | alpha | tokens/target call (theory) | tokens/target call (measured, median) "
             "| per-position acceptance | c = draft/target call | (K+1)-token verify / 1-token call "
             "| speedup vs autoregressive (median, IQR) | theory speedup E[tokens] / (K c + v) |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name in drafts:
        draft = load_model(name)[0]
        for T in temps:
            options = {"temperature": T}
            alpha = measure_alpha(draft, target_model, prompts, n_tokens, options)
            for method in ["speculative"] + (["greedy"] if T == 0 else []):
                r = compare(method, prompts, draft, target_model, n_tokens, K, range(seeds), options)
                theory_tpc = expected_tokens_per_call(alpha, K)
                lines.append(
                    f"| {name} | {T:g} | {method} | {alpha:.3f} | {theory_tpc:.2f} | {r['tokens_per_call']:.2f} "
                    f"| {' '.join(f'{a:.2f}' for a in r['per_position'])} | {r['c']:.3f} | {r['verify_cost']:.2f} "
                    f"| {r['speedup']:.2f}x ({r['speedup_iqr'][0]:.2f}-{r['speedup_iqr'][1]:.2f}) "
                    f"| {theory_tpc / (K * r['c'] + r['verify_cost']):.2f}x |")
                print(lines[-1], flush=True)
    if prompt_lookup:
        lines += prompt_lookup_table(target_model, encoder, prompts, n_tokens, seeds)
    if sweep_K:
        lines += sweep(sweep_K, drafts[0], draft_model=load_model(drafts[0])[0], target=target_model, prompts=prompts,
                       n_tokens=n_tokens, seeds=seeds)
    text = "\n".join(lines)
    print(text)
    if out:
        from pathlib import Path

        Path(out).write_text(text + "\n")


def copy_prompts(encoder, prompts, n_copy=12):
    """Input-grounded prompts: a held-out chunk, a blank line, then the chunk's start again, so copying pays off."""
    blank = encoder.encode("\n\n")
    return [x + blank + x[:n_copy] for x in prompts]


def prompt_lookup_table(target, encoder, prompts, n_tokens, seeds):
    lines = ["", "Prompt lookup decoding (max_ngram_size 3, num_pred_tokens 10), temperature 0:", "",
             "| prompts | tokens/target call (median) | acceptance | speedup vs autoregressive (median, IQR) |",
             "|---|---|---|---|"]
    for label, xs in (("copy-heavy (chunk, blank line, chunk start)", copy_prompts(encoder, prompts)),
                      ("ordinary continuation", prompts)):
        r = compare("prompt_lookup", xs, None, target, n_tokens, 10, range(seeds), {"temperature": 0})
        lines.append(f"| {label} | {r['tokens_per_call']:.2f} | {r['acceptance']:.2f} "
                     f"| {r['speedup']:.2f}x ({r['speedup_iqr'][0]:.2f}-{r['speedup_iqr'][1]:.2f}) |")
        print(lines[-1], flush=True)
    return lines


def sweep(Ks, name, draft_model, target, prompts, n_tokens, seeds):
    """The seeds' Figure 1 at temperature 0: time per generated token, acceptance and time per loop against K."""
    Ks = [int(k) for k in str(Ks).split(",")] if not isinstance(Ks, (list, tuple)) else list(Ks)
    lines = ["", f"K sweep, draft {name}, temperature 0:", "",
             "| K | ms per token (speculative) | ms per token (autoregressive) | acceptance | ms per loop | speedup |",
             "|---|---|---|---|---|---|"]
    curves = []
    for K in Ks:
        r = compare("speculative", prompts, draft_model, target, n_tokens, K, range(seeds), {"temperature": 0})
        ms_tok, ms_base, ms_loop = r["ms_per_token"], r["ms_per_token_base"], r["ms_per_loop"]
        curves.append((K, ms_tok, ms_base, r["acceptance"], ms_loop))
        lines.append(f"| {K} | {ms_tok:.2f} | {ms_base:.2f} | {r['acceptance']:.2f} | {ms_loop:.2f} | {ms_base / ms_tok:.2f}x |")
        print(lines[-1], flush=True)
    plot(curves, name)
    return lines


def plot(curves, name, path="bench_K.png"):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    K, ms_tok, ms_base, acc, ms_loop = zip(*curves)
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.2))
    axes[0].plot(K, ms_tok, "o-", label="speculative")
    axes[0].plot(K, ms_base, "--", label="autoregressive")
    axes[0].set(xlabel="K", ylabel="ms per token")
    axes[0].legend()
    axes[1].plot(K, acc, "o-")
    axes[1].set(xlabel="K", ylabel="acceptance rate")
    axes[2].plot(K, ms_loop, "o-")
    axes[2].set(xlabel="K", ylabel="ms per loop")
    fig.suptitle(f"draft {name}, temperature 0")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    import fire

    fire.Fire(main)
