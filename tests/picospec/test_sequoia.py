"""Sequoia: the dynamic program against a search over every tree, by-hand examples, the
hardware-aware choice, the acceptance vector against its exact value, the dynamic program's expected
accepted tokens against the measured mean (within 5%, on a toy where positional acceptance holds
exactly), greedy equality with autoregressive decoding, and the target's exact law of whole
sequences, which the same check rejects when the without-replacement siblings are judged by the
i.i.d. rule."""
import itertools
import json

import numpy as np
import pytest

import picospec.sequoia as sequoia
from picospec.autoregressive import autoregressive_sampling
from picospec.sampling import residual, sample_without_replacement
from gpt2.load import load_acceptance
from picospec.sequoia import (acceptance_vector, all_trees, choose_size, sequoia_decoding,
                              sequoia_tree, tree_value)
from picospec.verify import verify_iid

from picospec.check.exact_law import check_law, exact_law
from tests.support.toy import MaskedToyTree, Toy1
from tests.support.toy import Toy, random_toy, random_toy_tree


# measured by bench.token_trees, beside the target
SHIPPED = load_acceptance("tiny-target", "tiny-draft")


def test_examples_by_hand():
    assert tree_value([[0], [1], [0, 0]], (.6, .2)) == pytest.approx(2.16)
    # a rank beyond the vector is never accepted
    assert tree_value([[0], [2]], (.6, .2)) == pytest.approx(1.6)
    choices, value = sequoia_tree((.8, .1), 3, 2)
    assert choices == [[0], [0, 0]] and value == pytest.approx(2.44)
    # depth 1: two children of the root
    assert sequoia_tree((.8, .1), 3, 1) == ([[0], [1]], pytest.approx(1.9))
    assert sequoia_tree((.5,), 1, 3) == ([], 1.0)


def test_all_trees_counts_are_catalan_numbers():
    assert [sum(1 for _ in all_trees(n, n)) for n in range(1, 9)] == [1, 1, 2, 5, 14, 42, 132, 429]
    assert sorted(all_trees(3, 2)) == [[[0], [0, 0]], [[0], [1]]]


@pytest.mark.parametrize("acceptance", [SHIPPED["greedy"], SHIPPED["sampled"], (.3, .3, .3),
                                        (.1, .6, .05), (.9,)])
def test_dynamic_program_equals_brute_force(acceptance):
    K = len(acceptance)
    for n in range(1, 9):
        for d in range(1, 8):
            trees = [t for t in all_trees(n, d) if all(r < K for c in t for r in c)]
            if not trees:
                with pytest.raises(ValueError, match="no tree"):
                    sequoia_tree(acceptance, n, d)
                continue
            choices, value = sequoia_tree(acceptance, n, d)
            assert value == pytest.approx(max(tree_value(t, acceptance) for t in trees), abs=1e-12)
            assert tree_value(choices, acceptance) == pytest.approx(value, abs=1e-12)
            assert len(choices) == n - 1 and max(map(len, choices),
                                                 default=0) <= d and choices in trees


def test_hardware_aware_choice_by_hand():
    """a = (.5,): chains only. n = 2 (one draft node): 1.5 / (1.2 + .1) = 1.154 beats n = 3 (1.75 /
    (1.5 + .2) = 1.029) and n = 4 (1.875 / (3 + .3)); n = 1 (no draft node, plain decoding) is not a
    candidate."""
    n, d, speedup, choices = choose_size((.5,), [1, 1.2, 1.5, 3], 0.1, max_depth=3)
    assert (n, d, choices) == (2, 1, [[0]]) and speedup == pytest.approx(1.5 / 1.3)
    # verification ~free: deepest
    n, d, _, choices = choose_size((.5,), [1, 1.01, 1.02, 1.03], 0.0, max_depth=3)
    assert (n, d, choices) == (4, 3, [[0], [0, 0], [0, 0, 0]])
    # never worth it: still one draft node
    assert choose_size((.1,), [1, 5, 9], 0.5, max_depth=2)[:2] == (2, 1)


