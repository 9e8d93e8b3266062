"""Drafting without a draft model, and with two: layer_skip (Draft & Verify), early_exit
(LayerSkip) and cascade (CS Drafting) against speculative sampling, each beside its cost model.

    python -m bench.self_draft                 # the table, temperature 0 and 1

The skip set and the exit layer are the target's own choices (self_draft.json), made by
`python -m gpt2.train.self_draft --task search` and `--task exits`. Shapes: none; this file only
times things.
"""
import time

import numpy as np

from gpt2.hub import resolve
from gpt2.load import load_model
from gpt2.model import softmax
from gpt2.self_draft import read_config
from gpt2.train.corpus import heldout_prompts
from gpt2.train.skip_search import draft_logits
from picospec.autoregressive import autoregressive_sampling
from picospec.sampling import warp
from picospec.theory import cascade_speedup, expected_tokens_per_call
from gpt2.load import load_draft
from picospec_app.load import load_self_draft as load_as_main
from picospec_app.machine import thread_policy
from picospec_app.compare import compare, measure_alpha
from picospec_app.settings import engine_choices, read_settings
from picospec_cli import Option
from tools.families import command
from tools.page import header, measured_command, write_page


# ---- the bench table: each method against autoregressive decoding, side by side ----

def call_cost(model, x, n, reps=30):
    """Median time of a call on n new tokens over a 1-token call (the model's cache holds x)."""
    times = {1: [], n: []}
    for _ in range(reps):
        for m in (1, n):
            model.reset() if hasattr(model, "reset") else None
            model(x)
            start = time.perf_counter()
            model(x + list(range(30, 30 + m)), m)
            times[m].append(time.perf_counter() - start)
    return float(np.median(times[n]) / np.median(times[1]))


def self_draft_alpha(engine, target, prompts, n_tokens, options):
    """alpha of a self-draft on the target's own continuations, the draft reading the target's cache
    (as it drafts)."""
    seqs = []
    for x in prompts:
        target.reset()
        seqs.append(autoregressive_sampling(x, target, n_tokens, np.random.default_rng(0),
                                            **options))
    x, start = np.array(seqs), len(prompts[0])
    # the engine's weights without its panels (draft_logits runs [B, T] arrays)
    params = target.params
    p = warp(softmax(draft_logits(params, engine.hparams, x, start, engine.skip,
                                     engine.adapter)), **options)
    q = warp(softmax(draft_logits(params, engine.hparams, x, start, [])), **options)
    return float(np.minimum(p, q).sum(-1).mean())


