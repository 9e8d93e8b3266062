"""REST: the datastore's suffix array and search against brute force and hand-checked examples,
atomic save/load with clear errors, greedy equality with autoregressive decoding (toy trees and the
GPT-2 engine), and the target's exact law when sampling, with broken verifications that the same
check rejects."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import picospec.rest as rest
from gpt2.engine import GPT2
from picospec.autoregressive import autoregressive_sampling
from picospec.rest import Datastore, rest_decoding
from picospec.sampling import sample
from picospec.tree import paths

from tests.support.broken_verifiers import unverified
from picospec.check.exact_law import check_law, exact_law
from tests.support.micro import random_gpt2
from tests.support.toy import random_toy_tree

CORPUS = [5, 1, 2, 3, 9, 1, 2, 4, 2, 3]  # the docstring's worked example, positions 0..9


@pytest.mark.parametrize("context, max_matches, expected", [
    ([7, 1, 2], 3, ([[3, 9], [4, 2]], 2)),  # [7, 1, 2] never occurs; [1, 2] occurs at 1 and 5
    ([3, 9, 1, 2], 3, ([[4, 2]], 4)),  # the longest suffix wins over [1, 2]'s two matches
    ([6, 6, 3, 9, 1, 2], 3, ([[4, 2]], 4)),  # a context longer than max_suffix = 4
    # [2] at 8, 2, 6 in suffix order; at 8 the corpus ends after one token
    ([9, 2], 2, ([[3], [3, 9]], 1)),
    ([9, 2], 3, ([[3], [3, 9], [4, 2]], 1)),
    ([2, 3], 3, ([[], [9, 1]], 2)),  # a match at the very end of the corpus continues with nothing
    ([8], 3, ([], 0)),  # no match
])
def test_search_by_hand(context, max_matches, expected):
    assert Datastore.build(CORPUS, max_suffix=4).search(context, max_matches, 2) == expected


def test_suffix_array_by_hand():
    # the docstring's
    assert Datastore.build(CORPUS, max_suffix=4).sa.tolist() == [1, 5, 8, 2, 6, 9, 3, 7, 0, 4]


def test_matches_are_spread_over_the_run():
    # [1] at 0, 2, 4, 6 (followed by 5, 6, 7, 8): keep the 1st, 3rd
    store = Datastore.build([1, 5, 1, 6, 1, 7, 1, 8])
    assert store.search([1], 2, 1) == ([[5], [7]], 1)


# brute force: suffix starts ordered by their first `depth` tokens, then start
def sorted_by_prefix(corpus, depth):
    return sorted(range(len(corpus)), key=lambda i: (corpus[i:i + depth], i))


@given(st.lists(st.integers(0, 3), min_size=1, max_size=60), st.integers(1, 9))
def test_suffix_array_equals_brute_force(corpus, max_suffix):
    store = Datastore.build(corpus, max_suffix)
    # the docstring: sorted on the first power of two >= max_suffix
    depth = 2 ** (max_suffix - 1).bit_length()
    assert store.sa.tolist() == sorted_by_prefix(corpus, depth)
    if depth >= len(corpus):  # deep enough: the full suffix array
        assert store.sa.tolist() == sorted(range(len(corpus)), key=lambda i: corpus[i:])


@given(st.lists(st.integers(0, 3), min_size=1, max_size=60),
       st.lists(st.integers(0, 3), min_size=1, max_size=8), st.integers(1, 6))
def test_search_equals_brute_force(corpus, context, max_suffix):
    n = next((n for n in range(min(max_suffix, len(context)), 0, -1)
              if any(corpus[i:i + n] == context[-n:] for i in range(len(corpus)))), 0)
    expected = sorted(corpus[i + n:i + n + 3] for i in range(len(corpus)) if n
                      and corpus[i:i + n] == context[-n:])
    found, n_found = Datastore.build(corpus, max_suffix).search(context, 100, 3)
    assert (sorted(found), n_found) == (expected, n)


def test_save_load_round_trip_is_atomic(tmp_path, monkeypatch):
    store, path = Datastore.build(np.arange(300, dtype=np.uint16) % 7,
                                  max_suffix=5), tmp_path / "rest.npz"
    store.save(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rest.npz"]  # no leftover .tmp
    loaded = Datastore.load(path)
    assert (loaded.tokens.tolist() == store.tokens.tolist()
            and loaded.sa.tolist() == store.sa.tolist())
    assert loaded.max_suffix == 5 and loaded.search([3, 4], 4, 3) == store.search([3, 4], 4, 3)

    def fail(f, **arrays):  # a write that dies halfway
        f.write(b"PK half a file")
        raise OSError("disk full")

    monkeypatch.setattr(rest.np, "savez", fail)
    with pytest.raises(OSError, match="disk full"):
        Datastore.build([1, 2, 3]).save(path)
    # no .tmp, the old file intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rest.npz"]
    monkeypatch.undo()
    assert Datastore.load(path).sa.tolist() == store.sa.tolist()


def test_save_touches_no_other_file(tmp_path):
    """A file of the user's that the old temporary name would have taken (PATH.tmp) stays."""
    path = tmp_path / "rest.npz"
    for name in ("rest.npz.tmp", ".rest.npz.tmp"):
        (tmp_path / name).write_text("my notes")
    Datastore.build([1, 2, 3, 1, 2]).save(path)
    mine = ("rest.npz.tmp", ".rest.npz.tmp")
    assert [(tmp_path / n).read_text() for n in mine] == ["my notes"] * 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [".rest.npz.tmp", "rest.npz",
                                                          "rest.npz.tmp"]


