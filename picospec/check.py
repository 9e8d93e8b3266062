"""picospec.check: does a sampler reproduce the target's exact law? Anyone's sampler, checked on toy models.

A lossless speculative sampler must output sequences whose law is exactly the (warped) target's. On a toy model
(a table of next-token laws over a few tokens) that law is known exactly for every whole sequence of N tokens, so a
sampler can be run many times and its empirical law tested against it (a G-test, rare cells pooled; the toys, the
exact laws and the test are in picospec/exact_law.py, this file is the battery and its command). Notation as in
picospec/verify.py (Chen et al. 2023, arXiv:2302.01318): p = draft, q = target. NumPy only; scipy is not needed.

    from picospec.check import check_sampler
    from picospec.verify import verify_chain
    report = check_sampler(verify_chain, contract="chain")      # several toys, V, K, temperatures, top-k, top-p
    report.verdict, [(c.name, c.verdict, c.p_value, c.tv90) for c in report.cases]

    python -m picospec.check picospec.verify:verify_chain --contract chain    # a table; exit 1 when a case fails
    python -m picospec.check tests/outside_samplers.py:hf_chain --samples 50000 --json
    python -m picospec.check --power                                          # the checker's measured power

The contracts (a sampler is a function; wrap yours in an adapter of a few lines):

chain      fn(drafts, P, Q, rng) -> (n_accepted, next_token, ...)
           drafts: list of K token ids, drafts[t] drawn from P[t]; P [K, V] draft laws; Q [K + 1, V] target laws
           (Q[t] after the prompt and drafts[:t]); rng a numpy.random.Generator. The sampler keeps drafts[:n] and
           adds next_token. picospec.verify.verify_chain is one. Adapter example (transformers, whose notation
           swaps p and q and takes logits):
               def hf_chain(drafts, P, Q, rng):
                   torch.manual_seed(int(rng.integers(2**62)))
                   out, n = _speculative_sampling(torch.tensor([drafts]), torch.tensor(np.log(P))[None],
                                                  len(drafts), torch.tensor(np.log(Q))[None])
                   return int(n), int(out[0, -1])
tree       fn(tokens, parents, Q, rng, P=None) -> (path, next_token, ...)
           a token tree of m nodes (parents[i] < i, -1 for the root's children); Q [1 + m, V]: row 0 after the
           prompt, row 1 + i after node i's path; P [m, V] the law node i was drawn from, or None when the nodes are
           deterministic distinct candidates (the draft's top tokens). path: the accepted nodes, root to leaf.
           picospec.verify.verify_tree is one (i.i.d. siblings, or top tokens with P None). Adapter example (a
           verifier that takes the tree as a list of (token, parent) pairs):
               def mine(tokens, parents, Q, rng, P=None):
                   return their_verify(list(zip(tokens, parents)), Q, P, seed=int(rng.integers(2**62)))
tree_without_replacement   fn(tokens, parents, Q, P, rng) -> (path, next_token, ...)
           the same, with each node's siblings drawn from P's row without replacement (Sequoia); P [m, V] is the law
           before removals. picospec.verify.verify_without_replacement is one.
rejection  fn(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng=rng) -> [B, k + 1] ids
           vLLM's batched contract: q [B, k + 1, V], bonus [B, 1] (drawn from q's last row by the caller),
           p [B, k, V], drafts [B, k]; each output row is its accepted drafts, then a recovered or bonus token,
           then -1. picospec.rejection.rejection_sample is one; vLLM's RejectionSampler.forward(target_with_bonus_
           probs, bonus_token_ids, draft_probs, draft_token_ids, seeded_seqs) maps argument for argument:
               def vllm(q, bonus, p, drafts, rng):
                   torch.manual_seed(int(rng.integers(2**62)))
                   return sampler(*map(torch.from_numpy, (q, bonus, p, drafts))).numpy()

What a verdict means. Each case draws `samples` whole sequences; the G-test rejects at ALPHA = 1e-4 per case, so a
right sampler fails a battery of ~10 cases with probability below 0.1%. tv90 is the smallest total-variation error
in the law of whole sequences that the case detects with probability 0.9 wherever the error lies (measured by
simulation with the least detectable error: mass moved in proportion to the law between two halves of it); errors
concentrated on a few sequences are caught at smaller TV (`--power`). Before any verdict the battery runs its
negative controls, deliberately broken samplers of the same contract; if one of them passes every case the run has
no power and says so instead of giving a verdict. A sampler that raises or breaks its contract fails its case.
Exit status: 0 every case passed, 1 a case failed, 2 a usage error, 3 no verdict (a negative control passed).
Shapes: V vocabulary, N new tokens per sequence, K (k) drafts per step, B batch rows, m tree nodes.
"""
import difflib
import importlib
import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import numpy as np

