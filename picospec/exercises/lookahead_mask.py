"""Exercise: lookahead decoding's window mask (Fu et al. 2024, arXiv:2402.02057, section 3).
W columns, L = ngram - 1 levels."""
import numpy as np

from picospec.exercises.grading import grade_cases, named, same_array
from picospec.lookahead import attention_mask, lookahead_tree

NAME, FAMILY = "lookahead_mask", "lookahead and self-drafting"
STATEMENT = """\
**Exercise `lookahead_mask(W, L)`: which window tokens each window token sees.** Lookahead decoding
keeps a window of L levels of W guesses; the target reads them all in one forward pass after the
prefix. Number the window's tokens level by level: token (l, i) (level l < L, column i < W) is row
l * W + i. Token (0, i) continues the text: it sees (0, 0) .. (0, i). Token (l, i) of a deeper level
is the Jacobi iteration's next guess in column i: it sees what (l - 1, i) sees, and itself. Return
the mask, a NumPy bool array [W * L, W * L]: mask[a, b] when token a sees token b (the prefix, seen
by all, is not in it). Example: W = 2, L = 2 -> rows [1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0],
[1, 1, 0, 1]."""
STUB = '''def lookahead_mask(W, L):
    """-> bool [W * L, W * L]: row l * W + i is window token (l, i)."""
    raise NotImplementedError'''
ANSWER = '''from picospec.lookahead import attention_mask, lookahead_tree


def lookahead_mask(W, L):  # the project's answer: the window as a tree, its ancestor mask
    tokens, parents, _ = lookahead_tree([[0] * W for _ in range(L)], [])
    return attention_mask(parents)'''


def reference(W, L):
    return attention_mask(lookahead_tree([[0] * W for _ in range(L)], [])[1])


def cases(seed=None):
    """Every window of 1 to 5 columns and 1 to 4 levels, and ten larger, smallest first."""
    # 11 columns (column 10 read as text sorts before 2), 260 rows (past 8 bits), 130 columns
    # (past a signed byte); 130 and 257 levels (levels in a signed or unsigned byte), 257
    # columns; 1,100 levels (a recursion one level a call passes Python's limit); 2,050 rows
    # (past float16's whole numbers, which end at 2,048); two levels of every width up to 64 (a
    # level found as row * (1 / W) rounds below a whole number at W = 41, 47, 49, 55, 61)
    sizes = sorted([(W, L) for W in range(1, 6) for L in range(1, 5)]
                   + [(W, 2) for W in range(6, 65)]
                   + [(3, 7), (7, 5), (11, 1), (65, 4), (130, 2), (1, 130), (1, 257), (257, 1),
                      (1, 1_100), (5, 410)],
                   key=lambda s: (s[0] * s[1], s))
    return [(f"W={W}, L={L}", (W, L)) for W, L in sizes]


def compare(yours, expected):
    return named("mask", same_array(yours, expected))


def grade(fn, samples=None, seed=0):
    return grade_cases(NAME, fn, reference, cases(), compare,
                       "picospec.lookahead.attention_mask of the window's tree", known=WRONG)


# WRONG: plausible mistakes, each one the grader rejects
def causal(W, L):
    """A plain causal mask, every earlier window token seen."""
    return np.tril(np.ones((W * L, W * L), dtype=bool))


def column_only(W, L):
    """Each token sees its own column only (level 0 is not a chain)."""
    column = np.arange(W * L) % W  # [W * L]
    level = np.arange(W * L) // W  # [W * L]
    return (column[:, None] == column[None, :]) & (level[None, :] <= level[:, None])


def every_earlier_level(W, L):
    """(l, i) sees every (l', j) with l' <= l and j <= i: other columns' guesses too."""
    column, level = np.arange(W * L) % W, np.arange(W * L) // W  # [W * L] each
    return (column[None, :] <= column[:, None]) & (level[None, :] <= level[:, None])


WRONG = (causal, column_only, every_earlier_level)
