"""picospec.exercises: every exercise passes with the project's answer and fails with each wrong
answer it keeps, with the verdict expected (the first failing case of the checker's battery, or
the smallest case where the output differs, worked out by hand); the command's exit status and
its one-line usage errors; grading a notebook's answer cells and its hand-out copy."""
import json
from pathlib import Path

import numpy as np
import pytest

from picospec.exercises import EXERCISES
from picospec.exercises.answers import TAG
from picospec.exercises.grading import battery_tv90
from picospec.exercises.grading import show as grading_show

from tests.support.clitools import ROOT, assert_refused, files_under, run_cli, run_here
from tests.support.fewest import fewest

LEARNER = ROOT / "tests" / "support" / "learner_answers.py"
SAMPLES = 1_000  # sequences per case of the law-graded exercises
# a right answer passes a case with probability 1 - alpha at any number of sequences: graded at
# fewer (fewest(module), or PASSING), faster; whole gradings in a process of their own at the
# fewest the command allows
PASSING, FEWEST = 100, "100"
NOTEBOOK = ROOT / "notebooks" / "exercises.ipynb"


def answer(name):
    """The function the exercise's ANSWER (the project's answer cell) defines."""
    namespace = {}
    exec(EXERCISES[name].ANSWER, namespace)
    return namespace[name]


@pytest.mark.parametrize("name", list(EXERCISES))
def test_the_projects_answer_passes(name):
    verdict = EXERCISES[name].grade(answer(name), samples=fewest(EXERCISES[name]))
    assert verdict.passed, str(verdict)
    assert verdict.line() == "pass" and str(verdict).startswith(f"{name}: pass")


@pytest.mark.parametrize("name", list(EXERCISES))
def test_a_right_answer_written_differently_passes(name):
    """A learner's own right answer (tests/support/learner_answers.py: other loops, other
    formulas, no picospec) passes as the project's does."""
    from tests.support import learner_answers

    module = EXERCISES[name]
    verdict = module.grade(getattr(learner_answers, name), samples=fewest(module))
    assert verdict.passed, str(verdict)


@pytest.mark.parametrize("name", list(EXERCISES))
def test_the_stub_is_not_answered(name):
    namespace = {}
    exec(EXERCISES[name].STUB, namespace)
    verdict = EXERCISES[name].grade(namespace[name], samples=SAMPLES)
    assert not verdict.passed and verdict.failed == "not answered"
    # a stub is marked "-" in a class's table, its line saying why, not "FAIL at ..."
    assert not verdict.answered
    assert verdict.line() == "not answered: the function still raises NotImplementedError"


