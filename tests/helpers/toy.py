"""Toy models for the statistical tests: exact conditional tables over a vocabulary of a few tokens.

A toy model follows the model contract, model(x, n=1) -> probs [n, V]; its next-token distribution
depends on the last two tokens (a table of V*V rows), so whole-sequence laws are non-trivial and
cheap to compute exactly.
"""
import numpy as np

# the public toys; ToyTree is the tests' own
from picospec.check.exact_law import Toy, perturbed, random_toy  # noqa: F401


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
