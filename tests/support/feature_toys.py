"""Models with features for EAGLE's contract: a toy target whose feature at a position is the
one-hot of its token, a toy draft that reads those features, and a random GPT-2 engine with a random
EAGLE head."""
import numpy as np

from gpt2.eagle import EagleHead
from gpt2.engine import GPT2

from tests.support.micro import random_gpt2, random_head
from tests.support.toy import ToyTree, random_toy


def engine_and_head(seed):
    hparams, params = random_gpt2(n_vocab=12, n_ctx=64, n_embd=16, n_head=2, n_layer=2, seed=seed,
                                  scale=0.5)
    head_params, config = random_head(C=16, seed=seed)
    return GPT2(hparams, params), EagleHead(head_params, config, params["wte"], 128)


class ToyTarget(ToyTree):
    """A toy target with features: the feature at a position is the one-hot of its token (so F can
    be checked)."""

    def logits(self, x, n=1, hidden=False):
        out = np.log(np.maximum(self(x, n), 1e-300))
        return (out, np.eye(self.n_vocab)[x[-n:]]) if hidden else out

    def tree(self, x, tokens, parents, hidden=False, probs=False):
        out = super().tree(x, tokens, parents, probs=probs)
        return (out, np.eye(self.n_vocab)[[x[-1]] + list(tokens)]) if hidden else out


class ToyDraft:
    """The draft contract on a toy table: law after (second-to-last, last) token of each path; it
    reads the second-to-last token of x from the features, which must be the target's (one-hot)
    features of x."""

    def __init__(self, table):
        self.table, self.calls = table, 0

    def __call__(self, x, F, tokens=(), parents=()):
        self.calls += 1
        assert len(F) == len(x) - 1 and all(int(np.argmax(f)) == t for f,
                                            t in zip(F, x)), "wrong features"
        rows = [self.table[int(np.argmax(F[-1])), x[-1]]]
        for i in range(len(tokens)):
            path, node = [], i
            while node >= 0:
                path.append(tokens[node])
                node = parents[node]
            seq = list(x) + path[::-1]
            rows.append(self.table[seq[-2], seq[-1]])
        return np.log(np.maximum(np.stack(rows), 1e-300))


def toy_pair():
    """The exact-law tests' pair: a 3-token toy target, and a draft half-way to another toy."""
    target = ToyTarget(random_toy(3, seed=11).table)
    return target, ToyDraft(0.5 * target.table + 0.5 * random_toy(3, seed=12).table)