# (exercise, wrong answer, where it fails: the battery's case, or the part of the output and the
# smallest case that shows it)
WRONG = [
    ("residual", "not_renormalised", "values", "q=[0.5, 0.5], p=[0.9, 0.1]"),
    ("residual", "overlap_normaliser", "values",
     "q=[0.1000000000003, 0.2, 0.6999999999997], p=[0.1, 0.2, 0.7]"),
    ("residual", "draft_minus_target", "support: a token with q <= p must get exactly 0",
     "q=[0.5, 0.5], p=[0.9, 0.1]"),
    ("residual", "epsilon_added", "support: a token with q <= p must get exactly 0",
     "q=[0.5, 0.5], p=[0.9, 0.1]"),
    ("residual", "in_place", "input 1 changed: an answer must leave its inputs as they were",
     "q=[0.5, 0.5], p=[0.9, 0.1]"),
    ("residual", "draft_support_only", "support: a token with q > p must get more than 0",
     "q=[0.3, 0.5, 0.2], p=[0.0, 0.3, 0.7]"),
    ("residual", "small_mass_guard", "support: a token with q <= p must get exactly 0",
     "q=[0.5000000009313226, 0.4999999990686774], p=[0.5, 0.5]"),
    ("verify_chain", "resample_from_target", "case 2. V=3 K=1", None),
    ("verify_chain", "ratio_inverted", "case 2. V=3 K=1", None),
    ("verify_chain", "ties_toward_draft", "case 1. uniforms at 0: support", None),
    ("verify_chain", "bonus_from_draft", "case 2. V=3 K=1", None),
    ("verify_chain", "residual_unclipped", "case 2. V=3 K=1", None),
    ("verify_chain", "python_random", "randomness outside rng", None),
    ("verify_chain", "numpy_global", "randomness outside rng", None),
    ("verify_chain", "residual_from_numpy", "randomness outside rng", None),
    ("verify_chain", "ratio_smoothed", "twenty drafts", None),
    ("verify_chain", "numpy_global_from_the_fourth", "randomness outside rng", None),
    ("medusa_buffers", "siblings_see_each_other", "attn_mask", "choices=[[0], [1], [0, 0]]"),
    ("medusa_buffers", "positions_from_one", "position_ids", "choices=[[0]]"),
    ("medusa_buffers", "retrieve_without_root", "retrieve_indices", "choices=[[0]]"),
    ("medusa_buffers", "retrieve_leaf_to_root", "retrieve_indices", "choices=[[0]]"),
    ("medusa_buffers", "leaf_by_ranks_up_to_2", "retrieve_indices: shape (2, 3), expected (1, 3)",
     "choices=[[0], [0, 3]]"),
    ("medusa_buffers", "ancestor_by_joined_ranks", "attn_mask", "choices=[[1], [10]]"),
    ("typical_accept", "own_row", "kept nodes", None),
    ("typical_accept", "max_not_min", "kept nodes", None),
    ("typical_accept", "entropy_in_bits", "kept nodes", None),
    ("typical_accept", "stops_at_first_rejection", "kept nodes", None),
    ("typical_accept", "no_zero_guard", "kept nodes", "tokens=[2, 1], parents=[-1, 0], probs="
     "[[0.0, 0.6, 0.4], [0.5, 0.0, 0.5], [0.333, 0.333, 0.333]], epsilon=0.5, delta=0.6"),
    ("typical_accept", "log_plus_1e5", "kept nodes", "tokens=[0], parents=[-1], probs="
     "[[0.3, 0.7], [0.5, 0.5]], epsilon=0.5, delta=0.552606831959"),
    ("typical_accept", "threshold_in_float32", "kept nodes", "tokens=[0], parents=[-1], probs="
     "[[0.09000000009, 0.90999999991], [0.5, 0.5]], epsilon=0.09, delta=0.9"),
    ("typical_accept", "at_least_on_entropy_branch", "kept nodes", "tokens=[0], parents=[-1], "
     "probs=[[1.0, 0.0], [0.5, 0.5]], epsilon=2.0, delta=1.0"),
    ("verify_without_replacement", "judged_as_iid", "case 4. V=4 three siblings top_k=3",
     None),
    ("verify_without_replacement", "only_previous_removed", "case 4. V=4 three siblings top_k=3",
     None),
    ("verify_without_replacement", "no_residual_update", "case 2. V=3 two pairs of siblings",
     None),
    ("verify_without_replacement", "last_token_from_numpy", "randomness outside rng", None),
    ("verify_without_replacement", "numpy_global_below_depth_2", "randomness outside rng",
     None),
    ("draft_law", "softmax_over_all_tokens", "case 2. V=3 V_d=2 K=1", None),
    ("draft_law", "placed_by_inverse", "case 2. V=3 V_d=2 K=1", None),
    ("draft_law", "ids_from_one", "case 2. V=3 V_d=2 K=1", None),
    ("draft_law", "epsilon_everywhere", "case 2. V=3 V_d=2 K=1", None),
    ("draft_law", "no_max_subtracted", "case 9. V=4 V_d=2 K=2 logits near 1000", None),
    ("draft_law", "log_probabilities", "case 2. V=3 V_d=2 K=1", None),
    ("draft_law", "first_axis", "case 6. V=6 V_d=4 K=3, z [K, V_d]", None),
    ("draft_law", "over_n", "case 2. V=3 V_d=2 K=1", None),
    ("draft_law", "sorted_ids", "case 2. V=3 V_d=2 K=1", None),
    ("draft_law", "greedy_one_hot", "case 2. V=3 V_d=2 K=1", None),
    ("draft_law", "in_z_dtype", "case 10. V=5 V_d=3 K=2 float32 z [K, V_d]", None),
    ("draft_law", "max_subtracted_in_place", "case 2. V=3 V_d=2 K=1", None),
    ("draft_law", "one_row_only", "case 6. V=6 V_d=4 K=3, z [K, V_d]", None),
    ("draft_law", "one_max_for_all_rows", "case 11. V=4 V_d=3 K=2 rows 1000 apart, z [K, V_d]",
     None),
    ("find_candidates", "last_occurrence", "draft", "x=[0, 0, 0], max_ngram_size=1, "
     "num_pred_tokens=2"),
    ("find_candidates", "shortest_first", "draft", "x=[0, 0, 0], max_ngram_size=2, "
     "num_pred_tokens=2"),
    ("find_candidates", "matches_itself", "draft", "x=[0, 1, 0], max_ngram_size=2, "
     "num_pred_tokens=1"),
    ("find_candidates", "through_bytes", "raises", "x=[256, 1, 256], max_ngram_size=1, "
     "num_pred_tokens=1"),
    ("find_candidates", "yields_the_draft", "what it returns: a generator (a function with "
     "yield), not a list: return the list", "x=[0], max_ngram_size=1, num_pred_tokens=1"),
    ("longest_suffix", "as_strings", "n", "corpus=[11, 2], context=[1, 2], max_suffix=2"),
    ("trie", "joined_keys", "tokens", None),
    ("trie", "keyed_by_parent_token", "tokens", "sequences=[[1, 2, 3], [4, 2, 3]]"),
    ("trie", "yields_each_list", "what it returns: a generator (a function with yield), not a "
     "tuple: return the tuple", "sequences=[[0]]"),
    ("longest_suffix", "no_cap", "n", "corpus=[0, 0], context=[0, 0], max_suffix=1"),
    ("longest_suffix", "needs_a_continuation", "n", "corpus=[0], context=[0], max_suffix=1"),
    ("longest_suffix", "first_miss", "n", "corpus=[0], context=[0], max_suffix=1"),
    ("trie", "no_merging", "tokens", "sequences=[[0], [0]]"),
    ("trie", "merged_by_token", "tokens", "sequences=[[0, 0], [1, 0]]"),
    ("trie", "counts_at_ends", "counts", "sequences=[[0, 0]]"),
    ("lookahead_mask", "causal", "mask", "W=2, L=2"),
    ("lookahead_mask", "column_only", "mask", "W=2, L=1"),
    ("lookahead_mask", "every_earlier_level", "mask", "W=2, L=2"),
    ("expected_tokens", "no_own_token", "E", "alpha=0.0, K=1"),
    ("expected_tokens", "one_draft_short", "E", "alpha=0.5, K=1"),
    ("expected_tokens", "no_edge_case", "E", "alpha=1.0, K=1"),
    ("expected_tokens", "guarded_near_one", "E", "alpha=0.9999990463256836, K=16"),
    ("predicted_speedup", "verification_free", "speedup", "E=2.36, c=2.2, K=4, c_d=0.19"),
    ("predicted_speedup", "one_draft_call", "speedup", "E=2.36, c=2.2, K=4, c_d=0.19"),
    ("predicted_speedup", "free_draft_shortcut", "speedup", "E=3.0, c=2.0, K=4, c_d=0.0"),
    ("expected_tokens", "int_at_one",
     "E: dtype int64, expected float64: an integer where a float is asked", "alpha=1.0, K=1"),
    ("expected_tokens", "array_of_one_number",
     "E: a NumPy array of shape (), expected a number: return .item() of it", "alpha=0.0, K=1"),
    ("predicted_speedup", "speedup_by_where",
     "speedup: a NumPy array of shape (), expected a number: return .item() of it",
     "E=2.36, c=2.2, K=4, c_d=0.19"),
    ("trie", "packed_keys", "tokens", "sequences=[[1, 0], [50000]]"),
    ("trie", "counts_in_floats", "counts: 1.0 (float), not an int", "sequences=[[0]]"),
    ("medusa_buffers", "ranks_as_one_number", "attn_mask",
     "choices=[[0], [1], [0, 10], [1, 0], [0, 10, 0]]"),
    ("medusa_buffers", "indices_in_int8", "retrieve_indices",
     "choices=[[0], [1], [2], ..., [297], [298], [298, 0]] (300 nodes)"),
    ("typical_accept", "log_clipped", "kept nodes", "tokens=[1], parents=[-1], probs=[[1e-10, "
     "0.3, 0.6999999999], [0.3, 0.3, 0.4]], epsilon=0.5, delta=0.5526068338191136"),
    ("typical_accept", "indexed_by_arrays", "raises", "tokens=[], parents=[], probs=[[0.5, 0.5]], "
     "epsilon=0.09, delta=0.3 (no candidates)"),
    ("find_candidates", "as_text", "draft", "x=[11, 5, 1], max_ngram_size=1, num_pred_tokens=2"),
    ("longest_suffix", "as_spaced_text", "n", "corpus=[1, 23], context=[1, 2], max_suffix=2"),
    ("draft_law", "max_subtracted_when_large", "logits near -1000", None),
]


