"""picospec/exercises/grading.py against answers written as students write them
(tests/support/student_answers.py): every mistake is rejected with a message naming the case or the
call that shows it, and every right answer written otherwise passes. A law-graded failure writes
out the first call that broke a rule (its inputs, the uniforms it drew, what it returned), so
different sampler bugs get different lines."""
import copy
import re

import numpy as np
import pytest

from picospec.check.battery import cases_of
from picospec.exercises import EXERCISES, grading
from picospec.exercises.verify_chain import rules as chain_rules

from tests.support import student_answers
from tests.support.fewest import fewest

pytestmark = [pytest.mark.filterwarnings("ignore::RuntimeWarning"),  # students divide by zero
              # and leave out= out (NumPy's warning, which the learner sees too)
              pytest.mark.filterwarnings("ignore:'where' used without 'out'"),
              pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")]  # np.matrix
SAMPLES = 1_000  # sequences per case of the law-graded exercises, as in test_exercises.py
# a law-graded mistake is graded first at fewest(module) sequences: rejected there, where and as its
# pin below says if it has one, that verdict stands; else it is made again at SAMPLES
MISTAKES = [(name, fn.__name__) for name, fns in student_answers.WRONG.items() for fn in fns]
# the calls graded after the battery passed, each of a size or shape it lacks
CALLS_PAST = ("logits 2000 apart", "z [2, 2, V_d]", "logits near -1000", "twenty drafts",
              "five siblings, six levels", "z [0, V_d]", "z [1, 2, 2, V_d]", "token 256",
              "a tie u == q / p", "a uniform a hair from q / p", "token 35000",
              "ids past 65535", "a token of mass 1e-12", "q / p = 1e-12 at u = 0",
              "p(x) = 1e-200", "token 299 of 300", "a residual over 300 tokens",
              "the fifth sibling's law", "z [2, 1]", "z [3, 3]", "z [2, 0, V_d]",
              "the same z, other ids", "V_d = 64", "forty drafts", "a residual of mass 2^-52",
              "a residual over 2,000 tokens", "twelve siblings, 31 levels",
              "the twelfth sibling's law", "a chain of forty nodes", "V_d = 32,000",
              "1,500 drafts", "p(x) = 1e-310", "token 70000", "a law whose sum ends below 1",
              "V_d = n_vocab", "a chain of 100 nodes", "children 3 and 9", "tokens 70000 and 4464",
              "1,500 drafts, the last forbidden", "a chain of 300 nodes, the last forbidden",
              "a law of 0.9992", "the last hundred of 2,000 tokens",
              "the last hundred of a residual's 2,000", "q / p in float64",
              "a residual over 128,256 tokens", "a residual's tail 1e-10 of its largest entry",
              "a residual's tail 1e-05 of its largest entry", "z alike at its ends",
              "a residual of mass 1e-310", "a residual's tail 1e-15 of its largest entry",
              "the last of 128,256 tokens", "the last of a residual's 128,256",
              "a sibling's law of mass 1e-15", "a node of 300 children")
# a residual that drops a token of q > p (a share cut, rounded or floored away)
MORE_THAN_0 = "support: a token with q > p must get more than 0"
# mistakes pinned to where they fail (a case, or a call past the battery) and a line of evidence
WHERE = {
    # answers kept by a few entries of a law: a law alike there, right after it, gets the first's
    "residual_cached_by_ends": ("a law's twin", "returned the above for the twin: the case's "
                                                "answer, as an answer kept by a few of a law's"),
    # a log of 1e-17 taken as -inf: the case of that mass, before any twin
    "typical_log_by_log1p": ("kept nodes", "probs=[[1e-17, 0.3, 0.7], [0.3, 0.3, 0.4]]"),
    "typical_entropy_cached_by_ends": ("kept nodes", "probs=[[0, 0.3, 0.17, 0, 0.3, 0.23, 0]"),
    "draft_law_cached_by_ends": ("z alike at its ends", "z = [0.0, 1.0, -1.0, 3.0, 0.5, 5.0, 6.0]"),
    "residual_floor_at_eps": (MORE_THAN_0, "q=[0.9, 0.1], p=[0.0, 0.09999999999999999]"),
    # (a chain of eight drafts is a case of the battery now)
    "chain_six_drafts_at_most": (
        "case 18. V=2 K=8 sharp draft", "after drafts[6] was rejected, token 1 came back, but q = "
        "Q[6][1] = 0.8494 <= p = P[6][1] = 0.9969"),
    # (four siblings are a case of the battery now)
    "wr_three_siblings_at_most": (
        "case 10. V=5 four siblings", "node 3 (token 1) was rejected though q(1) = 1 >= p_i(1) = "
        "0.6464"),
    # (a chain of four levels is a case of the battery now)
    "wr_three_levels_at_most": (
        "case 14. V=3 chain of 4 sharp draft", "has probability 0 under q at the end of the walk"),
    "wr_four_levels_at_most": (
        "five siblings, six levels", "node 8 (token 2) was rejected though q(2) = 0.3 >= p_i(2) "
        "= 0.3"),
    # right on fresh memory: NaN left in freed memory shows it (a case with a zero in q)
    # (what the skipped entries hold is whatever memory held: a pass before the dirty one may
    # meet NaN there too, as the refilled one does in the laws of zeros at both ends)
    "typical_log_where_without_out": (("memory never written", "objects refilled in place"), ""),
    "typical_log_clipped_at_1e15": ("kept nodes", "(V = 50,257)"),
    # an epsilon added inside the log shows on two tokens already, a hair (1e-13) from the line
    "typical_log_plus_1e12": ("kept nodes", "probs=[[0.3, 0.7], [0.5, 0.5]], epsilon=0.5, "
                              "delta=0.5526068325111387"),
    # a recursion one level a token: the chain of 3,000 is past Python's limit
    "trie_by_recursion": ("raises", "sequences of 3000 and 1500 tokens"),
    "lookahead_rows_in_float16": ("mask", "smallest case that differs (mask): W=5, L=410"),
    # each past the largest the battery held before: 2,000 drafts, a 20-gram, a late match, a
    # residual of 3e-17 over two tokens, node 299's children, 64 draft tokens, 3,000,000 drafts
    "candidates_draft_capped_at_64": ("draft", "x=[1, 2, ..., 2000, 1]"),
    "candidates_ngrams_up_to_8": ("draft", "max_ngram_size=22, num_pred_tokens=12"),
    "candidates_first_4096": ("draft", "x=[2, 8] + [1] * 69988 + [1, 2, 3] + [1] * 5 + [1, 2]"),
    "residual_one_token_when_tiny": (MORE_THAN_0, "q=[1e-17, 2e-17, 1.0], p=[0.0, 0.0, 1.0]"),
    "trie_float32_key": ("tokens", "[[0], [1], ..., [299], [299, 0], [299, 1]]"),
    "draft_law_top_10": ("V_d = 64", "not the softmax"),
    "draft_law_floor_1e6": ("V_d = 64", "not the softmax"),
    "expected_sum_of_terms_capped": ("E", "alpha=0.9999999, K=3000000"),
    "speedup_free_below_1e12": ("speedup", "K=100000, c_d=1e-13"),
    "typical_as_bool_array": ("what it returns: a ndarray, expected a list", "a ndarray"),
    "draft_law_batch_of_one": ("z [2, 2, V_d]", "shape (1, 2, 5), expected (2, 2, 5)"),
    # the min subtracted passes every head whose rows span less than exp takes and fails the head
    # whose row spans 720; the mean subtracted passes every head (no row of a law spans past 745)
    # and fails the one call 2000 wide; a list is no array, whatever its numbers
    "draft_law_min_subtracted": ("case 12. V=4 V_d=3 K=2 a row's logits 720 apart",
                                 "not finite (nan or inf): exp overflows for logits from"),
    "draft_law_as_list": ("case 2. V=3 V_d=2 K=1", "a list, expected a NumPy array"),
    "draft_law_mean_subtracted": ("logits 2000 apart", "not finite (nan or inf): exp overflows "
                                  "for logits from -1000 to 1000"),
    # each past the sizes, digits and widths the battery first held
    "residual_relative_tolerance": ("values", "q=[0.5000000000000001, 0.4999999999999999], "
                                    "p=[0.5, 0.5]"),
    "residual_float32_when_wide": ("values", "q, p over Llama 3's V = 128,256"),
    "residual_top_64": (MORE_THAN_0, "q, p over V = 50,257"),  # before Llama 3's 128,256
    "residual_rounded_to_12": (MORE_THAN_0, "q=[0.9, 0.1], p=[0.0, 0.09999999999999999]"),
    "chain_uniforms_buffer_of_8": ("forty drafts", "it returned (40, 0), not (39, 1)"),
    "chain_drafts_capped_at_32": ("forty drafts", "it returned (32, 1), not (39, 1)"),
    "chain_residual_top_256_when_wide": ("a residual over 2,000 tokens", "token 1999, of mass"),
    "chain_residual_floor_1e15": ("a residual of mass 2^-52", "it returned (0, 2), not (0, 0)"),
    # guards, floors and flushes below what the battery's residuals reach: a residual of subnormal
    # mass, a tail 1e-15 of the largest entry, Llama 3's vocabulary
    "chain_residual_guard_below_1e16": ("a residual of mass 1e-310", "not (0, 2)"),
    "chain_residual_subnormals_flushed": ("a residual of mass 1e-310", "not (0, 2)"),
    "chain_residual_relative_floor_1e11": ("a residual's tail 1e-15 of its largest entry",
                                           "token 2, of mass 1e-15, never came out"),
    "chain_laws_cut_to_100000": ("the last of 128,256 tokens", "token 128255, of mass"),
    "wr_residual_guard_below_1e16": ("a residual of mass 1e-310", "not ([], 2)"),
    "wr_residual_subnormals_flushed": ("a residual of mass 1e-310", "not ([], 2)"),
    "wr_residual_relative_floor_1e11": ("a residual's tail 1e-15 of its largest entry",
                                        "token 2, of mass 1e-15, never came out"),
    "wr_residual_cut_to_100000": ("the last of a residual's 128,256", "token 128255, of mass"),
    "wr_sibling_law_kept_below_1e12": ("a sibling's law of mass 1e-15",
                                       "it returned ([1], 0), not ([], 2)"),
    "wr_children_cut_to_16": ("a node of 300 children", "not ([299], 0)"),
    "typical_rows_in_int16": ("kept nodes", "tokens=[0] * 33000"),
    # a floor relative to the residual's largest entry: at the ends of a long tail, or (Gumbel-max)
    # in the tail's share
    # at the first calls of extreme uniforms (the long tail after them catches both too)
    "chain_certain_within_1e5": ("a token of mass 1e-12",
                                 "token 1, of mass 1e-12, never came out"),
    "wr_certain_within_1e5": ("a token of mass 1e-12", "token 1, of mass 1e-12, never came out"),
    "wr_residual_top_16": ("a residual over 300 tokens", "token 299, of mass"),
    # a wide law drawn by np.random.choice: named as randomness outside rng at the wide calls
    # (the long tail's residual, nearly certain, would show it only as its tail never drawn)
    "chain_choice_when_wide": ("randomness outside rng", "draw every random number from rng"),
    "wr_choice_when_wide": ("randomness outside rng", "draw every random number from rng"),
    "chain_residual_relative_floor": ("a residual's tail 1e-10 of its largest entry",
                                      "token 50256, of mass"),
    "chain_gumbel_residual_relative_floor": ("a residual's tail 1e-05 of its largest entry",
                                             "it returned no token >= 10,000"),
    "wr_residual_relative_floor": ("a residual's tail 1e-10 of its largest entry",
                                   "token 50256, of mass"),
    "wr_eight_levels_at_most": ("twelve siblings, 31 levels", "was rejected though"),
    "wr_eight_children_at_most": ("twelve siblings, 31 levels", "node 11 (token 11) was rejected"),
    "wr_last_four_removed": ("the twelfth sibling's law", "not ([], 12)"),
    "wr_uniforms_buffer_of_16": ("a chain of forty nodes", "the uniforms of rng, in turn: 0.25 "
                                 "(39 times), 0.75, 0.5 ever after"),
    "wr_residual_top_256_when_wide": ("a residual over 2,000 tokens", "token 1999, of mass"),
    "medusa_ranks_in_int32": ("raises", "choices=[[0], [1], [0, 4294967296], [1, 0],"),
    "typical_certain_above_1e12": ("kept nodes", "probs=[[0.9999999999999, 1e-13], [0.5, 0.5]]"),
    "typical_float32_when_wide": ("kept nodes", "over V = 128,256 with 0.3 on token 5"),
    "draft_law_cached_object": ("answers reused", "the very object"),
    "draft_law_floor_1e10": ("V_d = 32,000", "off at out[1, "),
    "draft_law_top_100": ("V_d = 32,000", "off at out[0, "),
    "draft_law_float32_when_wide": ("V_d = 32,000", "compute in float64"),
    "candidates_ngrams_up_to_32": ("draft", "max_ngram_size=302, num_pred_tokens=12"),
    "candidates_rolling_hash": ("draft", "x=[42730, 2037, 11, 42730, 2038, 12,"),
    "suffix_capped_at_2048": ("n", "max_suffix=50000"),
    "suffix_rolling_hash": ("n", "corpus=[42730, 2037, 9, 42730, 2038, 9,"),
    "trie_key_in_32_bits": ("tokens", "[2, 15268, 7], [2, 15269], ..., [2, 35188]"),
    "speedup_free_below_1e18": ("speedup", "K=1000000000000, c_d=1e-19"),
    # past the widths, sizes and moduli the battery first held: starts, places, counts and ids
    # past 16 bits, hashes modulo 2^64, keys in 32 bits past node 42,729, suffixes past 16 tokens,
    # 256,000 tokens, 1,500 drafts and nodes, a sum ending below 1, a subnormal p, a law of mass 1
    # beside 1e-17, a threshold of 1e-13, 1 / 49 rounded, ranks packed past 2^32, depth 4
    "candidates_hash_in_int64": ("draft", "x=[3201, 0, 0, 0, 1396, 77, 0, 1694, 887, 1440, 0]"),
    "candidates_starts_in_uint16": ("draft", "x=[2, 8] + [1] * 69988"),
    "suffix_places_in_int16": ("n", "corpus=[7] * 69990 + [1, 2, 3, 9]"),
    "suffix_hash_in_uint64": ("n", "corpus=[3201, 0, 0, 0, 1396]"),
    "suffix_array_by_16_tokens": ("n", "corpus=[0] * 300, context=[0] * 300"),
    "trie_counts_in_uint16": ("counts", "sequences=[[1]] * 70000"),
    "trie_key_in_int32": ("tokens", "[2, 35188, 4078]] (85,460 sequences)"),
    "residual_in_a_buffer_of_2_17": ("raises", "q, p over Gemma's V = 256,000"),
    "residual_one_token_of_two": (MORE_THAN_0, "q=[0.1, 0.9], p=[0.09999999999999999, "
                                  "0.8999999999999999]"),
    "chain_index_clamped": ("case 13. uniforms near 1: support",
                            "then token 2, which Q[3] gives probability 0"),
    "chain_uniforms_buffer_of_64": ("1,500 drafts", "it returned (1500, 0), not (1499, 1)"),
    "chain_p_floored": ("p(x) = 1e-310", "it returned (0, 0), not (1, 0)"),
    "chain_ids_in_uint16": ("token 70000", "drafts[0] = 70000 was rejected though q"),
    "typical_certain_at_one": ("kept nodes", "probs=[[1.0, 1e-17], [0.5, 0.5]]"),
    "typical_floor_1e12": ("kept nodes", "epsilon=0.5, delta=1e-13"),
    "typical_rows_in_int8": ("kept nodes", "tokens=[0] * 1500, parents=[-1, 0, 1, ..., 1498]"),
    "lookahead_level_by_reciprocal": ("mask", "smallest case that differs (mask): W=49, L=2"),
    "medusa_parent_by_last_two": ("attn_mask", "[1, 1, 1], [0, 1, 1, 0]]"),
    "medusa_path_in_base_2_32": ("attn_mask", "[1, 0], [0, 4294967296, 0]]"),
    "wr_children_in_a_set": ("children 3 and 9", "it returned ([0, 9], 0)"),
    "wr_path_in_64_slots": ("a chain of 100 nodes", "it raised ValueError"),
    "wr_ids_in_int16": ("tokens 70000 and 4464", "not ([], 7)"),
    "draft_law_d2t_unread_when_full": ("V_d = n_vocab", "not the softmax [0.25, 0.75]"),
    "draft_law_cut_30_below": ("V_d = 32,000", "off at out[1, "),
    "expected_one_plus_alpha_when_tiny": ("E", "alpha=0.0005, K=2"),
    "expected_tail_dropped": ("E", "alpha=0.9, K=151"),
    "expected_few_drafts_all_kept": ("E", "alpha=0.9999999403953552, K=16"),
    # each caught by a later case or call too: pinned where it fails first, so that the case
    # going unnoticed is seen
    # (a case of ids up to 4,095 is the battery's now)
    "chain_tokens_in_a_byte": ("case 28. V=6 K=4 over 4,096 ids",
                               "  P = [{343: 0.0406, 367: 0.1606, 946: 0.2138, "),
    "residual_below_eps_is_q": ("support: a token with q <= p must get exactly 0",
                                "q=[1e-20, 0.6, 0.4], p=[0.0, 0.6, 0.4]"),
    "draft_law_rows_stacked": ("z [0, V_d]", "need at least one array to stack"),
    "expected_first_order_near_1": ("E", "alpha=0.9999991, K=1000"),
    "speedup_none_without_drafts": ("speedup", "E=1.0, c=1.1, K=0, c_d=0.2"),
    "chain_drafts_in_int16": ("token 35000", "drafts[0] = 35000 was kept though the target"),
    "speedup_draft_cost_capped_at_1": ("speedup", "E=2.0, c=1.0, K=2, c_d=1.5"),
    "speedup_K_in_int32": ("raises", "K=1000000000000, c_d=1e-19"),
    # each at the case added for it: prefixes, paths and windows hashed (popular bases and
    # moduli, hash(tuple) cut to 32 bits, odd bases modulo 2^64 against Thue-Morse, even bases
    # against 65 ranks alike), ranks in float32, a prefix told by its sum and ends, big-endian
    # bytes, KMP falling back once, a padded id found across two, the defaults, one draft at a
    # tiny alpha
    "trie_key_depth_sum_ends": ("tokens", "sequences=[[0, 1, 2, 3, 0], [0, 1, 3, 2, 0],"),
    "trie_rolling_hash_key": ("tokens", "sequences=[[0, 0, 0], [1, 9331, 18943],"),
    "trie_hashed_prefix_32_bits": ("tokens", "sequences=[[15505, 31842], [23022, 1073]]\n"),
    "trie_hash_in_uint64": ("tokens", "(Thue-Morse over 2,048 tokens, then its complement)"),
    "medusa_path_hash_mod_prime": ("attn_mask", "[[0], [998244353], [1000000007],"),
    "medusa_ranks_in_float32": ("attn_mask", "[[16777216], [16777217], [16777217, 0]]"),
    "medusa_hashed_path_32_bits": ("attn_mask", "[[71297665170], [811007108076],"),
    "medusa_path_hash_in_uint64": ("attn_mask", "the Thue-Morse path of 0 and 2^39"),
    "medusa_path_by_last_64": ("attn_mask", "(65 1s after the first)"),
    "suffix_big_endian_bytes": ("n", "corpus=[1, 0], context=[256], max_suffix=1"),
    "suffix_hash_base_1000003": ("n", "(24 windows of 3, each then 9), context=[0, 0, 0]"),
    "suffix_hashed_windows_32_bits": ("n", "corpus=[15505, 31842], context=[23022, 1073]"),
    "suffix_kmp_one_fallback": ("n", "corpus=[0, 0, 1, 0, 0], context=[0, 0, 0], max_suffix=3"),
    "suffix_padded_digits_first_find": ("n", "corpus=[4000, 11, 1], context=[1], max_suffix=1"),
    "candidates_hash_base_1000003": ("draft", "(24 windows of 3, each then 9, then 0, 0, 0)"),
    "candidates_hash_uint32_base_1000003": ("draft", "x=M + [9] + C + [7] + C, M the Thue-Morse "
                                            "sequence [0, 1, 1, 0, 1, 0, 0, 1, ...] over 128"),
    "suffix_hash_uint64_base_1000000007": ("n", "corpus=M + [9] + C[1:], M the Thue-Morse "
                                           "sequence [0, 1, 1, 0, 1, 0, 0, 1, ...] over 1,024"),
    "candidates_hashed_windows_32_bits": ("draft", "x=[15505, 31842, 5, 23022, 1073]"),
    "candidates_padded_digits_first_find": ("draft", "x=[4000, 11, 1, 9, 1], max_ngram_size=1"),
    "candidates_other_defaults": ("draft", "left to their defaults (3 and 10)"),
    "expected_limit_when_tiny": ("E", "alpha=0.0009, K=1"),
}


@pytest.mark.parametrize("name, wrong", MISTAKES, ids=[f"{n}-{w}" for n, w in MISTAKES])
def test_a_students_mistake_is_rejected_naming_where(name, wrong):
    module, fn = EXERCISES[name], getattr(student_answers, wrong)
    verdict = module.grade(fn, samples=fewest(module)) if fewest(module) else None
    failed, line = WHERE.get(wrong, (None, ""))
    failed = (failed,) if isinstance(failed, str) else failed  # None, or the parts it may fail at
    if verdict is None or verdict.passed or verdict.failed in ("no verdict", "not answered") or (
            failed is not None and (verdict.failed not in failed or line not in verdict.evidence)):
        verdict = module.grade(fn, samples=SAMPLES)
    text = str(verdict)
    assert not verdict.passed and verdict.failed not in ("no verdict", "not answered"), text
    if failed is not None:
        assert verdict.failed in failed and line in verdict.evidence, text
    if verdict.failed == "randomness outside rng":
        assert "draw every random number from rng" in text
    elif verdict.failed in CALLS_PAST:  # one call past the battery's
        assert re.match(r"the call( \(every digit\))?:\n", verdict.evidence), text
        assert any(said in verdict.evidence for said in (
            "it returned", "it raised", "changed: an answer must leave its inputs")), text
    elif verdict.failed == "answers reused":  # each case passed alone
        assert "return a new" in verdict.evidence, text
    elif hasattr(module, "CONTRACT"):  # the case, then the call that broke a rule or the counts
        assert verdict.failed.startswith("case "), text
        assert f"first failing case: {verdict.failed[5:]}" in text, text
        assert ("the first that broke a rule" in text or "observed" in text
                or "neighbouring sequences are not independent" in text), text
    else:  # the smallest case, the output expected and the student's
        assert f"smallest case that differs ({verdict.failed}): " in text and "yours:" in text


def test_every_pinned_mistake_is_a_kept_one():
    assert set(WHERE) <= {wrong for _, wrong in MISTAKES}


@pytest.mark.parametrize("name, answer", [*student_answers.RIGHT.items(),
                                          *student_answers.RIGHT_TOO],
                         ids=lambda v: getattr(v, "__name__", v))
def test_a_right_answer_written_otherwise_passes(name, answer):
    verdict = EXERCISES[name].grade(answer, samples=fewest(EXERCISES[name]))
    assert verdict.passed, str(verdict)
    if answer is student_answers.chain_binomial_draws:  # the support cases: untested, and said
        n = len(cases_of("chain"))
        assert f"{n - 3} of {n} cases passed and 3 went untested" in str(verdict), str(verdict)


@pytest.mark.parametrize("name, wrong, failed", [
    ("residual", "residual_float32", "dtype float32, expected float64: 1e-09 needs its digits"),
    ("expected_tokens", "expected_float32",
     "E: dtype float32, expected float64: 1e-09 needs its digits"),
    ("medusa_buffers", "medusa_int_mask", "attn_mask: dtype int64, expected bool"),
    ("medusa_buffers", "medusa_float_positions", "position_ids: dtype float64, expected integers"),
    ("lookahead_mask", "lookahead_as_ints", "mask: dtype int64, expected bool"),
    ("find_candidates", "candidates_none_when_missing", "what it returns: a NoneType, not a list"),
    ("find_candidates", "candidates_pops_the_tail",
     "input 1 changed: an answer must leave its inputs as they were"),
    ("longest_suffix", "suffix_reversed_in_place",
     "input 2 changed: an answer must leave its inputs as they were"),
    ("trie", "trie_pops_sequences",
     "input 1 changed: an answer must leave its inputs as they were"),
    ("residual", "residual_as_list", "a list, expected a NumPy array"),
    ("medusa_buffers", "medusa_as_lists", "attn_mask: a list, expected a NumPy array"),
    ("lookahead_mask", "lookahead_as_nested_lists", "mask: a list, expected a NumPy array"),
    ("lookahead_mask", "lookahead_as_matrix",
     "mask: a matrix (np.matrix), expected a NumPy array: np.asarray() it"),
    ("find_candidates", "candidates_as_array", "what it returns: a NumPy array, not a list"),
    ("longest_suffix", "suffix_last_token_as_bool", "what it returns: a bool, not an int"),
    ("find_candidates", "candidates_as_floats", "draft: 0.0 (float), not an int"),
    ("trie", "trie_nan_padded", "tokens: 0.0 (float64), not an int"),
    ("typical_accept", "typical_as_zero_one", "what it returns: 0 (int), not a boolean"),
    ("predicted_speedup", "speedup_as_text",
     "speedup: dtype <U14, expected float64: numbers, not str"),
    ("residual", "residual_as_text", "dtype <U32, expected float64: numbers, not str"),
])
def test_a_wrong_kind_of_value_or_a_changed_input_is_named(name, wrong, failed):
    verdict = EXERCISES[name].grade(getattr(student_answers, wrong))
    assert verdict.failed == failed, str(verdict)


def test_an_input_written_back_as_other_types_is_changed():
    """Lists made tuples, ints made floats, an array's dtype: equal values, changed inputs; the
    smallest case shows it."""
    from picospec.exercises.grading import changed_input

    for now, was in (([(0,), (1,)], [[0], [1]]), ([0.0, 1.0], [0, 1]), ([[0.0]], [[0]]),
                     (np.zeros(2, np.float32), np.zeros(2)), ([np.int64(1)], [1]),
                     ([0, True], [0, 1])):
        assert changed_input([now], [was]) is not None, (now, was)
    for same in ([[0], [1, 2]], [0, float("nan")], np.array([1.0, np.nan]), {"a": [1]}):
        assert changed_input([same], [copy.deepcopy(same)]) is None, same
    verdict = EXERCISES["trie"].grade(student_answers.trie_hashable_in_place)
    assert "changed" in verdict.failed and "sequences=[[0]]\n" in str(verdict), str(verdict)


def test_an_input_made_read_only_is_changed():
    """An array made read-only is changed for the caller (it can no longer write into it); an
    answer's copy, writeable, is compared by its values alone."""
    was = np.arange(3.0)
    now = was.copy()
    now.flags.writeable = False
    assert not grading.unchanged(now, was) and grading.unchanged(now, was, flags=False)
    assert not grading.unchanged([now], [was]) and grading.unchanged(now.copy(), was)


def test_an_answer_overwritten_by_a_later_call_is_named():
    """An answer whose values changed after the calls that followed it (a buffer kept between
    calls, written again) is named, though a call made again returns a new array."""
    yours = np.array([1.0, 0.0])
    answers = [("q=[1, 0], p=[0, 1]", yours, yours.copy(), ([1.0, 0.0], [0.0, 1.0]))]
    yours[:] = [0.5, 0.5]  # the next call wrote into it
    text = grading.reused_answer(lambda q, p: np.array([1.0, 0.0]), answers)
    assert "changed after the calls that followed it: now [0.5, 0.5]" in text, text
    assert grading.reused_answer(lambda q, p: np.array([1.0, 0.0]), []) is None


def test_a_wrong_return_names_each_parts_type():
    """A 0-d array shows as its number: the message names each part's type, so the learner sees
    what is not an integer."""
    verdict = EXERCISES["verify_chain"].grade(lambda *args: (np.array(1), 0), samples=SAMPLES)
    assert verdict.failed == "what it returns", str(verdict)
    assert "your function returned (1, 0) (a tuple of ndarray, int); it must return" in str(
        verdict)


def test_a_path_of_floats_is_named():
    """Node 0.0 is no node index: the path's parts are named, though the checker's contract
    reads 0.0 as 0."""
    verdict = EXERCISES["verify_without_replacement"].grade(student_answers.wr_path_of_floats,
                                                             samples=SAMPLES)
    assert verdict.failed == "what it returns", str(verdict)
    assert "returned ([0.0], 0) (a tuple of list of float, int); it must return (path, next " \
           "token): a list of node indices" in str(verdict)


def test_a_generator_of_the_learners_own_is_named():
    """rng ignored for a generator made once at import: right in law, and told to use rng."""
    verdict = EXERCISES["verify_chain"].grade(student_answers.chain_own_generator,
                                              samples=SAMPLES)
    assert verdict.failed == "randomness outside rng", str(verdict)
    assert "not from np.random, random or a generator of your own" in verdict.evidence


def test_a_generator_seeded_inside_is_named():
    """rng = np.random.default_rng(0) inside the function: one answer whatever rng it is given.
    The law fails, and the verdict says why; a wrong answer that uses rng gets no such line."""
    verdict = EXERCISES["verify_chain"].grade(student_answers.chain_seeded_inside,
                                              samples=SAMPLES)
    assert verdict.failed.startswith("case "), str(verdict)
    assert "your function ignores the rng it is given" in verdict.evidence
    other = EXERCISES["verify_chain"].grade(student_answers.chain_bonus_off_by_one,
                                            samples=SAMPLES)
    assert not other.passed and "ignores the rng" not in other.evidence


def test_a_sampler_that_fails_without_drafts_is_named():
    """Right in law with drafts, it raises with none (K = 0, as prompt lookup calls it when
    nothing matched): the battery's case whose calls have no drafts at times shows the call."""
    verdict = EXERCISES["verify_chain"].grade(student_answers.chain_bonus_after_the_loop,
                                              samples=SAMPLES)
    assert verdict.failed.startswith("case ") and " or 0 " in verdict.failed, str(verdict)
    assert "drafts = []\n" in verdict.evidence and "it raised UnboundLocalError" in verdict.evidence


@pytest.mark.parametrize("wrong, failed", [
    ("chain_greedy_without_drafts", " or 0 "),
    ("chain_numpy_without_drafts", "randomness outside rng")])
def test_a_sampler_wrong_only_without_drafts_is_caught(wrong, failed):
    """Right with drafts, wrong only at K = 0: Q[0]'s argmax fails the battery's case of calls
    with no drafts at times; a draw from NumPy's global generator there, which no law tells, is
    seen by a call with no drafts whose token is random. The project's sampler and the right ones
    written otherwise draw that token from rng."""
    from picospec.exercises.grading import outside_rng
    from picospec.verify import verify_chain

    from tests.support import learner_answers

    module = EXERCISES["verify_chain"]
    verdict = module.grade(getattr(student_answers, wrong), samples=SAMPLES)
    assert failed in verdict.failed, str(verdict)
    for right in (verify_chain, learner_answers.verify_chain, student_answers.chain_uniforms_first,
                  student_answers.chain_binomial_draws):
        assert outside_rng(right, module.EMPTY_UNCERTAIN) is None


def test_siblings_apart_are_tried():
    """A tree of the battery is numbered depth first, a node's children apart. Children read as
    one run of indices never try a sibling after another's subtree: right in law, and a call shows
    the sibling left out."""
    from picospec.exercises import verify_without_replacement as module

    verdict = module.grade(student_answers.wr_siblings_in_a_run, samples=SAMPLES)
    assert "numbered depth first" in verdict.failed, str(verdict)
    assert "the first that broke a rule" in verdict.evidence and "always kept" in verdict.evidence


def test_state_kept_between_calls_is_named():
    """Lists as default arguments grow call after call: the case called again answers otherwise,
    and the verdict says why; a mistake that keeps no state gets no such line."""
    verdict = EXERCISES["trie"].grade(student_answers.trie_mutable_defaults)
    assert "it keeps state between calls (a mutable default argument" in verdict.evidence
    assert "keeps state" not in EXERCISES["trie"].grade(student_answers.trie_counts_once).evidence


def test_mass_dropped_below_a_tolerance_fails_at_the_hair():
    """q ahead of p by 2^-52 and 2^-51 is still q > p; a 1e-12 tolerance leaves no mass, 0 / 0,
    named as wrong values (nan), not as mass on a forbidden token."""
    verdict = EXERCISES["residual"].grade(student_answers.residual_with_tolerance)
    assert verdict.failed == "values", str(verdict)
    assert "p=[0.25, 0.25, 0.5]\n" in verdict.evidence
    assert "yours:    [nan, nan, nan]" in verdict.evidence


@pytest.mark.parametrize("name, wrong, case", [
    ("find_candidates", "candidates_ngrams_up_to_3",
     "x=[2, 3, 4, 8, 1, 2, 3, 4, 9, 1, 2, 3, 4], max_ngram_size=4, num_pred_tokens=10"),
    ("longest_suffix", "suffix_up_to_3",
     "corpus=[5, 1, 2, 3, 4, 6], context=[9, 1, 2, 3, 4], max_suffix=5")])
def test_a_length_capped_at_3_fails_past_3(name, wrong, case):
    """Right on every case up to 3 tokens (n-grams, suffixes), wrong on the first longer one."""
    verdict = EXERCISES[name].grade(getattr(student_answers, wrong))
    assert f"smallest case that differs ({verdict.failed}): {case}\n" in str(verdict), str(verdict)


def test_text_search_for_an_ngram_fails_on_multi_digit_ids():
    """"1 2" is in the text "2 9 11 2 7 1 2" (inside "11 2"), though no window is [1, 2]."""
    verdict = EXERCISES["find_candidates"].grade(student_answers.candidates_as_text)
    assert "x=[2, 9, 11, 2, 7, 1, 2], max_ngram_size=2, num_pred_tokens=1\n" in str(verdict)
    assert "expected: [9]\n  yours:    [7]" in verdict.evidence


@pytest.mark.parametrize("name, wrong, line", [
    ("verify_chain", "chain_mutates_q", "Q changed: an answer must leave its inputs as they were"),
    ("verify_without_replacement", "wr_mutates_p",
     "P changed: an answer must leave its inputs as they were"),
    ("verify_chain", "chain_no_bonus", "came back, but q = Q[0]"),
    ("verify_without_replacement", "wr_stops_at_first_kept",
     "the law it was drawn from: it is always kept"),
])
def test_what_a_sampled_law_cannot_show_is_caught_call_by_call(name, wrong, line):
    """Right in law (the inputs changed after use; the bonus forgotten; the walk stopped a level
    early), wrong by the statement: a call shows it."""
    text = str(EXERCISES[name].grade(getattr(student_answers, wrong), samples=SAMPLES))
    assert "the first that broke a rule" in text and line in text, text


P, Q = np.array([[0.5, 0.5]]), np.array([[0.8, 0.2], [0.3, 0.7]])


def scripted(outputs, drawn):
    """A sampler that draws two uniforms (rng.random, rng.uniform) and returns the next output."""
    outputs = iter(outputs)

    def sampler(drafts, P, Q, rng):
        drawn.append([rng.random(), rng.uniform()])
        return next(outputs)
    return sampler


def test_the_first_call_that_breaks_a_rule_is_written_out():
    """Calls 1 and 2 are allowed (a rejected 1 replaced by 0; 0 kept, then 1); call 3 returns 1
    after rejecting 1, a token the residual [0.3, 0] forbids. Recording the uniforms leaves them
    as the rng would have drawn them."""
    drawn = []
    watch = grading.watched(scripted([(0, 0), (1, 1), (0, 1)], drawn), chain_rules, 3)
    rng = np.random.default_rng(5)
    watch([1], P, Q, rng)
    watch([0], P, Q, rng)
    with pytest.raises(grading.BrokenRule) as raised:
        watch([1], P.copy(), Q.copy(), rng)
    twin = np.random.default_rng(5)
    assert drawn == [[twin.random(), twin.uniform()] for _ in range(3)]
    u = ", ".join(f"{x:.4g}" for x in drawn[-1])
    assert str(raised.value) == (
        "call 3 of this case, the first that broke a rule:\n  drafts = [1]\n  P = [[0.5, 0.5]]\n"
        "  Q = [[0.8, 0.2], [0.3, 0.7]]\n"
        f"  the uniforms your rng gave: [{u}]\n"
        "it returned (0, 1): after drafts[0] was rejected, token 1 came back, but q = Q[0][1] = "
        "0.2 <= p = P[0][1] = 0.5: the residual norm(max(0, Q[0] - P[0])) gives it probability 0")


def test_calls_past_the_watched_ones_are_not_checked():
    watch = grading.watched(scripted([(0, 1)] * 3, []), chain_rules, 3, limit=2)
    rng = np.random.default_rng(0)
    with pytest.raises(grading.BrokenRule):
        watch([1], P, Q, rng)
    watch.calls = 2
    assert watch([1], P, Q, rng) == (0, 1)
    # limit=1: the first call is still checked, the second is not
    watch = grading.watched(scripted([(0, 1)] * 2, []), chain_rules, 3, limit=1)
    with pytest.raises(grading.BrokenRule):
        watch([1], P, Q, rng)
    assert watch([1], P, Q, rng) == (0, 1)



@pytest.mark.parametrize("n", [7, 8, 9])
def test_a_broken_call_shows_its_first_eight_uniforms_then_dots(n):
    """The uniforms of a call are written out, the first eight of them, "..." only when it drew
    more."""
    def sampler(drafts, P, Q, rng):
        rng.random(n)
        return 0, 1  # drafts[0] = 1 rejected, then token 1: the residual [0.3, 0] forbids it

    with pytest.raises(grading.BrokenRule) as raised:
        grading.watched(sampler, chain_rules, 3)([1], P, Q, np.random.default_rng(7))
    twin = np.random.default_rng(7).random(n)
    shown = ", ".join(f"{u:.4g}" for u in twin[:8]) + (", ..." if n > 8 else "")
    assert f"  the uniforms your rng gave: [{shown}]\n" in str(raised.value)

@pytest.mark.parametrize("out, rule", [
    ((1, 0), None), ((0, 0), None),
    ((0, 1), "token 1 came back, but q = Q[0][1] = 0.2 <= p = P[0][1] = 0.5"),
    ((2, 0), "n accepted must be in 0 .. K = 1"), ((0, 2), "next token in 0 .. V - 1 = 1")])
def test_the_chain_rules_by_hand(out, rule):
    found = chain_rules([1], P, Q, out)
    assert found is None if rule is None else rule in found
    # drafts [0]: q = 0.8 >= p = 0.5, always kept; the target forbids token 1 after it
    assert "always kept" in chain_rules([0], P, Q, (0, 0))
    assert "which Q[1] gives probability 0" in chain_rules([0], P, np.array([[.8, .2], [1, 0]]),
                                                           (1, 1))
    assert "the target forbids it" in chain_rules([1], P, np.array([[1, 0], [.5, .5]]), (1, 0))


def diagnosis(verdict):
    """The line that says what was wrong, its numbers blanked."""
    lines = str(verdict).splitlines()
    said = next(line for line in lines if re.match(r"\s*(it returned|p-value|\d+ sequences)", line))
    return re.sub(r"[-+.\de]+|\(.*?\)", "#", said)


def test_five_sampler_bugs_get_five_lines_and_their_names():
    """Each names its own mistake, drawn alike on every case: ties toward the draft and the
    inverted ratio draw alike under all-zero uniforms (both keep every draft), not elsewhere."""
    module = EXERCISES["verify_chain"]
    bugs = ["resample_from_target", "ratio_inverted", "ties_toward_draft", "bonus_from_draft",
            "residual_unclipped"]
    verdicts = [module.grade(getattr(module, bug), samples=SAMPLES) for bug in bugs]
    assert len({diagnosis(v) for v in verdicts}) == len(bugs), [diagnosis(v) for v in verdicts]
    for bug, verdict in zip(bugs, verdicts):
        mistake = " ".join(getattr(module, bug).__doc__.split())
        said = f"your answer draws exactly what a known mistake draws on every case: {mistake}"
        assert verdict.evidence.splitlines()[-1] == said, str(verdict)


def test_an_output_graded_mistake_is_named_where_it_returns_a_kept_ones():
    """Written otherwise than the module's kept answer, it returns the same on every case: the
    verdict says which mistake. An answer unlike every kept one, and one that writes into its
    inputs (its outputs match a kept answer's by chance: both fail one case alike), get no
    such line."""
    from picospec.exercises import medusa_buffers

    verdict = medusa_buffers.grade(student_answers.medusa_leaf_to_root)
    mistake = " ".join(medusa_buffers.retrieve_leaf_to_root.__doc__.split())
    said = f"your answer returns what a known mistake returns on every case: {mistake}"
    assert verdict.evidence.splitlines()[-1] == f"  {said}", str(verdict)
    for name, wrong in [("medusa_buffers", "medusa_mask_transposed"),
                        ("typical_accept", "typical_guard_in_place")]:
        verdict = EXERCISES[name].grade(getattr(student_answers, wrong))
        assert not verdict.passed and "known mistake" not in verdict.evidence, str(verdict)


def test_neighbours_tied_by_a_kept_state_are_named_as_such():
    """A verify_chain that returns the call before's answer for equal inputs gives each sequence
    the target's law; the checker's pairs test fails it, and the verdict says what that test saw
    (not "the sequences with the largest gaps", which it did not measure)."""
    from picospec.exercises import verify_chain
    from tests.support.broken_samplers import answer_kept_for_equal_inputs

    verdict = verify_chain.grade(answer_kept_for_equal_inputs, samples=4000)
    assert not verdict.passed
    assert "neighbouring sequences are not independent" in verdict.evidence
    assert "largest gaps" not in verdict.evidence




def test_a_lossless_answer_keeping_fewer_drafts_is_told_so():
    """An answer dropping its bonus token keeps the target's law; graded by law alone (no
    per-call rules, as an exercise without them grades), the checker's kept test fails it, and
    the verdict says what that test saw (not "the sequences with the largest gaps", which it did
    not measure)."""
    verdict = grading.grade_law("verify_chain", student_answers.chain_no_bonus, "chain", 4000)
    assert not verdict.passed
    assert "keeps fewer drafts than the rule" in verdict.evidence, str(verdict)
    assert "largest gaps" not in verdict.evidence, str(verdict)


@pytest.mark.parametrize("name, wrong", [("residual", "residual_cached_by_id"),
                                         ("find_candidates", "candidates_index_kept_by_id")])
def test_an_answer_kept_by_its_object_is_stale_once_refilled(name, wrong):
    """Right on every case given new objects; given the objects of the case before refilled in
    place (a decoding loop appending to its tokens), the answer kept by id() comes back, and the
    verdict says so."""
    verdict = EXERCISES[name].grade(getattr(student_answers, wrong))
    assert verdict.failed == "objects refilled in place", str(verdict)
    assert "given new objects, your function returned the expected answer" in verdict.evidence
    assert "a cache keyed by id()" in verdict.evidence


def test_refilled_calls_give_one_object_per_argument_and_shape():
    """Each list, and each array of one shape, is one object call after call, holding the case's
    values; a function of the values alone passes."""
    seen = []

    def total(x, q, k):
        return sum(x) + float(q.sum()) + k

    def fn(x, q, k):
        seen.append((id(x), id(q), list(x), q.tolist(), k))
        return total(x, q, k)

    cases = [("a", ([1, 2], np.ones(2), 1)), ("b", ([3], np.zeros(2), 2)),
             ("c", ([4, 5, 6], np.ones(3), 3))]

    def same(yours, expected):
        return None if yours == expected else "sum"
    assert grading.refilled_call(fn, total, cases, same) is None
    assert len({x for x, *_ in seen}) == 1 and len({q for _, q, *_ in seen}) == 2
    assert [rest for _, _, *rest in seen] == [[[1, 2], [1, 1], 1], [[3], [0, 0], 2],
                                              [[4, 5, 6], [1, 1, 1], 3]]


@pytest.mark.parametrize("name, wrong, case", [
    ("find_candidates", "candidates_ids_in_a_byte",
     "x=[256, 5, 0], max_ngram_size=1, num_pred_tokens=1"),
    ("trie", "trie_ids_in_a_byte", "sequences=[[256, 1], [0, 1]]")])
def test_ids_a_byte_apart_are_two_tokens(name, wrong, case):
    """0 and 256 are one byte (uint8), two of GPT-2's ids: an answer matching them fails there."""
    verdict = EXERCISES[name].grade(getattr(student_answers, wrong))
    assert f"smallest case that differs ({verdict.failed}): {case}\n" in str(verdict), str(verdict)


def capped(name, cap):
    """The learner's right answer with its length argument (n-gram, drafts, suffix) capped."""
    from tests.support import learner_answers

    return {"ngram": lambda x, n, k: learner_answers.find_candidates(x, min(n, cap), k),
            "drafts": lambda x, n, k: learner_answers.find_candidates(x, n, min(k, cap)),
            "suffix": lambda c, x, m: learner_answers.longest_suffix(c, x, min(m, cap))}[name]


@pytest.mark.parametrize("cap", [3, 4, 5, 6, 7])
@pytest.mark.parametrize("name, kind", [("find_candidates", "ngram"),
                                        ("find_candidates", "drafts"),
                                        ("longest_suffix", "suffix")])
def test_a_length_capped_below_the_longest_case_fails(name, kind, cap):
    """A hard-coded bound on the n-gram, the draft or the suffix, up to 7, fails a case."""
    verdict = EXERCISES[name].grade(capped(kind, cap))
    assert verdict.failed in ("draft", "n"), str(verdict)


def test_a_raise_inside_numpy_names_the_learners_line():
    """NumPy's frames (a compiled _generator.pyx among them) are not the learner's: the line
    named is the learner's call."""
    namespace = {}
    source = ("import numpy as np\n\n\ndef f():\n"
              "    return np.random.default_rng(0).choice(2, p=[1.0])\n")
    exec(compile(source, "mine.py", "exec"), namespace)
    with pytest.raises(ValueError) as raised:
        namespace["f"]()
    assert grading.learners_line(raised.value) == " (at mine.py, line 5)"


def test_the_learners_line_is_theirs_wherever_the_raise_comes_from():
    """A learner's file inside the checkout (outside picospec/) is theirs; a raise inside
    picospec's own code (eagle3.py) or an installed package other than NumPy (scipy) names the
    learner's call, not the package's line."""
    from tests.support.clitools import ROOT

    namespace = {}
    source = ("import scipy.optimize\n\nfrom picospec.eagle3 import draft_vocabulary\n\n\n"
              "def own():\n    return draft_vocabulary([1, 2], 5)\n\n\n"
              "def installed():\n    return scipy.optimize.brentq(lambda x: 1.0, 0.0, 1.0)\n")
    exec(compile(source, str(ROOT / "notebooks" / "mine.py"), "exec"), namespace)
    for name, line in (("own", 7), ("installed", 11)):
        with pytest.raises(ValueError) as raised:
            namespace[name]()
        assert grading.learners_line(raised.value) == f" (at mine.py, line {line})", name


@pytest.mark.parametrize("name, kind, asked", [
    ("trie", "coroutine (an async def's call)", "tuple"),
    ("find_candidates", "generator (a function with yield)", "list")])
def test_an_async_def_or_a_yield_is_told_to_return_its_value(name, kind, asked):
    """An async def's call is a coroutine and a function with yield a generator: never run, each
    is named for what it is and closed (no "never awaited" warning), and a second call's new
    object is no sign of state kept between calls."""
    import gc
    import warnings

    def answer(*args):
        yield []

    async def coroutine(*args):
        return [], [], []

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        verdict = EXERCISES[name].grade(coroutine if name == "trie" else answer)
        gc.collect()
    assert verdict.failed == f"what it returns: a {kind}, not a {asked}: return the {asked}"
    assert "keeps state" not in verdict.evidence, str(verdict)
    assert re.fullmatch(r"  yours:    <(coroutine|generator) object .+ at 0x[0-9a-f]+>",
                        verdict.evidence.splitlines()[-1]), str(verdict)
    assert not [w for w in caught if "never awaited" in str(w.message)], caught


@pytest.mark.parametrize("name", ["verify_chain", "verify_without_replacement", "draft_law"])
def test_an_answer_that_always_raises_fails_at_its_first_case_saying_so(name):
    """Every check before the law (what it returns, randomness outside rng) leaves a raise to the
    battery: the first case fails on it, named with the error, and no line blames the rng."""
    def answer(*args):
        raise ValueError("not today")

    verdict = EXERCISES[name].grade(answer, samples=SAMPLES)
    assert not verdict.passed and verdict.failed.startswith("case "), str(verdict)
    assert "raised ValueError: not today" in verdict.evidence, str(verdict)
    assert "ignores the rng" not in verdict.evidence and "known mistake" not in verdict.evidence


def test_an_answer_that_raises_once_given_a_refilled_object_fails():
    """Right on new objects, it raises when handed a list it has seen before holding other values
    (as a decoding loop hands it its tokens again, refilled): that call fails, and the verdict
    shows the raise."""
    from tests.support import learner_answers

    seen = {}  # id: (the list itself, so that no id is freed and reused; its values then)

    def find_candidates(x, max_ngram_size=3, num_pred_tokens=10):
        if id(x) in seen and x != seen[id(x)][1]:
            raise RuntimeError("this list again")
        seen[id(x)] = (x, list(x))
        return learner_answers.find_candidates(x, max_ngram_size, num_pred_tokens)

    module = EXERCISES["find_candidates"]
    verdict = module.grade(find_candidates)
    assert not verdict.passed and verdict.failed == "objects refilled in place", str(verdict)
    # the first case whose tokens differ from the first case's: the list it is handed is the
    # first case's, refilled
    cases = module.cases()
    label, args = next((label, args) for label, args in cases if args[0] != cases[0][1][0])
    assert verdict.evidence.startswith(
        f"smallest case that differs (objects refilled in place): {label}\n  expected: "
        f"{grading.show(module.reference(*args))}\n  yours:    raised RuntimeError: this list "
        f"again"), str(verdict)


def test_a_raise_graded_by_law_alone_is_named_as_the_contracts_break():
    """Graded by law alone (no per-call rules, as an exercise without them grades), a raise is
    the checker's error verdict: the first case fails, saying the function raised."""
    def answer(drafts, P, Q, rng):
        raise ValueError("not today")

    verdict = grading.grade_law("verify_chain", answer, "chain", SAMPLES)
    assert not verdict.passed and verdict.failed.startswith("case "), str(verdict)
    assert "your function raised or broke the contract: " in verdict.evidence, str(verdict)
    assert "not today" in verdict.evidence, str(verdict)
    assert "checked one by one" not in verdict.checked, str(verdict)


@pytest.mark.parametrize("name", ["verify_chain", "verify_without_replacement"])
def test_a_right_answer_saying_where_its_token_came_from_passes(name):
    """picospec's own samplers return a third part, where the token came from ("bonus",
    "resample"): a right answer that does so too passes."""
    from tests.support import learner_answers

    def answer(*args):
        return (*getattr(learner_answers, name)(*args), "resample")

    verdict = EXERCISES[name].grade(answer, samples=fewest(EXERCISES[name]))
    assert verdict.passed, str(verdict)


def test_a_pass_states_the_smallest_p_value_of_its_cases():
    """The p-value and the power a pass states are the smallest p-value and the largest tv90 of
    the law cases' own, each case run alone through the checker with the grading's seeds (the
    support cases have neither)."""
    from picospec.check.battery import cases_of, check_case

    from tests.support import learner_answers

    fn = learner_answers.verify_chain
    verdict = EXERCISES["verify_chain"].grade(fn, samples=SAMPLES)
    results = [check_case(fn, "chain", case, SAMPLES, (0, i))
               for i, case in cases_of("chain") if not case.support]
    p_values, tv90 = [r.p_value for r in results], max(r.tv90 for r in results)
    assert verdict.passed and f"(smallest p-value {min(p_values):.3g};" in verdict.evidence
    # the power stated is the weakest case's: the largest error any one case may miss
    assert f"catches any error of total variation >= {tv90:.3f} with" in verdict.checked
    n_cases = len(cases_of("chain"))
    assert verdict.evidence.startswith(f"all {n_cases} cases passed (smallest p-value")
    assert "each case's first 1,000 calls checked one by one" in verdict.checked


def test_the_refilled_calls_are_stated_only_where_an_argument_is_a_list_or_array():
    """find_candidates takes a list of tokens: its pass says the calls were made again on
    refilled objects; expected_tokens takes numbers only, and its pass does not."""
    from tests.support import learner_answers

    said = ", then again on one list or array per argument refilled in place"
    dirty = "; the 50 smallest again on memory left holding NaN"
    lists = EXERCISES["find_candidates"].grade(learner_answers.find_candidates)
    numbers = EXERCISES["expected_tokens"].grade(learner_answers.expected_tokens)
    assert lists.passed and lists.checked.endswith(f"smallest first{said}{dirty}"), str(lists)
    assert numbers.passed and numbers.checked.endswith(f"smallest first{dirty}"), str(numbers)


def test_expected_tokens_reference_holds_to_half_the_tolerance_on_every_case():
    """The closed form the grader holds answers to, against -expm1((K + 1) log1p(-d)) / d, d = 1 -
    alpha (each step within a few ulps): cases near alpha = 1 are kept only where the closed form
    is good."""
    import math

    exercise = EXERCISES["expected_tokens"]
    for shown, (alpha, K) in exercise.cases():
        d = 1 - float(alpha)
        if d == 0 or d > 0.5:  # no cancellation in 1 - alpha^(K + 1) past 1/2
            stable = K + 1.0 if d == 0 else (1 - float(alpha) ** (K + 1)) / d
        else:
            stable = -math.expm1((K + 1) * math.log1p(-d)) / d
        tol = 1e-9 + 1e-9 * stable
        assert abs(exercise.reference(alpha, K) - stable) < tol / 2, shown


def test_a_kept_mistake_is_named_only_when_it_agrees_on_every_case():
    """returns_as by hand: the kept answer agreeing on every case is named, past one that raises;
    one agreeing on some cases only is not, nor is any when the learner's answer raises."""
    cases = [("a", (1,)), ("b", (2,)), ("c", (3,))]

    def same(yours, expected):
        return None if yours == expected else "value"

    def doubled(x):
        return x + x

    def raises(x):
        raise ValueError("kept, but raises")

    def agrees_once(x):
        return 2 if x == 1 else -1

    def yours(x):
        return 2 * x

    assert grading.returns_as(yours, (raises, agrees_once, doubled), cases, same) is doubled
    assert grading.returns_as(yours, (agrees_once,), cases, same) is None
    assert grading.returns_as(lambda x: 2 // (x - 2), (doubled,), cases, same) is None


@pytest.mark.parametrize("value, shown", [
    (np.array([0.123456, 2.0]), "[0.1235, 2.0]"), (np.array([[True, False]]), "[[1, 0]]"),
    (np.array(["a", "b"]), "['a', 'b']"), (np.float64(0.5), "0.5"), (np.int64(3), "3"),
    ((np.array([1, 2]), [np.int32(0)]), "([1, 2], [0])"), ({"mask": np.zeros(1)}, "{mask: [0.0]}")])
def test_a_value_is_shown_on_one_line_as_python_writes_it(value, shown):
    """Floats of an array to 4 decimals, booleans as 0 and 1, text as it is, NumPy scalars as
    Python's, tuples, lists and dicts part by part."""
    assert grading.show(value) == shown


def test_an_answer_raising_when_called_again_gets_no_second_call_line():
    """Its first calls return a wrong answer, the later ones raise (a state used up): the case
    fails on what it returned, and the call again, which raised, adds no line."""
    calls = []

    def trie(sequences):
        calls.append(sequences)
        if len(calls) > 2:  # the stub check's call, then the first case's
            raise IndexError("pop from empty list")
        return [], [], []

    verdict = EXERCISES["trie"].grade(trie)
    assert not verdict.passed and len(calls) == 3, str(verdict)  # and the call again
    assert verdict.evidence.endswith("\n  yours:    ([], [], [])"), str(verdict)


@pytest.mark.parametrize("yours, expected, differs", [
    ([5e-9], [0.0], "values"), ([0.0], [5e-9], "values"), ([1.0 + 5e-9], [1.0], "values"),
    ([5e-10], [0.0], None), ([1.0 + 5e-10], [1.0], None), ([2.0, 3.0], [2.0, 3.0], None)])
def test_arrays_agree_within_1e_9_and_no_further(yours, expected, differs):
    """same_array's tolerance is 1e-9, absolute near 0 and relative elsewhere: 5e-9 apart is a
    difference, 5e-10 apart is not."""
    assert grading.same_array(np.array(yours), np.array(expected)) == differs


def test_a_call_returning_what_no_rule_can_read_is_told_so():
    """Right on the battery, it returns None for its next token on a call of twenty drafts: the
    rules cannot read it, and the verdict says it is not what the statement asks."""
    from tests.support import learner_answers

    def verify_chain(drafts, P, Q, rng):
        if len(drafts) == 20:
            return 20, None
        return learner_answers.verify_chain(drafts, P, Q, rng)

    module = EXERCISES["verify_chain"]
    verdict = module.grade(verify_chain, samples=fewest(module))
    assert not verdict.passed and verdict.failed == "twenty drafts", str(verdict)
    assert verdict.evidence.endswith(
        "it returned (20, None): not what the statement asks the function to return")


def test_a_call_past_the_battery_that_writes_into_q_is_told_so():
    """Right on the battery, it zeroes Q's last row on a call of twenty drafts: the verdict
    names Q as changed, and the grader's own twenty-draft call is left as it was for the next
    answer."""
    from tests.support import learner_answers

    def verify_chain(drafts, P, Q, rng):
        out = learner_answers.verify_chain(drafts, P, Q, rng)
        if len(drafts) == 20:
            Q[-1] = 0
        return out

    module = EXERCISES["verify_chain"]
    verdict = module.grade(verify_chain, samples=fewest(module))
    assert not verdict.passed and verdict.failed == "twenty drafts", str(verdict)
    assert verdict.evidence.endswith("Q changed: an answer must leave its inputs as they were")
    # the write stayed in the call's own copy: a right answer graded next still passes
    right = module.grade(learner_answers.verify_chain, samples=fewest(module))
    assert right.passed, str(right)


def test_a_law_failure_graded_by_law_alone_shows_its_gaps():
    """A rejected draft replaced from the target itself, graded by law alone: its first failing
    case is a law case, told by its p-value and the sequences with the largest gaps, not by the
    support cases' all-zero or all-near-one uniforms."""
    from picospec.check.exact_law import ALPHA
    from picospec.exercises import verify_chain

    verdict = grading.grade_law("verify_chain", verify_chain.resample_from_target, "chain",
                                SAMPLES)
    assert not verdict.passed, str(verdict)
    assert re.search(rf"\np-value \S+ < {re.escape(f'{ALPHA:g}')}: the law of what you sampled "
                     r"differs from the exact one; sequences \(new tokens\) with the largest "
                     r"gaps:\n  \(", verdict.evidence), str(verdict)
    assert "every uniform your rng gave" not in verdict.evidence, str(verdict)


def test_a_kept_mistake_agreeing_only_on_the_failing_case_is_not_named():
    """same_mistake compares the failing case first, then every other: a sampler that is the
    kept mistake on the V = 5 case alone and right elsewhere is not that mistake."""
    from picospec.verify import verify_chain

    kept = EXERCISES["verify_chain"].resample_from_target
    [(first, _)] = [(i, c) for i, c in grading.cases_of("chain") if c.V == 5]

    def there_only(drafts, P, Q, rng):
        return (kept if len(Q[0]) == 5 else verify_chain)(drafts, P, Q, rng)

    wrong = EXERCISES["verify_chain"].WRONG
    assert grading.same_mistake(there_only, wrong, "chain", 0, first=first) is None
    assert grading.same_mistake(kept, wrong, "chain", 0, first=first) is kept


def test_same_mistake_compares_every_case_at_its_full_count(monkeypatch):
    """Each case is compared at GLANCE sequences, then at the full count: an answer whose first
    sequences are a kept mistake's on every case, and whose later ones are right, is not it."""
    from picospec.verify import verify_chain

    kept, drawn = EXERCISES["verify_chain"].resample_from_target, grading.sequences

    def glanced(fn, contract, case, n, seed, battery):  # the kept mistake's at a glance only
        return drawn(kept if fn is verify_chain and n <= grading.GLANCE else fn, contract, case,
                     n, seed, battery)
    monkeypatch.setattr(grading, "sequences", glanced)
    assert grading.same_mistake(verify_chain, [kept], "chain", 0) is None
    assert grading.same_mistake(kept, [kept], "chain", 0) is kept


def test_a_control_caught_by_a_support_case_alone_leaves_the_run_without_a_verdict():
    """The grader judges its broken samplers on the law cases only, as the checker's run_controls
    does: in a battery of a support case and a law case, the control that only the support case
    catches (its forbidden tokens, not a law) counts as missed, and the grading has no verdict."""
    from picospec.check.battery import cases_of, first_catch, run_controls
    from picospec.check.controls import CONTROLS

    from tests.support import learner_answers

    chain = cases_of("chain")
    support = next((i, case) for i, case in chain if case.support)
    named = {control.__name__: control for control in CONTROLS["chain"]}
    missed, caught = named["bonus_from_draft"], named["resample_from_target"]
    assert first_catch(missed, "chain", [support], SAMPLES, 0) is not None
    law = next((i, case) for i, case in chain if not case.support
               and first_catch(missed, "chain", [(i, case)], SAMPLES, 0) is None
               and first_catch(caught, "chain", [(i, case)], SAMPLES, 0) is not None)

    class Battery(grading.Battery):  # hashed by identity, as a cache key: the cases hold dicts
        __hash__ = object.__hash__

    battery = Battery("a support case and a law case", (support, law))
    said = grading.controls("chain", SAMPLES, 0, battery)
    assert dict(said) == {caught.__name__: f"{law[0]}. {law[1].name}", missed.__name__: None}
    assert said == run_controls("chain", SAMPLES, 0, [support[0], law[0]])
    verdict = grading.grade_law("verify_chain", learner_answers.verify_chain, "chain", SAMPLES,
                                battery=battery)
    assert not verdict.passed and verdict.failed == "no verdict", str(verdict)
    assert f"the broken sampler {missed.__name__} passed every case" in verdict.evidence


def test_values_apart_only_past_the_rounding_are_shown_in_full():
    """A law 2.3e-5 off, or one dropping a share of 1.5e-17: rounded to 4 digits, "expected" and
    "yours" would read the same; they are shown in full instead."""
    from picospec.exercises import grade
    from picospec.sampling import residual

    def off(q, p):
        r = residual(q, p)
        r[np.argmax(r)] *= 1 + 2.3e-5
        return r
    evidence = grade("residual", off).evidence.splitlines()
    expected, yours = (line.split(":", 1)[1].strip() for line in evidence[1:3])
    assert evidence[1].lstrip().startswith("expected:") and expected != yours, evidence


def test_a_uniform_is_never_shown_as_1():
    """rng.random() is below 1: one a hair below is written in full, not rounded to 1."""
    from picospec.exercises.grading import written

    line = written(1, ([0], np.eye(2), np.eye(2)), [0.5, 1 - 2**-53], "")
    assert "the uniforms your rng gave: [0.5, 0.9999999999999999]" in line, line