# the toys, exact laws and G-test live in picospec/exact_law.py; re-exported here, the public checker's names
from picospec.exact_law import (ALPHA, SAMPLES, SAMPLES_HIGH, SHAPES, Toy, all_sequences, cells,  # noqa: F401
                                check_law, chi2_isf, chi2_sf, detectable_tv, exact_law, g_statistic, g_test, index,
                                law_vector, perturb, perturbed, power, power_table, random_toy)
from picospec.rejection import rejection_sample, sample_rows
from picospec.sampling import sample, warp
from picospec.verify import verify_chain, verify_tree

DEFAULT_SAMPLES = 20_000  # sequences per case of the command and of check_sampler


# The battery: cases of toy target and draft, warping, K and (for trees) tree shapes; drivers that run a sampler of
# each contract on a case and return the N-token sequences it produced.

class Case(NamedTuple):
    name: str
    V: int
    N: int
    K: int = 2  # drafts per step (chain, rejection)
    sampling: dict = {}  # temperature, top_k, top_p: applied alike to draft and target
    target: int = 7  # random_toy seed
    draft: tuple = ("near", 0.6)  # ("near", eps) | ("far",) | ("zeros", share) | ("same",) | ("one-hot",)
    parents: tuple = None  # tree shape (tree contract)
    siblings: str = "iid"  # tree: drawn i.i.d. from the draft, "top" (its top tokens) or "without_replacement"
    dtype: str = "float64"
    lowest: bool = False  # every uniform the sampler draws is 0.0: checks the support, not the law

    def laws(self):
        """Warped target and draft tables [V, V, V]."""
        target = random_toy(self.V, self.target, zeros=0.3 if self.draft[0] == "one-hot" or self.lowest else 0)
        kind = self.draft[0]
        draft = {"near": lambda: perturbed(target, self.draft[1], self.target + 1),
                 "far": lambda: random_toy(self.V, self.target + 1),
                 "zeros": lambda: random_toy(self.V, self.target + 1, zeros=self.draft[1]),
                 "same": lambda: target,
                 "one-hot": lambda: Toy(np.tile(np.eye(self.V)[0], (self.V, self.V, 1)))}[kind]()
        return warp(target.table, **self.sampling), warp(draft.table, **self.sampling)


PROMPT = (1,)
CASES = {
    "chain": [
        Case("uniforms at 0: support", 3, 5, 3, target=97, draft=("far",), lowest=True),
        Case("V=3 K=1", 3, 5, 1),
        Case("V=3 K=2 T=0.6", 3, 5, 2, dict(temperature=0.6), target=17),
        Case("V=3 K=4 T=1.4 top_k=2", 3, 5, 4, dict(temperature=1.4, top_k=2), target=27),
        Case("V=4 K=3 top_p=0.8", 4, 4, 3, dict(top_p=0.8), target=37, draft=("near", 0.5)),
        Case("V=5 K=2 draft with zeros", 5, 3, 2, target=47, draft=("zeros", 0.4)),
        Case("V=2 K=6 far draft", 2, 7, 6, target=57, draft=("far",)),
        Case("V=3 K=2 draft = target", 3, 5, 2, target=67, draft=("same",)),
        Case("V=4 K=3 one-hot draft", 4, 4, 3, target=77, draft=("one-hot",)),
        Case("V=4 K=2 T=0", 4, 4, 2, dict(temperature=0), target=87),
    ],
    "tree": [
        Case("uniforms at 0: support", 3, 5, target=97, draft=("far",), parents=(-1, -1, 0, 1), lowest=True),
        Case("V=3 sampled siblings", 3, 5, parents=(-1, -1, 0, 0)),
        Case("V=3 top tokens T=0.7", 3, 5, sampling=dict(temperature=0.7), target=17, parents=(-1, -1, -1, 0, 1),
             siblings="top"),
        Case("V=4 chain of 4 top_k=3", 4, 4, sampling=dict(top_k=3), target=27, parents=(-1, 0, 1, 2)),
        Case("V=4 four siblings top_p=0.9", 4, 4, sampling=dict(top_p=0.9), target=37, draft=("far",),
             parents=(-1, -1, -1, -1)),
        Case("V=5 top tokens, draft with zeros", 5, 3, target=47, draft=("zeros", 0.4),
             parents=(-1, -1, 0, 0, 1, 1), siblings="top"),
        Case("V=3 sampled, draft = target", 3, 5, target=67, draft=("same",), parents=(-1, -1, 0, 1)),
        Case("V=4 T=0", 4, 4, sampling=dict(temperature=0), target=87, parents=(-1, -1, 0)),
    ],
    "tree_without_replacement": [
        Case("uniforms at 0: support", 3, 5, target=97, draft=("far",), parents=(-1, -1, 0, 0), lowest=True,
             siblings="without_replacement"),
        Case("V=3 two pairs of siblings", 3, 5, parents=(-1, -1, 0, 0), siblings="without_replacement"),
        Case("V=4 three siblings T=0.7", 4, 4, sampling=dict(temperature=0.7), target=17, parents=(-1, -1, -1, 0, 1),
             siblings="without_replacement"),
        Case("V=4 three siblings top_k=3", 4, 4, sampling=dict(top_k=3), target=27, draft=("far",),
             parents=(-1, -1, -1), siblings="without_replacement"),
        Case("V=5 far draft", 5, 3, target=47, draft=("far",), parents=(-1, -1, 0, 0, 1, 1),
             siblings="without_replacement"),
        Case("V=3 draft = target", 3, 5, target=67, draft=("same",), parents=(-1, -1, 0),
             siblings="without_replacement"),
        Case("V=4 T=0 chain", 4, 4, sampling=dict(temperature=0), target=87, parents=(-1, 0, 1),
             siblings="without_replacement"),
    ],
    "rejection": [
        Case("uniforms at 0: support", 3, 5, 3, target=97, draft=("far",), lowest=True),
        Case("V=3 k=1", 3, 5, 1),
        Case("V=3 k=2 T=0.7", 3, 5, 2, dict(temperature=0.7), target=17),
        Case("V=4 k=4 top_k=3", 4, 4, 4, dict(top_k=3), target=27),
        Case("V=5 k=3 top_p=0.8 draft with zeros", 5, 3, 3, dict(top_p=0.8), target=47, draft=("zeros", 0.4)),
        Case("V=2 k=5 far draft", 2, 7, 5, target=57, draft=("far",)),
        Case("V=3 k=2 draft = target", 3, 5, 2, target=67, draft=("same",)),
        Case("V=4 k=3 float32", 4, 4, 3, target=77, dtype="float32"),
        Case("V=4 k=2 T=0", 4, 4, 2, dict(temperature=0), target=87),
    ],
}