def test_every_kept_wrong_answer_has_its_expected_verdict():
    kept = {(m.NAME, w.__name__) for m in EXERCISES.values() for w in m.WRONG}
    assert kept == {(name, wrong) for name, wrong, _, _ in WRONG}
    assert all(len(m.WRONG) >= 2 for m in EXERCISES.values())


@pytest.mark.parametrize("name, wrong, failed, case", WRONG,
                         ids=[f"{n}-{w}" for n, w, _, _ in WRONG])
def test_a_wrong_answer_fails_where_expected(name, wrong, failed, case):
    module, samples = EXERCISES[name], PASSING  # where it fails there, that verdict stands
    verdict = module.grade(getattr(module, wrong), samples=samples)
    if verdict.passed or verdict.failed != failed:
        samples = SAMPLES
        verdict = module.grade(getattr(module, wrong), samples=samples)
    assert not verdict.passed and verdict.failed == failed, str(verdict)
    text = str(verdict)
    if failed == "randomness outside rng":  # before the law: the same rng, two answers
        assert "draw every random number from rng (rng.random())" in text
    elif hasattr(module, "CONTRACT") and not failed.startswith("case "):  # a call past them
        assert "once the law passed" in text and "the call:" in text and "it returned" in text
    elif hasattr(module, "CONTRACT"):  # the law: the first failing case, with its evidence
        assert f"first failing case: {failed[5:]}" in text
        assert "observed" in text and "expected" in text or "the first that broke a rule" in text
        # its power at the sequences graded, the pooled mass included
        tv90 = battery_tv90(module.CONTRACT, samples, getattr(module, "BATTERY", None))
        if tv90 < 1:
            assert f"total variation >= {tv90:.3f}" in text and tv90 > 0.1, text
        else:  # no error is that large: the run is too small to promise one caught
            assert "too few sequences for each case to catch even the largest error" in text
    else:  # the smallest case that differs: the output expected and the learner's
        assert "expected:" in text and "yours:" in text
        if case is not None:
            assert f"smallest case that differs ({failed}): {case}\n" in text


def test_a_function_that_raises_or_returns_nonsense_fails_with_its_case():
    trie = EXERCISES["trie"]
    raising = trie.grade(lambda sequences: 1 / 0)
    assert raising.failed == "raises" and "raised ZeroDivisionError" in str(raising)
    assert trie.grade(lambda sequences: 5).failed == "a tuple (tokens, parents, counts)"
    chain = EXERCISES["verify_chain"].grade(lambda drafts, P, Q, rng: (9, 0), samples=SAMPLES)
    assert chain.failed == "case 2. V=3 K=1"
    assert "it returned (9, 0): n accepted must be in 0 .. K = 1" in str(chain)