def bench(target, encoder, target_name, n_prompts, prompt_tokens, n_tokens, seeds, temperatures):
    prompts = heldout_prompts(encoder, n_prompts, prompt_tokens)  # seed 0, as bench.harness
    tiny, ngram = (load_draft(name, target, target_name) for name in ("tiny-draft", "ngram"))
    folder = resolve(target_name, offline=read_settings().offline)
    config = read_config(folder)
    # loaded as main.py loads them: on the weights the target engine decodes with (its panels and LM
    # head copy)
    skip, paper, exit_ = (load_as_main(kind, options, target, target_name)["target"].engine
                          for kind, options in
                          (("layer_skip", {}), ("layer_skip", {"skip": "m2"}), ("early_exit", {})))
    K_skip, K_exit, E = (config["layer_skip"]["K"], config["early_exit"]["K"],
                         config["early_exit"]["exit_layer"])
    # ..., the alpha of the theory column
    rows = [("speculative", "tiny-draft", {"draft": tiny}, {"K": 4}, "tiny"),
            ("speculative", "ngram", {"draft": ngram}, {"K": 4}, "ngram"),
            ("layer_skip", f"skip {config['layer_skip']['skip']} (searched)",
             {"target": skip.target, "draft": skip.draft, "self_draft": skip.settings},
             {"K": K_skip}, "skip"),
            ("layer_skip", "skip m2 (agreement 0.91), the paper's loop",
             {"target": paper.target, "draft": paper.draft, "self_draft": paper.settings},
             {"K": 4, "threshold": 0.6, "adaptive": True}, "m2"),
            ("early_exit", f"exit after {E}" + (" + adapter" if exit_.adapter else ""),
             {"target": exit_.target, "draft": exit_.draft, "self_draft": exit_.settings},
             {"K": K_exit}, "exit"),
            ("cascade", "vertical: tiny-draft over ngram", {"draft": tiny, "draft2": ngram},
             {"K": 4, "K_inner": 2, "K_tail": 0}, None),
            ("cascade", "horizontal: tiny-draft, then ngram", {"draft": tiny, "draft2": ngram},
             {"K": 3, "K_inner": 0, "K_tail": 2}, None),
            ("cascade", "both", {"draft": tiny, "draft2": ngram},
             {"K": 3, "K_inner": 2, "K_tail": 2}, None)]
    lines = [f"`{measured_command()}`", "",
             "| method | drafter | options | T | tokens/target call (median) | draft calls per "
             "target call (tiny-draft or self / ngram) | c_d = draft call / target call | c = "
             "verify call / 1-token call | speedup vs autoregressive (median, IQR) | theory "
             "speedup |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    # tiny-draft's review call of K_inner + 1 tokens
    c_inner = call_cost(tiny, prompts[0], 3)
    alphas = []
    for T in temperatures:
        options = {"temperature": T}
        alpha = {"tiny": measure_alpha(tiny, target, prompts, n_tokens, options),
                 "ngram": measure_alpha(ngram, target, prompts, n_tokens, options),
                 "ngram_tiny": measure_alpha(ngram, tiny, prompts, n_tokens, options),
                 "skip": self_draft_alpha(skip, target, prompts, n_tokens, options),
                 "exit": self_draft_alpha(exit_, target, prompts, n_tokens, options),
                 "m2": self_draft_alpha(paper, target, prompts, n_tokens, options)}
        alphas.append(f"| {T:g} | " + " | ".join(f"{a:.3f}" for a in alpha.values()) + " |")
        measured = {}
        for method, drafter, loaded, opts, key in rows:
            r = compare(method, prompts, {"target": target, **loaded}, n_tokens, range(seeds),
                        options, **opts)
            measured[(method, drafter)] = r
            K = opts["K"]
            if method == "cascade":
                c_d1 = measured[("speculative", "tiny-draft")]["c_d"]
                c_d2 = measured[("speculative", "ngram")]["c_d"]
                theory = cascade_speedup(alpha["tiny"], alpha["ngram"], K, opts["K_tail"], c_d1,
                                         c_d2, r["c"], alpha["ngram_tiny"], opts["K_inner"],
                                         c_inner)
                calls = f"{r['draft_calls_per_step']:.2f} / {r['draft2_calls_per_step']:.2f}"
                cost = f"{r['c_d']:.3f} / {r['c_d2']:.3f}"
            else:
                theory = expected_tokens_per_call(alpha[key], K) / (K * r["c_d"] + r["c"])
                calls, cost = f"{r['draft_calls_per_step']:.2f}", f"{r['c_d']:.3f}"
            shown = ", ".join(f"{k} {v}" for k, v in opts.items())
            lines.append(f"| {method} | {drafter} | {shown} | {T:g} | {r['tokens_per_call']:.2f} | "
                         f"{calls} | {cost} | {r['c']:.2f} | {r['speedup']:.2f}x "
                         f"({r['speedup_iqr'][0]:.2f}-{r['speedup_iqr'][1]:.2f}) | {theory:.2f}x |")
            print(lines[-1], flush=True)
    lines += ["",
              f"The theory column's inputs: alpha = E[sum min(p, q)] on the same prompts' "
              f"continuations (the self-drafts read the target's cache, as they draft), c_d and c "
              f"measured in the rows above, tiny-draft's 3-token review call = {c_inner:.2f} of "
              f"its 1-token call. Self-drafts: E[tokens](alpha, K) / (K c_d + c) at a fixed K "
              f"(layer_skip also stops early); cascades: picospec.theory.cascade_speedup.", "",
              "| T | alpha tiny-draft | alpha ngram | alpha ngram under tiny-draft | alpha "
              "layer_skip "
              "| alpha early_exit | alpha skip m2 |", "|---|---|---|---|---|---|---|"] + alphas
    return lines


def main(target="tiny-target", bench_prompts=8, prompt_tokens=64, n_tokens=64, seeds=2,
         temperatures=(0.0, 1.0), out=None):
    """The table: each self-drafting and cascade row against autoregressive decoding."""
    offline = read_settings().offline  # PICOSPEC_OFFLINE, as main.py reads it
    model, encoder = load_model(target, offline=offline, **engine_choices())
    top = header(thread_policy(model.n_params))
    print(top, flush=True)
    text = "\n".join(bench(model, encoder, target, bench_prompts, prompt_tokens, n_tokens, seeds,
                           temperatures))
    print(text)
    if out:
        write_page(out, text, top)


OPTIONS = [
    Option("target", str, "tiny-target", "the target model"),
    Option("bench_prompts", int, 8, "held-out prompts (seed 0, as bench.harness)", low=1),
    Option("prompt_tokens", int, 64, "tokens per prompt", low=1),
    Option("n_tokens", int, 64, "new tokens per run", low=2),
    Option("seeds", int, 2, "seeds per prompt", low=1),
    Option("temperatures", "floats", (0.0, 1.0), "temperatures, a row each", low=0),
    Option("out", "out", None, "also write the table to this file")]


if __name__ == "__main__":
    command(main, OPTIONS)