class ContractError(Exception):
    """The sampler's output breaks its contract (wrong shape, a token outside the vocabulary, a wrong path)."""


class LowestUniforms(np.random.Generator):
    """A Generator whose uniforms are all 0.0, the lowest value of [0, 1): a right sampler still never emits a token
    the target forbids (accept when u < q/p; inverse CDF picks a token of positive mass), one that breaks the tie
    u == q/p toward the draft does. Its other draws (integers, choice, ...) are ordinary."""

    def random(self, size=None, dtype=np.float64, out=None):
        return 0.0 if size is None else np.zeros(size, dtype=dtype)


def draft_chains(D, T, last2, last1, K, rng):
    """K drafts after contexts (last2, last1) [m] -> drafts [m, K], P [m, K, V], Q [m, K + 1, V]."""
    drafts, P, Q = [], [], [T[last2, last1]]
    for _ in range(K):
        p = D[last2, last1]  # [m, V]
        token = sample_rows(p, rng.random(len(p)))  # [m]
        drafts.append(token)
        P.append(p)
        last2, last1 = last1, token
        Q.append(T[last2, last1])
    return np.stack(drafts, 1), np.stack(P, 1), np.stack(Q, 1)


def run(fn, contract, case, n, seed):
    """n sequences of case.N new tokens from fn on this case -> int array [n, N]; seed: a tuple of ints."""
    T, D = case.laws()
    rng = np.random.default_rng([*seed, 0])  # the checker's draws: drafts, bonus tokens
    fn_rng = (LowestUniforms if case.lowest else np.random.Generator)(np.random.PCG64([*seed, 1]))  # the sampler's
    L = len(PROMPT)
    seqs = np.zeros((n, L + case.N), dtype=np.int64)
    seqs[:, :L] = PROMPT
    length = np.full(n, L)
    while (rows := np.flatnonzero(length < L + case.N)).size:
        last1 = seqs[rows, length[rows] - 1]
        last2 = np.where(length[rows] >= 2, seqs[rows, length[rows] - 2], 0)
        new = STEPS[contract](fn, case, T, D, last2, last1, rng, fn_rng)  # [rows, W]: new tokens, then -1
        count = (new >= 0).sum(1)  # [rows]
        if (count < 1).any() or (new >= case.V).any():
            row = int(np.flatnonzero((count < 1) | (new >= case.V).any(1))[0])
            raise ContractError(f"a step emitted {new[row][new[row] >= 0].tolist()}: expected 1 or more token ids "
                                f"in [0, {case.V})")
        at = length[rows, None] + np.arange(new.shape[1])  # [rows, W]: where each new token goes
        keep = (new >= 0) & (at < seqs.shape[1])
        seqs[np.broadcast_to(rows[:, None], at.shape)[keep], at[keep]] = new[keep]
        length[rows] = np.minimum(length[rows] + count, seqs.shape[1])
    return seqs[:, L:L + case.N]