def test_no_verdict_when_a_broken_sampler_passes(monkeypatch):
    """A run that cannot catch the checker's own broken samplers grades nothing as a pass."""
    from picospec.exercises import grading

    monkeypatch.setattr(grading, "controls", lambda *a: [("resample_from_target", None)])
    verdict = EXERCISES["verify_chain"].grade(answer("verify_chain"), samples=PASSING)
    assert not verdict.passed and verdict.failed == "no verdict"
    assert "resample_from_target passed every case" in str(verdict)


def test_no_verdict_when_any_one_broken_sampler_passes(monkeypatch):
    """One broken sampler caught and another missed: still no verdict, naming the missed one."""
    from picospec.exercises import grading

    monkeypatch.setattr(grading, "controls", lambda *a: [("bonus_from_draft", "2. V=3 K=1"),
                                                         ("resample_from_target", None)])
    verdict = EXERCISES["verify_chain"].grade(answer("verify_chain"), samples=PASSING)
    assert not verdict.passed and verdict.failed == "no verdict"
    assert "resample_from_target passed every case" in str(verdict)


def test_a_law_failure_names_the_known_mistake_it_behaves_as():
    """A learner's own resample-from-q (written differently from the kept one) is named by the
    mistake it is; a failure unlike any kept mistake names none."""
    import numpy as np

    from picospec.sampling import sample

    def resample_from_q(drafts, P, Q, rng):
        for t in range(len(drafts)):
            u = rng.random()
            if u >= min(1.0, Q[t][drafts[t]] / P[t][drafts[t]]):
                return t, sample(Q[t], rng)
        return len(drafts), sample(Q[len(drafts)], rng)

    def always_first(drafts, P, Q, rng):
        return 0, int(np.argmax(Q[0]))

    named = str(EXERCISES["verify_chain"].grade(resample_from_q, samples=PASSING))
    assert ("your answer draws exactly what a known mistake draws on every case: A rejected draft "
            "replaced from q itself, not the residual.") in named
    assert "known mistake" not in str(EXERCISES["verify_chain"].grade(always_first,
                                                                       samples=PASSING))


def test_the_rng_check_leaves_the_global_generators_as_they_were():
    import random

    import numpy as np

    random.seed(5)
    np.random.seed(5)
    before = random.random(), np.random.random()
    random.seed(5)
    np.random.seed(5)
    EXERCISES["verify_chain"].grade(answer("verify_chain"), samples=PASSING)
    assert (random.random(), np.random.random()) == before


def test_a_pass_states_the_smallest_difference_it_could_see():
    """At 1,000 sequences a case catches errors of total variation 0.62 and up; at 100 no error
    is large enough to be sure of (a tv90 past 1), and the verdict says so instead of a figure."""
    verdict = str(EXERCISES["verify_chain"].grade(answer("verify_chain"), samples=SAMPLES))
    tv90 = battery_tv90("chain", SAMPLES)
    assert tv90 < 1 and f"as large as total variation {tv90:.3f}, the smallest this run catches "\
        "with probability 0.9" in verdict, verdict
    few = str(EXERCISES["verify_chain"].grade(answer("verify_chain"), samples=PASSING))
    assert battery_tv90("chain", PASSING) >= 1 and "total variation >=" not in few, few
    assert "too few sequences for each case to catch even the largest error" in few
    assert "no difference from the target's exact law seen, at too few sequences" in few


@pytest.mark.parametrize("name, returned, want", [
    ("verify_chain", None, "(n accepted, next token): two integers"),
    ("verify_chain", "ab", "(n accepted, next token): two integers"),
    ("verify_chain", (0.5, 1), "(n accepted, next token): two integers"),
    ("verify_without_replacement", 3, "(path, next token): a list of node indices and an integer"),
    # a path that is no list of indices (a number, a 2-D array, floats), or a part too many
    ("verify_without_replacement", (5, 0), "(path, next token): a list of node indices"),
    ("verify_without_replacement", (np.array([[0, 1]]), 0), "(path, next token): a list of"),
    ("verify_without_replacement", (np.array([0.5]), 0), "(path, next token): a list of"),
    ("verify_without_replacement", ([0], 1, "bonus", 0), "(path, next token): a list of"),
    ("verify_chain", (0, 1, "bonus", 0), "(n accepted, next token): two integers"),
    ("verify_chain", (0, 1.0), "(n accepted, next token): two integers")])
def test_a_law_graded_answer_returning_the_wrong_thing_is_told_so(name, returned, want):
    """Not blamed on its arguments or as a raise: what it returned, and what it must return."""
    verdict = EXERCISES[name].grade(lambda *args: returned, samples=SAMPLES)
    assert verdict.failed == "what it returns"
    assert f"your function returned {grading_show(returned)}" in str(verdict)
    assert f"it must return {want}" in str(verdict)


@pytest.mark.parametrize("returned", [[], [True], "ab", None])
def test_typical_accept_needs_one_boolean_per_node(returned):
    """Fewer booleans than nodes (even none) fails, whatever the ones given."""
    verdict = EXERCISES["typical_accept"].grade(lambda *args: returned)
    assert not verdict.passed


def write(path, *sources):
    path.write_text("import numpy as np\n\n" + "\n\n\n".join(sources) + "\n")
    return path


def wrong_source(name, wrong):
    """A learner's file text: the kept wrong answer under the exercise's name."""
    return (f"from picospec.exercises.{name} import {wrong}\n\n\n"
            f"def {name}(*args):\n    return {wrong}(*args)")


