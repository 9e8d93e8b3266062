"""Medusa decoding on a real (random) GPT-2 engine with random heads: greedy equals autoregressive
greedy for every tree shape, typical and nucleus equal greedy at temperature 0, lossless mode
follows the target's exact law (and the longest-match flaw is rejected by the same check), bad trees
give clear errors."""
import numpy as np
import pytest

import picospec.medusa as medusa
from picospec.autoregressive import autoregressive_sampling
from picospec.medusa import medusa_decoding
from picospec.tree import chain_choices

from tests.support.broken_verifiers import longest_match
from picospec.check.exact_law import check_law, exact_law
from tests.support.micro import model_and_heads
from tests.support.trees import SEED_CHOICES
from tests.support.trees import TREES


def test_auto_posterior_is_greedy_at_temperature_zero_and_lossless_above():
    """--posterior auto, as the methods table resolves it before the run: greedy exact match at
    temperature 0, the lossless rule at any other temperature (the default temperature is 1)."""
    from picospec.methods import TABLE, defaults, law, prepare_medusa

    row = TABLE["medusa"]
    heads = {"fn": None, "n_heads": 3, "sparse": None}
    for sampling, expected in (({"temperature": 0}, "greedy"), ({"temperature": 0.7}, "lossless"),
                               ({}, "lossless")):
        options = {**{k: v for k, v in defaults(row).items() if k != "heads"}, "tree": "chain"}
        assert prepare_medusa(options, {"heads": heads}, sampling)["posterior"] == expected
    assert law(row, defaults(row)) == "lossless"
    # as prepared
    assert law(row, defaults(row), 0) == "greedy" and law(row, defaults(row), 0.7) == "lossless"
    # typical and nucleus take the argmax at temperature 0 (evaluate_posterior): greedy there,
    # where --json's "law" and the report's "texts must be identical" read it
    for posterior, hot in (("typical", "lossy"), ("nucleus", "lossy"), ("greedy", "greedy"),
                           ("lossless", "lossless")):
        options = {**defaults(row), "posterior": posterior}
        cold = "lossless" if posterior == "lossless" else "greedy"
        assert (law(row, options, 0), law(row, options, 0.7)) == (cold, hot), posterior


@pytest.mark.parametrize("tree, sparse, said", [
    ("sparse", [[0], [3], [0, 0]], "--tree sparse (the default: the heads' medusa_choices.json) "
                                   "asks for candidate rank 3, but --topk 2 offers ranks 0..1: "
                                   "give --topk 4 or more"),
    ("[[0],[1],[1,2]]", None, "--tree [[0],[1],[1,2]] asks for candidate rank 2, but --topk 2")])
def test_a_tree_beyond_topk_names_both_options(tree, sparse, said):
    """A node of rank r needs --topk > r: refused before the run, naming the tree and --topk
    (the heads' own sparse tree is the default --tree, so a user who typed only --topk learns
    where rank 3 comes from)."""
    from picospec.methods import TABLE, defaults, prepare_medusa

    options = {**defaults(TABLE["medusa"]), "tree": tree, "topk": 2}
    heads = {"fn": None, "n_heads": 3, "sparse": sparse}
    with pytest.raises(ValueError) as e:
        prepare_medusa(dict(options), {"heads": heads}, {"temperature": 0})
    assert str(e.value).startswith(said), str(e.value)
    ok = prepare_medusa({**options, "topk": 4}, {"heads": heads}, {"temperature": 0})
    assert ok["topk"] == 4 and ok["medusa_choices"]


@pytest.mark.parametrize("text, message", [
    ("[[0], [1]]", "expected .*a list of rank paths"),
    ('{"medusa_choices": "abc"}', "a list of rank paths"),
    ('{"medusa_choices": [[0], [true]]}', "a list of rank paths"),
    ('{"budget": 7}', "a list of rank paths"),
    ('{"medusa_choices": [[0], [1, 0]]}', r"node \[1, 0\] has no parent"),
    ('{"medusa_choices": [[0], [0, 0], [0, 0, 0]]}', "only 2 heads"),
    ("{", "Expecting property name")])