def draft_calls(choices):
    """How many draft calls draw_tree makes to fill the shape `choices` (counted, not assumed)."""
    calls = []

    def draft(x, n=1):
        calls.append(1)
        return np.full((n, 8), 1 / 8)  # [n, V]: every rank can be filled

    sequoia.draw_tree(draft, [0], choices, np.random.default_rng(0), False)
    return len(calls)


@pytest.mark.parametrize("acceptance, verify_cost, draft_cost", [
    ((.6, .3, .1), [1, 1.02, 1.05, 1.1, 1.2, 1.3, 1.5, 1.8], 0.3),
    ((.7, .2), [1, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0], 0.5),
    ((.5, .4, .3), [1, 1.1, 1.2, 1.3, 1.4, 1.5], 0.05)])
def test_hardware_aware_choice_charges_the_draft_calls_the_tree_makes(acceptance, verify_cost,
                                                                      draft_cost):
    """On trees (not chains, where every count agrees): the chosen (n, d) is the best of every
    size and depth by the value of its best tree over verify_cost[n - 1] + draft_cost times the
    draft calls that tree's drafting really makes (one per node with children)."""
    best = None
    for n in range(2, len(verify_cost) + 1):
        for d in range(1, 4):
            try:
                choices, value = sequoia_tree(acceptance, n, d)
            except ValueError:
                continue
            speedup = value / (verify_cost[n - 1] + draft_cost * draft_calls(choices))
            if best is None or speedup > best[2] + 1e-12:
                best = (n, d, speedup, choices)
    chosen = choose_size(acceptance, verify_cost, draft_cost, max_depth=3)
    assert chosen[:2] == best[:2] and chosen[2] == pytest.approx(best[2])
    assert sum(len(c) == 1 for c in chosen[3]) >= 2  # a tree: the root has siblings


def test_a_tree_makes_one_draft_call_per_node_with_children():
    assert draft_calls([[0], [1], [0, 0]]) == 2 and draft_calls([[0], [1], [2]]) == 1
    assert draft_calls([[0], [0, 0], [0, 1], [0, 0, 0]]) == 3


def test_iid_acceptance_credits_the_draw_rank():
    """i.i.d. siblings, draft (.5, .5), target (0, 1): the accepted token is the first draw of 1,
    at draw rank k with probability .5^(k+1) (a repeated 0 is one node: its index is not the
    rank): a = (.5, .25, .125)."""
    def draft(x, n=1):
        return np.tile([0.5, 0.5], (n, 1))  # [n, V]

    def target(x, n=1):
        return np.tile([0.0, 1.0], (n, 1))  # [n, V]

    a = acceptance_vector(draft, target, [[0, 0]], 1, 3, np.random.default_rng(0), siblings="iid",
                          repeats=2000)
    assert a == pytest.approx([0.5, 0.25, 0.125], abs=0.03)


def test_without_replacement_draws_distinct_tokens_from_the_support():
    rng = np.random.default_rng(0)
    p = np.array([0.1, 0.0, 0.6, 0.3])
    for _ in range(200):
        picks = sample_without_replacement(p, 5, rng)
        assert sorted(picks) == [0, 2, 3]  # never a zero, never twice, at most the support
    firsts = np.bincount([sample_without_replacement(p, 2, rng)[0] for _ in range(20_000)],
                         minlength=4) / 20_000
    assert np.abs(firsts - p).max() < 0.015


def exact_acceptance(p, q, K):
    """Independent reference: P(the k-th child is accepted), by enumerating every ordered draw
    without replacement, weighted by its probability, and for each the chance that child k is kept
    after the ones before it are not."""
    a = np.zeros(K)
    for order in itertools.permutations(np.flatnonzero(p), min(K, np.count_nonzero(p))):
        laws, left = [], p.copy()
        for x in order:  # child k is drawn from p with children 1..k-1 removed
            laws.append(left / left.sum())
            left = np.where(np.arange(len(p)) == x, 0, left)
        reach, qi = np.prod([law[x] for law, x in zip(laws, order)]), q.copy()
        for k, (x, law) in enumerate(zip(order, laws)):
            keep = min(1, qi[x] / law[x])
            a[k] += reach * keep
            reach, qi = reach * (1 - keep), residual(qi, law)
    return a


