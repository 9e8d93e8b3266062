"""Toy models for the statistical tests: exact conditional tables over a vocabulary of a few tokens.

A toy model follows the model contract, model(x, n=1) -> probs [n, V]; its next-token distribution
depends on the last two tokens (a table of V*V rows), so whole-sequence laws are non-trivial and
cheap to compute exactly.
"""
import numpy as np

# the public toys; ToyTree is the tests' own
from picospec.check.exact_law import Toy, perturbed, random_toy  # noqa: F401
from picospec.tree import ancestor_mask


class ToyTree(Toy):
    """A toy model with the engine's tree interface: tree(x, tokens, parents) scores every node's
    path exactly."""

    def tree(self, x, tokens, parents, hidden=False, probs=False):
        self.calls += 1
        rows = [self(list(x))[-1]]
        for i in range(len(tokens)):
            path, node = [], i
            while node >= 0:
                path.append(tokens[node])
                node = parents[node]
            rows.append(self(list(x) + path[::-1])[-1])
        out = np.stack(rows)
        return out if probs else np.log(np.maximum(out, 1e-300))

    def accept(self, path):
        pass

    def reset(self):
        pass


def random_toy_tree(V, seed, concentration=1.0, zeros=0.0):
    return ToyTree(random_toy(V, seed, concentration, zeros).table)


class Toy1(Toy):
    """Toy (the same law), with the one-row call the tree methods make taken directly from the
    table."""

    def __call__(self, x, n=1):
        if n > 1:
            return super().__call__(x, n)
        self.calls += 1
        return self.table[x[-2] if len(x) >= 2 else 0, x[-1]][None].copy()  # [1, V]


class MaskedToyTree(Toy1):
    """A toy with the engine's tree interface whose rows depend on the mask it is given: node i's
    row is the toy's law after x followed by the nodes row i of mask(parents) lets it see, in node
    order. With picospec.tree.ancestor_mask that is x + the node's path, the right context; a mask
    that shows a node its siblings gives wrong rows."""

    def __init__(self, table, mask=ancestor_mask):
        super().__init__(table)
        self.mask = mask

    def tree(self, x, tokens, parents, hidden=False, probs=False):
        self.calls += 1
        mask = self.mask(parents)  # [m, m]
        rows = [self.table[x[-2] if len(x) >= 2 else 0, x[-1]]]
        for i in range(len(tokens)):
            seen = list(x[-2:]) + [tokens[j] for j in range(len(tokens)) if mask[i, j]]
            rows.append(self.table[seen[-2], seen[-1]])
        return np.stack(rows) if probs else np.log(np.maximum(np.stack(rows), 1e-300))

    def accept(self, path):
        pass

    def reset(self):
        pass


# broken: every node also sees the nodes before it (the "regular" causal mask)
def sibling_mask(parents):
    return np.tril(np.ones((len(parents), len(parents)), dtype=bool))
