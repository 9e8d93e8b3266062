"""picospec.check: does a sampler reproduce the target's exact law? Anyone's sampler, checked on toy models.

A lossless speculative sampler must output sequences whose law is exactly the (warped) target's. On a toy model
(a table of next-token laws over a few tokens) that law is known exactly for every whole sequence of N tokens, so a
sampler can be run many times and its empirical law tested against it (a G-test, rare cells pooled; the toys, the
exact laws and the test are in picospec/exact_law.py). This file runs the battery; its cases, drivers, negative
controls and command are in picospec/check_cases.py, check_steps.py, check_controls.py and check_command.py.
Notation as in picospec/verify.py (Chen et al. 2023, arXiv:2302.01318): p = draft, q = target. NumPy only; scipy is
not needed.

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
import sys
from typing import NamedTuple

import numpy as np

from picospec.check_cases import CASES, PROMPT
from picospec.check_controls import CONTROLS
from picospec.check_steps import run
# the toys, exact laws and G-test live in picospec/exact_law.py; re-exported here, the public checker's names
from picospec.exact_law import (ALPHA, SAMPLES, SAMPLES_HIGH, SHAPES, Toy, all_sequences, cells,  # noqa: F401
                                check_law, chi2_isf, chi2_sf, detectable_tv, exact_law, g_statistic, g_test, index,
                                law_vector, perturb, perturbed, power, power_table, random_toy)

DEFAULT_SAMPLES = 20_000  # sequences per case of the command and of check_sampler


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
    except (Exception, SystemExit) as e:  # the sampler raised (sys.exit too) or broke its contract: its case fails,
        # the battery goes on (Ctrl-C still stops it)
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


# the pieces that lived in this file until it was split by concept: their old names still import from here
MOVED = {"picospec.check_cases": ("Case",),
         "picospec.check_steps": ("ContractError", "LowestUniforms", "STEPS", "draft_chains", "padded", "step_chain",
                                  "step_rejection", "step_tree"),
         "picospec.check_controls": ("bonus_from_draft", "bonus_is_last_draft", "judged_as_iid",
                                     "recovered_from_target", "resample_from_target", "tree_scored_by_parent",
                                     "tree_without_residual", "without_replacement_without_residual"),
         "picospec.check_command": ("OPTIONS", "Option", "USAGE", "UsageError", "as_json", "convert", "help_text",
                                    "load", "main", "number", "parse", "print_power", "table")}


def __getattr__(name):  # `from picospec.check import main`: the module that holds it now (imported on first use)
    import importlib

    for module, names in MOVED.items():
        if name in names:
            return getattr(importlib.import_module(module), name)
    raise AttributeError(f"module 'picospec.check' has no attribute {name!r}")


if __name__ == "__main__":
    from picospec.check_command import main  # here, not at the top: the command imports this file
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # one line, as every command says it (gpt2/cli.py's guarded)
        print("\ninterrupted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:
        sys.stderr.close()
        sys.exit(0)