def padded(rows, width):  # lists of token ids -> [len(rows), width], -1 after each row's tokens
    out = np.full((len(rows), width), -1, dtype=np.int64)
    for i, r in enumerate(rows):
        out[i, :len(r)] = r
    return out


def step_chain(fn, case, T, D, last2, last1, rng, fn_rng):
    drafts, P, Q = draft_chains(D, T, last2, last1, case.K, rng)
    new = []
    for d, p, q in zip(drafts.tolist(), P, Q):
        out = fn(d, p, q, fn_rng)
        n = int(out[0])
        if not 0 <= n <= case.K:
            raise ContractError(f"n_accepted = {n} with K = {case.K} drafts")
        new.append(d[:n] + [int(out[1])])
    return padded(new, case.K + 1)


def step_tree(fn, case, T, D, last2, last1, rng, fn_rng):
    """Grow every row's tree from the draft (node i after its parent's path), score it with the target, verify."""
    parents, m = list(case.parents), len(case.parents)
    tokens = np.zeros((len(last1), m), dtype=np.int64)
    ctx = {-1: (last2, last1)}  # node -> the (second-to-last, last) tokens of its path
    P = np.zeros((len(last1), m, case.V))
    rank, removed = Counter(), {}
    for i, parent in enumerate(parents):
        p = D[ctx[parent]]  # [rows, V]: the draft's law after the parent's path
        if case.siblings == "iid":
            tokens[:, i] = sample_rows(p, rng.random(len(p)))
        elif case.siblings == "top":  # deterministic: the parent's children are the draft's top tokens, in order
            tokens[:, i] = np.argsort(-p, -1, kind="stable")[:, rank[parent]]
            rank[parent] += 1
        else:  # without replacement: p with the siblings drawn before removed (sample_rows renormalises)
            drawn = removed.setdefault(parent, np.zeros(p.shape, dtype=bool))  # [rows, V]
            tokens[:, i] = sample_rows(np.where(drawn, 0, p), rng.random(len(p)))
            drawn[np.arange(len(p)), tokens[:, i]] = True
        P[:, i] = p
        ctx[i] = (ctx[parent][1], tokens[:, i])
    Q = np.stack([T[ctx[i]] for i in range(-1, m)], 1)  # [rows, 1 + m, V]
    new = []
    for row, (t, q) in enumerate(zip(tokens.tolist(), Q)):
        if case.siblings == "without_replacement":  # P [m, V]: the law of each node's siblings before removals
            out = fn(t, parents, q, P[row], fn_rng)
        else:
            out = fn(t, parents, q, fn_rng, P=None if case.siblings == "top" else P[row])
        path = [int(i) for i in out[0]]
        if any(not 0 <= i < m or parents[i] != (path[j - 1] if j else -1) for j, i in enumerate(path)):
            raise ContractError(f"path {path} is not a root-to-node path of the tree with parents {parents}")
        new.append([t[i] for i in path] + [int(out[1])])
    return padded(new, m + 1)


def step_rejection(fn, case, T, D, last2, last1, rng, fn_rng):
    drafts, P, Q = draft_chains(D, T, last2, last1, case.K, rng)
    bonus = sample_rows(Q[:, -1], rng.random(len(Q)))[:, None]  # [B, 1]: the caller samples it, as in vLLM
    out = np.asarray(fn(Q.astype(case.dtype), bonus, P.astype(case.dtype), drafts, rng=fn_rng))
    B, k = drafts.shape
    if out.shape != (B, k + 1) or out.dtype.kind not in "iu":
        raise ContractError(f"output of shape {out.shape} and dtype {out.dtype}: expected integer ids [{B}, {k + 1}]")
    emitted = (out >= 0).cumprod(1).sum(1)  # [B]: tokens before the first -1
    accepted_ok = np.where(np.arange(k) < emitted[:, None] - 1, out[:, :k] == drafts, True).all(1)
    if (emitted == 0).any() or ((out >= 0).sum(1) != emitted).any() or not accepted_ok.all():
        row = int(np.flatnonzero((emitted == 0) | ((out >= 0).sum(1) != emitted) | ~accepted_ok)[0])
        raise ContractError(f"row {row}: {out[row].tolist()} for drafts {drafts[row].tolist()}: expected accepted "
                            "drafts, one recovered or bonus token, then -1")
    return out


STEPS = {"chain": step_chain, "tree": step_tree, "tree_without_replacement": step_tree, "rejection": step_rejection}


