"""The comparisons the benchmarks and the notebooks run, apart from the command's own run: a method
against autoregressive decoding on many prompts and seeds (compare), what holds it down (explain),
the acceptance alpha of a draft (measure_alpha), prompts that repay copying (copy_prompts). Costs
as in picospec/theory.py, in one-token target calls: c a target call of the method, c_d a draft
call, c_d2 the second drafter's.
"""
import time

import numpy as np

from picospec.autoregressive import autoregressive_sampling
from picospec.theory import GPU_VERIFY_COST, estimate_alpha
from picospec_app.run import (call_costs, drafting, every_draft_accepted, interleaved, limit,
                              median_run, run_method, speedup_of, summary)


def per_position_acceptance(stats, K):
    """P(draft t accepted | drafts before it accepted), t = 1..K, over full-K steps."""
    steps = [s for s in stats if s["drafted"] == K]
    reached = [sum(1 for s in steps if s["accepted"] >= t) for t in range(K)]
    return [sum(1 for s in steps if s["accepted"] >= t + 1) / r if r else float("nan")
            for t, r in enumerate(reached)]


def mean_accepted(stats, full_depth):
    full = [s["accepted"] for s in stats if s["drafted"] == full_depth]
    return float(np.mean(full)) if full else float("nan")


def compare(method, prompts, loaded, N, seeds, sampling=None, repeats=1, *,
            clock=time.perf_counter, **options):
    """method vs autoregressive on every prompt and seed -> medians of speedup, E and costs (c a
    target call of the method, c_d a draft call, c_d2 draft2's, each over a one-token target
    call)."""
    rows = []
    for x in prompts:
        for seed in seeds:
            base = {"target": loaded["target"]}
            bases, runs = interleaved(
                [lambda: run_method("autoregressive", x, base, N, seed, sampling, clock),
                 lambda: run_method(method, x, loaded, N, seed, sampling, clock, **options)],
                rounds=repeats)
            rows.append({"speedup": speedup_of(bases, runs)["median"], **median_run(runs),
                         "base": median_run(bases), "costs": call_costs(bases, runs)})
    tpc = [r["tokens_per_call"] for r in rows]
    speedup = [r["speedup"] for r in rows]
    one = np.median([r["base"]["target_s"] / r["base"]["target_calls"] for r in rows])
    # costs in one-token target calls: a draft call's (0: no draft), draft2's, a target call's
    c_d = np.median([r["draft_s"] / max(r["draft_calls"], 1) for r in rows]) / one
    c_d2 = np.median([r["draft2_s"] / max(r["draft2_calls"], 1) for r in rows]) / one
    c = np.median([r["target_s"] / r["target_calls"] for r in rows]) / one
    stats = [s for r in rows for s in r["stats"]]
    K = options.get("K", 0)
    return {"tokens_per_call": float(np.median(tpc)), "tokens_per_call_mean": float(np.mean(tpc)),
            "speedup": float(np.median(speedup)),
            "speedup_iqr": np.percentile(speedup, [25, 75]).tolist(),
            "c": float(c), "c_d": float(c_d), "c_d2": float(c_d2),
            "acceptance": summary(stats)["acceptance"] or 0.0,
            "draft_calls_per_step": sum(r["draft_calls"] for r in rows) / len(stats),
            "draft2_calls_per_step": sum(r["draft2_calls"] for r in rows) / len(stats),
            "per_position": per_position_acceptance(stats, K) if K else [],
            "ms_per_token": 1e3 * float(np.median([r["seconds"] for r in rows])) / N,
            "ms_per_token_base": 1e3 * float(np.median([r["base"]["seconds"] for r in rows])) / N,
            "ms_per_loop": 1e3 * float(np.median([r["seconds"] / len(r["stats"]) for r in rows])),
            "predicted": float(np.median([r["costs"]["predicted"] for r in rows])),
            "predicted_gpu": float(np.median([r["costs"]["predicted_gpu"] for r in rows])),
            "drafting": float(np.median([drafting(r["costs"]) for r in rows])),
            "rest": float(np.median([r["costs"]["rest"] for r in rows])),
            "rest_base": float(np.median([r["costs"]["rest_base"] for r in rows])),
            "E_full": every_draft_accepted(stats, float(np.median(tpc))), "stats": stats}


def explain(r):
    """compare's result -> one line: measured and predicted speedup, and what holds it down."""
    E, c, d, rest = r["tokens_per_call"], r["c"], r["drafting"], r["rest"]
    worst, gain = limit(E, r["E_full"], c, d, rest, r["rest_base"])
    gpu = f", with c = {GPU_VERIFY_COST} {r['predicted_gpu']:.2f}x" if GPU_VERIFY_COST < c else ""
    return (f"E {E:.2f}, c {c:.2f}, drafting {d:.2f}, rest {rest:.2f} (autoregressive "
            f"{r['rest_base']:.2f}): measured {r['speedup']:.2f}x, cost model "
            f"{r['predicted']:.2f}x{gpu}; limit: {worst} (without it {gain:.2f}x)")


def measure_alpha(draft, target, prompts, N, options):
    """alpha on the prompts followed by the target's own continuation."""
    values = []
    for x in prompts:
        for model in (draft, target):
            getattr(model, "reset", lambda: None)()
        seq = autoregressive_sampling(x, target, N, np.random.default_rng(0), **options)
        values.append(estimate_alpha(draft, target, seq[len(x) - 1:], **options))
    return float(np.mean(values))


def copy_prompts(encoder, prompts, n_copy=12):
    """Prompts that repay copying: a chunk, a blank line, the chunk's start again."""
    blank = encoder.encode("\n\n")
    return [x + blank + x[:n_copy] for x in prompts]