def permutation_pair(V, seed):
    """A target and draft whose laws are the same two vectors up to a relabelling that depends on
    the context: the acceptance of the k-th child is the same after every context, so positional
    acceptance holds exactly."""
    rng = np.random.default_rng(seed)
    q0 = rng.dirichlet(np.full(V, 0.7))
    p0 = 0.5 * q0 + 0.5 * rng.dirichlet(np.full(V, 0.7))
    target, draft = np.zeros((V, V, V)), np.zeros((V, V, V))
    for a, b in itertools.product(range(V), repeat=2):
        perm = rng.permutation(V)
        target[a, b, perm], draft[a, b, perm] = q0, p0
    return MaskedToyTree(target), Toy1(draft), p0, q0


def test_acceptance_vector_matches_its_exact_value():
    target, draft, p0, q0 = permutation_pair(5, seed=3)
    exact = exact_acceptance(p0, q0, 4)
    seqs = [autoregressive_sampling([0, 1], target, 60, np.random.default_rng(s))
            for s in range(10)]
    # 12,200 trials
    measured = acceptance_vector(draft, target, seqs, 2, 4, np.random.default_rng(0), repeats=20)
    assert np.abs(measured - exact).max() < 0.02 and exact.sum() <= 1
    assert acceptance_vector(target, target, seqs[:2], 2, 3,
                             np.random.default_rng(0)).tolist() == [1, 0, 0]
    greedy = acceptance_vector(draft, target, seqs[:3], 2, 3, np.random.default_rng(0),
                               temperature=0)
    # where the target's argmax sits
    rank = list(np.argsort(-p0, kind="stable")).index(int(np.argmax(q0)))
    assert greedy.tolist() == [1.0 if k == rank else 0.0 for k in range(3)]


def test_expected_tokens_of_the_dynamic_program_match_the_measured_mean():
    target, draft, _, _ = permutation_pair(6, seed=4)
    seqs = [autoregressive_sampling([0, 1], target, 60, np.random.default_rng(s))
            for s in range(10)]
    # held-out text
    a = acceptance_vector(draft, target, seqs, 2, 6, np.random.default_rng(1), repeats=10)
    choices, value = sequoia_tree(a, 9, 4)
    stats = []
    for seed in range(8):
        sequoia_decoding([2, 3], draft, target, 500, np.random.default_rng(seed), nodes=8, depth=4,
                         acceptance=a, stats=stats)
    # whole trees (the last steps are cut short)
    full = [s["accepted"] for s in stats if s["nodes"] == 8]
    assert len(full) > 1000 and len({len(c) for c in choices}) > 1 and any(c[-1] > 0
                                                                           for c in choices)
    # 5% is more than 3 standard errors
    assert np.std(full) / np.sqrt(len(full)) < 0.015 * (value - 1)
    assert np.mean(full) == pytest.approx(value - 1, rel=0.05)  # measured: 2.65 expected


@pytest.mark.parametrize("options, message", [
    (dict(nodes=0), "nodes"), (dict(depth=1.5), "depth"), (dict(acceptance=()), "acceptance"),
    (dict(acceptance=(.7, .6)), "acceptance"),
    (dict(nodes=9, depth=2, acceptance=(.5, .2)), "no tree"), (dict(temperature=-1), "temperature"),
])
def test_bad_options_give_clear_errors(options, message):
    with pytest.raises(ValueError, match=message):
        sequoia_decoding([1, 2], random_toy(4, 1), random_toy_tree(4, 0), 3,
                         np.random.default_rng(0), **{"acceptance": (.6, .2), **options})


@pytest.mark.parametrize("nodes, depth", [(1, 1), (6, 3), (12, 6)])
def test_temperature_zero_equals_greedy_on_toys(nodes, depth):
    stats = []
    for seed in range(6):
        target, draft = random_toy_tree(4, seed), random_toy(4, seed + 50)
        for x in ([1, 2, 3], [0], [3, 3]):
            out = sequoia_decoding(x, draft, target, 20, np.random.default_rng(0), nodes, depth,
                                   acceptance=SHIPPED["greedy"], stats=stats,
                                   temperature=0)
            assert out == autoregressive_sampling(x, target, 20, np.random.default_rng(0),
                                                  temperature=0)
    assert sum(s["accepted"] for s in stats) > 0 and all(s["drafted"] <= depth for s in stats)