def learner(path):
    """A file of right answers written as a learner would (tests/support/learner_answers.py)."""
    path.write_text(LEARNER.read_text(encoding="utf-8"), encoding="utf-8")
    return path


def grade(*args, folder):
    return run_here(["-m", "picospec.exercises", "grade", *map(str, args)], folder)


def test_a_notebook_that_is_not_json_is_named_once_with_where_it_breaks(tmp_path):
    """A notebook cut short (a copy stopped half-way): the line names the file once and says
    where its JSON breaks, in words that read whole."""
    path = tmp_path / "cut.ipynb"
    path.write_text('{"cells": [{"source": "def resid')
    r = grade(path, "--exercise", "residual", folder=tmp_path)
    assert r.returncode == 1
    assert ("cut.ipynb: not a notebook (not JSON: Unterminated string starting at line 1, column "
            "23)") in r.stdout.splitlines(), r.stdout
    assert str(path) not in r.stdout and " at at " not in r.stdout


def test_grade_a_file_exit_0_when_every_answer_passes(tmp_path):
    r = grade(learner(tmp_path / "answers.py"), "--samples", FEWEST, folder=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert [line.split(":")[0] for line in r.stdout.splitlines()
            if line.endswith(": pass")] == list(EXERCISES)
    assert r.stdout.strip().endswith(f"{len(EXERCISES)} of {len(EXERCISES)} exercises pass")


def test_the_projects_own_answers_are_flagged_not_passed(tmp_path):
    """An answer file that imports picospec's function (by its name, another name, or its module)
    is not graded as the learner's work."""
    path = write(tmp_path / "answers.py", EXERCISES["residual"].ANSWER,
                 "import picospec.tree as t\n\n\ndef trie(s):\n    return t.trie(s)",
                 "from picospec.verify import verify_chain as vc\n\n\n"
                 "def verify_chain(*args):\n    return vc(*args)")
    r = grade(path, "--samples", "300", folder=tmp_path)
    assert r.returncode == 1
    for name in ("residual", "trie", "verify_chain"):
        assert f"{name}: FAIL\n  your file uses picospec's own answer" in r.stdout
    # reached where no name of the file holds it: through the package, or imported inside
    path = write(tmp_path / "reached.py",
                 "import picospec.tree\n\n\ndef trie(s):\n    return picospec.tree.trie(s)",
                 "def verify_chain(*args):\n    from picospec.verify import verify_chain as vc\n"
                 "    return vc(*args)")
    r = grade(path, "--samples", "300", folder=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "trie: FAIL\n  checked: what your function's first call runs\n  your function runs "\
           "picospec's own answer, picospec.tree.trie" in r.stdout, r.stdout
    assert "verify_chain: FAIL" in r.stdout and "picospec.verify.verify_chain" in r.stdout


def test_a_partial_file_fails_naming_what_is_missing(tmp_path):
    """1 of 12 answered: exit 1, each missing exercise named; a misnamed function gets its
    did-you-mean; --exercise grades one."""
    path = write(tmp_path / "mine.py", "def residual(q, p):\n    r = np.maximum(q - p, 0)\n"
                 "    return r / r.sum()",
                 "def verify_chains(drafts, P, Q, rng):\n    return 0, 0")
    r = grade(path, folder=tmp_path)
    assert r.returncode == 1 and "residual: pass" in r.stdout
    assert r.stdout.count("not answered: the file defines no function") == len(EXERCISES) - 1
    assert ("verify_chain: FAIL\n  not answered: the file defines no function verify_chain (did "
            "you mean verify_chains? rename it verify_chain)") in r.stdout
    assert r.stdout.strip().endswith(f"1 of {len(EXERCISES)} exercises pass (see above)")
    only = grade(path, "--exercise", "residual", folder=tmp_path)
    assert only.returncode == 0 and "trie" not in only.stdout


def test_grade_a_file_exit_1_with_the_smallest_case(tmp_path):
    path = write(tmp_path / "mine.py", wrong_source("trie", "no_merging"))
    r = grade(path, "--exercise", "trie", folder=tmp_path)
    assert r.returncode == 1 and "trie: FAIL" in r.stdout
    assert "smallest case that differs (tokens): sequences=[[0], [0]]" in r.stdout


def test_grade_a_folder_one_row_per_learner(tmp_path):
    """The class table: a row per learner, a column per exercise, k of 12; a learner who answered
    one exercise passes one, not every exercise; then the failures, one line each."""
    folder = tmp_path / "class"
    folder.mkdir()
    learner(folder / "ada.py")
    write(folder / "bob.py", wrong_source("lookahead_mask", "causal"))
    write(folder / "cyd.py", "raise RuntimeError('half written')")
    write(folder / "dan.py", "def unrelated():\n    return 1")
    write(folder / "fay.py", "def trie(sequences):\n    raise NotImplementedError")  # a stub
    write(folder / "eve.py", "def trie(sequences):\n    out = {}\n    tokens, parents, counts "
          "= [], [], []\n    for s in sequences:\n        parent = -1\n        for k in "
          "range(len(s)):\n            key = tuple(s[:k + 1])\n            if key not in out:\n"
          "                out[key] = len(tokens)\n                tokens.append(s[k])\n"
          "                parents.append(parent)\n                counts.append(0)\n"
          "            counts[out[key]] += 1\n            parent = out[key]\n"
          "    return tokens, parents, counts")
    r = grade(folder, "--samples", FEWEST, folder=tmp_path)
    rows = {line.split()[0]: line.split() for line in r.stdout.splitlines()
            if line.endswith(f"of {len(EXERCISES)}")}
    assert r.returncode == 1, r.stdout
    assert rows["ada.py"][1:-3] == ["pass"] * len(EXERCISES) and rows["ada.py"][-3] == "12"
    assert rows["bob.py"][-3] == "0" and "FAIL" in rows["bob.py"]
    assert rows["cyd.py"][1:-3] == ["x"] * len(EXERCISES)
    assert rows["dan.py"][1:-3] == ["-"] * len(EXERCISES)
    assert rows["fay.py"][1:-3] == ["-"] * len(EXERCISES)  # the stub is no FAIL: not answered
    assert rows["eve.py"][-3:] == ["1", "of", "12"] and rows["eve.py"].count("pass") == 1
    assert "RuntimeError: half written (at cyd.py, line 3)" in r.stdout
    assert "bob.py lookahead_mask: FAIL at mask" in r.stdout
    assert "fay.py: not answered: " + ", ".join(EXERCISES) in r.stdout
    assert r.stdout.strip().endswith("1 of 6 learners pass every exercise graded")


def test_grade_a_folder_as_json_and_csv(tmp_path):
    import csv
    import io

    folder = tmp_path / "class"
    folder.mkdir()
    learner(folder / "ada.py")
    write(folder / "bob.py", wrong_source("trie", "no_merging"))
    as_json = json.loads(grade(folder, "--exercise", "trie", "--json", folder=tmp_path).stdout)
    assert as_json["exercises"] == ["trie"]
    assert [(x["file"], x["passed"], x["of"]) for x in as_json["learners"]] == [
        ("ada.py", 1, 1), ("bob.py", 0, 1)]
    assert as_json["learners"][1]["verdicts"]["trie"].startswith("FAIL at tokens")
    write(folder / "cy.py", "def trie(:\n")
    table = list(csv.reader(io.StringIO(grade(folder, "--exercise", "trie", "--csv",
                                              folder=tmp_path).stdout)))
    assert table[0] == ["learner", "trie", "passed", "of", "notes"]
    assert table[1] == ["ada.py", "pass", "1", "1", ""] and table[2][0] == "bob.py"
    # a file that does not read says why in its row, as the text table says it below
    assert table[3][:4] == ["cy.py", "not graded: the file could not be read", "0", "1"]
    assert "SyntaxError" in table[3][4], table[3]


@pytest.fixture
def answers(tmp_path):
    return write(tmp_path / "answers.py", EXERCISES["trie"].ANSWER)


@pytest.mark.parametrize("args, pattern", [
    ([], "give a command: list, show, template, grade, handout"),
    (["grde", "x.py"], r"give a command.*got 'grde' \(did you mean grade\?\)$"),
    (["grade", "missing.py"], "missing.py: no such file or folder"),
    (["grade", "notes.txt"], "notes.txt: give a .py file of answers, a notebook or a folder"),
    (["grade", "answers.py", "--exercise", "tri"], "unknown --exercise 'tri' \\(did you mean trie"),
    (["grade", "answers.py", "--samples", "10"], "--samples must be >= 100"),
    (["grade", "answers.py", "--samples", "100000000000"], "--samples must be <= 10000000"),
    (["grade", "answers.py", "--timeout", "0"], "--timeout must be > 0"),
    (["grade", "answers.py", "--out", "x.md"], "grade does not read --out: drop it"),
    (["grade", "answers.py", "--json"], "--json writes a class's table: grade a FOLDER"),
    (["grade", ".", "--json", "--csv"], "--json and --csv are both given: keep one"),
    (["grade", "empty"], "empty: the folder holds no .py or .ipynb file"),
    (["show", "tree"], r"no exercise 'tree' \(did you mean trie\?\): choose one of"),
    # a whole part of a name names it
    (["show", "speedup"], r"no exercise 'speedup' \(did you mean predicted_speedup\?\)"),
    (["show", "mask"], r"no exercise 'mask' \(did you mean lookahead_mask\?\)"),
    (["show", "trie", "--samples", "300"], "show does not read --samples: drop it"),
    (["template", "verify"], r"no exercise 'verify' \(did you mean verify_chain or "
                             r"verify_without_replacement\?\): choose one of"),
    (["template", "trie", "residual"], "template takes at most one exercise's NAME"),
    (["list", "all"], "list takes nothing more; got the word all"),
    (["grade"], "grade takes one FILE.py, FILE.ipynb or folder; got none"),
    (["show", "trie", "residual"], "show takes the exercise's NAME; got 2 words: trie residual"),
    # each command takes exactly its words: none too few, none left over
    (["show"], "show takes the exercise's NAME; got none$"),
    (["grade", "answers.py", "answers.py"],
     "grade takes one FILE.py, FILE.ipynb or folder; got 2 words: answers.py answers.py$"),
    (["handout", "--out", "h.ipynb"], "handout takes the NOTEBOOK to copy; got none$"),
    (["handout", "teacher.ipynb", "teacher.ipynb", "--out", "h.ipynb"],
     "handout takes the NOTEBOOK to copy; got 2 words"),
    (["grade", "answers.py", "--seed", "-1"], "--seed must be >= 0"),
    (["list", "--exercise", "trie"], "list does not read --exercise: drop it"),
    (["handout", "answers.py", "--out", "h.ipynb"], "answers.py: not a notebook file"),
    (["handout", "absent.ipynb", "--out", "h.ipynb"], "absent.ipynb: no such file"),
    (["handout", str(NOTEBOOK)], "handout needs --out FILE.ipynb"),
    (["handout", "teacher.ipynb", "--out", "teacher.ipynb"],
     "--out teacher.ipynb is the notebook itself: the handout would overwrite its answers"),
    (["handout", "teacher.ipynb", "--out", "./teacher.ipynb"], "is the notebook itself"),
    (["handout", "nocells.ipynb", "--out", "h.ipynb"], "nocells.ipynb: not a notebook \\(no list"),
    (["handout", "notjson.ipynb", "--out", "h.ipynb"], "notjson.ipynb: not a notebook \\(not JSON"),
    (["handout", "untagged.ipynb", "--out", "h.ipynb"], "answer cell 1 names no exercise: add"),
    (["handout", "typo.ipynb", "--out", "h.ipynb"],
     "answer cell 1 names the exercise 'residul', which does not exist"),
    (["handout", "noanswers.ipynb", "--out", "h.ipynb"], "has no answer cells"),
])
def test_usage_errors_are_one_line_exit_2(tmp_path, answers, args, pattern):
    (tmp_path / "notes.txt").write_text("notes")
    (tmp_path / "empty").mkdir()
    (tmp_path / "teacher.ipynb").write_text(NOTEBOOK.read_text(encoding="utf-8"))
    (tmp_path / "nocells.ipynb").write_text("{}")
    (tmp_path / "notjson.ipynb").write_text("cells")
    answer = {"cell_type": "code", "source": "x", "metadata": {"tags": [TAG]}}
    typo = {**answer, "metadata": {"tags": [TAG], "exercise": "residul"}}
    for name, cells in (("untagged", [answer]), ("typo", [typo]), ("noanswers", [])):
        (tmp_path / f"{name}.ipynb").write_text(json.dumps({"cells": cells}))
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    r = run_here(["-m", "picospec.exercises", *args], tmp_path)
    assert r.returncode == 2
    assert_refused(r, pattern, tmp_path, before)
    assert (tmp_path / "teacher.ipynb").read_text(encoding="utf-8") == NOTEBOOK.read_text(
        encoding="utf-8")


def test_the_command_as_a_process(tmp_path, answers):
    bad = run_cli(["-m", "picospec.exercises", "grade", "nothere.py"], tmp_path)
    assert bad.returncode == 2 and bad.stderr == "error: nothere.py: no such file or folder\n"
    write(answers, wrong_source("trie", "counts_at_ends"))
    r = run_cli(["-m", "picospec.exercises", "grade", str(answers), "--exercise", "trie"],
                tmp_path)
    assert r.returncode == 1 and "trie: FAIL" in r.stdout and r.stderr == ""


def test_list_show_and_template(tmp_path):
    helped = run_here(["-m", "picospec.exercises", "--help"], tmp_path)
    assert helped.returncode == 0 and "grade FOLDER" in helped.stdout
    assert helped.stdout.startswith("usage: python -m picospec.exercises COMMAND ... ")
    listed = run_here(["-m", "picospec.exercises", "list"], tmp_path)
    assert [line.split()[0] for line in listed.stdout.splitlines()] == list(EXERCISES)
    shown = run_here(["-m", "picospec.exercises", "show", "trie"], tmp_path)
    assert shown.stdout.startswith("**Exercise `trie(sequences)`") and "def trie(" in shown.stdout
    template = run_here(["-m", "picospec.exercises", "template"], tmp_path)
    for name in EXERCISES:  # every statement, as comments, above its stub
        first = EXERCISES[name].STATEMENT.splitlines()[0]
        assert f"# {first}" in template.stdout and f"def {name}(" in template.stdout
    (tmp_path / "template.py").write_text(template.stdout)
    graded = run_here(["-m", "picospec.exercises", "grade", "template.py"], tmp_path)
    assert graded.returncode == 1 and graded.stdout.count("not answered") == len(EXERCISES)
    one = run_here(["-m", "picospec.exercises", "template", "trie"], tmp_path).stdout
    assert "def trie(" in one and "def residual(" not in one and "# **Exercise `trie" in one


def test_main_returns_0_for_the_commands_that_grade_nothing(tmp_path, capsys):
    """main() returns the exit status, as its caller (python -m, or a script) reads it: 0 for
    list, show and template, not None."""
    from picospec.exercises.__main__ import main

    assert [main(args) for args in (["list"], ["show", "trie"], ["template", "trie"])] == [0] * 3
    assert "def trie(" in capsys.readouterr().out


def answer_cells(nb):
    return [c for c in nb["cells"] if TAG in c.get("metadata", {}).get("tags", [])]


def test_the_notebook_answers_every_exercise_with_picospecs_own(tmp_path):
    """The teacher's notebook holds the project's answers: graded, each is flagged as picospec's
    own (a learner's notebook with their own answers passes: the handout test)."""
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    assert [c["metadata"]["exercise"] for c in answer_cells(nb)] == list(EXERCISES)
    r = run_here(["-m", "picospec.exercises", "grade", str(NOTEBOOK), "--samples", "300"],
                 tmp_path)
    assert r.returncode == 1 and r.stdout.count("uses picospec's own answer") == len(EXERCISES)


def test_the_notebook_states_each_exercise_as_its_module_does():
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    shown = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"]
    assert [name for name in EXERCISES if EXERCISES[name].STATEMENT not in shown] == []


def test_a_handout_clears_the_answers_and_grades_as_not_answered(tmp_path):
    r = run_here(["-m", "picospec.exercises", "handout", str(NOTEBOOK), "--out", "h.ipynb"],
                 tmp_path)
    assert r.returncode == 0 and f"{len(EXERCISES)} answer cells back to stubs" in r.stdout
    nb = json.loads((tmp_path / "h.ipynb").read_text(encoding="utf-8"))
    assert all(c["outputs"] == [] for c in nb["cells"] if c["cell_type"] == "code")
    for cell, name in zip(answer_cells(nb), EXERCISES):
        assert "".join(cell["source"]).endswith(EXERCISES[name].STUB)
    graded = run_here(["-m", "picospec.exercises", "grade", "h.ipynb"], tmp_path)
    assert graded.returncode == 1 and graded.stdout.count("not answered") == len(EXERCISES)
    cell = answer_cells(nb)[0]  # a learner's answer using the notebook's np, as in Jupyter
    cell["source"] = ("%matplotlib inline\ndef residual(q, p):\n    r = np.maximum(q - p, 0)\n"
                      "    return r / r.sum()")
    (tmp_path / "h.ipynb").write_text(json.dumps(nb))
    mine = run_here(["-m", "picospec.exercises", "grade", "h.ipynb", "--exercise", "residual"],
                    tmp_path)
    assert mine.returncode == 0 and "residual: pass" in mine.stdout, mine.stdout
    assert Path(tmp_path / "h.ipynb").stat().st_size < NOTEBOOK.stat().st_size


def test_a_handout_may_replace_another_file(tmp_path):
    """Only --out naming the notebook itself is refused: a file already there is replaced."""
    (tmp_path / "old.ipynb").write_text("an older copy")
    r = run_here(["-m", "picospec.exercises", "handout", str(NOTEBOOK), "--out", "old.ipynb"],
                 tmp_path)
    assert r.returncode == 0, r.stderr
    assert len(answer_cells(json.loads((tmp_path / "old.ipynb").read_text()))) == len(EXERCISES)


@pytest.mark.parametrize("old, then", [("an older copy", "the file is as it was"),
                                       (None, "no file was made")])
def test_a_handout_that_cannot_be_written_whole_leaves_the_old_file(tmp_path, old, then):
    """A write that fails mid-file (a file-size limit in a child process stands in for a full
    disk: the same OSError) is one line naming --out, and leaves the file there as it was (or
    none), with no temporary file beside it."""
    if old is not None:
        (tmp_path / "old.ipynb").write_text(old)
    before = files_under(tmp_path)
    script = ("import resource, runpy, signal, sys\n"
              "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
              "resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))\n"
              f"sys.argv = ['x', 'handout', {str(NOTEBOOK)!r}, '--out', 'old.ipynb']\n"
              "runpy.run_module('picospec.exercises', run_name='__main__', alter_sys=True)\n")
    # no bytecode written under the limit: Python would keep a .pyc cut at 8 kB and fail on it
    r = run_cli(["-c", script], tmp_path, env={"PYTHONDONTWRITEBYTECODE": "1"})
    assert r.returncode == 2
    assert_refused(r, rf"^error: --out old.ipynb: cannot write the handout \(File too large\); "
                      rf"{then}: free space on .* disk, or give another --out$", tmp_path, before)
    if old is not None:
        assert (tmp_path / "old.ipynb").read_text() == old


def test_a_handout_to_a_full_device_is_one_line_naming_it(tmp_path):
    """/dev/full (a device that is always full) is written in place, never replaced by a file."""
    if not Path("/dev/full").is_char_device():
        pytest.skip("no /dev/full here")
    r = run_here(["-m", "picospec.exercises", "handout", str(NOTEBOOK), "--out", "/dev/full"],
                 tmp_path)
    assert r.returncode == 2
    assert_refused(r, r"^error: --out /dev/full: ", tmp_path, [])
    assert Path("/dev/full").is_char_device()


def test_grading_needs_numpy_alone(tmp_path):
    """Like `python -m picospec.check`: the modules a whole grading loads (in the process that
    runs the answers) are the standard library's, NumPy's and the project's picospec and door."""
    path = learner(tmp_path / "answers.py")
    code = ("import sys\nbefore = set(sys.modules)  # what the interpreter's site loaded\n"
            "from picospec.exercises import EXERCISES\n"
            "from picospec.exercises.runner import child\n"
            f"child({str(path)!r}, {str(tmp_path / 'events')!r}, {FEWEST}, 0, list(EXERCISES))\n"
            "names = {m.split('.')[0] for m in set(sys.modules) - before}\n"
            "print(sorted(n for n in names - set(sys.stdlib_module_names)\n"
            "             if 'cython' not in n), file=sys.__stdout__)")
    r = run_cli(["-c", code], tmp_path)
    names = r.stdout.splitlines()[-1]
    passed = [json.loads(line)["passed"] for line in
              (tmp_path / "events").read_text().splitlines() if '"passed"' in line]
    assert passed == [True] * len(EXERCISES), r.stdout + r.stderr
    assert set(eval(names)) <= {"numpy", "picospec", "picospec_cli"}, names
