"""What the drivers (picospec/check/drivers.py) check in each call's return, beyond the law:
samplers right but for one breach of their contract, each failing its case with an error that
names it. A breach the driver let through would write tokens the sampler never chose (a draft it
was not given, a slot left empty, an id past the vocabulary) into the sequences the G-test judges.
"""
import re
from collections import Counter

import numpy as np
import pytest

from picospec.batched.rejection import rejection_sample
from picospec.check.battery import check_case
from picospec.check.cases import CASES
from picospec.check.drivers import padded, run, wide_ids
from picospec.verify import verify_chain, verify_tree, verify_without_replacement

SAMPLES = 300


def numbered(contract, name):
    """(number from 1, Case) of the case of that name."""
    [(i, case)] = [(i, c) for i, c in enumerate(CASES[contract], 1) if c.name == name]
    return i, case


def no_drafts_claims_one(drafts, P, Q, rng):
    """Right with drafts; with none it says it accepted one (n = 1 with K = 0)."""
    n, token = verify_chain(drafts, P, Q, rng)[:2]
    return (1 if not drafts else n), token


def emitted(out):
    """[B]: the tokens of each row of a rejection output before its first -1."""
    return (out >= 0).cumprod(1).sum(1)


def batched_gap_before_the_last_token(target_with_bonus_probs, bonus_token_ids, draft_probs,
                                      draft_token_ids, rng):
    """picospec's rejection sampler with a -1 slipped in before a row's recovered token when it
    kept a draft but not all: [d, r, -1] -> [d, -1, r]."""
    out = rejection_sample(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids,
                           rng=rng)
    k = draft_token_ids.shape[1]
    for row, e in enumerate(emitted(out)):
        if 2 <= e <= k:
            out[row, e], out[row, e - 1] = out[row, e - 1], -1
    return out


def batched_last_token_out_of_range(target_with_bonus_probs, bonus_token_ids, draft_probs,
                                    draft_token_ids, rng):
    """picospec's rejection sampler whose recovered or bonus token is V, one past the last id."""
    out = rejection_sample(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids,
                           rng=rng)
    out[np.arange(len(out)), emitted(out) - 1] = draft_probs.shape[-1]
    return out


def batched_last_draft_changed(target_with_bonus_probs, bonus_token_ids, draft_probs,
                               draft_token_ids, rng):
    """picospec's rejection sampler with the last accepted draft, the one before the recovered or
    bonus token, replaced by the next id."""
    out = rejection_sample(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids,
                           rng=rng)
    rows = np.flatnonzero(emitted(out) >= 2)
    cols = emitted(out)[rows] - 2
    out[rows, cols] = (out[rows, cols] + 1) % draft_probs.shape[-1]
    return out


@pytest.mark.parametrize("fn, contract, name, message", [
    (no_drafts_claims_one, "chain", "V=4 K=3 or 0 top_p=0.8", "n_accepted = 1 with K = 0 drafts"),
    (batched_gap_before_the_last_token, "rejection", "V=3 k=2 T=0.7",
     "expected accepted drafts, one recovered or bonus token, then -1"),
    (batched_last_token_out_of_range, "rejection", "V=3 k=2 T=0.7",
     "expected 1 or more token ids in [0, 3)"),
    (batched_last_draft_changed, "rejection", "V=3 k=2 T=0.7",
     "expected accepted drafts, one recovered or bonus token, then -1"),
], ids=["no_drafts_claims_one", "gap_before_the_last_token", "last_token_out_of_range",
        "last_draft_changed"])
def test_a_breach_of_the_contract_fails_its_case_with_the_reason(fn, contract, name, message):
    number, case = numbered(contract, name)
    result = check_case(fn, contract, case, SAMPLES, (0, number))
    assert result.verdict == "error" and message in result.detail, result


def narrowed(case, tokens, parents, Q, P):
    """A wide case's call as its own V tokens: the laws' columns at wide_ids (every other one 0),
    each token's place among them."""
    if not case.wide:
        return tokens, parents, Q, P
    ids = wide_ids(case.V, case.wide)
    off = np.ones(case.wide, dtype=bool)
    off[ids] = False
    assert not Q[:, off].any() and (P is None or not P[:, off].any()), case.name
    return ([ids.tolist().index(t) for t in tokens], parents, Q[:, ids],
            None if P is None else P[:, ids])


