"""Toy models for the statistical tests: exact conditional tables over a vocabulary of a few tokens.

A toy model follows the model contract, model(x, n=1) -> probs [n, V]; its next-token distribution depends on the
last two tokens (a table of V*V rows), so whole-sequence laws are non-trivial and cheap to compute exactly.
"""
import numpy as np


class Toy:
    def __init__(self, table):
        self.table = np.asarray(table, dtype=np.float64)  # [V, V, V]: (second-to-last, last) -> next-token law
        self.n_vocab = self.table.shape[-1]
        self.calls = 0

    def __call__(self, x, n=1):
        self.calls += 1
        return np.stack([self.table[x[i - 2] if i >= 2 else 0, x[i - 1]] for i in range(len(x) - n + 1, len(x) + 1)])


def random_toy(V, seed, concentration=1.0, zeros=0.0):
    """Dirichlet rows; with `zeros` > 0 that share of entries is set to 0 (each row keeps at least one token)."""
    rng = np.random.default_rng(seed)
    table = rng.dirichlet(np.full(V, concentration), size=(V, V))
    if zeros:
        mask = rng.random(table.shape) < zeros
        mask[..., rng.integers(0, V)] = False
        table = np.where(mask, 0, table)
        table /= table.sum(-1, keepdims=True)
    return Toy(table)


def perturbed(model, eps, seed):
    """A draft near the target: mix each row with a random one (eps = 0 gives the same model)."""
    other = random_toy(model.n_vocab, seed).table
    return Toy((1 - eps) * model.table + eps * other)


class ToyTree(Toy):
    """A toy model with the engine's tree interface: tree(x, tokens, parents) scores every node's path exactly."""

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
