"""Writes notebooks/self_drafting.ipynb without outputs (run it: notebook_io.py)."""
import nbformat as nbf

from notebook_io import NOTEBOOKS, save

nb = nbf.v4.new_notebook()
md, code = nbf.v4.new_markdown_cell, nbf.v4.new_code_cell
nb.cells = [
md("""# Drafting without a draft model: the target drafts for itself, and drafts for drafts

* **layer skipping** (Draft & Verify, Zhang et al. 2023, arXiv:2309.08168): the draft is the target with some of its
  attention and MLP sublayers skipped; it stops drafting when unsure, and "unsure" adapts to the acceptance;
* **early exit** (LayerSkip, Elhoushi et al. 2024, arXiv:2404.16710): the draft is the target's first E layers; the
  verification runs only the remaining layers on the drafted tokens, reusing the first E layers' KV cache;
* **cascades** (CS Drafting, Chen et al. 2023, arXiv:2312.11462): the tiny draft's own drafts come from the n-gram
  model (vertical), and the n-gram model also adds the last, rarely accepted positions (horizontal).

All three are lossless (`tests/picospec/test_self_draft.py`, `tests/picospec/test_cascade.py` check the law of whole sequences). The
self-drafts read and write the target's own KV cache (`gpt2/self_draft.py`); to the algorithm
(`picospec/self_draft.py`) the draft is just one more model function."""),
code("""import os, sys
sys.path.insert(0, "..")
from picospec_cli import env_flag
QUICK = env_flag("PICOSPEC_QUICK", False)  # CI (1, true, yes): fewer prompts, tokens, repeats
from picospec_app.settings import engine_choices
ENGINE = engine_choices()  # as main.py: its PICOSPEC_* settings and the cores idle now
import json
import numpy as np
import matplotlib.pyplot as plt
from IPython.display import HTML, display
from gpt2.load import ASSETS, load_model
from gpt2.self_draft import SelfDraft, exit_skip, load_self_draft, parse_skip, read_config, sublayer_name
from gpt2.train.skip_search import draft_logits
from picospec.theory import greedy_walk, walk_speedup, cascade_speedup, expected_speedup
from picospec.self_draft import adapt_threshold
target, encoder = load_model("tiny-target", **ENGINE)
config = read_config(ASSETS / "tiny-target")
L = target.hparams["n_layer"]
print("sublayers:", [sublayer_name(s) for s in range(2 * L)])
print("shipped skip set:", config["layer_skip"]["skip"], " K", config["layer_skip"]["K"],
      " threshold", config["layer_skip"]["threshold"])
exit_config = config["early_exit"]
print("shipped early exit: after layer", exit_config["exit_layer"], " adapter", exit_config["adapter"],
      " K", exit_config["K"])"""),
md("""## The walk: tokens per target call from agreement, by hand

At temperature 0 the draft's token is kept while it equals the target's. `agree[i]` says whether the draft, having
read new token i, guesses token i + 1. The walk below is `picospec.theory.greedy_walk`'s docstring example: with
K = 3 and a confidence stop at gamma = 0.5 the first step stops after its second draft (confidence 0.3) and loses
nothing."""),
code("""agree = [1, 1, 0, 1, 1]
print("K=2:", greedy_walk(agree, 2))
print("K=3:", greedy_walk(agree, 3))
print("K=3, stop below 0.5:", greedy_walk(agree, 3, [0.9, 0.3, 0.9, 0.9, 0.9], 0.5))
print("speedup with c_d = 0.25, c = 1:", walk_speedup([greedy_walk(agree, 2)], 0.25, lambda k: 1.0))
# Draft & Verify's threshold update, one step: 1 of 4 drafts kept, so the threshold goes up (fewer drafts)
print("gamma, AR =", adapt_threshold(0.6, 0.9, 1, 4, alpha=0.9, epsilon=0.01, beta1=0.5, beta2=0.9))"""),
md("""## Every skip set: the landscape

`python -m gpt2.train.self_draft --task search` scored all 2^12 = 4096 skip sets of the 6-layer target:
for each, the draft's agreement with the target at 16 x 32 positions of held-out prompts' greedy
continuations (one depth-first pass in which sets that keep the same first sublayers share their
computation), walked with each K and threshold, and timed by two cost models: the CPU the search ran
on (its measured sublayer costs, and the cost of verifying k + 1 tokens, printed below in one-token
calls) and a memory-bound accelerator (a call costs the weights it reads, whatever its tokens). On
the search's CPU a one-token step of the tiny target was bound by reading its weights, so verifying
a few tokens cost about as much as one token, and the cheapest drafts win: the search keeps one or
two sublayers. Where verification costs more, the live run at the end shows it (c, measured on the
machine at hand)."""),
code("""search = config["layer_skip"]["search"]
agreement = np.array(search["agreement"])
skipped = np.array([bin(m).count("1") for m in range(4096)])
fig, axes = plt.subplots(1, 2, figsize=(12, 4), sharey=False)
for ax, key, title in zip(axes, ("cpu", "memory_bound"), ("the search's CPU (measured costs)", "memory-bound accelerator")):
    speed = np.array(search[key]["speedup"])
    jitter = np.random.default_rng(0).uniform(-0.3, 0.3, 4096)  # spread the sets of one size apart
    drafts = slice(1, None)  # set 0 skips nothing: the target itself, no draft
    sc = ax.scatter((skipped + jitter)[drafts], speed[drafts], c=agreement[drafts], s=4, cmap="viridis")
    for label, name, marker in (("best", search[key]["best"], "*"), ("greedy", search[key]["greedy"]["skip"], "x"),
                                ("hill climbing", search[key]["hill_climb"]["skip"], "+")):
        m = sum(1 << s for s in parse_skip(name, L))
        ax.scatter([skipped[m]], [speed[m]], marker=marker, s=150, color="red", label=f"{label}: {name}")
    exits = [sum(1 << s for s in exit_skip(E, L)) for E in range(L)]
    ax.plot(skipped[exits], speed[exits], "k.--", label="early exits (LM head)")
    ax.axhline(1, color="gray", lw=0.8)
    ax.set(xlabel="sublayers skipped", ylabel="expected speedup (best K, threshold)", title=title)
    ax.legend(fontsize=7)
fig.colorbar(sc, ax=axes, label="agreement with the target")
plt.show()
for key in ("cpu", "memory_bound"):
    s = search[key]
    best = max(s["speedup"])
    for label in ("greedy", "hill_climb"):
        m = sum(1 << x for x in parse_skip(s[label]["skip"], L))
        print(f"{key:12s} {label:10s}: {s[label]['evaluations']:4d} sets evaluated, {s[label]['skip']:20s} "
              f"{s['speedup'][m]:.3f}x = {s['speedup'][m] / best:.1%} of the exhaustive optimum {s['best']} "
              f"({best:.3f}x)")
costs = search["costs_ms"]  # measured by the search, on the machine it ran on (ms)
print("the search's CPU: verification of k + 1 tokens, in one-token target calls, k = 1..8:",
      [round(v / costs["verify"][0], 2) for v in costs["verify"][1:]])
print(f"the search's CPU: a draft call's fixed cost (embedding, LM head), in one-token target calls: "
      f"{costs['call'] / costs['verify'][0]:.2f}")"""),
md("""A second way to the shipped number: recompute the shipped set's agreement in one batched pass, walk it, and
compare with what the search stored (and with decoding: `tests/picospec/test_self_draft.py` decodes the same prompts)."""),
code("""record = config["layer_skip"]
x, start = np.array(search["sequences"]), search["start"]
logits = draft_logits(target.params, target.hparams, x, start, parse_skip(record["skip"], L))
agree = logits.argmax(-1) == x[:, start + 1:]
top = np.exp(logits - logits.max(-1, keepdims=True)); confidence = 1 / top.sum(-1)
walks = [greedy_walk(a, record["K"], q, record["threshold"]) for a, q in zip(agree, confidence)]
print("agreement", agree.mean(), "stored", record["predicted"]["agreement"])
print("tokens per target call", x[:, start:].size / sum(1 + len(w) for w in walks), "stored",
      record["predicted"]["tokens_per_call"])"""),
md("""## Early exit: how often does layer E already know?

The plain LM head on layer E's residual stream agrees with the full model rarely (the tiny target was not trained
with LayerSkip's early-exit loss), so each exit layer also gets a small adapter: a tied residual head of
`gpt2/heads.py` (C x C + C numbers) trained with the training loop of `gpt2/train/gpt2.py` to give the target's law from layer E
(`python -m gpt2.train.self_draft --task exits`)."""),
code("""curve = config["early_exit"]["curve"]
plain = [agreement[sum(1 << s for s in exit_skip(E, L))] for E in range(L)] + [1.0]  # from the search, E = 0..6
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(range(L + 1), plain, "o-", label="LM head: greedy agreement (search)")
Es = sorted(int(E) for E in curve["adapter"])
ax.plot(Es, [curve["adapter"][str(E)]["agreement"] for E in Es], "s-", label="exit adapter: greedy agreement")
for label, style in (("LM head", "o:"), ("adapter", "s:")):
    ax.plot(Es, [curve[label][str(E)]["alpha"] for E in Es], style, alpha=0.5, label=f"{label}: alpha at T=1")
ax.set(xlabel="exit after layer E", ylabel="agreement with the target", ylim=(0, 1.05)); ax.legend(fontsize=7)
plt.show()
# the same numbers a second way: the search's exit sets and the exits task measured them on the same positions
print("LM head, exit after", Es, ":", [round(float(plain[E]), 4) for E in Es], "=",
      [round(curve["LM head"][str(E)]["agreement"], 4) for E in Es])
for E in Es:
    print(f"exit after {E}: " + ", ".join(f"{label} agreement {curve[label][str(E)]['agreement']:.3f} alpha "
                                          f"{curve[label][str(E)]['alpha']:.3f}" for label in ("LM head", "adapter")))
e = config["early_exit"]
print(f"shipped: exit after {e['exit_layer']}, adapter {e['adapter']}, K {e['K']}: predicted "
      f"{e['predicted']['tokens_per_call']:.2f} tokens per target call, {e['predicted']['speedup']:.3f}x on the "
      "CPU the exits task ran on")"""),
md("""## KV reuse, token by token

The loop drives the engine like this: the target has read the prefix and given token t; the draft reads t, d1, d2
(each call runs layers 1..E of one token and writes their keys/values into the target's cache) and proposes d3; the
target's call on the prefix + t, d1, d2, d3 runs d3 through layers 1..E, then all four through layers E+1..6, from the
residuals the draft saved. The logits equal a full forward of the same tokens."""),
code("""from gpt2.model import gpt2
engine = load_self_draft(target.hparams, target.params, ASSETS / "tiny-target", "early_exit")
x = encoder.encode("def read_lines(path):\\n    with open(path) as f:\\n")
engine.target(x[:-1])
drafts = []
for _ in range(3):
    drafts.append(int(engine.draft(x + drafts)[0].argmax()))
rows = engine.rows  # the engine's one row: what its cache holds
print("drafted:", [encoder.decode([d]) for d in drafts], f"| keys/values in every layer: {rows.verified[0]} tokens;",
      f"in layers 1..E only: {rows.h_cut[0].shape[0]} tokens, their residuals saved at the cut")
got = engine.target.logits(x + drafts, len(drafts) + 1)
full = gpt2(np.asarray(x + drafts), **target.params, n_head=target.hparams["n_head"])[-len(drafts) - 1:]
print("target's argmax:", [encoder.decode([int(t)]) for t in got.argmax(-1)])
print("max |verification - full forward| =", float(np.abs(got - full).max()))"""),
md("""## One cascade step, drawn token by token

Models are wrapped to log every call. The target reviews K = 3 tokens of tiny-draft, which tiny-draft makes by its
own review steps over n-gram drafts, at most K_inner = 2 in one call and fewer when fewer tokens are still needed
(vertical), then K_tail = 2 n-gram tokens (horizontal)."""),
code("""from picospec.cascade import review_step
tiny, ngram = load_model("tiny-draft", **ENGINE)[0], load_model("ngram")[0]
log = []
def logged(name, model):
    def call(x, n=1):
        out = model(x, n)
        log.append((name, n, [encoder.decode([int(t)]) for t in out.argmax(-1)]))
        return out
    return call
prompt = encoder.encode("import os\\n\\n\\ndef list_files(path):\\n    return [")
for m in (target, tiny):
    m.reset()
models = [logged("target", target), logged("tiny-draft", tiny), logged("ngram", ngram)]
new, laws, origins, drafted = review_step(prompt, models, [[0, 3, 2], [0, 0, 2], [0, 0, 0]], 10,
                                         np.random.default_rng(0), {"temperature": 0})
# at temperature 0 a proposal is the proposer's argmax; a reviewer keeps the drafts that equal its own tokens
for name, n, argmax in log:
    if n == 1 and name == "ngram":
        print(f"{name:10s} proposes {argmax[0]!r}")
    else:
        print(f"{name:10s} reviews {n - 1} draft(s) in one call; its own token at each position: {argmax}")
colors = {"draft": "#9f9", "resample": "#fd9", "bonus": "#9cf"}
spans = "".join(f'<span style="background:{colors[o]}">{encoder.decode([t])}</span>' for t, o in zip(new, origins))
display(HTML(f"<pre>{encoder.decode(prompt)}{spans}</pre>"))
print(f"{drafted} drafted, {origins.count('draft')} kept, origins {origins}")"""),
md("""## Side by side on a few held-out prompts

A small live run (in full mode 2 prompts, 32 new tokens; temperature 0): tokens per target call
and wall-clock speedup against autoregressive decoding with the same engine. The full table, with
the theory beside it, is docs/results/self_draft.md (`python -m bench.self_draft`). Each
prompt's times are medians of interleaved rounds (autoregressive, method, autoregressive, ...; 5 in
full mode), so a change of load falls on both alike.

Each row prints the cost model (picospec_app.compare.explain), every cost measured in this run in
one-token target calls of autoregressive decoding: E tokens per target call, c the verification
call, c_d one draft call and "drafting" the draft calls of a step (k c_d), r the rest of a step
outside the model calls (r_0 the same for an autoregressive token), the speedup E (1 + r_0) / (c +
drafting + r) they give beside the measured one (the run's own costs: they account for it), the
same with c = 1.2 (verification nearly free,
as on a GPU), and the largest cost beyond the one call autoregressive decoding pays. A self-drafting
verification call skips, for the tokens the draft has read, the sublayers below the draft's first
skipped one (the draft already ran them as the target does: every layer before an early exit's exit,
none for a skip set that skips a0); what it still costs is the row's c. By the cost model a row
gains only where E (1 + r_0) exceeds c + drafting + r, and with verification nearly free only where
it exceeds 1.2 + drafting + r: each row prints E, c, drafting and r, and the verdict printed under
it follows from them, not from the method's name. The measured speedup of a row whose costs give
near 1 can land on either side of 1 with the machine's load."""),
code("""from picospec_app.load import load_self_draft as load_as_main
from picospec_app.compare import compare, explain
sys.path.insert(0, "src")  # notebooks/src: the verdict sentences, computed from the figures
from verdicts import gains, versus
from picospec_app.machine import blas_line, policy
print(blas_line(policy(target)))  # the BLAS kernel family the times below run on
from gpt2.train.corpus import heldout_prompts
prompts = heldout_prompts(encoder, 1 if QUICK else 2, 64)
N, REPEATS = (16, 1) if QUICK else (32, 5)
# as main.py loads them: on the target engine's weights, with its weight panels and LM head copy
skip, exit_ = (load_as_main(kind, {}, target, "tiny-target") for kind in ("layer_skip", "early_exit"))
rows = [("speculative", "tiny-draft", {"draft": tiny}, {"K": 4}),
        ("speculative", "ngram", {"draft": ngram}, {"K": 4}),
        ("layer_skip", record["skip"], skip, {}),
        ("early_exit", f"exit {exit_['target'].engine.skip[0] // 2}", exit_, {}),
        ("cascade", "vertical", {"draft": tiny, "draft2": ngram}, {"K": 4, "K_inner": 2, "K_tail": 0}),
        ("cascade", "horizontal", {"draft": tiny, "draft2": ngram}, {"K": 3, "K_inner": 0, "K_tail": 2}),
        ("cascade", "both", {"draft": tiny, "draft2": ngram}, {"K": 3, "K_inner": 2, "K_tail": 2})]
results = []
for method, label, loaded, options in rows:
    r = compare(method, prompts, {"target": target, **loaded}, N, range(1), {"temperature": 0},
                repeats=REPEATS, **options)
    results.append((f"{method}\\n{label}", r["tokens_per_call"], r["speedup"], r["predicted"],
                    r["predicted_gpu"]))
    print(f"{method:12s} {label:22s} c_d {r['c_d']:.2f}  {explain(r)}")
    print(f"{'':35s} {versus(r['speedup'], r['predicted'])}; "
          f"{gains(r['predicted'])}")
fig, ax = plt.subplots(figsize=(10, 3))
at = np.arange(len(results))
ax.bar(at - 0.27, [r[2] for r in results], 0.27, label="measured")
ax.bar(at, [r[3] for r in results], 0.27, label="cost model, c measured")
ax.bar(at + 0.27, [r[4] for r in results], 0.27, label="cost model, c = 1.2")
ax.set_xticks(at, [r[0] for r in results], fontsize=7); ax.axhline(1, color="k", lw=0.8)
ax.set_ylabel("speedup (T=0)"); ax.legend(fontsize=7); plt.show()"""),
]
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
save(nb, NOTEBOOKS / "self_drafting.ipynb")