@pytest.mark.parametrize("contract", ["tree", "tree_without_replacement"])
def test_each_tree_call_is_handed_the_tree_its_case_names(contract):
    """The first step's calls (every row starts after the prompt (1,), its second-to-last token
    the pad 0), node by node from the case's parents and the laws of case.laws(): a node's token
    is drawn from the draft's law after its parent's path ("two drafts": every second sibling from
    case.second_draft()), P[i] is that law (None for "top" siblings, the draft's top tokens in
    order), siblings drawn without replacement or as top tokens are distinct, and Q[0], Q[i + 1]
    are the target's laws after the root's and node i's paths."""
    verifier = verify_tree if contract == "tree" else verify_without_replacement
    for number, case in enumerate(CASES[contract], 1):
        T, D = case.laws()  # [V, V, V] each
        D2 = case.second_draft() if case.siblings == "two drafts" else None
        calls = []

        def spy(tokens, parents, Q, *args, **kwargs):
            P = args[0] if contract == "tree_without_replacement" else kwargs["P"]
            calls.append(narrowed(case, list(tokens), tuple(parents), Q.copy(),
                                  None if P is None else P.copy()))
            return verifier(tokens, parents, Q, *args, **kwargs)

        run(spy, contract, case, 50, (0, number))
        empty = 0  # calls given no nodes: tokens [], parents [], Q [1, V], P [0, V]
        for tokens, parents, Q, P in calls[:50]:  # the first step: one call a row
            ctx, rank = {-1: (0, 1)}, Counter()  # node -> (second-to-last, last) of its path
            assert np.array_equal(Q[0], T[ctx[-1]]), case.name
            if not tokens and case.no_drafts:
                assert parents == () and len(Q) == 1 and (P is None or P.shape == (0, case.V))
                empty += 1
                continue
            assert parents == case.parents, case.name
            for i, parent in enumerate(parents):
                second = case.siblings == "two drafts" and rank[parent] % 2 == 1
                law = (D2 if second else D)[ctx[parent]]  # [V]
                if case.siblings == "top":
                    assert P is None and law[tokens[i]] == np.sort(law)[::-1][rank[parent]]
                else:
                    assert np.array_equal(P[i], law) and law[tokens[i]] > 0, (case.name, i)
                rank[parent] += 1
                ctx[i] = (ctx[parent][1], tokens[i])
                assert np.array_equal(Q[i + 1], T[ctx[i]]), (case.name, i)
            if case.siblings in ("top", "without_replacement"):
                for parent in set(parents):
                    kids = [t for t, p in zip(tokens, parents) if p == parent]
                    assert len(set(kids)) == len(kids), (case.name, tokens)
        assert (empty > 0) == (case.no_drafts > 0), case.name  # a quarter of 50, or none


def test_the_rejection_battery_hands_float32_laws_where_its_case_says_so():
    """Each call's target_with_bonus_probs and draft_probs are of the case's dtype, and the battery
    has a float32 case beside its float64 ones: a sampler that works only in float64 (vLLM's
    tensors are often float32) meets one."""
    seen = set()
    for number, case in enumerate(CASES["rejection"], 1):
        dtypes = set()

        def spy(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng):
            dtypes.update({target_with_bonus_probs.dtype, draft_probs.dtype})
            return rejection_sample(target_with_bonus_probs, bonus_token_ids, draft_probs,
                                    draft_token_ids, rng=rng)

        run(spy, "rejection", case, 50, (0, number))
        assert dtypes == {np.dtype(case.dtype)}, (case.name, dtypes)
        assert (case.dtype == "float32") == ("float32" in case.name), case.name  # as it says
        seen |= dtypes
    assert seen == {np.dtype(np.float32), np.dtype(np.float64)}, seen


def batched_last_row_out_of_range(target_with_bonus_probs, bonus_token_ids, draft_probs,
                                  draft_token_ids, rng):
    """picospec's rejection sampler whose batches of 2 rows or more end their last row with V,
    one past the last id; its rows drawn alone are right."""
    out = rejection_sample(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids,
                           rng=rng)
    if len(out) > 1:
        out[-1, emitted(out)[-1] - 1] = draft_probs.shape[-1]
    return out


def test_a_token_out_of_range_is_named_in_the_row_that_emitted_it():
    """The error quotes the row that broke the range (its tokens hold V = 3), not the first row
    that emitted several tokens: the rows drawn alone before it are right."""
    number, case = numbered("rejection", "V=3 k=2 T=0.7")
    result = check_case(batched_last_row_out_of_range, "rejection", case, SAMPLES, (0, number))
    assert result.verdict == "error", result
    quoted = re.search(r"a step emitted \[([0-9, ]*)\]", result.detail)
    assert quoted and "3" in quoted.group(1).split(", "), result.detail


def batched_last_row_ends_with_minus_2(target_with_bonus_probs, bonus_token_ids, draft_probs,
                                       draft_token_ids, rng):
    """picospec's rejection sampler whose batches holding a row padded with -1 before their last
    end that last row with -2, a negative id other than the pad; its other calls are right."""
    out = rejection_sample(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids,
                           rng=rng)
    if (out[:-1] == -1).any():
        out[-1, -1] = -2
    return out


