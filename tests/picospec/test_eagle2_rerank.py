"""EAGLE-2's rerank by hand: the nodes of highest value, kept in drafted order and re-indexed."""

import numpy as np

from gpt2.load import ASSETS

FAST = 3.0  # seconds: a mistake in the options is refused before any model loads
TARGET = ASSETS / "tiny-target"


def test_eagle2_rerank_worked_example():
    """Nodes (token, parent, value = cumulative draft probability):
        0: (10, root, .5)   1: (11, root, .2)   2: (12, 0, .45)   3: (13, 1, .1)   4: (14, 0, .3)
    total_tokens 3 keeps the three of highest value, 0 (.5), 2 (.45), 4 (.3), in drafted order and
    re-indexed: tokens [10, 12, 14], parents [-1, 0, 0]. total_tokens 4 adds node 1 (.2), which
    comes before node 2 in drafted order: tokens [10, 11, 12, 14], parents [-1, -1, 0, 0] (value
    order would give [10, 12, 14, 11]). Ties go to the node drafted first: values .5, .3, .3
    (nodes 1 and 2) with total_tokens 2 keep nodes 0 and 1."""
    from picospec.eagle2 import rerank

    tokens, parents = [10, 11, 12, 13, 14], [-1, -1, 0, 1, 0]
    values = list(np.log([0.5, 0.2, 0.45, 0.1, 0.3]))
    kept = rerank(tokens, parents, values, 3)
    assert kept[:2] == ([10, 12, 14], [-1, 0, 0])
    np.testing.assert_allclose(np.exp(kept[2]), [0.5, 0.45, 0.3])
    kept = rerank(tokens, parents, values, 4)
    assert kept[:2] == ([10, 11, 12, 14], [-1, -1, 0, 0])
    np.testing.assert_allclose(np.exp(kept[2]), [0.5, 0.2, 0.45, 0.3])
    tie = rerank([10, 11, 12], [-1, -1, 0], list(np.log([0.5, 0.3, 0.3])), 2)
    assert tie[:2] == ([10, 11], [-1, -1])
    assert rerank(tokens, parents, values, 9)[:2] == (tokens, parents)  # room for every node
