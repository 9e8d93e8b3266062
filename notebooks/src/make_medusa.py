"""Writes notebooks/medusa.ipynb without outputs (run it: notebook_io.py)."""
import nbformat as nbf

from notebook_io import NOTEBOOKS, save

nb = nbf.v4.new_notebook()
md, code = nbf.v4.new_markdown_cell, nbf.v4.new_code_cell
nb.cells = [
md("""# Medusa: heads, tree attention, typical acceptance

Cai et al. 2024, *Medusa: Simple LLM Inference Acceleration Framework with Multiple Decoding Heads* (arXiv:2401.10774).
Extra heads on the model's last hidden state guess the tokens 2, 3, ... places ahead; their top-k guesses form a
tree; one forward pass with a tree attention mask checks every branch at once.

Plan: the article's toy tree and its four buffers; a real step of the built-in model (candidates, tree, posterior);
typical acceptance; speed against tree size."""),
code("""import os, sys, json, time
sys.path.insert(0, "..")
from picospec_cli import env_flag
QUICK = env_flag("PICOSPEC_QUICK", False)  # CI (1, true, yes): fewer prompts, tokens, repeats
from picospec_app.settings import engine_choices
ENGINE = engine_choices()  # as main.py: its PICOSPEC_* settings and the cores idle now
import numpy as np
import matplotlib.pyplot as plt
from picospec.tree import medusa_buffers, sparse_tree, chain_choices, cartesian_choices
from picospec.medusa import generate_candidates, medusa_decoding, typical_accept
from picospec.tree import greedy_path"""),
md("""## The toy tree of the article

`medusa_choices` lists nodes as paths of candidate ranks: `[0, 2]` is head 1's top-1 candidate followed by head 2's
third. With 10 candidates per head, the flat candidate vector is `[root, head 1's 10, head 2's 10]`. The article's demo
puts tokens 2, 3 in head 1's first two slots and 4, 5, 6 in head 2's first three; the root (the LM head's token) is 1."""),
code("""choices = [[0], [0, 0], [0, 1], [0, 2], [1], [1, 0], [1, 1], [1, 2]]
b = medusa_buffers(choices, topk=10)
flat = np.zeros(21, dtype=int); flat[0] = 1; flat[1:3] = [2, 3]; flat[11:14] = [4, 5, 6]
print("tree_indices     ", b["tree_indices"].tolist())
print("tree tokens      ", flat[b["tree_indices"]].tolist())
print("position_ids     ", b["position_ids"].tolist())
print("retrieve_indices ", b["retrieve_indices"].tolist())
print("paths as tokens  ", np.append(flat[b["tree_indices"]], -1)[b["retrieve_indices"]].tolist())"""),
md("""Check by hand: node `[1, 0]` is head 2's top-1 candidate, flat index 1 + 10 + 0 = 11, token 4, at depth 2; its
row of the mask sees the root (column 0), its parent `[1]` (row 2) and itself. Each row of `retrieve_indices` is one
root-to-leaf path, the last leaf first, as the article prints them."""),
code("""fig, ax = plt.subplots(figsize=(4, 4))
ax.imshow(b["attn_mask"], cmap="Blues")
labels = [str(t) for t in flat[b["tree_indices"]]]
ax.set_xticks(range(9), labels); ax.set_yticks(range(9), labels)
ax.set_title("tree attention mask (row sees column)")
plt.show()
assert b["attn_mask"][6].tolist() == [True, False, True, False, False, False, True, False, False]"""),
md("""## A real step of the built-in model

`gpt2/assets/tiny-target/medusa` holds 2 heads trained with MEDUSA-1 (frozen backbone) by `python -m gpt2.train.heads`
on self-distillation data: 1.6M tokens the target itself wrote greedily after prompts from the training text (what the
heads must guess when decoding greedily); 4 heads were trained and the first 2 kept. Their accuracy, on the target's own
continuations of validation prompts and on the validation text itself, and the sparse tree built from the first, come
from `heads.json` and `medusa_choices.json`. (In the first, 16 of every 128 tokens are the prompts the continuations
follow, so even the LM head is not 100% "right".)"""),
code("""from gpt2.load import load_model, heads_folder, heads_function
target, encoder = load_model("tiny-target", **ENGINE)
folder = heads_folder("tiny-target", "medusa")
heads, config = heads_function(folder, target)
record = json.loads((folder / "heads.json").read_text())
print(f"{record['args']['distill_tokens']:,} self-distilled tokens; {record['args']['n_heads']} heads trained, "
      f"{record['n_heads']} kept")
for key in ("accuracy", "accuracy_text"):
    print("on", record[key].get("on", "the validation text"))
    for k, (t1, t5) in enumerate(zip(record[key]["top1"], record[key]["top5"])):
        print("   ", ("LM head" if k == 0 else f"head {k}  "), f"top-1 {t1:.3f}  top-5 {t5:.3f}")
sparse = json.loads((folder / "medusa_choices.json").read_text())
print("sparse tree:", sparse["medusa_choices"], " expected tokens per step", round(sparse["expected_tokens_per_step"], 2))"""),
code("""x = encoder.encode("import os\\n\\n\\ndef list_files(path):\\n    return [")
logits, h = target.logits(x, 1, hidden=True)                 # prefill: the LM head's row and hidden state
root = int(np.argmax(logits[0]))                              # the root: always accepted
head_logits = heads(h)[:, -1]                                 # [K, V]: each head's guess at its offset
for k in range(config["n_heads"]):
    top = np.argsort(-head_logits[k])[:3]
    print(f"head {k + 1} top-3:", [encoder.decode([t]) for t in top])
choices = sparse["medusa_choices"]
b = medusa_buffers(choices, topk=10)
tokens = generate_candidates(root, head_logits, b, topk=10)
tree_logits, _ = target.tree(x + [root], tokens, b["parents"], hidden=True)   # ONE forward over the whole tree
path, nxt = greedy_path(tokens, b["parents"], tree_logits)
print("root", repr(encoder.decode([root])), "| tree:", [encoder.decode([t]) for t in tokens])
print("accepted path:", [encoder.decode([tokens[i]]) for i in path], "| next token:", repr(encoder.decode([nxt])))
print(f"one target call over the tree kept {len(path)} candidate(s) and gave the next root: "
      f"{1 + len(path)} token(s) for the call")"""),
md("""## Typical acceptance

Instead of exact matches, a candidate x is kept when the target gives it probability above
`min(epsilon, delta * exp(-H))`, H the entropy of the target's distribution at that position. When the target is sure
(low H) the bar is high; when it is unsure, almost any plausible token passes. It is faster than rejection sampling
but not lossless; at temperature 0 it is exactly greedy (only the argmax has probability above the bar)."""),
code("""H = np.linspace(0, 6, 100)
for eps, delta in ((0.09, 0.3), (0.3, 0.6)):
    plt.plot(H, np.minimum(eps, delta * np.exp(-H)), label=f"epsilon {eps}, delta {delta}")
plt.xlabel("entropy H of the target (nats)"); plt.ylabel("threshold"); plt.legend(); plt.show()
probs = np.array([[0.5, 0.5, 0.0], [0.9, 0.05, 0.05]])
kept = typical_accept([0, 2, 1], [-1, -1, 0], probs, epsilon=0.3, delta=0.3)
print([bool(k) for k in kept])  # 0.5 > 0.15; 0 < 0.15; 0.05 < 0.20"""),
md("""## Speed against tree size

Tokens per target call grow with the tree until they level off; the cost of one forward grows too
(printed as the cost of a target call over the tree against a one-token call of autoregressive
decoding). The best tree is where the speedup peaks, not where the two curves cross: past the peak,
a node adds a smaller share to E than to the step's cost. Greedy, 48 tokens, 3 prompts (in full
mode), against autoregressive decoding in interleaved rounds (5 each in full mode, medians), so a
change of load falls on both alike.

Each row also prints the cost model (picospec_app.compare.explain): with E tokens per target call,
a target call costing c one-token calls, the heads' call on the accepted row's hidden state costing
"drafting" (the heads are the drafter, timed apart from the target) and r the rest of a step
outside the calls (building the tree, verifying it, the Python between them; r_0 the same for an
autoregressive token), the speedup they give is E (1 + r_0) / (c + drafting + r), which accounts for
the measured one (the costs are the run's own); beside it, the
same with c = 1.2, verification nearly free as on a GPU. How fast c grows with the tree is the
CPU's (the BLAS line below names its kernels): where it grows faster than E, each extra node costs
more than the tokens it adds, and the verdict under each row says whether its figures show a gain.
On a GPU c stays near 1.2 up to 16 rows for GPT-2 124M (docs/results/engine_gpu.md), so there a
bigger tree pays until E levels off."""),
code("""from picospec_app.load import load_heads
from picospec_app.compare import compare, explain
sys.path.insert(0, "src")  # notebooks/src: the verdict sentences, computed from the figures
from verdicts import gains, versus
from picospec_app.machine import blas_line, policy
print(blas_line(policy(target)))  # the BLAS kernel family the times below run on
from gpt2.train.corpus import heldout_prompts
prompts = heldout_prompts(encoder, 1 if QUICK else 3, 48)
N, REPEATS, BUDGETS = (24, 1, (1, 7)) if QUICK else (48, 5, (1, 3, 7, 15, 31))
acc = record["accuracy"]["rank_share"][1:]
rows = []
for budget in BUDGETS:
    ch = sparse_tree(acc, budget)[0]
    r = compare("medusa", prompts, {"target": target, "heads": load_heads("tiny-target", "medusa", folder, target)},
                N, range(1), {"temperature": 0}, repeats=REPEATS, tree=ch, topk=10,
                posterior="greedy")
    rows.append((budget, r["tokens_per_call"], r["speedup"], r["predicted"], r["predicted_gpu"]))
    print(f"sparse tree, {budget:2d} nodes: {r['tokens_per_call']:.2f} tokens per call, "
          f"a call costs {r['c']:.2f} one-token calls, {r['speedup']:.2f}x; {explain(r)}")
    print(f"    {versus(r['speedup'], r['predicted'])}; {gains(r['predicted'])}")
fig, ax = plt.subplots(1, 2, figsize=(9, 3))
ax[0].plot([r[0] for r in rows], [r[1] for r in rows], "o-"); ax[0].set(xscale="log", xlabel="nodes", ylabel="tokens per call")
ax[1].plot([r[0] for r in rows], [r[2] for r in rows], "o-", label="measured")
ax[1].plot([r[0] for r in rows], [r[3] for r in rows], "s:", label="cost model, c measured")
ax[1].plot([r[0] for r in rows], [r[4] for r in rows], "^--", label="cost model, c = 1.2")
ax[1].set(xscale="log", xlabel="nodes", ylabel="speedup"); ax[1].legend(fontsize=7)
plt.show()"""),
md("""Greedy Medusa decoding equals greedy decoding token for token whatever the tree (tests/picospec/test_medusa.py), so every
point above produced the same text."""),
]
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
save(nb, NOTEBOOKS / "medusa.ipynb")