def test_a_damaged_sparse_tree_is_named(tiny_target, tmp_path, text, message):
    """medusa_choices.json beside the heads: anything but a tree of rank paths the heads can fill is
    refused when the heads load, naming the file and how to rebuild it (before: a TypeError, or a
    message about --tree)."""
    import shutil

    from picospec_app.load import load_heads
    from gpt2.load import ASSETS

    shutil.copytree(ASSETS / "tiny-target" / "medusa", tmp_path / "medusa")
    (tmp_path / "medusa" / "medusa_choices.json").write_text(text)
    target, _ = tiny_target
    # the shipped tree reads
    assert load_heads("tiny-target", "medusa", None, target)["sparse"] is not None
    with pytest.raises(ValueError,
                       match=f"medusa_choices.json is not a readable tree \\(.*{message}.*\\): "
                             f"rebuild it with `python -m bench.trees --build"):
        load_heads("tiny-target", "medusa", tmp_path / "medusa", target)


def test_typical_threshold_when_epsilon_is_the_smaller_term():
    """Row 0 = [.45, .45, .1]: H = -(.9 ln .45 + .1 ln .1) = 0.949, delta e^-H = .3 * 0.387 = 0.116
    > epsilon = .09, so the threshold is epsilon and token 2 (p = .1 > .09) is kept; max(epsilon,
    delta e^-H) would drop it. Row 1 = [.92, .05, .03]: H = 0.332, delta e^-H = 0.215, threshold .09
    again: token 1 (.05) out, token 0 in."""
    probs = np.array([[0.45, 0.45, 0.1], [0.92, 0.05, 0.03]])
    ok = medusa.typical_accept([2, 1, 0], [-1, 0, 0], probs, epsilon=0.09, delta=0.3)
    assert ok == [True, False, True]


def test_heads_see_the_hidden_state_of_the_last_accepted_token():
    """Each time the heads run, the hidden state they get is a fresh forward's at the last accepted
    token (the one before the new root): the prefill's at the prompt's end, then the row of the last
    node of the accepted path. A row too early still decodes greedy text exactly (the heads only
    guess), so only this check tells."""
    accepted = 0
    for seed in range(3):
        model, heads = model_and_heads(seed=seed)
        fresh, _ = model_and_heads(seed=seed)  # the same weights, its own cache
        x, stats, seen = [1, 2, 3, 4], [], []

        def recording(h, n_heads=None):
            seen.append((len(stats), h.copy()))
            return heads(h, n_heads)

        medusa_decoding(x, model, recording, 25, np.random.default_rng(0), TREES["seed"], topk=3,
                        stats=stats, temperature=0)
        for steps, h in seen:
            # accepted so far, the newest root last
            text = x + [t for s in stats[:steps] for t in s["tokens"]]
            last = text if steps == 0 else text[:-1]
            fresh.reset()
            np.testing.assert_allclose(h[-1], fresh.logits(last, 1, hidden=True)[1][0], atol=1e-4)
        accepted += sum(s["accepted"] for s in stats)
    # paths were accepted, so the row after a path was tested
    assert accepted > 0 and len(seen) > 10


@pytest.fixture(scope="module")
def shipped(tiny_target):
    from picospec_app.load import load_heads

    target, encoder = tiny_target
    return target, load_heads("tiny-target", "medusa", None, target), encoder


def test_shipped_heads_keep_their_speed(shipped):
    """The shipped heads with their sparse tree, greedy, on three code prompts: 2.09 tokens per
    target call (measured; 1.67 when the heads are fed the hidden state one row too early, which
    leaves the text unchanged). The floor sits halfway; greedy decoding of fixed weights makes the
    count deterministic."""
    target, heads, encoder = shipped
    tokens = calls = 0
    for prompt in ("import os\n\n\ndef list_files(path):\n    return [",
                   "class Stack:\n    def __init__(self):\n",
                   "def read_lines(path):\n    with open(path) as f:\n"):
        target.reset()
        before = target.calls
        x = encoder.encode(prompt)
        out = medusa_decoding(x, target, heads["fn"], 48, np.random.default_rng(0), heads["sparse"],
                              temperature=0)
        tokens, calls = tokens + len(out) - len(x), calls + target.calls - before
    assert tokens / calls >= 1.9, f"{tokens / calls:.2f} tokens per target call"


@pytest.mark.parametrize("tree", TREES)
@pytest.mark.parametrize("posterior", ["greedy", "typical", "nucleus"])
def test_temperature_zero_equals_greedy(tree, posterior):
    accepted = 0
    for seed in range(3):
        model, heads = model_and_heads(seed=seed)
        x = [1, 2, 3, 4]
        expected = autoregressive_sampling(x, model, 25, np.random.default_rng(0), temperature=0)
        stats = []
        out = medusa_decoding(x, model, heads, 25, np.random.default_rng(0), TREES[tree], topk=3,
                              posterior=posterior, stats=stats, temperature=0)
        assert out == expected
        assert sum(len(s["tokens"]) for s in stats) == 25
        accepted += sum(s["accepted"] for s in stats)
    assert accepted > 0  # some candidates were right, so the tree path was exercised


