"""Exercises a learner solves, each graded by its law through the exact-law checker or against
picospec's own function, with the smallest case that shows a mistake: `python -m
picospec.exercises --help`, notebooks/exercises.ipynb. One module per exercise: STATEMENT, STUB,
ANSWER, grade(fn, samples, seed) -> Verdict, and WRONG, plausible wrong answers it rejects."""
from picospec.exercises import (expected_tokens, find_candidates, longest_suffix, lookahead_mask,
                                medusa_buffers, predicted_speedup, residual, trie, typical_accept,
                                verify_chain, verify_without_replacement)

EXERCISES = {m.NAME: m for m in (residual, verify_chain, medusa_buffers, typical_accept,
                                 verify_without_replacement, find_candidates, longest_suffix, trie,
                                 lookahead_mask, expected_tokens, predicted_speedup)}


def grade(name, fn, samples=20_000, seed=0):
    """The exercise `name` graded on the learner's function fn -> Verdict (print it)."""
    return EXERCISES[name].grade(fn, samples=samples, seed=seed)
