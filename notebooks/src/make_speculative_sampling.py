"""Writes notebooks/speculative_sampling.ipynb without outputs (run it: notebook_io.py)."""
import nbformat as nbf

from notebook_io import NOTEBOOKS, save

nb = nbf.v4.new_notebook()
md, code = nbf.v4.new_markdown_cell, nbf.v4.new_code_cell
nb.cells = [
md("""# Speculative sampling, step by step

Chen et al. 2023, *Accelerating Large Language Model Decoding with Speculative Sampling*
(arXiv:2302.01318), Algorithm 2, on picospec's built-in models. Notation as in the paper: **p** is
the draft model, **q** the target model, **K** the number of drafted tokens per step. (Leviathan et
al. 2023 swap the letters; docs/algorithms.md maps them.)

The plan: look at one step with real numbers, check the proof of losslessness numerically, then
measure the paper's Figure 1 (speed-up against K) on each of the two kinds of CPU kernels OpenBLAS
runs here, and explain why the two differ with the cost of each call."""),
code("""import os, sys
sys.path.insert(0, "..")
import numpy as np
import matplotlib.pyplot as plt
from gpt2.load import load_model
from picospec_app.machine import blas_line, policy
from picospec.sampling import warp, sample, residual
from picospec.speculative import speculative_sampling
from picospec.autoregressive import autoregressive_sampling
from picospec.theory import expected_tokens_per_call, GPU_VERIFY_COST
from picospec_cli import env_flag
QUICK = env_flag("PICOSPEC_QUICK", False)  # CI (1, true, yes): fewer prompts, tokens, repeats
from picospec_app.settings import engine_choices
ENGINE = engine_choices()  # as main.py: its PICOSPEC_* settings and the cores idle now

target, encoder = load_model("tiny-target", **ENGINE)  # each engine runs on main.py's BLAS policy
draft, _ = load_model("tiny-draft", **ENGINE)
x = encoder.encode("def read_lines(path):\\n")   # main.py's default prompt
print(len(x), "prompt tokens;", target.n_vocab, "tokens in the vocabulary")
print(blas_line(policy(target)))"""),
md("""## One step with real numbers

Step 1: the draft proposes K = 4 tokens, one call each. Step 2: the target scores all of them in **one** call, giving
K + 1 distributions. Step 3: token t is kept with probability min(1, q(x̃_t) / p(x̃_t)); at the first rejection we
sample from norm(max(0, q − p)) and stop; if all pass, the last q gives a bonus token."""),
code("""rng = np.random.default_rng(0)
K, T = 4, 1.0
drafts, P = [], []
for _ in range(K):                                          # Step 1: draft K tokens from p
    p = warp(draft(x + drafts)[-1], temperature=T)
    P.append(p)
    drafts.append(sample(p, rng))
Q = warp(target(x + drafts, K + 1), temperature=T)          # Step 2: one target call, K + 1 rows
print(f"{'t':>2} {'token':>12} {'p(x)':>7} {'q(x)':>7} {'min(1,q/p)':>10} {'r':>6}  decision")
for t, tok in enumerate(drafts):                            # Step 3: accept or reject
    ratio, r = min(1, Q[t][tok] / P[t][tok]), rng.random()
    print(f"{t:>2} {encoder.decode([tok])!r:>12} {P[t][tok]:7.3f} {Q[t][tok]:7.3f} {ratio:10.3f} {r:6.3f}  "
          + ("accept" if r < ratio else "reject -> resample"))
    if r >= ratio:
        fix = sample(residual(Q[t], P[t]), rng)
        print("   resampled from the residual:", repr(encoder.decode([fix])))
        break
else:
    print("all accepted; bonus token:", repr(encoder.decode([sample(Q[K], rng)])))"""),
md("""## The proof, checked numerically

For one position, the output law is min(p, q) (accepted drafts) plus (1 − Σ min(p, q)) · norm(max(0, q − p))
(resampled tokens), and the two add up to q exactly. A 3-token vocabulary you can check by hand:"""),
code("""p = np.array([0.6, 0.3, 0.1]); q = np.array([0.2, 0.3, 0.5])
accepted = np.minimum(p, q)                          # [0.2, 0.3, 0.1]
rejected = 1 - accepted.sum()                        # 0.4
law = accepted + rejected * residual(q, p)           # residual = [0, 0, 1]
print("accepted part", accepted, " rejected mass", rejected, " residual", residual(q, p))
print("output law   ", law, " target q", q, " max error", np.abs(law - q).max())
rng = np.random.default_rng(1)
draws = [speculative_sampling([0], lambda s, n=1: np.tile(p, (n, 1)), lambda s, n=1: np.tile(q, (n, 1)), 1, 1, rng)[-1]
         for _ in range(20000)]
emp = np.bincount(draws, minlength=3) / len(draws)
plt.figure(figsize=(5, 2.5)); w = 0.25
plt.bar(np.arange(3) - w, p, w, label="draft p"); plt.bar(np.arange(3), q, w, label="target q")
plt.bar(np.arange(3) + w, emp, w, label="speculative, 20k draws"); plt.legend(); plt.xticks(range(3)); plt.show()
print("empirical", emp.round(3))"""),
md("""## Autoregressive against speculative on the built-in pair

At temperature 0 both decode greedily, so the texts must be identical; only the time and the number
of target calls change. The times are medians of interleaved rounds (autoregressive, speculative,
autoregressive, ...), each run from cold caches, so a change of load on the machine falls on both
alike; the speed-up is the median of the rounds' ratios."""),
code("""from picospec_app.compare import compare, explain
N, REPEATS = (24, 1) if QUICK else (48, 7)
for m in (target, draft): m.reset()
ar = autoregressive_sampling(x, target, N, np.random.default_rng(0), temperature=0)
stats = []
for m in (target, draft): m.reset()
sp = speculative_sampling(x, draft, target, N, 4, np.random.default_rng(0), stats=stats, temperature=0)
print(encoder.decode(sp))
print(f"identical: {ar == sp};  {len(stats)} target calls for {N} tokens: "
      f"{N / len(stats):.2f} tokens per target call")
r = compare("speculative", [x], {"target": target, "draft": draft}, N, range(1), {"temperature": 0},
            repeats=REPEATS, K=4)
print(blas_line(policy(target)))
print(f"autoregressive {r['ms_per_token_base']:.2f} ms per token, speculative "
      f"{r['ms_per_token']:.2f} ms per token (medians of {REPEATS} interleaved rounds): "
      f"speed-up {r['speedup']:.2f}x")"""),
md("""## Why the speed-up is what it is: the cost of each call

One step costs one target call over K + 1 tokens and K draft calls (fewer in a last step that
needs fewer tokens), and yields E tokens. Count time
in one-token target calls of autoregressive decoding: the step's target call costs c = c(K + 1), a
draft call c_d, and the rest of the step (sampling, acceptance, the Python between the calls) r;
autoregressive decoding pays r_0 of its own around each of its calls. Then the cost model predicts

    S = E (1 + r_0) / (c + K c_d + r)

(Leviathan et al.'s Theorem 3.8, with c measured instead of taken as 1 and the rest counted; with
r = r_0 = 0 it is E / (c + K c_d)). E comes from acceptance,
but c comes from the hardware. On a GPU a forward over a few tokens costs about what one token
costs: the weights are read once either way (docs/results/engine_gpu.md measures c(M) = 1.18-1.22
for GPT-2 124M on an H200, M = 2..16). On a CPU it depends on the BLAS kernels: a few rows are
multiplied at the kernels' arithmetic speed, which for small matrices is slow unless they have a
small-matrix path (OpenBLAS's direct SGEMM in its AVX-512 kernels, which the engine's weight panels
use; with OpenBLAS's other kernels the engine sends a few rows through the panels one row at a time,
which spares the packing but reads the weights once per row; the BLAS line above says which kernels
run here). The cell below reads c, c_d, r and r_0 from
the run above, as its calls spent them: from the run's own costs the formula accounts for the
measured speed-up (it predicts with costs measured apart, as the c(M) curve below does), and
gives the same step at a GPU's verification cost."""),
code("""E, c, drafting = r["tokens_per_call"], r["c"], r["drafting"]  # drafting: k c_d a step
rest, rest_0 = r["rest"], r["rest_base"]
print(f"E = {E:.2f} tokens per target call; c = {c:.2f} one-token calls for the 5-token target "
      f"call; c_d = {r['c_d']:.3f} and {r['draft_calls_per_step']:.2f} draft calls a step (K = 4, "
      f"fewer in a last step that needs fewer tokens), so the drafts cost {drafting:.2f} a step; "
      f"the rest of a step "
      f"r = {rest:.2f}, of an autoregressive token r_0 = {rest_0:.2f}")
predicted = E * (1 + rest_0) / (c + drafting + rest)
assert abs(predicted - r["predicted"]) < 1e-9  # one prompt: the harness's prediction is this
print(f"cost model: E (1 + r_0) / (c + K c_d + r) = {E:.2f} x {1 + rest_0:.2f} / ({c:.2f} + "
      f"{drafting:.2f} + {rest:.2f}) = {predicted:.2f}x; measured {r['speedup']:.2f}x")
sys.path.insert(0, "src")  # notebooks/src: the verdict sentences, computed from the figures
from verdicts import gains, versus
print(f"{versus(r['speedup'], predicted)}; {gains(predicted)}")
gpu = E * (1 + rest_0) / (GPU_VERIFY_COST + drafting + rest)
print(f"the same step with verification at a GPU's cost, c = {GPU_VERIFY_COST}: {gpu:.2f}x")
if c - 1 > drafting:
    print(f"here verification costs most: the target call pays {c - 1:.2f} one-token calls beyond "
          f"the one autoregressive decoding pays, more than the K = 4 drafts ({drafting:.2f})")
else:
    print(f"here drafting costs most: {drafting:.2f} one-token calls a step, more than "
          f"verification's {c - 1:.2f} beyond one call")"""),
md("""## Figure 1 of the paper on both kernel families: c is the machine's

OpenBLAS picks its kernels for the CPU when it loads: the **Haswell** family on every x86-64 CPU
with AVX2 (where the engine's weight panels take a few rows one by one), the **SkylakeX** family
(with a direct SGEMM for small products, which the panels use whole) on a CPU with AVX-512. `OPENBLAS_CORETYPE=Haswell` forces the first on an
AVX-512 CPU, and the choice cannot change once the library has loaded, so `python -m bench.figure1`
measures each family this CPU runs in a process of its own and prints what each measured. For each
family: c(M), the cost of an M-token target call after the prompt's cache in one-token calls (the
fastest of several rounds of each), each call timed where decoding makes it: the one-token call
among one-token calls back to back, as autoregressive decoding makes them, an M-token call right
after a draft call, as a speculative step makes it. Beside it, c(M) with every M in turn: there
the one-token call follows the largest call and a draft call, whose weights (the panels', the
draft's) have pushed the one-token path's weights out of the caches, and its time is no longer the
one autoregressive decoding pays. Then the draft's c_d, and for each K the tokens per target call E
and the speed-up of speculative sampling over autoregressive decoding (medians of interleaved
rounds, temperature 0), beside the cost model from that run's own costs (c, K c_d, r, r_0 as the
run spent them) and what the c(M) curve alone predicts, E / (c(K + 1) + K c_d), which leaves out
the rest of the step and measures each call apart from the others. The paper's Figure 1 draws the
time per token against K; the speed-up is autoregressive time over it."""),
code("""import json, subprocess
from gpt2.fast.policy import DIRECT_SGEMM, blas_kernels
done = subprocess.run([sys.executable, "-m", "bench.figure1", "--json_line"], cwd="..",
                      capture_output=True, text=True)  # PICOSPEC_QUICK: fewer K, rounds, tokens
assert done.returncode == 0, done.stderr
families = json.loads(done.stdout.splitlines()[-1])
for family, f in families.items():
    print(f"{family}: {f['blas']}")
    costs = " ".join(f"{v:.2f}" for v in f["c"].values())
    print(f"   c(M), M = 1..{len(f['c'])}: {costs}; c_d = {f['c_d']:.3f}")
    turn = " ".join(f"{v:.2f}" for v in f["c_in_turn"].values())
    print(f"   c(M) with every M in turn: {turn}")
    print(f"   a two-token call costs {f['c']['2']:.2f} one-token calls: the one-token call is "
          f"{'the cheaper' if f['c']['2'] > 1 else 'as dear' if f['c']['2'] == 1 else 'the dearer'}")
    for k in f["runs"]:
        print(f"   K={k['K']}: E {k['E']:.2f}, acceptance {k['acceptance']:.2f}, measured "
              f"{k['speedup']:.2f}x; cost model from the run's costs (c {k['c_run']:.2f}, K c_d "
              f"{k['drafting_run']:.2f}, r {k['rest_run']:.2f}, r_0 {k['rest_base_run']:.2f}) "
              f"{k['predicted']:.2f}x, from c(M) alone E / (c({k['K'] + 1}) + {k['K']} c_d) = "
              f"{k['predicted_curve']:.2f}x")
        print(f"        {versus(k['speedup'], k['predicted'])}; {gains(k['predicted'])}")
fig, ax = plt.subplots(1, 3, figsize=(13, 3.4))
for (family, f), colour, line in zip(families.items(), ("C0", "C1"), ("o-", "x--")):
    Ms = [int(M) for M in f["c"]]
    ax[0].plot(Ms, list(f["c"].values()), "o-", c=colour, label=f"{family}: c(M)")
    ax[0].axhline(f["c_d"], c=colour, ls=":", lw=1, label=f"{family}: c_d")
    K_ = [k["K"] for k in f["runs"]]
    ax[1].plot(K_, [k["E"] for k in f["runs"]], line, c=colour, label=family)
    ax[2].plot(K_, [k["speedup"] for k in f["runs"]], "o-", c=colour, label=f"{family}, measured")
    ax[2].plot(K_, [k["predicted"] for k in f["runs"]], "s:", c=colour,
               label=f"{family}, cost model from the run")
ax[0].set(xlabel="M (tokens in one target call)", ylabel="c(M), one-token calls", ylim=(0, None))
ax[1].set(xlabel="K", ylabel="E, tokens per target call")
ax[2].axhline(1, c="k", ls="--", lw=0.8, label="autoregressive")
ax[2].set(xlabel="K", ylabel="speed-up")
for a in ax:
    a.legend(fontsize=7)
plt.tight_layout(); plt.show()
Es = [[k["E"] for k in f["runs"]] for f in families.values()]
print("E the same on every family:", all(e == Es[0] for e in Es))
library, mine = blas_kernels()
follows = mine if mine in families else ("SkylakeX" if mine in DIRECT_SGEMM else "Haswell")
if library != "openblas":  # another BLAS: its own c(M), as the cost cell above measured it
    print(f"this notebook's NumPy runs {library} ({mine} kernels), not OpenBLAS: neither curve is "
          f"its own; the cost cell above measured its c and c_d")
else:
    print(f"this notebook's process runs OpenBLAS {mine} kernels: the reader's machine follows "
          f"the {follows} curves" + ("" if follows in families else " (not measured here: this "
                                     "CPU cannot run them)"))"""),
md("""E is the same on both families: acceptance is a property of the two models, not of the machine.
What differs is c, printed above for each family. Where c(K + 1) is well over one one-token call,
verification eats much of what the accepted drafts gain; where c(M) stays near 1 for small M (the
SkylakeX kernels' direct SGEMM with weight panels can give that), the speed-up grows with E until
the drafts' K c_d catches up. The same draft, the same target, the same acceptance: which curve a
reader gets is a property of the CPU, and the cost model says by how much. The cost model from the
run's own costs counts every second of the step (its calls as they ran, and the rest), so it
differs from the measured speed-up only by taking medians of each cost apart (the verdict under
each K says by how much). The c(M) curve alone can miss either way: it leaves out the rest of
the step (r), and it takes each call's fastest of several rounds in a fixed order, where a run's
calls cost what the calls before them (K draft calls, the sampling) left in the CPU's caches."""),
md("""## The theory, a second way

If each draft is accepted independently with rate α, a step yields (1 − α^(K+1)) / (1 − α) tokens.
We take α from the measured tokens per target call at K = 1 (where the formula reduces to 1 + α) on
the family the reader's machine follows; that line is the fit, so it carries no verdict. Then we
compare the prediction with the measured tokens per target call at each K ≥ 2; the first verdict on
each line says which is larger. The K = 1 run is short (in full mode 2 prompts of 48 tokens: some 60
drafts), so α itself is uncertain: its standard error is √(α(1 − α) / n) for n drafts, printed
below, and the band beside each prediction is what α ± 2 standard errors give. The second verdict
says whether the measurement leaves that band. Inside it, the gap is no more than the error of α
allows, whatever its size; above it, a kept draft made the next one likelier than α: acceptance is
not i.i.d. across positions (easy stretches of text come in runs). Each measured E has noise of its
own too, so even a point just outside the band is weak evidence. Four times the tokens (`python -m
bench.figure1 --n_tokens 192`) halve the standard error. A short run can also fall below the
prediction for another reason: its last step drafts no more than the tokens still needed."""),
code("""from verdicts import band, iid
f = families.get(follows, next(iter(families.values())))
runs = f["runs"]
alpha = runs[0]["E"] - 1
drafts = f["n_prompts"] * f["n_tokens"] / runs[0]["E"]  # K = 1: one draft a step
error = (alpha * (1 - alpha) / drafts) ** 0.5  # alpha's standard error
print(f"K=1: measured {runs[0]['E']:.2f}, so alpha = {alpha:.2f} (the fit: no verdict), from about "
      f"{drafts:.0f} drafts: standard error {error:.3f}")
for k in runs[1:]:
    predicted = expected_tokens_per_call(alpha, k["K"])
    low, high = (expected_tokens_per_call(min(max(a, 0.0), 1.0), k["K"])
                 for a in (alpha - 2 * error, alpha + 2 * error))
    print(f"K={k['K']}: predicted {predicted:.2f} (alpha ± 2 standard errors: {low:.2f}-"
          f"{high:.2f}), measured {k['E']:.2f}; {iid(k['E'], predicted)}; "
          f"{band(k['E'], low, high)}")"""),
]
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
save(nb, NOTEBOOKS / "speculative_sampling.ipynb")