# Negative controls: broken samplers of each contract that every run must catch before its verdict counts.

def resample_from_target(drafts, P, Q, rng):
    """chain, broken: a rejected draft is replaced from q instead of the residual norm(max(0, q - p))."""
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t, sample(Q[t], rng)
    return len(drafts), sample(Q[-1], rng)


def bonus_from_draft(drafts, P, Q, rng):
    """chain, broken: when every draft is accepted the extra token comes from the draft's last law, not q's."""
    return verify_chain(drafts, P, np.concatenate([Q[:-1], P[-1:]]), rng)


def tree_without_residual(tokens, parents, Q, rng, P=None):
    """tree, broken: siblings are tried against q itself and the next token drawn from q: no residual update."""
    node, path = -1, []
    while True:
        q = Q[node + 1]
        for c in [i for i, parent in enumerate(parents) if parent == node]:
            p_x = P[c][tokens[c]] if P is not None else 1.0
            if rng.random() < min(1, q[tokens[c]] / p_x):
                node = c
                path.append(c)
                break
        else:
            return path, sample(q, rng)


def tree_scored_by_parent(tokens, parents, Q, rng, P=None):
    """tree, broken: an off-by-one in the target rows: each node is scored with its parent's law."""
    return verify_tree(tokens, parents, Q[[0] + [p + 1 for p in parents]], rng, P)


def recovered_from_target(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng):
    """rejection, broken: the token after the first rejection is drawn from q instead of norm(max(0, q - p))."""
    q, (B, k, _) = target_with_bonus_probs, draft_probs.shape
    rows, cols = np.arange(B)[:, None], np.arange(k)[None, :]
    ratio = q[rows, cols, draft_token_ids] / draft_probs[rows, cols, draft_token_ids]  # [B, k]
    accepted = rng.random((B, k)) < ratio
    n = np.where(accepted.all(1), k, accepted.argmin(1))  # [B]
    recovered = sample_rows(q[np.arange(B), np.minimum(n, k - 1)], rng.random(B))  # bug: q, not the residual
    out = np.where(np.arange(k + 1) < n[:, None], np.pad(draft_token_ids, ((0, 0), (0, 1))), -1)
    out[np.arange(B), n] = np.where(n == k, bonus_token_ids[:, 0], recovered)
    return out


def bonus_is_last_draft(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng):
    """rejection, broken: the bonus token is the last draft token again instead of the caller's bonus_token_ids."""
    return rejection_sample(target_with_bonus_probs, draft_token_ids[:, -1:], draft_probs, draft_token_ids, rng=rng)


def judged_as_iid(tokens, parents, Q, P, rng):
    """tree_without_replacement, broken: siblings drawn without replacement judged against p itself, as if i.i.d."""
    return verify_tree(tokens, parents, Q, rng, P)


def without_replacement_without_residual(tokens, parents, Q, P, rng):
    """tree_without_replacement, broken: no residual update (tree_without_residual with this contract's arguments)."""
    return tree_without_residual(tokens, parents, Q, rng, P)


CONTROLS = {"chain": (resample_from_target, bonus_from_draft),
            "tree": (tree_without_residual, tree_scored_by_parent),
            "tree_without_replacement": (judged_as_iid, without_replacement_without_residual),
            "rejection": (recovered_from_target, bonus_is_last_draft)}


# Running the battery.

class CaseResult(NamedTuple):
    name: str
    samples: int
    p_value: float  # nan for the support case (it counts forbidden sequences, it tests no law)
    tv90: float  # the smallest TV error caught with probability 0.9 wherever it lies (nan for the support case)
    verdict: str  # "pass", "FAIL" or "error"
    detail: str = ""


class Report(NamedTuple):
    verdict: str  # "pass", "fail" or "no verdict" (a negative control passed every case: no power)
    cases: list
    controls: list  # [(control name, the first case that caught it, or None)]


