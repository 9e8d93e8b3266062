"""Writes notebooks/eagle.ipynb without outputs (run it: notebook_io.py)."""
import nbformat as nbf

from notebook_io import NOTEBOOKS, save

nb = nbf.v4.new_notebook()
md, code = nbf.v4.new_markdown_cell, nbf.v4.new_code_cell
nb.cells = [
md("""# EAGLE: drafting at the feature level, static and dynamic trees

Li, Wei, Zhang, Zhang 2024, *EAGLE: Speculative Sampling Requires Rethinking Feature Uncertainty* (arXiv:2401.15077),
*EAGLE-2: Faster Inference of Language Models with Dynamic Draft Trees* (arXiv:2406.16858) and 2025, *EAGLE-3:
Scaling up Inference Acceleration of Large Language Models via Training-Time Test* (arXiv:2503.01840).
Medusa's heads guess tokens 2, 3, ... places ahead from one hidden state, each blind to the guesses before it. EAGLE's
head guesses the target's next *feature* (its last hidden state) from the current feature and the token that was
actually chosen, and runs on its own guesses: a small autoregressive model one level below the tokens, which reads the
target's LM head to get token laws.

Plan: the shipped head's shapes, counted by hand; its training curve and accuracy per step ahead; one dynamic tree of
EAGLE-2 drawn with its scores, then verified; the one-hot question answered with exact laws; EAGLE-3's changes
(features from three depths, training on tokens alone, training-time test, a draft vocabulary); the bench rows."""),
code("""import os, sys, json
sys.path.insert(0, "..")
from picospec_cli import env_flag
QUICK = env_flag("PICOSPEC_QUICK", False)  # CI (1, true, yes): fewer prompts, tokens, repeats
from picospec_app.settings import engine_choices
ENGINE = engine_choices()  # as main.py: its PICOSPEC_* settings and the cores idle now
import numpy as np
import matplotlib.pyplot as plt
from gpt2.load import load_model
from picospec_app.load import load_eagle
from gpt2.weights import flatten
from picospec.eagle2 import expand, rerank, log_softmax
from picospec.tree import greedy_path
from picospec.sampling import residual"""),
md("""## The head's shapes

For a target of width C (tiny-target: C = 256, 4 attention heads, V = 4097 tokens): a linear layer from
[token embedding, feature] (2C numbers) to C, then one GPT-2 block (attention 4C² + 4C weights and biases, MLP 8C² + 5C,
two layer norms 4C). The embedding and the LM head are the target's, frozen: the head ships no vocabulary matrix."""),
code("""target, encoder = load_model("tiny-target", **ENGINE)
head = load_eagle("tiny-target", None, target)   # gpt2.eagle.EagleHead: the draft contract, with its record's accuracy
folder = head.folder
record = json.loads((folder / "eagle.json").read_text())
C = record["n_embd"]
for name, a in flatten(head.params).items():
    print(f"{name:28s} {str(a.shape):14s} {a.size:>9,}")
n = sum(a.size for a in flatten(head.params).values())
by_hand = (2 * C * C + C) + (4 * C * C + 4 * C) + (8 * C * C + 5 * C) + 4 * C
print(f"parameters: {n:,}  (by hand: fc 2C^2 + C = {2*C*C + C:,}, block 12C^2 + 13C = {12*C*C + 13*C:,}; sum {by_hand:,})")
assert n == by_hand
print(f"stored in float16: {(folder / 'eagle.safetensors').stat().st_size:,} bytes")"""),
md("""## Training

`python -m gpt2.train.eagle` (command in `gpt2/assets/build.sh`): rows of 16 prompt tokens from the training text,
each continued greedily by the target itself (self-distillation), the target's features of every row computed once,
then loss = SmoothL1(guess, next feature) + 0.1 x cross-entropy(target's law, head's law), input features perturbed by
U(-0.1, 0.1). The log holds the training loss and, on validation rows, the loss and step-1 top-1 agreement."""),
code("""hist = record["history"]
steps = [h["step"] for h in hist]
fig, ax = plt.subplots(1, 2, figsize=(10, 3))
ax[0].plot(steps, [h["loss"] for h in hist], label="train (one batch)")
ax[0].plot(steps, [h["val_loss"] for h in hist], "o-", label="validation")
ax[0].axhline(record["first_losses"]["loss"], ls="--", c="gray", label="fresh head")
ax[0].set(xlabel="step", ylabel="SmoothL1 + 0.1 CE", title="loss"); ax[0].legend()
ax[1].plot(steps, [h["val_top1"] for h in hist], "o-")
ax[1].set(xlabel="step", ylabel="top-1 agreement, step 1", title="validation")
plt.tight_layout(); plt.show()
print("data:", record["data"], "| tokens seen:", record["tokens_seen"], "| minutes:", record["machine"]["minutes"])"""),
md("""Accuracy per step ahead on the target's own continuations of validation prompts: from each position the head
drafts along the true path; step k is fed its own guessed features for steps 1..k-1 (the true token, not its own
guess, so this is "given the k - 1 before were right": exactly what acceptance along a tree path needs)."""),
code("""acc = record["accuracy"]
print("step ahead    " + "  ".join(f"{k + 1:>5d}" for k in range(len(acc["top1"]))))
print("top-1         " + "  ".join(f"{a:5.3f}" for a in acc["top1"]))
print("top-5         " + "  ".join(f"{a:5.3f}" for a in acc["top5"]))
medusa = json.loads((folder.parent / "medusa" / "heads.json").read_text())["accuracy"]
print("Medusa heads  " + "  ".join(f"{a:5.3f}" for a in medusa["top1"][1:]), " (top-1, head k guesses k + 1 ahead)")"""),
md("""## One dynamic tree (EAGLE-2)

Expansion: the root's top-k tokens form layer 1; at each further layer the head runs on the k nodes of highest value
(value = cumulative draft log-probability along the path) and each gets its top-k children. Reranking keeps the
`total_tokens` nodes of highest value from everything drafted. Below: depth 4, top-k 3, 8 kept."""),
code("""x = encoder.encode("def read_lines(path):\\n")     # main.py's default prompt
target.reset(); head.reset()
logits, H = target.logits(x, len(x), hidden=True)       # prefill: the features of every prompt position
root = int(np.argmax(logits[-1]))
x = x + [root]; F = list(H)                              # F[j]: the target's feature after x[j]
pool = expand(x, F, head, depth=4, top_k=3)
tokens, parents, values = rerank(*pool, total_tokens=8)
print("root:", repr(encoder.decode([root])), f"| {len(pool[0])} nodes drafted, 8 kept")
kept_paths = set()
for i in range(len(tokens)):
    path, node = [], i
    while node >= 0:
        path.append(tokens[node]); node = parents[node]
    kept_paths.add(tuple(path[::-1]))
    print(f"  node {i}: parent {parents[i]:2d}  {encoder.decode(path[::-1])!r:24s} value {values[i]:7.3f}")"""),
code("""pt, pp, pv = pool
kids, depth, paths = {}, {-1: 0}, {-1: ()}
for i, p in enumerate(pp):
    kids.setdefault(p, []).append(i); depth[i] = depth[p] + 1; paths[i] = paths[p] + (pt[i],)
xs, leaves = {}, [0]
def place(i):                                   # leaves side by side, a parent above the middle of its children
    for c in kids.get(i, []):
        place(c)
    if kids.get(i):
        xs[i] = np.mean([xs[c] for c in kids[i]])
    else:
        xs[i] = leaves[0]; leaves[0] += 1
place(-1)
fig, ax = plt.subplots(figsize=(13, 4.5))
for i in range(len(pt)):
    kept = paths[i] in kept_paths
    ax.plot([xs[pp[i]], xs[i]], [-depth[pp[i]], -depth[i]], c="tab:blue" if kept else "0.85", lw=2 if kept else 1, zorder=1)
    ax.scatter(xs[i], -depth[i], s=60, c="tab:blue" if kept else "0.8", zorder=2)
    ax.annotate(f"{encoder.decode([pt[i]])!r}\\n{pv[i]:.2f}", (xs[i], -depth[i]), fontsize=7, ha="center",
                va="top", xytext=(0, -6), textcoords="offset points")
ax.scatter(xs[-1], 0, s=90, c="k")
ax.annotate(f"root {encoder.decode([root])!r}", (xs[-1], 0), xytext=(8, 0), textcoords="offset points")
ax.set_axis_off(); ax.set_title("EAGLE-2 draft pool (grey) and the 8 nodes kept (blue); label: token, cumulative log p")
plt.show()"""),
md("""The target scores the kept tree in one forward (each node sees the prefix, its ancestors and itself) and the
greedy path is accepted; the accepted nodes' features come from that same forward and extend the head's context."""),
code("""tree_logits, tree_H = target.tree(x, tokens, parents, hidden=True)
path, nxt = greedy_path(tokens, parents, tree_logits)
print("accepted:", [encoder.decode([tokens[i]]) for i in path], "| next token:", repr(encoder.decode([nxt])))
print(f"{1 + len(path)} tokens from one target call; the head ran once per level (4 calls)")
mask = np.eye(len(tokens), dtype=bool)
for i, p in enumerate(parents):
    if p >= 0: mask[i] |= mask[p]
plt.figure(figsize=(3.5, 3.5)); plt.imshow(mask, cmap="Blues"); plt.title("tree attention mask"); plt.show()"""),
md("""## The one-hot question

EAGLE-2 (and EAGLE-1 with top-k candidates) verifies tokens that were *chosen*, not drawn: the top-k of the head's law.
A token fixed by the context is a draw from the one-hot e_x at itself, so the rule of speculative sampling applies
with p = e_x: keep x with probability min(1, q(x) / 1) = q(x); after a rejection, the next sibling is judged against
the residual norm(max(0, q - e_x)) = q with x removed and renormalised; when all are rejected, the token comes from
what is left. The output law of one position, computed exactly for a 4-token vocabulary:"""),
code("""q = np.array([0.4, 0.3, 0.2, 0.1])
e = np.eye(4)

def law(candidates, rule):
    \"\"\"Exact output law of one verified position: siblings tried in order, each one-hot.\"\"\"
    out, mass, cur, tried = np.zeros(4), 1.0, q.copy(), 0.0
    for x in candidates:
        keep = {"one-hot": cur[x], "no residual": q[x], "distinct shortcut": min(1, q[x] / max(1 - tried, 1e-12))}[rule]
        out[x] += mass * keep
        mass *= 1 - keep
        tried += q[x]
        if rule == "one-hot":
            cur = residual(cur, e[x])         # q with x removed, renormalised
    if rule == "distinct shortcut":
        cur = q.copy(); cur[list(candidates)] = 0; cur /= cur.sum()
    return out + mass * cur

for candidates, rule in [((0, 2), "one-hot"), ((0, 0, 1), "one-hot"), ((0, 2), "distinct shortcut"),
                         ((0, 0, 1), "distinct shortcut"), ((0, 2), "no residual")]:
    p = law(candidates, rule)
    print(f"{str(candidates):10s} {rule:18s} -> {np.round(p, 4)}   TV from q: {0.5 * np.abs(p - q).sum():.4f}")"""),
md("""What the numbers say:
- **Lossless**: distinct candidates with the residual update give q exactly (TV 0). So do duplicates: a rejected token
  has q = 0 afterwards, its copy is rejected for sure and leaves q unchanged; a duplicate only wastes a node.
- **The shortcut** "keep x_i with q(x_i) / (1 - mass of the siblings tried)" is the same rule written without the
  residual, and is right for distinct siblings; with a duplicate it counts the token's mass twice: for candidates
  (0, 0, 1) token 0 comes out with probability 0.4 + 0.6 x 0.4 / (1 - 0.4) = 0.8 instead of 0.4.
- **Skipping the residual update** (each sibling judged against the unchanged q) keeps candidates too often.

The same holds for whole sequences: `tests/picospec/test_eagle.py` and `tests/picospec/test_eagle2.py` run EAGLE-1 (sampled and top-k candidates) and EAGLE-2 at
temperature 1 with top-k / top-p warping on toy models and check the exact law of every sequence; the two broken
rules above, swapped into EAGLE-1, are rejected by the same check."""),
md("""## EAGLE-3: three depths, training-time test, a draft vocabulary of its own

EAGLE-3 keeps EAGLE-2's dynamic tree and changes the head (`gpt2/eagle3.py`, drafted by `picospec/eagle3.py`):

1. **Features from three depths.** The head no longer reads the target's top feature alone: it reads the outputs of
   a low, a middle and a high block at each position, concatenated (3C numbers), and one linear layer fuses them to C.
   The paper's argument: the top feature is shaped for the target's next token; lower blocks still hold what the
   tokens after it need.
2. **Tokens, not features.** The head is trained on the target's token laws alone (no feature regression), so its
   own output g need not imitate any feature of the target: it is whatever helps the next draft step.
3. **Training-time test.** Drafting feeds g back as the next step's input. EAGLE-1 trained every step on the target's
   true features and met its own outputs only when drafting; EAGLE-3 unrolls the head in training as it drafts (step
   s at position j reads the head's output of step s - 1 there, and attends to the context and its own path), and the
   loss sums over the steps.
4. **A draft vocabulary.** The head's LM head covers the V_d most frequent tokens of its training data (d2t maps them
   to target ids): V_d columns instead of V. The draft law has no mass outside them; verification stays over all V
   tokens, so the output law is still the target's (the proof is in `picospec/eagle3.py`'s header)."""),
code("""head3 = load_eagle("tiny-target", None, target, kind="eagle3")   # gpt2.eagle3.Eagle3Head
card = json.loads((head3.folder / "eagle3.json").read_text())
V, Vd = target.n_vocab, len(head3.d2t)
for name, a in flatten(head3.params).items():
    print(f"{name:28s} {str(a.shape):14s} {a.size:>9,}")
print(f"reads blocks {head3.layers} of {target.hparams['n_layer']}; draft vocabulary V_d = {Vd} of V = {V}")
print(f"its LM head per drafted row: C x V_d = {C * Vd:,} multiply-adds, against C x V = {C * V:,} for EAGLE's")
print("training:", card["data"], "| steps:", card["step"], "| minutes:", card["machine"]["minutes"],
      "| test steps:", card["args"]["test_steps"])"""),
md("""Training-time test: the validation loss at each unrolled step over training. Step 1 reads the target's features;
steps 2, 3 read the head's own outputs. Then the accuracy per step ahead, drafting along the true path (each step fed
the head's own output, as in the EAGLE-1 table above; a token outside the draft vocabulary counts as a miss)."""),
code("""hist3 = [h for h in card["history"] if "val_loss_by_step" in h]
by_step = np.array([h["val_loss_by_step"] for h in hist3])          # [log entries, test steps]
for s in range(by_step.shape[1]):
    plt.plot([h["step"] for h in hist3], by_step[:, s], "o-", ms=3, label=f"test step {s + 1}")
plt.xlabel("training step"); plt.ylabel("cross-entropy over the draft vocabulary"); plt.legend()
plt.title("EAGLE-3 validation loss by test step"); plt.show()
acc3 = card["accuracy"]
print("step ahead    " + "  ".join(f"{k + 1:>5d}" for k in range(len(acc3["top1"]))))
print("EAGLE-3 top-1 " + "  ".join(f"{a:5.3f}" for a in acc3["top1"]))
print("EAGLE top-1   " + "  ".join(f"{a:5.3f}" for a in acc["top1"]))
ahead = [k + 1 for k, (a3, a1) in enumerate(zip(acc3["top1"], acc["top1"])) if a3 > a1]
print(f"EAGLE-3's head is the more accurate at steps {ahead} of {len(acc3['top1'])}" if ahead else
      "EAGLE's head is at least as accurate at every step ahead")
print(f"(EAGLE's head: {record['step']} steps, {record['machine']['device']}; EAGLE-3's: "
      f"{card['step']} steps, {card['machine']['device']})")"""),
md("""The draft vocabulary's coverage. On held-out text continued by the target, how much of the target's probability
lies inside the V_d most frequent tokens, and how often its greedy token does, for a few V_d (prefixes of d2t, which
is ordered by frequency): what a smaller vocabulary gives up, against what it saves in the head's LM head."""),
code("""from gpt2.train.corpus import heldout_prompts
from picospec.autoregressive import autoregressive_sampling
seqs = []
for p in heldout_prompts(encoder, 2 if QUICK else 4, 32):
    target.reset()
    seqs.append(autoregressive_sampling(p, target, 32 if QUICK else 64, np.random.default_rng(0), temperature=0))
probs = np.concatenate([target(s, len(s) - 1) for s in seqs])                  # [positions, V]
print("   V_d   target mass inside   greedy token inside   LM head cost vs V")
for n in sorted({64, 256, Vd // 2, Vd}):
    inside = probs[:, head3.params["d2t"][:n]]
    greedy_in = np.isin(probs.argmax(-1), head3.params["d2t"][:n]).mean()
    print(f"{n:6d}   {inside.sum(-1).mean():18.3f}   {greedy_in:19.3f}   {n / V:17.3f}")"""),
md("""## Bench rows

EAGLE-1, EAGLE-2, EAGLE-3, Medusa and speculative sampling against autoregressive decoding on the
built-in target, side by side (a small run here, in full mode 2 prompts x 1 seed x 48 tokens, 5
interleaved rounds each, medians; the full table is docs/results/eagle.md, from `python
-m bench.eagle`, 4 prompts x 1 seed x 48 tokens at temperatures 0 and 1). Every EAGLE row at
temperature 0 produces the same text as greedy decoding. Beside each measured speedup, the cost
model's (picospec_app.compare.explain): E tokens per target call, c the target call's cost in
one-token calls, the drafting cost of a step in the same unit (EAGLE's head calls, Medusa's heads,
or the draft model's), the rest of a step outside the model calls r (r_0 the same for an
autoregressive token), the speedup E (1 + r_0) / (c + drafting + r) they give (the run's own costs:
they account for its measured speedup), the same with c =
1.2 (verification nearly free, as on a GPU), and which cost limits the row. Where a target call
over a tree of 10-16 nodes costs several one-token calls (c, in each row), a row that decodes 3
tokens per call can still lose; the verdict under each row says what its figures imply, and the
same step at the GPU's verification cost shows what the method gains where that call is nearly
free. Two columns are counted differently: tokens/target call is each prompt's tokens over its
target calls, then the median over the prompts, while acceptance pools every step's drafts
(accepted over drafted) across the prompts; where one prompt is easy and the other hard the two
need not agree, so 1 + K x acceptance is no check on a chain's tokens per call here."""),
code("""from picospec_app.load import load_draft, load_heads
from picospec_app.compare import compare, explain
sys.path.insert(0, "src")  # notebooks/src: the verdict sentences, computed from the figures
from verdicts import gains, versus
from picospec_app.machine import blas_line, policy
print(blas_line(policy(target)))  # the BLAS kernel family the times below run on
from gpt2.train.corpus import heldout_prompts
prompts = heldout_prompts(encoder, 1 if QUICK else 2, 48)
N, REPEATS, TEMPERATURES = (24, 1, (0.0,)) if QUICK else (48, 5, (0.0, 1.0))
needs = {"draft": {"draft": load_draft("tiny-draft", target, "tiny-target")},
         "medusa": {"heads": load_heads("tiny-target", "medusa", None, target)},
         "eagle": {"heads": head}, "eagle3": {"heads": head3}}
rows = [("speculative", "K 4", {"K": 4}, "draft"), ("medusa", "sparse 7", {"tree": "sparse"}, "medusa"),
        ("eagle", "sparse 10", {"tree": "sparse", "nodes": 10}, "eagle"),
        ("eagle2", "depth 5, top-k 4, 16", {}, "eagle"), ("eagle3", "depth 5, top-k 4, 16", {}, "eagle3"),
        ("eagle3", f"the same, V_d {Vd // 4}", {"draft_vocab": Vd // 4}, "eagle3")]
print("| method | setting | T | tokens/target call | acceptance | drafting per step | speedup | cost model |")
measured = {}
for T in TEMPERATURES:
    for method, setting, options, need in rows:
        r = measured[method, setting, T] = compare(method, prompts, {"target": target, **needs[need]}, N,
                                                   range(1), {"temperature": T}, repeats=REPEATS, **options)
        print(f"| {method} | {setting} | {T:g} | {r['tokens_per_call']:.2f} | "
              f"{r['acceptance']:.2f} | {r['drafting']:.2f} | {r['speedup']:.2f}x | {explain(r)} |")
        print(f"  {versus(r['speedup'], r['predicted'])}; {gains(r['predicted'])}")
for T in TEMPERATURES:  # EAGLE-3 against EAGLE-2, the same tree
    e2, e3 = measured["eagle2", "depth 5, top-k 4, 16", T], measured["eagle3", "depth 5, top-k 4, 16", T]
    print(f"T = {T:g}: EAGLE-3's drafting costs {e3['drafting'] / e2['drafting']:.2f} of EAGLE-2's per step, "
          f"its tokens per target call are {e3['tokens_per_call'] / e2['tokens_per_call']:.2f} of EAGLE-2's, and it "
          f"runs {e3['speedup'] / e2['speedup']:.2f}x as fast as EAGLE-2 ("
          + ("faster: its speedups' quartiles lie above EAGLE-2's"
             if e3["speedup_iqr"][0] > e2["speedup_iqr"][1] else
             "slower: its speedups' quartiles lie below EAGLE-2's"
             if e3["speedup_iqr"][1] < e2["speedup_iqr"][0] else
             "the two speedups' quartile ranges overlap: no difference this run can tell") + ")")"""),
]
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
save(nb, NOTEBOOKS / "eagle.ipynb")