def test_a_negative_id_other_than_the_pad_is_named_in_the_row_that_holds_it():
    """The error quotes the row that holds -2 (the batch's last), not the first row padded with
    -1 or the first row of the batch."""
    number, case = numbered("rejection", "V=3 k=2 T=0.7")
    result = check_case(batched_last_row_ends_with_minus_2, "rejection", case, SAMPLES,
                        (0, number))
    quoted = re.search(r"row (\d+): \[(-?\d+), (-?\d+), (-?\d+)\]: the contract pads with -1",
                       result.detail)
    assert result.verdict == "error" and quoted, result
    assert quoted.group(4) == "-2" and int(quoted.group(1)) > 0, result.detail


def batched_last_row_empty(target_with_bonus_probs, bonus_token_ids, draft_probs,
                           draft_token_ids, rng):
    """picospec's rejection sampler whose batches of 2 rows or more leave their last row empty,
    -1 only; its rows drawn alone are right."""
    out = rejection_sample(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids,
                           rng=rng)
    if len(out) > 1:
        out[-1] = -1
    return out


def test_a_row_with_no_token_is_quoted_from_that_row():
    """The error quotes the empty row (the batch's last: -1 only), not a row before it that
    emitted one token (a draft rejected at once) or any other."""
    number, case = numbered("rejection", "V=3 k=2 T=0.7")
    result = check_case(batched_last_row_empty, "rejection", case, SAMPLES, (0, number))
    quoted = re.search(r"row (\d+): \[([^\]]*)\] for drafts", result.detail)
    assert result.verdict == "error" and quoted, result
    assert quoted.group(2) == "-1, -1, -1" and int(quoted.group(1)) > 0, result.detail


def tree_zeroes_q(tokens, parents, Q, rng, P=None):
    """picospec's tree verifier that zeroes the target's laws Q after reading them."""
    out = verify_tree(tokens, parents, Q, rng, P=P)
    Q[...] = 0
    return out


def tree_reverses_tokens(tokens, parents, Q, rng, P=None):
    """picospec's tree verifier that reverses the caller's list of node tokens after reading it."""
    out = verify_tree(tokens, parents, Q, rng, P=P)
    tokens.reverse()
    return out


def without_replacement_zeroes_p(tokens, parents, Q, P, rng):
    """picospec's without-replacement verifier that zeroes the draft's laws P after reading them."""
    out = verify_without_replacement(tokens, parents, Q, P, rng)
    P[...] = 0
    return out


@pytest.mark.parametrize("fn, contract, name, message", [
    (tree_zeroes_q, "tree", "V=3 sampled siblings", "changed its input Q in place"),
    (tree_reverses_tokens, "tree", "V=3 sampled siblings", "changed its input tokens in place"),
    (tree_reverses_tokens, "tree", "V=3 top tokens T=0.7", "changed its input tokens in place"),
    (without_replacement_zeroes_p, "tree_without_replacement", "V=3 two pairs of siblings",
     "changed its input P in place"),
], ids=["tree_zeroes_q", "tree_reverses_tokens", "top_tree_reverses_tokens",
        "without_replacement_zeroes_p"])
def test_a_tree_sampler_that_changes_its_inputs_fails_with_the_reason(fn, contract, name, message):
    """The arrays and lists a tree step hands the sampler are the caller's: changing one in place
    is an error of the case, named (also where P is None: "top" siblings)."""
    number, case = numbered(contract, name)
    result = check_case(fn, contract, case, SAMPLES, (0, number))
    assert result.verdict == "error" and message in result.detail, result


def test_the_rejection_battery_never_calls_with_an_empty_batch():
    """Every call holds 1 row or more, also at a step where only rows drawn alone are left (10
    sequences: the one drawn alone is at times the last unfinished): a right sampler that cannot
    take B = 0 (vLLM never calls with it) meets none."""
    sizes = Counter()

    def spy(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng):
        sizes[len(draft_token_ids)] += 1
        return rejection_sample(target_with_bonus_probs, bonus_token_ids, draft_probs,
                                draft_token_ids, rng=rng)

    for seed in range(25):
        for number, case in enumerate(CASES["rejection"][:6], 1):
            run(spy, "rejection", case, 10, (seed, number))
    assert sizes[1] >= 100 and min(sizes) >= 1, sizes


def batched_last_row_draft_changed(target_with_bonus_probs, bonus_token_ids, draft_probs,
                                   draft_token_ids, rng):
    """picospec's rejection sampler whose batches of 2 rows or more return a first draft the
    last row was not given, as if accepted; its rows drawn alone are right."""
    out = rejection_sample(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids,
                           rng=rng)
    if len(out) > 1:
        out[-1, 0] = (draft_token_ids[-1, 0] + 1) % draft_probs.shape[-1]
        out[-1, 1] = max(out[-1, 1], 0)  # the changed draft reads as accepted: a token after it
    return out


