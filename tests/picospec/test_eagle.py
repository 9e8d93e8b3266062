"""EAGLE-1 (picospec/eagle.py): equal to greedy decoding at temperature 0 on a real (random)
GPT-2; at temperature 1 (with top-k / top-p warping) it follows the target's exact law on toy
models, with sampled drafts and with deterministic top-k candidates verified as one-hot proposals,
while two broken one-hot rules and sampled children drawn with replacement are rejected by the same
check; the static trees. The head itself is tested in tests/gpt2/test_eagle.py, EAGLE-2 in
tests/picospec/test_eagle2.py."""
import numpy as np
import pytest

import picospec.eagle as eagle1
from picospec.autoregressive import autoregressive_sampling
from picospec.eagle import eagle_decoding, static_tree
from picospec.sampling import sample

from tests.support.broken_verifiers import one_hot_without_residual
from picospec.check.exact_law import check_law, exact_law
from tests.support.feature_toys import engine_and_head, toy_pair


# ---- temperature 0 on a real (random) GPT-2 ----

@pytest.mark.parametrize("method", ["chain", "tree", "tree topk"])
def test_temperature_zero_equals_greedy(method):
    accepted = 0
    for seed in range(3):
        model, head = engine_and_head(seed)
        x = [1, 2, 3, 4]
        expected = autoregressive_sampling(x, model, 25, np.random.default_rng(0), temperature=0)
        stats, rng = [], np.random.default_rng(0)
        choices = static_tree("chain", depth=3) if method == "chain" else TREE
        out = eagle_decoding(x, model, head, 25, rng, choices,
                             candidates="topk" if "topk" in method else "sample", stats=stats,
                             temperature=0)
        assert out == expected
        assert sum(len(s["tokens"]) for s in stats) == 25
        accepted += sum(s["accepted"] for s in stats)
    # some drafts were right, so the accepted-path bookkeeping (features, caches) was exercised
    assert accepted > 0


# ---- exact laws on toy models ----

PROMPT, N = [0, 1], 4  # the first tree (after the prefill's token) can be 2 deep
TARGET, DRAFT = toy_pair()
TREE = [[0], [1], [2], [0, 0], [0, 1], [1, 0]]
FOLLOWS = {"sampled-top_k": dict(candidates="sample", temperature=1.0, top_k=2),
           "sampled-top_p": dict(candidates="sample", temperature=1.0, top_p=0.8),
           "topk-one-hot-top_p": dict(candidates="topk", temperature=1.0, top_p=0.8)}

# Sequences per check, each sized by `python -m tests.suite.power --only eagle`: the broken
# variant named, planted in the same case, is rejected with the power given (at ALPHA; the
# least over the test's cases, measured on 20,000 fresh draws of n sequences).
FOLLOWS_N = 460  # drawn-with-replacement (sampled children), one-hot-without-residual (one-hot
#                  candidates; the same n as tests/picospec/test_eagle2.py): power 0.9994
DUPLICATES = 130  # duplicates-verified-as-distinct: 1.0000
SHORTCUT = 450  # one-hot-without-residual: 0.9988
BROKEN = {"duplicates-verified-as-distinct": 130, "one-hot-without-residual": 450,
          "drawn-with-replacement": 100}  # each itself: 1.0000, 0.9988, 1.0000


def runs(n=FOLLOWS_N, seed=0, **options):
    rng = np.random.default_rng(seed)
    return [tuple(eagle_decoding(PROMPT, TARGET, DRAFT, N, rng, TREE, **options)[len(PROMPT):])
            for _ in range(n)]


@pytest.mark.parametrize("options", FOLLOWS.values(), ids=FOLLOWS)
def test_follows_the_target_exactly(options):
    sampling = {k: v for k, v in options.items() if k != "candidates"}
    check_law(runs(FOLLOWS_N, **options), exact_law(TARGET, PROMPT, N, **sampling))


def distinct_shortcut(tokens, parents, Q, rng, P=None):
    """Right only for distinct siblings: sibling i kept with q(x_i) / (1 - mass of the siblings
    tried before), the renormalised residual computed without removing anything; a repeated token is
    counted twice."""
    kids, node, path = {}, -1, []
    for i, p in enumerate(parents):
        kids.setdefault(p, []).append(i)
    while True:
        q, tried = Q[node + 1], 0.0
        for child in kids.get(node, []):
            x = tokens[child]
            if rng.random() < q[x] / max(1 - tried, 1e-12):
                node = child
                path.append(child)
                break
            tried += q[x]
        else:
            rest = q.copy()
            rest[[tokens[c] for c in kids.get(node, [])]] = 0
            return path, sample(rest if rest.sum() > 0 else q, rng), "resample"


def with_replacement(p, r, rng):
    """Broken: sampled children drawn with replacement, while verify_without_replacement judges them
    as drawn without it."""
    return [sample(p, rng) for _ in range(min(r, int((np.asarray(p) > 0).sum())))]


# the broken draw can repeat a sibling whose residual mass is 0: q / p is 0 / 0 there
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_sampled_children_drawn_with_replacement_are_rejected(monkeypatch):
    monkeypatch.setattr(eagle1, "sample_without_replacement", with_replacement)
    with pytest.raises(AssertionError, match="empirical law differs"):
        check_law(runs(BROKEN["drawn-with-replacement"], **FOLLOWS["sampled-top_k"]),
                  exact_law(TARGET, PROMPT, N, top_k=2))


# candidates where the top token comes twice: [top, top, second, ...]
def with_duplicates(logits, r):
    order = [int(t) for t in np.argsort(-logits, kind="stable")]
    return ([order[0]] + order)[:r]


def test_duplicate_one_hot_candidates_are_harmless_with_the_residual(monkeypatch):
    """The one-hot rule itself survives duplicates: a rejected token has q = 0 afterwards, so its
    copy is rejected for sure and leaves q as it is (lossless, only a wasted node)."""
    monkeypatch.setattr(eagle1, "top_ranked", with_duplicates)
    check_law(runs(n=DUPLICATES, candidates="topk", temperature=1.0), exact_law(TARGET, PROMPT, N))


@pytest.mark.parametrize("rule, duplicates",
                         [(distinct_shortcut, True), (one_hot_without_residual, False)],
                         ids=["duplicates-verified-as-distinct", "one-hot-without-residual"])
def test_broken_one_hot_rules_are_rejected(request, monkeypatch, rule, duplicates):
    monkeypatch.setattr(eagle1, "verify_tree", rule)
    if duplicates:
        monkeypatch.setattr(eagle1, "top_ranked", with_duplicates)
    n = BROKEN[request.node.callspec.id]
    with pytest.raises(AssertionError, match="empirical law differs"):
        check_law(runs(n=n, candidates="topk", temperature=1.0), exact_law(TARGET, PROMPT, N))


def test_distinct_shortcut_is_right_for_distinct_siblings(monkeypatch):
    monkeypatch.setattr(eagle1, "verify_tree", distinct_shortcut)
    check_law(runs(n=SHORTCUT, candidates="topk", temperature=1.0), exact_law(TARGET, PROMPT, N))


def test_static_trees():
    assert static_tree("chain", depth=3) == [[0], [0, 0], [0, 0, 0]]
    accuracy = [[0.6, 0.2, 0.1], [0.5, 0.2, 0.1]]
    assert static_tree("sparse", accuracy, nodes=3) == [[0], [1], [0, 0]]  # .6, .3 (= .6 x .5), .2
    with pytest.raises(ValueError, match="no accuracy record"):
        static_tree("sparse", None)