def check_case(fn, contract, case, samples, seed, alpha=ALPHA, tv=True):
    """Run fn on one case and test the law of the sequences it produced -> CaseResult (tv=False: no tv90)."""
    T, _ = case.laws()
    probs = law_vector(Toy(T), PROMPT, case.N)  # [V^N]: the warped target's exact law
    try:
        with np.errstate(divide="ignore", invalid="ignore"):
            seqs = run(fn, contract, case, samples, seed)
    except Exception as e:  # the sampler raised or broke its contract: its case fails, the battery goes on
        hint = f" (does the sampler take the arguments of the {contract} contract?)" if type(e) is TypeError else ""
        return CaseResult(case.name, samples, float("nan"), float("nan"), "error", f"{type(e).__name__}: {e}{hint}")
    counts = np.bincount(index(seqs, case.V), minlength=case.V**case.N).astype(float)  # [V^N]
    forbidden = int(counts[probs == 0].sum())
    if case.lowest:
        detail = f"{forbidden} sequences the target forbids" if forbidden else ""
        return CaseResult(case.name, samples, float("nan"), float("nan"), "FAIL" if forbidden else "pass", detail)
    G, df = g_statistic(counts, probs)
    p = 0.0 if G == np.inf else chi2_sf(float(G), df) if df > 0 else 1.0
    detail = ""
    if p < alpha:
        worst = np.argsort(-np.abs(counts - samples * probs))[:3]
        detail = "; ".join(f"{tuple(int(t) for t in np.unravel_index(i, (case.V,) * case.N))}: observed "
                           f"{int(counts[i])}, expected {samples * probs[i]:.1f}" for i in worst)
    tv90 = detectable_tv(probs, samples) if tv else float("nan")
    return CaseResult(case.name, samples, p, tv90, "pass" if p >= alpha else "FAIL", detail)


def cases_of(contract, numbers=None):
    """[(case number from 1, Case)] of a contract's battery, all of them or the numbered ones."""
    battery = list(enumerate(CASES[contract], 1))
    return [(i, c) for i, c in battery if numbers is None or i in numbers]


def run_controls(contract, samples=DEFAULT_SAMPLES, seed=0, numbers=None):
    """Each negative control over the law cases, stopping at the first that catches it -> [(name, case or None)].
    No law case selected (only the support case, which needs no power): no controls."""
    law_cases = [(i, case) for i, case in cases_of(contract, numbers) if not case.lowest]
    caught = []
    for control in CONTROLS[contract] if law_cases else ():
        first = None
        for i, case in law_cases:
            if check_case(control, contract, case, samples, (seed, i), tv=False).verdict != "pass":
                first = f"{i}. {case.name}"
                break
        caught.append((control.__name__, first))
    return caught


def check_sampler(fn, contract="chain", samples=DEFAULT_SAMPLES, seed=0, cases=None, controls=True,
                  first_failure=False):
    """Run fn through the contract's battery (after its negative controls) -> Report.

    contract: one of CASES ("chain", "tree", "tree_without_replacement", "rejection"; the module docstring gives each
    signature); cases: case numbers to run (default: all); controls=False skips the negative controls (and their
    guarantee); first_failure: stop at the first case that does not pass.
    Example: check_sampler(picospec.verify.verify_chain).verdict -> "pass".
    """
    if contract not in CASES:
        raise ValueError(f"unknown contract {contract!r}: choose one of {', '.join(CASES)}")
    caught = run_controls(contract, samples, seed, cases) if controls else []
    if any(case is None for _, case in caught):
        return Report("no verdict", [], caught)
    results = []
    for i, case in cases_of(contract, cases):
        results.append(check_case(fn, contract, case, samples, (seed, i)))
        if first_failure and results[-1].verdict != "pass":
            break
    return Report("pass" if all(r.verdict == "pass" for r in results) else "fail", results, caught)


# The command line: python -m picospec.check MODULE:FUNCTION ... [options]. A hand parser with the guarantees of
# picospec's other commands (gpt2/cli.py, which picospec may not import): typed values, suggestions for unknown
# options, one `error: ...` line and exit status 2 for a mistake, no traceback.

class Option(NamedTuple):
    name: str
    type: object  # int, str, bool (a switch) or "ints" (comma-separated)
    default: object
    help: str
    low: int = None
    choices: tuple = None


OPTIONS = {o.name: o for o in [
    Option("contract", str, "chain", "the sampler's signature: " + ", ".join(CASES), choices=tuple(CASES)),
    Option("samples", int, None, f"sequences per case (default {DEFAULT_SAMPLES:,}; more: more power)", low=100),
    Option("seed", int, 0, "seed of the run (every case and control derives its generators from it)", low=0),
    Option("cases", "ints", None, "run only these cases of the battery, e.g. 1,3 (default: all)", low=1),
    Option("first_failure", bool, False, "stop a sampler's battery at its first failing case"),
    Option("json", bool, False, "print one JSON object instead of the table"),
    Option("power", bool, False, "print the checker's power, measured by simulation, and exit"),
]}
USAGE = ("usage: python -m picospec.check MODULE:FUNCTION [MODULE:FUNCTION ...] [--contract CONTRACT] "
         "[--samples N] [--seed N] [--cases 1,2] [--first_failure] [--json]\n"
         "       python -m picospec.check --power [--samples N] [--json]")


class UsageError(ValueError):
    """A command line that cannot run: one line, exit status 2."""