def test_oracle_heads_accept_whole_chain():
    """Heads that know the model's greedy text: every step accepts the full chain -> depth + 1
    tokens per call."""
    model, _ = model_and_heads()
    x = [1, 2, 3, 4]
    text = autoregressive_sampling(x, model, 40, np.random.default_rng(0), temperature=0)
    V = model.n_vocab

    class Oracle:  # looks up where decoding is from the engine's token list
        def __call__(self, h, n_heads=None):
            # the position whose hidden state h is: the last token the cache holds
            n = len(model.tokens)
            out = np.zeros((3, 1, V), np.float32)
            for k in range(3):
                if n + 1 + k < len(text):
                    out[k, 0, text[n + 1 + k]] = 1
            return out

    model.reset()
    stats = []
    out = medusa_decoding(x, model, Oracle(), 33, np.random.default_rng(0), chain_choices(3),
                          topk=1, stats=stats, temperature=0)
    assert out == text[:len(x) + 33]
    assert [s["accepted"] for s in stats[1:]] == [3] * 8  # 1 + 8 * 4 = 33 tokens, 9 calls


PROMPT, N = [0, 1], 3
LOSSLESS = [{}, dict(temperature=0.7, top_k=2)]

# Sequences per check, each sized by `python -m tests.suite.power --only medusa`: the broken
# variant named, planted in the same case, is rejected with the power given (at ALPHA; the
# least over the test's cases, measured on 20,000 fresh draws of n sequences).
LOSSLESS_N = 2_000  # longest-match in each case: power 0.9992
LONGEST = 550  # itself: 0.9994
TYPICAL = 2_700  # itself (typical acceptance, epsilon 0.3, delta 0.6): 0.9996


SMALL = dict(n_vocab=3, n_heads=2, seed=5, scale=0.8)


@pytest.fixture(scope="module")
def small():
    return model_and_heads(**SMALL)


def runs(model, heads, n, seed=0, posterior="lossless", **options):
    rng = np.random.default_rng(seed)
    return [tuple(medusa_decoding(PROMPT, model, heads, N, rng, SEED_CHOICES, topk=3,
                                  posterior=posterior, **options)[len(PROMPT):]) for _ in range(n)]


@pytest.mark.parametrize("options", LOSSLESS)
def test_lossless_follows_target(small, options):
    model, heads = small
    check_law(runs(model, heads, LOSSLESS_N, **options), exact_law(model, PROMPT, N, **options))


def test_longest_match_flaw_is_rejected(small, monkeypatch):
    model, heads = small
    monkeypatch.setattr(medusa, "verify_tree", longest_match)
    with pytest.raises(AssertionError, match="empirical law differs"):
        check_law(runs(model, heads, LONGEST), exact_law(model, PROMPT, N))


def test_typical_acceptance_is_not_lossless(small):
    """Typical acceptance trades the target's law for speed: the same check tells (a documented
    property)."""
    model, heads = small
    samples = runs(model, heads, TYPICAL, posterior="typical", epsilon=0.3, delta=0.6)
    with pytest.raises(AssertionError, match="empirical law differs"):
        check_law(samples, exact_law(model, PROMPT, N))


def test_typical_threshold_by_hand():
    # H = ln 2 -> delta e^-H = 0.15; H2 = 0.394 -> 0.202
    probs = np.array([[0.5, 0.5, 0.0], [0.9, 0.05, 0.05]])
    ok = medusa.typical_accept([0, 2, 1], [-1, -1, 0], probs, epsilon=0.3, delta=0.3)
    assert ok == [True, False, False]  # 0.5 > 0.15; 0.0 < 0.15; 0.05 < min(0.3, 0.202)


@pytest.mark.parametrize("choices, topk, message", [
    ([[0], [0, 0], [0, 0, 0], [0, 0, 0, 0]], 3, "only 3 heads"),
    ([[0], [3]], 3, "only topk = 3 candidates"),
    ([[0], [1, 1]], 3, "no parent"),
    ([[0], [0]], 3, "twice"),
])
def test_bad_choices(choices, topk, message):
    model, heads = model_and_heads()
    with pytest.raises(ValueError, match=message):
        medusa_decoding([1, 2], model, heads, 5, np.random.default_rng(0), choices, topk=topk)


def test_bad_posterior():
    model, heads = model_and_heads()
    with pytest.raises(ValueError, match="unknown posterior"):
        medusa_decoding([1, 2], model, heads, 5, np.random.default_rng(0), [[0]], posterior="beam")