def test_load_errors_say_what_is_wrong_and_the_door_how_to_build(tmp_path):
    from picospec_app.load import rest_datastore

    with pytest.raises(ValueError, match=r"^no REST datastore at .*missing.npz$"):
        Datastore.load(tmp_path / "missing.npz")
    (tmp_path / "bad.npz").write_bytes(b"not a zip at all")
    with pytest.raises(ValueError, match=r"bad.npz is not a REST datastore: it is a file that "
                                         r"begins b'not ', not an \.npz archive \(.*\)$"):
        Datastore.load(tmp_path / "bad.npz")
    (tmp_path / "empty.npz").write_bytes(b"")
    with pytest.raises(ValueError, match=r"empty.npz is not a REST datastore: it is an empty file"):
        Datastore.load(tmp_path / "empty.npz")
    with pytest.raises(ValueError,
                       match=r"not a REST datastore: .*\); give a datastore that "
                             r"--build_datastore wrote, .*Datastore\.build"):
        rest_datastore(tmp_path / "bad.npz", "tiny-target", None)
    np.savez(tmp_path / "other.npz", weights=np.zeros(3))
    with pytest.raises(ValueError, match="not a readable REST datastore"):
        Datastore.load(tmp_path / "other.npz")


def good_arrays():
    store = Datastore.build([3, 1, 4, 1, 5, 9, 2, 6], max_suffix=4)
    return {"tokens": store.tokens, "suffix_array": store.sa,
            "max_suffix": np.int64(store.max_suffix)}