def convert(option, text):
    """The value of --name text, typed and checked. Example: convert(OPTIONS["samples"], "2_000") -> 2000."""
    flag = f"--{option.name}"
    if option.type == "ints":
        return [convert(option._replace(type=int), part.strip()) for part in text.split(",")]
    if option.type is bool:
        if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
            raise UsageError(f"{flag} is a switch: write {flag} or --no{option.name}; got {flag}={text}")
        return text.lower() in ("true", "1", "yes")
    if option.type is int:
        try:
            value = int(text.replace("_", ""), 10)
        except ValueError:
            raise UsageError(f"{flag} must be an integer; got {text!r}") from None
        if option.low is not None and value < option.low:
            raise UsageError(f"{flag} must be >= {option.low}; got {value}")
        return value
    if option.choices and text not in option.choices:
        near = difflib.get_close_matches(text, option.choices, 1)
        raise UsageError(f"{flag} must be one of {', '.join(option.choices)}; got {text!r}"
                         + (f" (did you mean {near[0]}?)" if near else ""))
    return text


def parse(argv):
    """argv -> (sampler specs, {option: value}); UsageError for any mistake, SystemExit(0) after -h."""
    values, specs, i = {o.name: o.default for o in OPTIONS.values()}, [], 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-h", "--help"):
            print(help_text())
            raise SystemExit(0)
        if arg.startswith("-") and arg != "-":
            name, eq, text = arg.lstrip("-").partition("=")
            name = name.replace("-", "_")
            if name not in OPTIONS and name.startswith("no") and getattr(OPTIONS.get(name[2:]), "type", 0) is bool:
                values[name[2:]] = False
            elif name not in OPTIONS:
                near = difflib.get_close_matches(name, list(OPTIONS), 1)
                raise UsageError(f"unknown option {arg.partition('=')[0]}" + (f": did you mean --{near[0]}?" if near
                                 else f"; options: {', '.join('--' + o for o in OPTIONS)}"))
            elif OPTIONS[name].type is bool:
                values[name] = convert(OPTIONS[name], text) if eq else True
            else:
                if not eq:
                    i += 1
                    if i == len(argv):
                        raise UsageError(f"--{name} needs a value: {OPTIONS[name].help}")
                    text = argv[i]
                values[name] = convert(OPTIONS[name], text)
        else:
            specs.append(arg)
        i += 1
    if values["power"] and specs:
        raise UsageError("--power measures the checker itself and takes no sampler: drop " + " ".join(specs))
    if not values["power"] and not specs:
        raise UsageError("name the sampler to check as MODULE:FUNCTION or FILE.py:FUNCTION, e.g. "
                         "picospec.verify:verify_chain (see --help)")
    numbers = range(1, len(CASES[values["contract"]]) + 1)
    if values["cases"] and not set(values["cases"]) <= set(numbers):
        raise UsageError(f"--cases {','.join(map(str, values['cases']))}: the {values['contract']} battery has cases "
                         f"1 to {numbers[-1]}")
    return specs, values


def help_text():
    options = "\n".join(f"  --{o.name:<15} {o.help}" + (f" (default {o.default})" if o.default not in (None, False)
                                                          else "") for o in OPTIONS.values())
    cases = "\n".join(f"  {contract}: " + "; ".join(f"{i}. {c.name}" for i, c in cases_of(contract))
                      for contract in CASES)
    return (f"{USAGE}\n\nCheck a speculative sampler against the exact law of toy targets (see the module docstring "
            f"of picospec/check.py for the contracts).\n\noptions:\n{options}\n\nbatteries:\n{cases}\n\nexit status: "
            "0 every case passed, 1 a case failed, 2 a usage error, 3 no verdict (a negative control passed)")


def load(spec):
    """'package.module:function' or 'path/file.py:function' -> the function; UsageError naming what is missing."""
    where, colon, name = spec.rpartition(":")
    if not colon or not where or not name:
        raise UsageError(f"give the sampler as MODULE:FUNCTION or FILE.py:FUNCTION, e.g. picospec.verify:verify_chain;"
                         f" got {spec!r}")
    try:
        if where.endswith(".py"):
            path = Path(where)
            if not path.is_file():
                raise UsageError(f"{where}: no such file")
            sys.path.insert(0, str(path.resolve().parent))  # so the file can import its neighbours
            module_spec = importlib.util.spec_from_file_location(path.stem, path)
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[path.stem] = module
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
    except UsageError:
        raise
    except ModuleNotFoundError as e:
        raise UsageError(f"cannot import {where}: {e} (run from the folder that holds it, or pass FILE.py:FUNCTION)"
                         ) from None
    except Exception as e:  # the module itself fails to import
        raise UsageError(f"importing {where} raised {type(e).__name__}: {e}") from None
    fn = module
    for part in name.split("."):
        fn = getattr(fn, part, None)
    if not callable(fn):
        near = difflib.get_close_matches(name, [n for n in dir(module) if callable(getattr(module, n))], 1)
        raise UsageError(f"{where} has no function {name!r}" + (f": did you mean {near[0]}?" if near else ""))
    return fn