def test_temperature_zero_equals_greedy_on_the_built_in_pair(tiny_target, tiny_draft):
    (target, encoder), draft = tiny_target, tiny_draft[0]
    x = encoder.encode("def read_lines(path):\n    with open(path) as f:\n")
    expected = autoregressive_sampling(x, target, 24, np.random.default_rng(0), temperature=0)
    stats = []
    assert sequoia_decoding(x, draft, target, 24, np.random.default_rng(0), 12, 5,
                            acceptance=SHIPPED["greedy"], stats=stats,
                            temperature=0) == expected
    assert sum(s["accepted"] for s in stats) > 0 and max(s["nodes"] for s in stats) == 12


# --- sampling reproduces the target's exact law
# ---------------------------------------------------------------------

PROMPT, N, V = [0, 1], 3, 3
TABLE = random_toy(V, seed=25).table
TARGET = Toy(TABLE)  # the law the tree's target (a MaskedToyTree of TABLE) must give
DRAFT = Toy1(random_toy(V, seed=39, concentration=0.5).table)
# an acceptance vector whose best tree of 5 nodes branches: [[0], [1], [2], [0, 0]]
BUSHY = (.4, .3, .2)


# Sequences per check, each sized by `python -m tests.suite.power --only sequoia`: the broken
# variant named, planted in the same case, is rejected with the power given (at ALPHA; the
# least over the test's cases, measured on 20,000 fresh draws of n sequences).
JOINT = 100  # without-replacement-judged-as-iid in each case: power 1.0000
BROKEN = 100  # itself: 1.0000


def runs(n, seed=0, n_tokens=N, **options):
    target, rng = MaskedToyTree(TABLE), np.random.default_rng(seed)
    return [tuple(sequoia_decoding(PROMPT, DRAFT, target, n_tokens, rng, 4, 2, acceptance=BUSHY,
                                   **options)[len(PROMPT):])
            for _ in range(n)]


def test_the_test_tree_branches():
    assert sequoia_tree(BUSHY, 5, 2)[0] == [[0], [1], [2], [0, 0]]


@pytest.mark.parametrize("n_tokens, options", [(N, {}), (2, dict(top_p=0.8))],
                         ids=["T=1", "top_p=0.8"])
# with 2 tokens, one level: the root's 3 children and a token
def test_joint_law_equals_target(n_tokens, options):
    check_law(runs(JOINT, n_tokens=n_tokens, **options),
              exact_law(Toy(TABLE), PROMPT, n_tokens, **options))


def test_without_replacement_judged_as_iid_is_rejected(monkeypatch):
    monkeypatch.setattr(sequoia, "verify_without_replacement", verify_iid)
    with pytest.raises(AssertionError, match="empirical law differs"):
        check_law(runs(BROKEN), exact_law(Toy(TABLE), PROMPT, N))


def test_recorded_vectors_are_what_the_loader_reads(tmp_path):
    """bench.token_trees --record writes a draft's vectors beside the target (keeping other
    drafts'), and the loader of main.py's Sequoia reads them back; a draft never measured is refused
    with the way out."""
    from bench.token_trees import record_vectors

    (tmp_path / "sequoia.json").write_text('{"other": {"greedy": [1.0], "sampled": [0.5]}}')
    vectors = {(0.0, "top"): np.array([.61234, .1]),
               (1.0, "without_replacement"): np.array([.5, .2])}
    record_vectors(tmp_path, "mine", vectors, "by hand")
    entries = json.loads((tmp_path / "sequoia.json").read_text())
    assert entries["other"] == {"greedy": [1.0], "sampled": [0.5]}
    assert entries["mine"] == {"greedy": [.612, .1], "sampled": [.5, .2], "protocol": "by hand"}
    assert load_acceptance(tmp_path, "mine")["greedy"] == [.612, .1]
    with pytest.raises(ValueError,
                       match="no acceptance vector of draft 'nobody'.*give --acceptance"):
        load_acceptance(tmp_path, "nobody")