@pytest.mark.parametrize("change, message", [
    (dict(tokens=np.arange(8.0), suffix_array=np.arange(8.0)),
     "tokens must be a non-empty 1-D array of token ids"),
    (dict(tokens=np.zeros(0, np.uint16), suffix_array=np.zeros(0, np.int32)), "non-empty"),
    (dict(suffix_array=np.arange(7)), "suffix_array must hold 8 integer positions"),
    (dict(suffix_array=np.arange(8.0)), "integer positions"),
    (dict(max_suffix=np.int64(-5)), "max_suffix must be one whole number >= 1; it is -5"),
    (dict(max_suffix=np.array([1, 2])), r"it is \[1, 2\]"),
    (dict(suffix_array=np.array([0, 1, 2, 3, 4, 5, 6, 99])), "not a permutation"),
    (dict(suffix_array=np.zeros(8, np.int32)), "not a permutation"),
    (dict(suffix_array=np.arange(8)), "not sorted"),
    (dict(tokens=np.array([3, 1, 4, 1, 5, 9, 2, -6])), "negative"),
    (dict(tokens=np.array(["a"] * 8)), "token ids"),
    (dict(tokens=np.array([None] * 8, dtype=object)),
     "pickled Python objects, which are never loaded"),
])
def test_a_damaged_datastore_file_is_named_and_says_what_is_wrong(tmp_path, change, message):
    """Arrays of the wrong kind, shape or order in a datastore file: one ValueError naming the file
    and what is wrong (before: a TypeError in the search, or a run whose search silently found
    nothing), which the loader of main.py follows with the command that builds a good one; a good
    file still loads."""
    from picospec_app.load import rest_datastore

    np.savez(tmp_path / "good.npz", **good_arrays())
    assert Datastore.load(tmp_path / "good.npz").search([1], 2, 2)[1] == 1
    path = tmp_path / "bad.npz"
    np.savez(path, **{**good_arrays(), **change})
    with pytest.raises(ValueError,
                       match=f"{path} is not a (readable|consistent) REST datastore "
                             f"\\(.*{message}.*\\)$"):
        Datastore.load(path)
    with pytest.raises(ValueError,
                       match=f"{path} is not a (readable|consistent) REST datastore "
                             f"\\(.*{message}.*\\); give a datastore that --build_datastore wrote, "
                             f"or build one into a new file with --method rest --datastore NEW.npz "
                             f"--build_datastore") as e:
        rest_datastore(path, "tiny-target", None)
    assert "delete" not in str(e.value)  # the user's file is theirs


TOY = random_toy_tree(4, seed=0)


@pytest.mark.parametrize("tokens, build_options, message", [
    ([], {}, "non-empty 1-D"), ([[1, 2]], {}, "non-empty 1-D"), ([1, -2], {}, "non-negative"),
    ([0.5, 1.0], {}, "integer"), ([1, 2], dict(max_suffix=0), "max_suffix"),
])
def test_bad_datastores_give_clear_errors(tokens, build_options, message):
    with pytest.raises(ValueError, match=message):
        Datastore.build(tokens, **build_options)


@pytest.mark.parametrize("options, message", [
    (dict(max_matches=0), "max_matches"), (dict(draft_len=0), "draft_len"),
    (dict(num_draft_nodes=2.5), "num_draft_"),
    (dict(datastore=[1, 2, 3]), "Datastore.build"),
    (dict(datastore=Datastore.build([1, 9])), "tokenizer"), (dict(temperature=-1), "temperature"),
])
def test_bad_options_give_clear_errors(options, message):
    options = dict(dict(datastore=Datastore.build([1, 2, 3])), **options)
    with pytest.raises(ValueError, match=message):
        rest_decoding([1, 2], TOY, 3, np.random.default_rng(0), **options)


# the model's own greedy continuations, concatenated: a datastore it agrees with
def greedy_text(model, prompts, n):
    return sum((autoregressive_sampling(x, model, n, np.random.default_rng(0), temperature=0)
                for x in prompts), [])


@pytest.mark.parametrize("max_matches, draft_len, num_draft_nodes",
                         [(100, 10, 7), (3, 4, 16), (1, 1, 1)])
def test_temperature_zero_equals_greedy_on_toys(max_matches, draft_len, num_draft_nodes):
    stats = []
    for seed in range(5):
        target = random_toy_tree(4, seed)
        store = Datastore.build(greedy_text(target, [[a, b] for a in range(4) for b in range(4)],
                                            12), max_suffix=4)
        for x in ([1, 2, 3, 1, 2], [0], [3, 3]):
            out = rest_decoding(x, target, 25, np.random.default_rng(0), store, max_matches,
                                draft_len, num_draft_nodes, stats=stats, temperature=0)
            assert out == autoregressive_sampling(x, target, 25, np.random.default_rng(0),
                                                  temperature=0)
    assert sum(s["accepted"] for s in stats) > 0 and any(len(s["tokens"]) == 1 for s in stats)