def number(x, digits=3):
    return "-" if x != x else f"{x:.{digits}f}" if x >= 10**-digits else f"{x:.1e}"


def table(spec, contract, values, report, controls=True):
    """The command's printout for one sampler: a header, the negative controls (controls=True), a row per case."""
    lines = [f"{spec}: contract {contract}, {values['samples']:,} sequences per case, seed {values['seed']}, "
             f"alpha {ALPHA:g} per case"]
    if controls and report.controls:
        lines.append("negative controls (broken samplers the run must catch): " + "; ".join(
            f"{name} caught by case {case}" if case else f"{name} NOT CAUGHT" for name, case in report.controls))
    if report.verdict == "no verdict":
        lines.append(f"no verdict: a deliberately broken sampler passed every case at --samples {values['samples']:,}, "
                     "so this run cannot tell a broken sampler from a right one; raise --samples")
        return "\n".join(lines)
    width = max(len(r.name) for r in report.cases)
    lines += ["", f" #  {'case':<{width}}  {'samples':>8}  {'p-value':>8}  {'tv90':>6}  verdict"]
    for (i, _), r in zip(cases_of(contract, values["cases"]), report.cases):
        lines.append(f"{i:>2}  {r.name:<{width}}  {r.samples:>8,}  {number(r.p_value):>8}  {number(r.tv90):>6}  "
                     f"{r.verdict}")
        if r.detail:
            lines.append(f"      {r.detail}")
    passed, tvs = sum(r.verdict == "pass" for r in report.cases), [r.tv90 for r in report.cases if r.tv90 == r.tv90]
    caught = f"; each law case catches any error of TV >= {max(tvs):.3f} with probability 0.9" if tvs else ""
    lines.append(f"verdict: {report.verdict} ({passed} of {len(report.cases)} cases passed{caught})")
    return "\n".join(lines)


def as_json(contract, values, reports):
    """One JSON object for the run (NaN, which JSON lacks, as null)."""
    def row(i, case):
        return {"number": i, **{k: None if v != v else v for k, v in case._asdict().items()}}
    return json.dumps({"contract": contract, "samples": values["samples"], "seed": values["seed"], "alpha": ALPHA,
                       "controls": [{"name": n, "caught_by": c} for n, c in reports[0][1].controls],
                       "results": [{"sampler": spec, "verdict": r.verdict, "cases": [
                           row(i, c) for (i, _), c in zip(cases_of(contract, values["cases"]), r.cases)]}
                           for spec, r in reports]})


def print_power(values):
    rows = power_table((values["samples"],) if values["samples"] else (DEFAULT_SAMPLES, SAMPLES, SAMPLES_HIGH))
    if values["json"]:
        return print(json.dumps([{"samples": n, "shape": how, "tv90": tv} for n, how, tv in rows]))
    print(f"smallest TV error caught with probability 0.9 at alpha {ALPHA:g} (measured by simulation: 100 runs per "
          "point; law of 5 tokens over 3, 243 sequences)\n")
    print(f"{'samples':>8}  " + "  ".join(f"{how:>24}" for how in SHAPES))
    for n in dict.fromkeys(n for n, _, _ in rows):
        print(f"{n:>8,}  " + "  ".join(f"{tv:>24.4f}" for m, _, tv in rows if m == n))


def main(argv=None):
    """The command; returns its exit status (0 pass, 1 a case failed, 2 usage error, 3 no verdict)."""
    try:
        specs, values = parse(sys.argv[1:] if argv is None else argv)
        if values["power"]:
            return print_power(values) or 0
        fns = [load(spec) for spec in specs]
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    contract, values["samples"] = values["contract"], values["samples"] or DEFAULT_SAMPLES
    controls = run_controls(contract, values["samples"], values["seed"], values["cases"])  # once for every sampler
    reports = []
    for spec, fn in zip(specs, fns):
        if any(case is None for _, case in controls):
            report = Report("no verdict", [], controls)
        else:
            report = check_sampler(fn, contract, values["samples"], values["seed"], values["cases"], controls=False,
                                   first_failure=values["first_failure"])._replace(controls=controls)
        reports.append((spec, report))
        if not values["json"]:
            print(table(spec, contract, values, report, controls=len(reports) == 1) + "\n", flush=True)
    if values["json"]:
        print(as_json(contract, values, reports))
    verdicts = {r.verdict for _, r in reports}
    return 3 if "no verdict" in verdicts else 1 if "fail" in verdicts else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        sys.stderr.close()
        sys.exit(0)
