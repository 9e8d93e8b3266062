"""Models with features for EAGLE's contract: a toy target whose feature at a position is the
one-hot of its token, a toy draft that reads those features (and its EAGLE-3 form over a draft
vocabulary), and a random GPT-2 engine with a random EAGLE or EAGLE-3 head."""
import numpy as np

from gpt2.backend import tree_map
from gpt2.eagle import EagleHead
from gpt2.eagle3 import Eagle3Head, init_eagle3
from gpt2.engine import GPT2

from tests.support.micro import random_gpt2, random_head
from tests.support.toy import ToyTree, random_toy


def engine_and_head(seed):
    hparams, params = random_gpt2(n_vocab=12, n_ctx=64, n_embd=16, n_head=2, n_layer=2, seed=seed,
                                  scale=0.5)
    head_params, config = random_head(C=16, seed=seed)
    engine = GPT2(hparams, params, threads=1)
    return engine, EagleHead(head_params, config, params["wte"], 128,
                             threads=engine.plan.threads)


def engine_and_eagle3_head(seed, V_d=7, ops=None, n_vocab=12):
    """A random 3-block GPT-2 and a random EAGLE-3 head over V_d of its n_vocab tokens (d2t in no
    order), reading blocks 0, 1, 2."""
    hparams, params = random_gpt2(n_vocab=n_vocab, n_ctx=64, n_embd=16, n_head=2, n_layer=3,
                                  seed=seed, scale=0.5)
    rng = np.random.default_rng(seed + 100)
    d2t = rng.permutation(n_vocab)[:V_d]  # [V_d]
    head, config = init_eagle3(16, 2, d2t, (0, 1, 2), params["wte"], params["ln_f"], rng)
    head = {k: v if k == "d2t" else tree_map(
        lambda a: (a + 0.3 * rng.standard_normal(a.shape)).astype(np.float32), v)
        for k, v in head.items()}
    engine = GPT2(hparams, params, ops=ops, threads=1)
    return engine, Eagle3Head(head, config, params["wte"], 128,
                              threads=engine.plan.threads)


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


class ToyEagle3(ToyDraft):
    """ToyDraft over a draft vocabulary: logits [1 + m, V_d] of the tokens d2t; it reads the
    target's features (one-hot) as asked at `layers`."""

    def __init__(self, table, d2t):
        super().__init__(table)
        self.d2t, self.layers = np.asarray(d2t), (0,)

    def __call__(self, x, F, tokens=(), parents=()):
        return super().__call__(x, F, tokens, parents)[:, self.d2t]


def toy_eagle3_pair(d2t=(2, 0)):
    """toy_pair's target, and its draft over the tokens d2t only (token 1 outside by default)."""
    target, draft = toy_pair()
    return target, ToyEagle3(draft.table, d2t)