def test_temperature_zero_equals_greedy_on_the_engine():
    weights, V, N = random_gpt2(n_vocab=50, n_ctx=64, seed=3), 50, 40
    reference, engine = GPT2(*weights), GPT2(*weights)
    x = [7, 3, 11, 3, 7, 20]
    expected = autoregressive_sampling(x, reference, N, np.random.default_rng(0), temperature=0)
    others = greedy_text(reference, [[1, 2], [9, 40, 9]], 20) + np.random.default_rng(1).integers(0,
                                                                                                  V,
                                                                                                  200).tolist()
    # the answer with every 9th token off
    noisy = [(t + 1) % V if i % 9 == 8 else t for i, t in enumerate(expected)]
    store = Datastore.build(others + noisy)  # drafts that are partly right, and much else
    stats = []
    assert rest_decoding(x, engine, N, np.random.default_rng(0), store, stats=stats,
                         temperature=0) == expected
    assert sum(s["accepted"] for s in stats) > 0 and engine.calls == len(stats) < N
    # some drafts rejected: accept() dropped tree nodes
    assert any(s["origins"][-1] == "resample" for s in stats)
    # no retrieval: a tree of zero nodes is one plain call
    assert engine.tree(x, [], [], probs=True).shape == (1, V)
    # a one-token corpus: every match continues with nothing, so each step is a plain single call
    stats = []
    assert rest_decoding(x, GPT2(*weights), N, np.random.default_rng(0), Datastore.build([V - 1]),
                         stats=stats, temperature=0) == expected
    assert all(s["drafted"] == 0 for s in stats) and len(stats) == N


# --- sampling reproduces the target's exact law
# --------------------------------------------------------------------

PROMPT, N = [0, 1, 2, 0, 1], 5
TARGET = random_toy_tree(3, seed=7)
STORE = Datastore.build(sum((autoregressive_sampling([0, 1], TARGET, 40,
                                                     np.random.default_rng(seed))
                             # the toy's likely text, with branches
                             for seed in range(10)), []), max_suffix=4)


# Sequences per check, each sized by `python -m tests.suite.power --only rest`: the broken
# variant named, planted in the same case, is rejected with the power given (at ALPHA; the
# least over the test's cases, measured on 20,000 fresh draws of n sequences).
JOINT = 460  # first-matching-path in each case: power 0.9993
BROKEN = {"unverified": 100, "first_matching_path": 460}  # each itself: 1.0000, 0.9993


def runs(n, seed=0, stats=None, **options):
    rng = np.random.default_rng(seed)
    return [tuple(rest_decoding(PROMPT, TARGET, N, rng, STORE, 8, 3, 6, stats=stats,
                                **options)[len(PROMPT):])
            for _ in range(n)]


@pytest.mark.parametrize("options", [{}, dict(temperature=0.7, top_k=2)])
def test_joint_law_equals_target(options):
    stats = []
    check_law(runs(JOINT, stats=stats, **options), exact_law(TARGET, PROMPT, N, **options))
    # trees, often accepted
    assert sum(s["accepted"] for s in stats) > JOINT and any(s["nodes"] >= 4 for s in stats)


def first_matching_path(tokens, parents, Q, rng, P=None):
    """Broken: each root-to-leaf path gets its own target draws; the first path whose first token
    matches its draw is accepted up to its first mismatch. Several paths = several chances for a
    drafted token."""
    draws = None
    for path in paths(parents):
        draws = [sample(Q[r + 1], rng) for r in [-1] + path]
        n = 0
        while n < len(path) and tokens[path[n]] == draws[n]:
            n += 1
        if n:
            return path[:n], draws[n], "bonus"
    return [], draws[0] if draws else sample(Q[0], rng), "bonus"


@pytest.mark.parametrize("broken", [unverified, first_matching_path],
                         ids=["unverified", "first_matching_path"])
def test_broken_verification_is_rejected(monkeypatch, broken):
    monkeypatch.setattr(rest, "verify_tree", broken)
    with pytest.raises(AssertionError, match="differs from the target"):
        check_law(runs(BROKEN[broken.__name__]), exact_law(TARGET, PROMPT, N))
