"""Writes notebooks/token_trees.ipynb without outputs (run it: notebook_io.py)."""
import nbformat as nbf

from notebook_io import NOTEBOOKS, save

nb = nbf.v4.new_notebook()
md, code = nbf.v4.new_markdown_cell, nbf.v4.new_code_cell
nb.cells = [
md("""# Token trees from drafts: SpecInfer and Sequoia

A draft model proposes not one continuation but a tree of them; the target scores the whole tree in one forward pass
with a tree attention mask, and a rejection-sampling walk keeps one path of it, losslessly.

* **SpecInfer** (Miao et al. 2024, arXiv:2305.09781): the tree grows by an *expansion configuration* `<k_1, .., k_d>`
  (every node of depth i - 1 gets k_i children, sampled i.i.d. from the draft; at temperature 0 its top k_i), trees
  of several drafts are merged into one trie, and *multi-step speculative sampling* verifies it
  (`picospec.verify.verify_iid`).
* **Sequoia** (Chen et al. 2024, arXiv:2402.12374): children are drawn *without replacement* and judged against the
  law each was really drawn from (`verify_without_replacement`); the tree's shape comes from a dynamic program over a
  measured *acceptance vector*, and its size from the measured cost of verification on the machine.

Plan: a drawn tree and its attention mask; one verification step by hand (and why merged duplicates keep their
draws); the acceptance vector of the built-in pair; the dynamic program's trees beside a brute-force search; a small
bench."""),
code("""import os, sys, itertools
sys.path.insert(0, "..")
from picospec_cli import env_flag
QUICK = env_flag("PICOSPEC_QUICK", False)  # CI (1, true, yes): fewer prompts, tokens, repeats
from picospec_app.settings import engine_choices
ENGINE = engine_choices()  # as main.py: its PICOSPEC_* settings and the cores idle now
import numpy as np
import matplotlib.pyplot as plt
from gpt2.load import load_model
from gpt2.engine import tree_mask
from picospec.sampling import residual, warp
from picospec.tree import DrawTrie, ancestor_mask, node_path
from picospec.specinfer import grow
from picospec.sampling import sample_without_replacement as without_replacement
from picospec.sequoia import all_trees, sequoia_tree, tree_value
from picospec_app.load import load_acceptance
from picospec.sequoia import acceptance_vector
ACCEPTANCE = load_acceptance("tiny-target", "tiny-draft")  # measured by bench.token_trees, beside the target
from picospec_app.machine import blas_line, policy
target, encoder = load_model("tiny-target", **ENGINE)  # each engine runs on main.py's BLAS policy
draft = load_model("tiny-draft", **ENGINE)[0]
ngram = load_model("ngram")[0]
print(blas_line(policy(target)))

def draw(choices, labels=None, ax=None, title=""):
    \"\"\"Draw a tree given as rank paths (root at the top, children left to right in rank order).\"\"\"
    ax = ax or plt.gca()
    nodes = [()] + [tuple(c) for c in choices]
    leaves = [c for c in nodes if not any(len(o) == len(c) + 1 and o[:-1] == c for o in nodes)]
    order = sorted(leaves)
    x = {}
    for c in sorted(nodes, key=len, reverse=True):
        kids = [o for o in nodes if len(o) == len(c) + 1 and o[:-1] == c]
        x[c] = order.index(c) if not kids else np.mean([x[k] for k in kids])
    for c in nodes[1:]:
        ax.plot([x[c[:-1]], x[c]], [-len(c) + 1, -len(c)], "k-", lw=0.8)
    for c in nodes:
        ax.text(x[c], -len(c), (labels or {}).get(c, "root" if not c else str(c[-1])), ha="center", va="center",
                bbox=dict(boxstyle="round", fc="#9cf" if not c else "#efe"), fontsize=8)
    ax.set_title(title, fontsize=9); ax.axis("off")"""),
md("""## A drawn tree and its attention mask

SpecInfer's expansion `<1, 2, 2>` with the tiny draft at temperature 1 after a prompt: one child of the root, two
below it, two below each of those. Then the n-gram draft grows its own tree from the same configuration, merged in.
Samples of the same token under the same parent are one node (scored once), but every draw is kept with the law it
came from: `draws` lists the node each draw landed on, in order."""),
code("""x = encoder.encode("def read_lines(path):\\n    with open(path) as f:\\n        return ")
rng = np.random.default_rng(3)
trie = grow(draft, x, (1, 2, 2), DrawTrie(), rng, greedy=False)
n_tiny = len(trie.draws)
trie = grow(ngram, x, (1, 2, 2), trie, rng, greedy=False)
tokens, parents = trie.tokens, trie.parents
for i, (t, p) in enumerate(zip(tokens, parents)):
    print(f"node {i:2d}  parent {p:2d}  token {encoder.decode([t])!r:12}  path {encoder.decode(node_path(tokens, parents, i))!r}")
print("draws (tiny draft):", trie.draws[:n_tiny])
print("draws (n-gram)    :", trie.draws[n_tiny:])
print(f"{len(trie.draws)} draws, {len(tokens)} nodes: the target scores {len(tokens)} rows after the root, not {len(trie.draws)}")"""),
md("""The mask: node i sees node j when j is i or one of its ancestors, never a sibling or a cousin (the root, the last
prompt token, is seen by all and not drawn). `picospec.tree.ancestor_mask` is the teaching copy; the engine builds
its own (`gpt2.engine.tree_mask`): the two agree."""),
code("""mask = ancestor_mask(parents)
assert np.array_equal(mask, tree_mask(parents, np))
labels = [encoder.decode([t]).replace("\\n", "\\\\n") for t in tokens]
fig, ax = plt.subplots(figsize=(5, 5))
ax.imshow(mask, cmap="Blues")
ax.set_xticks(range(len(tokens)), labels, rotation=90); ax.set_yticks(range(len(tokens)), [f"{i} {l}" for i, l in enumerate(labels)])
ax.set_title("tree attention mask (row sees column)"); plt.show()
print("the last node sees nodes", np.flatnonzero(mask[-1]).tolist(), "(itself and its ancestors)")"""),
md("""One forward pass scores every node: row 0 is the target's law after the prompt, row 1 + i its law after node i's
path. Each row equals a plain call on that path's tokens (checked here for every node)."""),
code("""Q = target.tree(x, tokens, parents, probs=True)   # [1 + m, V]
for i in range(len(tokens)):
    assert np.allclose(Q[1 + i], target(x + node_path(tokens, parents, i))[-1], atol=1e-5)
print("rows:", Q.shape, "- each row equals the plain forward of its path")"""),
md("""## One verification step, by hand

A 3-token vocabulary. Below the root the target says q = [.1, .5, .4]; the draft says p = [.6, .1, .3], and three
i.i.d. draws came out `[0, 0, 2]`: token 0 twice. The trie has two nodes (tokens 0 and 2) and three draws. Each trial
keeps its token with probability min(1, q(x) / p(x)); a rejection replaces q by norm(max(0, q - p)) before the next
trial. The second draw of token 0 can never be kept (token 0 was rejected once, so q(0) is now 0), but its trial
still moves q: from [0, .8, .2] to [0, 1, 0], and token 2 is then kept with probability 0 instead of 2/3."""),
code("""p, q = np.array([.6, .1, .3]), np.array([.1, .5, .4])
def walk(draws, laws, q, show=True):
    \"\"\"Exact law of the token one verification outputs, for fixed draws (trial by trial).\"\"\"
    out, reach = np.zeros_like(q), 1.0
    for x, law in zip(draws, laws):
        keep = min(1, q[x] / law[x])
        if show: print(f"  try {x}: q = {np.round(q, 3)}  keep with {keep:.3f}  (reached with {reach:.3f})")
        out[x] += reach * keep
        reach *= 1 - keep
        q = residual(q, law)
    if show: print(f"  none kept (probability {reach:.3f}): sample q = {np.round(q, 3)}")
    return out + reach * q
print("draws [0, 0, 2], each judged against p:")
law = walk([0, 0, 2], [p] * 3, q)
print("output law for these draws:", np.round(law, 3))"""),
md("""That is the law *given* these draws. Averaged over all 27 draw sequences (each with its probability p(x1)p(x2)p(x3))
it is exactly q: verify_iid is lossless. Trying each merged token once instead (dropping the repeat's trial) is not:"""),
code("""def average(rule):
    total = np.zeros(3)
    for draws in itertools.product(range(3), repeat=3):
        total += np.prod(p[list(draws)]) * rule(list(draws))
    return total
every_draw = average(lambda d: walk(d, [p] * 3, q, show=False))
once = average(lambda d: walk(list(dict.fromkeys(d)), [p] * len(set(d)), q, show=False))
print("q                          ", q)
print("every draw tried (SpecInfer)", np.round(every_draw, 4))
print("each token tried once       ", np.round(once, 4), " <- wrong")
assert np.allclose(every_draw, q) and not np.allclose(once, q)"""),
md("""Sequoia draws the children *without replacement* (distinct tokens; here two of the three); child k's law is p
with the earlier children removed and renormalised, and that is the law it is judged against and subtracted after a
rejection. Judging them against p (the i.i.d. rule) is wrong:"""),
code("""def without(order, p):
    laws, left = [], p.copy()
    for t in order:
        laws.append(left / left.sum()); left = np.where(np.arange(3) == t, 0, left)
    return laws
right, wrong = np.zeros(3), np.zeros(3)
for order in itertools.permutations(range(3), 2):        # two children, distinct
    laws = without(order, p)
    prob = laws[0][order[0]] * laws[1][order[1]]
    right += prob * walk(list(order), laws, q, show=False)
    wrong += prob * walk(list(order), [p, p], q, show=False)
print("judged against their own laws", np.round(right, 4))
print("judged as if i.i.d.          ", np.round(wrong, 4), " <- wrong")
assert np.allclose(right, q) and not np.allclose(wrong, q)"""),
md("""## The acceptance vector of the built-in pair

Sequoia's acceptance vector: a_k = P(the k-th child is the one accepted), measured where decoding goes (held-out
prompts followed by the target's own continuation). At temperature 0 the children are the draft's top-k tokens;
at temperature 1 they are drawn without replacement (Sequoia) or i.i.d. (SpecInfer). A small measurement here
(`python -m bench.token_trees --record gpt2/assets/tiny-target` measures on more text and stores the vectors that
`main.py --method sequoia` uses in `gpt2/assets/tiny-target/sequoia.json`, loaded above as `ACCEPTANCE`)."""),
code("""from gpt2.train.corpus import heldout_prompts
from picospec.autoregressive import autoregressive_sampling
prompts = heldout_prompts(encoder, 3, 48, seed=1)
REPEATS = 6  # draws of the children at each position, at temperature 1
vectors = {}
for T, kinds in ((0.0, ("top",)), (1.0, ("without_replacement", "iid"))):
    seqs = [autoregressive_sampling(x, target, 32, np.random.default_rng(i), temperature=T) for i, x in enumerate(prompts)]
    for kind in kinds:
        vectors[f"T={T:g} {kind}"] = acceptance_vector(draft, target, seqs, 48, 6, np.random.default_rng(0),
                                                       siblings=kind, repeats=REPEATS,
                                                       temperature=T)
fig, ax = plt.subplots(figsize=(7, 3))
for i, (name, a) in enumerate(vectors.items()):
    ax.bar(np.arange(1, 7) + 0.27 * (i - 1), a, width=0.27, label=name)
    print(f"{name:26s}", np.round(a, 3), " sum", round(a.sum(), 3))
wr, iid = (round(float(vectors[f"T=1 {kind}"][1]), 3) for kind in ("without_replacement", "iid"))
trials = sum(len(s) - 48 + 1 for s in seqs) * REPEATS  # seqs: temperature 1's; per kind
error = np.sqrt((wr * (1 - wr) + iid * (1 - iid)) / trials)  # of the difference, about
print(f"a_2 at T=1 over {trials} trials each: {wr:.3f} without replacement, {iid:.3f} i.i.d.; the "
      f"difference {wr - iid:+.3f} is {(wr - iid) / error:.1f} standard errors ({error:.3f}): "
      + ("larger without replacement, beyond the noise" if wr - iid > 2 * error
         else "not told apart from the noise at this size"))
ax.set(xlabel="child k", ylabel="P(child k is accepted)", yscale="log"); ax.legend(); plt.show()"""),
md("""The first child carries most of the mass, but the second and third still add: a tree beats a
chain when the extra rows are cheap. Without replacement a later child is never a token already
rejected; an i.i.d. draw often repeats the first one and adds nothing, so a_2 should come out larger
without replacement than i.i.d. The last line above says whether this measurement shows it: each a_k
is a share of a few hundred trials, with a standard error of about √(a(1 − a) / trials), so a gap of
a few hundredths needs some hundreds of trials per kind to stand out (twice the gap, or four times
the trials, doubles its count of standard errors).

## The dynamic program's trees

Under positional acceptance a node at rank path (r_1, .., r_d) is accepted with probability a_(r_1)
... a_(r_d), and a tree's expected tokens per step is 1 + the sum of those products. Sequoia's
dynamic program, best(n, d) = 1 + max over s_1 + .. + s_k = n - 1 of sum_i a_i best(s_i, d - 1) (the
root's k children get subtrees of s_i nodes; best(1, d) = 1 and best(0, d) = 0), finds the best tree
of n nodes (root included) and depth at most d: its expected tokens per step. (The name is
`picospec/sequoia.py`'s; c stays the cost of a target call.) For n = 8 there are 429 trees; the
search over all of them finds the same value:"""),
code("""a = ACCEPTANCE["sampled"]
choices, value = sequoia_tree(a, 8, 8)
trees = list(all_trees(8, 8))
best = max(trees, key=lambda t: tree_value(t, a))
print(f"{len(trees)} trees of 8 nodes; best by search {tree_value(best, a):.4f}, dynamic program {value:.4f}")
assert abs(tree_value(best, a) - value) < 1e-12
fig, axes = plt.subplots(1, 2, figsize=(9, 3))
draw(choices, ax=axes[0], title=f"dynamic program, n = 8: {value:.3f} tokens/step")
draw(best, ax=axes[1], title=f"brute force over {len(trees)} trees: {tree_value(best, a):.3f}")
plt.show()"""),
md("""Two budgets with the built-in pair's vectors: more nodes go deep along the first children (a_1 is large) and
branch near the root, where the path probability is still high."""),
code("""fig, axes = plt.subplots(2, 2, figsize=(11, 6))
for row, kind in enumerate(("greedy", "sampled")):
    for col, n in enumerate((8, 16)):
        ch, val = sequoia_tree(ACCEPTANCE[kind], n, 8)
        draw(ch, ax=axes[row, col], title=f"{kind} vector, n = {n} ({n - 1} draft nodes): {val:.2f} tokens/step")
plt.tight_layout(); plt.show()"""),
md("""## Side by side (a small run)

Chain (speculative sampling, K = 6), SpecInfer `<1, 1, 2, 1>` and Sequoia's tree at an equal budget
of 6 draft nodes, against autoregressive decoding on a few held-out prompts (`picospec_app.compare`:
in full mode 5 interleaved rounds per prompt, autoregressive, method, autoregressive, ..., medians).
The full table is docs/results/token_trees.md (`python -m bench.token_trees`). A target call over 7 rows costs
more than a one-token call (the "call cost" column: the method's mean target call over
autoregressive decoding's, measured in the same run), so tokens per call must beat that before time
is saved. The last column is the cost model (picospec_app.compare.explain): E (1 + r_0) / (c +
drafting + r) from the measured costs (r the rest of a step outside the model calls, r_0 the same
for an autoregressive token) beside the measured speedup, and the same with c = 1.2, verification
nearly free as on a GPU. The "accepted/step" column is the mean number of drafted tokens kept, over
the steps that drafted to the tree's full depth only; "tokens/call" is every token the run yields
per target call (the kept drafts plus the one token the target adds), over all steps and the median
over prompts. The two are measured over different steps, so tokens/call need not be 1 +
accepted/step. Every row here scores at most 7 rows in its target call (SpecInfer at temperature 1
merges repeated draws into one node, and a run's last step drafts no more than the tokens still
needed); the "limit" at the end of each row names what holds that row down (on a CPU without a
small-matrix path it is often the call's cost c), the c = 1.2 figure gives the same steps where
verification is nearly free, and the verdict under each row says what its figures imply."""),
code("""from picospec_app.compare import compare, explain
from picospec_app.machine import blas_line, policy
sys.path.insert(0, "src")  # notebooks/src: the verdict sentences, computed from the figures
from verdicts import gains, versus
print(blas_line(policy(target)))  # the BLAS kernel family the times below run on
from picospec_app.compare import mean_accepted
prompts = heldout_prompts(encoder, 1 if QUICK else 2, 48)
N, REPEATS, TEMPERATURES = (16, 1, (0.0,)) if QUICK else (32, 5, (0.0, 1.0))
loaded = {"target": target, "draft": draft, "acceptance": ACCEPTANCE}
print(f"{'method':28s} {'T':>3s} {'accepted/step':>14s} {'tokens/call':>12s} {'call cost':>10s} {'speedup':>8s}")
for T in TEMPERATURES:
    a = ACCEPTANCE["greedy" if T == 0 else "sampled"]
    for label, method, options, depth in (("chain K=6", "speculative", dict(K=6), 6),
                                          ("SpecInfer <1,1,2,1>", "specinfer", dict(expansion=(1, 1, 2, 1)), 4),
                                          ("Sequoia, 6 nodes", "sequoia", dict(nodes=6, depth=6),
                                           max(map(len, sequoia_tree(a, 7, 6)[0])))):
        r = compare(method, prompts, loaded, N, range(1), {"temperature": T}, repeats=REPEATS,
                    **options)
        print(f"{label:28s} {T:3g} {mean_accepted(r['stats'], depth):14.2f} {r['tokens_per_call']:12.2f} "
              f"{r['c']:10.2f} {r['speedup']:7.2f}x  {explain(r)}")
        print(f"{'':32s} {versus(r['speedup'], r['predicted'])}; {gains(r['predicted'])}")"""),
]
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
save(nb, NOTEBOOKS / "token_trees.ipynb")