def test_a_draft_changed_in_one_row_is_quoted_from_that_row():
    """The error quotes the row whose accepted draft differs from the draft it was given (its
    first token is not its first draft), not another row of the batch."""
    number, case = numbered("rejection", "V=3 k=2 T=0.7")
    result = check_case(batched_last_row_draft_changed, "rejection", case, SAMPLES, (0, number))
    quoted = re.search(r"row \d+: \[(-?\d+), [^\]]*\] for drafts \[(\d+), ", result.detail)
    assert result.verdict == "error" and quoted, result
    assert quoted.group(1) != quoted.group(2), result.detail


def batched_last_row_gap(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids,
                         rng):
    """picospec's rejection sampler whose batches of 2 rows or more slip a -1 into their last row
    before its recovered token when it kept a draft but not all: [d, r, -1] -> [d, -1, r]; its
    rows drawn alone are right."""
    out = rejection_sample(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids,
                           rng=rng)
    e = emitted(out)[-1]
    if len(out) > 1 and 2 <= e <= draft_token_ids.shape[1]:
        out[-1, e], out[-1, e - 1] = out[-1, e - 1], -1
    return out


def test_a_gap_in_one_row_of_a_batch_fails_the_case():
    """A -1 before a token in one row of a batch, the others right, is an error of the case:
    every row must be tokens, then -1 only."""
    number, case = numbered("rejection", "V=3 k=2 T=0.7")
    result = check_case(batched_last_row_gap, "rejection", case, SAMPLES, (0, number))
    assert result.verdict == "error", result
    assert "expected accepted drafts, one recovered or bonus token, then -1" in result.detail


def test_padded_writes_minus_1_after_each_row_s_tokens():
    """padded(): rows of token ids of any length, none too -> one array of the width given, each
    row its tokens, then -1 (the contracts' pad), as its comment states."""
    out = padded([[4, 0], [], [2]], 3)
    assert out.dtype == np.int64 and out.tolist() == [[4, 0, -1], [-1, -1, -1], [2, -1, -1]]


def wide_case(contract):
    [case] = [c for c in CASES[contract] if c.wide]
    return CASES[contract].index(case) + 1, case


def test_each_battery_has_a_wide_case_and_its_answers_are_read_back():
    """Each battery's wide case hands the sampler its V tokens as wide_ids out of a vocabulary of
    `wide` (the last id among them), every other id 0: picospec's own passes it, and a sampler
    that returns an id of probability 0, or one past the vocabulary, fails it naming the token."""
    for contract, right in (("chain", verify_chain), ("tree", verify_tree),
                            ("tree_without_replacement", verify_without_replacement),
                            ("rejection", rejection_sample)):
        number, case = wide_case(contract)
        ids = wide_ids(case.V, case.wide)
        assert len(set(ids.tolist())) == case.V and case.wide - 1 in ids and case.wide >= 256
        assert check_case(right, contract, case, 2000, (0, number)).verdict == "pass", contract
    number, case = wide_case("chain")
    # next_token as a whole float (2.0), which the contract takes: read back as its token too
    def floats(drafts, P, Q, rng):
        n, token = verify_chain(drafts, P, Q, rng)[:2]
        return n, float(token)

    as_float = check_case(floats, "chain", case, 2000, (0, number))
    assert as_float.verdict == "pass", as_float
    off = next(t for t in range(case.wide) if t not in wide_ids(case.V, case.wide))
    for token, message in ((off, f"token {off}: P and Q give it probability 0"),
                           (case.wide, "token 4096: expected ids in [0, 4,096)")):
        result = check_case(lambda drafts, P, Q, rng: (0, token), "chain", case, SAMPLES,
                            (0, number))
        assert result.verdict == "error" and message in result.detail, result
    number, case = wide_case("rejection")

    def one_off(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng):
        out = rejection_sample(target_with_bonus_probs, bonus_token_ids, draft_probs,
                               draft_token_ids, rng=rng)
        out[-1, 0] = off  # the last row's first token: an id of probability 0
        return out

    off = next(t for t in range(case.wide) if t not in wide_ids(case.V, case.wide))
    result = check_case(one_off, "rejection", case, SAMPLES, (0, number))
    assert result.verdict == "error" and f"token {off}: P and Q give it" in result.detail, result
    # the wide inputs are the caller's too: one changed in place, in wide calls alone, is named
    number, case = wide_case("tree_without_replacement")

    def in_place_when_wide(tokens, parents, Q, P, rng):
        if Q.shape[-1] > 1024:
            Q[0] = np.maximum(Q[0] - P[0], 0)
        return verify_without_replacement(tokens, parents, Q, P, rng)

    result = check_case(in_place_when_wide, "tree_without_replacement", case, SAMPLES,
                        (0, number))
    assert result.verdict == "error" and "changed its input Q in place" in result.detail, result
