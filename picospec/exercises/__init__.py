"""Exercises a learner solves, each graded by its law (the exact-law checker) or against picospec's
own function: `python -m picospec.exercises --help`. A module per exercise: STATEMENT, STUB, ANSWER
(the project's), grade(fn, samples, seed) -> Verdict, and WRONG answers it rejects."""
from picospec.exercises import (draft_law, expected_tokens, find_candidates, longest_suffix,
                                lookahead_mask, medusa_buffers, predicted_speedup, residual, trie,
                                typical_accept, verify_chain, verify_without_replacement)

EXERCISES = {m.NAME: m for m in (residual, verify_chain, medusa_buffers, typical_accept,
                                 verify_without_replacement, draft_law, find_candidates,
                                 longest_suffix, trie, lookahead_mask, expected_tokens,
                                 predicted_speedup)}


def grade(name, fn, samples=20_000, seed=0):
    """Exercise `name` graded on the learner's function fn -> Verdict."""
    return EXERCISES[name].grade(fn, samples=samples, seed=seed)
