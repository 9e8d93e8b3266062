"""Writes notebooks/model_free_drafting.ipynb without outputs (run it: notebook_io.py)."""
import nbformat as nbf

from notebook_io import NOTEBOOKS, save

nb = nbf.v4.new_notebook()
md, code = nbf.v4.new_markdown_cell, nbf.v4.new_code_cell
nb.cells = [
md("""# Drafting without a draft model: prompt lookup, REST, lookahead

Three ways to guess the next tokens for free, each verified by the same target call as speculative sampling:

* **prompt lookup** (Saxena 2023): find the last n-gram earlier in the text and copy what followed;
* **REST** (He et al. 2023, arXiv:2311.08252): find the context's longest suffix in a corpus (a suffix array) and
  verify a trie of what followed its occurrences;
* **lookahead** (Fu et al. 2024, arXiv:2402.02057): Jacobi iteration on a window of guesses makes n-grams, a pool
  keeps them, the pool's n-grams starting with the last token are verified.

All three are lossless: at temperature 0 they print exactly greedy decoding's text (tests/ check this)."""),
code("""import os, sys
sys.path.insert(0, "..")
from picospec_cli import env_flag
QUICK = env_flag("PICOSPEC_QUICK", False)  # CI (1, true, yes): fewer prompts, tokens, repeats
from picospec_app.settings import engine_choices
ENGINE = engine_choices()  # as main.py: its PICOSPEC_* settings and the cores idle now
import numpy as np
import matplotlib.pyplot as plt
from IPython.display import HTML, display
from gpt2.load import load_model
from picospec.prompt_lookup import find_candidates, prompt_lookup_decoding
from picospec.rest import Datastore, rest_decoding
from picospec.lookahead import lookahead_tree, attention_mask, lookahead_decoding
from picospec.tree import trie, prune
target, encoder = load_model("tiny-target", **ENGINE)

def show(ids, origins, prompt_len):
    colors = {"prompt": "#ddd", "draft": "#9f9", "resample": "#fd9", "bonus": "#9cf"}
    spans = [f'<span style="background:{colors[o]}">{encoder.decode([t]).replace("<", "&lt;")}</span>'
             for t, o in zip(ids, ["prompt"] * prompt_len + origins)]
    display(HTML('<pre style="white-space:pre-wrap">' + "".join(spans) + "</pre>"))"""),
md("""## Prompt lookup, one match by hand

The worked example of `picospec/prompt_lookup.py`: the trailing 3-gram `[1, 2, 3]` occurs at position 0, so the
draft is what followed it."""),
code("""print(find_candidates([1, 2, 3, 4, 1, 2, 3], max_ngram_size=3, num_pred_tokens=2))   # -> [4, 1]
print(find_candidates([5, 1, 2, 9, 1, 2, 7, 1, 2], 3, 2))                          # no 3-gram; 2-gram -> [9, 1]"""),
md("""On real text: a function, then a request to write it again. Grey: the prompt; green: drafted tokens the target
accepted; blue/orange: the target's own token closing each step."""),
code("""src = "def area(width, height):\\n    if width < 0 or height < 0:\\n        raise ValueError('negative size')\\n    return width * height\\n\\n\\n"
x = encoder.encode(src + "def area(width, height):\\n")
stats = []
out = prompt_lookup_decoding(x, target, 40, np.random.default_rng(0), stats=stats, temperature=0)
show(out, [o for s in stats for o in s["origins"]], len(x))
for s in stats[:4]:
    print(f"drafted {s['drafted']:2d}, accepted {s['accepted']:2d}:", repr(encoder.decode(s["tokens"])))
print(f"{40 / len(stats):.2f} tokens per target call")"""),
md("""The target does not write the function again here: its first token after the prompt is a blank line, not the
function's body, so the drafted body is rejected and the text goes its own way (the step records above). Prompt lookup
saves calls only where the output repeats its input."""),
md("""## REST: a suffix array over a corpus

A toy corpus first, so the suffix array can be read by hand; then the built-in datastore (the standard library's
train split, built once and cached by `main.py --method rest`)."""),
code("""corpus = np.array([5, 1, 2, 3, 5, 1, 2, 4, 5, 1, 9], dtype=np.uint16)
store = Datastore.build(corpus, max_suffix=4)
print("suffix array:", store.sa.tolist())
for i in store.sa[:6]:
    print(f"  {int(i):2d}:", corpus[i:].tolist())
print(store.search([7, 5, 1], max_matches=10, draft_len=2))   # the longest suffix [5, 1] occurs 3 times"""),
code("""tokens, parents, counts = trie([[2, 3], [2, 4], [9]])
print("trie tokens", tokens, "parents", parents, "counts", counts)
print("pruned to 2 nodes:", prune(tokens, parents, counts, 2))"""),
code("""from picospec_app.load import rest_datastore
if QUICK:   # a small datastore, built here in seconds: 20 files of the train split
    from gpt2.train.corpus import split_files, stdlib_files, tokenize
    files = split_files(stdlib_files())["train"][:20]
    store = Datastore.build(np.array(tokenize(files, encoder), dtype=np.uint16))
else:
    store = rest_datastore(None, "tiny-target", encoder)
print(f"datastore: {len(store.tokens):,} tokens")
x = encoder.encode("import os\\n\\n\\ndef main():\\n    parser = argparse.")
conts, n = store.search(x, max_matches=100, draft_len=6)
print(f"longest suffix found: {n} tokens, {len(conts)} continuations, e.g.", [encoder.decode(c) for c in conts[:3]])
stats = []
out = rest_decoding(x, target, 40, np.random.default_rng(0), store, stats=stats, temperature=0)
show(out, [o for s in stats for o in s["origins"]], len(x))
print(f"{40 / len(stats):.2f} tokens per target call")"""),
md("""## Lookahead: the window and its mask

W = 3, N = 3: two levels of three guesses, and two pool n-grams `[7, 8]`, `[7, 9]` that continue the last token.
Because each column of the window is a chain, the whole mask is a tree mask: the engine's ordinary tree attention
runs it."""),
code("""tokens, parents, n_look = lookahead_tree([[10, 11, 12], [20, 21, 22]], [[7, 8], [7, 9]])
mask = attention_mask(parents)
fig, ax = plt.subplots(figsize=(4, 4))
ax.imshow(mask, cmap="Blues")
labels = ["(0,0)", "(0,1)", "(0,2)", "(1,0)", "(1,1)", "(1,2)", "7", "8", "9"]
ax.set_xticks(range(9), labels, rotation=90); ax.set_yticks(range(9), labels)
ax.set_title("lookahead (6) + verification (3) nodes"); plt.show()
print("depths:", mask.sum(1).tolist())"""),
code("""x = encoder.encode("    def __init__(self):\\n        self.")
stats = []
out = lookahead_decoding(x, target, 40, np.random.default_rng(0), window=4, ngram=3, guesses=4, stats=stats, temperature=0)
show(out, [o for s in stats for o in s["origins"]], len(x))
print(f"{40 / len(stats):.2f} tokens per target call")"""),
md("""## Side by side

Tokens per target call and wall-clock speedup against autoregressive decoding, measured in the same
run on a few held-out prompts, copy-heavy (a chunk, a blank line, the chunk's start again) and
ordinary. A target call over several rows costs more than a one-token call (c in each row: the
method's mean target call over autoregressive decoding's), so tokens per call must beat that cost
before time is saved. Prompt lookup and REST make a plain one-token call when they find no match;
lookahead always sends its whole window. Each figure of a row is a median over the prompts, taken
apart from the others, so the cost model holds prompt by prompt, not always between a row's
printed figures; each prompt's times are medians of interleaved rounds (autoregressive, method,
autoregressive, ...; 5 in full mode). The full table is docs/results/trees.md
(`python -m bench.trees --drafting`).

None of the three has a draft model, so the cost model is E (1 + r_0) / (c + r): E tokens per
target call, c the cost of the method's target call in one-token calls, r the rest of a step
outside the model calls (finding the drafts, verifying them, the Python between the calls) and r_0
the same for an autoregressive token (picospec_app.compare.explain prints them, the speedup they
give, which accounts for the measured one as the costs are the run's own, and
the same with c = 1.2, verification nearly free as on a GPU). By the cost model a method gains on a
prompt only where E (1 + r_0) exceeds c + r, and under each row a verdict line says what its
figures imply: lookahead pays for its whole window on every call, so its c is the one to read
first, and its extra accepted tokens save time only where they outnumber that cost."""),
code("""from picospec_app.compare import compare, copy_prompts, explain
sys.path.insert(0, "src")  # notebooks/src: the verdict sentences, computed from the figures
from verdicts import gains, versus
from picospec_app.machine import blas_line, policy
print(blas_line(policy(target)))  # the BLAS kernel family the times below run on
from gpt2.train.corpus import heldout_prompts
prompts = heldout_prompts(encoder, 1 if QUICK else 3, 48)
N, REPEATS = (16, 1) if QUICK else (32, 5)
rows = []
for label, xs in (("copy-heavy", copy_prompts(encoder, prompts)), ("ordinary", prompts)):
    for name, method in (("prompt lookup", "prompt_lookup"), ("REST", "rest"), ("lookahead", "lookahead")):
        r = compare(method, xs, {"target": target, "datastore": store}, N, range(1),
                    {"temperature": 0}, repeats=REPEATS)
        rows.append((label, name, r["tokens_per_call"], r["speedup"], r["predicted"],
                     r["predicted_gpu"]))
        print(f"{label:10s} {name:13s} {explain(r)}")
        print(f"{'':24s} {versus(r['speedup'], r['predicted'])}; "
              f"{gains(r['predicted'])}")
fig, ax = plt.subplots(figsize=(7, 3))
names = [f"{n}\\n{l}" for l, n, *_ in rows]
at = np.arange(len(rows))
ax.bar(at - 0.27, [r[3] for r in rows], 0.27, label="measured")
ax.bar(at, [r[4] for r in rows], 0.27, label="cost model, c measured")
ax.bar(at + 0.27, [r[5] for r in rows], 0.27, label="cost model, c = 1.2")
ax.set_xticks(at, names, fontsize=7); ax.axhline(1, color="k", lw=0.8)
ax.set_ylabel("speedup"); ax.legend(fontsize=7)
plt.show()"""),
]
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
save(nb, NOTEBOOKS / "model_free_drafting.ipynb")
