"""Every method's step record against what actually happened, not only its tokens.

A recording target writes down what each call was asked to score: a chain of drafts (model(x, n):
the last n - 1 tokens of x), a tree (model.tree(x, tokens, parents)) or nothing yet (model.logits, a
tree method's prefill). From that and the step's new tokens the origins follow:

    the tokens marked "draft" are a path of the tree, read from its root along the new tokens;
    the token after them is never a child of the path's last node (a child that was rejected has no
    mass left in the residual norm(max(0, q - p)), and at temperature 0 a child that matched would
    have been kept); so it is a "bonus" when that node is a leaf (nothing was left to reject) and a
    "resample" otherwise.

drafted must be the tree's depth (a chain's length), nodes its size, accepted the number of drafts,
calls 1. The same check covers chains and trees, sampling and greedy; Blockwise (p_1's own token
first, then the heads' kept proposals), autoregressive decoding (every token the target's) and the
self-drafting methods' first token (the target's own) have their own. Medusa's typical and nucleus
posteriors are lossy and keep a path by threshold, so only greedy and lossless Medusa are checked
here. A row of picospec/methods.py with no run below fails the test.
"""
import numpy as np
import pytest

from gpt2.engine import GPT2
from picospec.autoregressive import autoregressive_sampling
from picospec.blockwise import blockwise_decoding
from picospec.greedy import greedy_decoding
from picospec.lookahead import lookahead_decoding
from picospec.medusa import medusa_decoding
from picospec.methods import TABLE
from picospec.prompt_lookup import prompt_lookup_decoding
from picospec.rest import Datastore, rest_decoding
from picospec.speculative import speculative_sampling
from picospec.tree import children, depth
from picospec.verify import verify_chain

from tests.support.micro import model_and_heads
from tests.support.micro import random_gpt2
from tests.support.micro import random_heads
from tests.support.toy import perturbed, random_toy, random_toy_tree
from tests.support.trees import TREES


class Recorder:
    """A target that notes what it scores: (tokens, parents) of the chain or tree after the prefix,
    per call."""

    def __init__(self, model):
        self.model, self.asked = model, []
        self.n_vocab = getattr(model, "n_vocab", None)

    def chain(self, x, n):
        drafts = list(x[len(x) - n + 1:])
        self.asked.append((list(x[:len(x) - n + 1]), drafts, list(range(-1, len(drafts) - 1))))

    def __call__(self, x, n=1):
        self.chain(x, n)
        return self.model(x, n)

    def logits(self, x, n=1, **kw):  # the prefill of a tree method: nothing drafted yet
        self.asked.append((list(x), [], []))
        return self.model.logits(x, n, **kw)

    def tree(self, x, tokens, parents, **kw):
        self.asked.append((list(x), list(tokens), list(parents)))
        return self.model.tree(x, tokens, parents, **kw)

    def accept(self, path):
        self.model.accept(path)


def what_happened(tokens, parents, new):
    """The origins of `new` after verifying the tree (tokens, parents): see the module docstring."""
    kids, node = children(parents), -1
    for t in new[:-1]:
        node = next((c for c in kids[node] if tokens[c] == t), None)
        assert node is not None, (f"{new} marks a token as drafted that is not on a path of the "
                                  f"tree {tokens, parents}")
    assert all(tokens[c] != new[-1]
               for c in kids[node]), f"{new}: the last token is a child that was not kept"
    return ["draft"] * (len(new) - 1) + ["bonus" if not kids[node] else "resample"]


def check_records(stats, asked, branch=lambda x, tokens, parents: (tokens, parents)):
    """Each record against the call that scored its step; branch(x, tokens, parents) -> the part
    that was verified. -> the origins seen, for the caller to check that every kind happened."""
    assert len(stats) == len(asked)
    seen = set()
    for record, (x, tokens, parents) in zip(stats, asked):
        tokens, parents = branch(x, tokens, parents)
        assert record["origins"] == what_happened(tokens, parents, record["tokens"]), (record,
                                                                                       tokens,
                                                                                       parents)
        assert (record["drafted"], record["nodes"]) == (depth(parents), len(tokens)), record
        assert record["accepted"] == len(record["tokens"]) - 1 and record["calls"] == 1, record
        seen |= set(record["origins"])
    return seen


# --- the verifiers themselves, one deterministic step per origin
# ----------------------------------------------------

def test_verify_chain_origin_of_each_step_by_hand():
    """Drafts [2, 1]; q after the prefix is one-hot at 2 (draft 2 kept: q/p = 1); after [2] at 0
    (draft 1 has q = 0: rejected, token 0 from the residual) or at 1 (kept, and the last row gives
    the bonus 0)."""
    P = np.full((2, 3), 1 / 3)
    rows = np.eye(3)
    for seed in range(5):
        rng = np.random.default_rng(seed)
        assert verify_chain([2, 1], P, rows[[2, 0, 1]], rng) == (1, 0, "resample")
        assert verify_chain([2, 1], P, rows[[2, 1, 0]], rng) == (2, 0, "bonus")
        assert verify_chain([2, 1], P, rows[[1, 1, 0]], rng) == (0, 1, "resample")
        assert verify_chain([], P[:0], rows[[2]], rng) == (0, 2, "bonus")


# --- every method of the table
# ----------------------------------------------------------------------------------

TARGET = random_toy(3, seed=7)
# about 70% acceptance: drafts kept, rejected, and full chains
DRAFT = perturbed(TARGET, 0.6, seed=8)


def speculative():
    seen = set()
    # the same model as draft: every chain is kept, with shortened ones at the end
    for draft in (DRAFT, TARGET):
        for seed in range(4):
            target, stats = Recorder(TARGET), []
            speculative_sampling([1], draft, target, 11, 4, np.random.default_rng(seed),
                                 stats=stats)
            seen |= check_records(stats, target.asked)
            assert stats[-1]["drafted"] < 4 or draft is DRAFT  # the end: k = tokens left - 1 < K
    return seen


def greedy():
    seen = set()
    for seed in range(4):
        model, draft = random_toy(6, seed, concentration=0.3), random_toy(6, seed + 50,
                                                                          concentration=0.3)
        target, stats = Recorder(model), []
        greedy_decoding([seed % 6, 1], draft, target, 15, 4, stats=stats)
        seen |= check_records(stats, target.asked)
    return seen


def prompt_lookup():
    seen = set()
    for options in ({}, dict(temperature=0)):
        for seed in range(4):
            target, stats = Recorder(random_toy(3, seed=seed, concentration=0.3)), []
            prompt_lookup_decoding([0, 1, 2, 0, 1], target, 12, np.random.default_rng(seed), 2, 3,
                                   stats=stats, **options)
            seen |= check_records(stats, target.asked)
    return seen


def autoregressive():
    stats, target = [], Recorder(TARGET)
    autoregressive_sampling([1], target, 6, np.random.default_rng(0), stats=stats)
    assert len(stats) == len(target.asked) == 6
    for s in stats:
        record = (len(s["tokens"]), s["origins"], s["drafted"], s["nodes"], s["accepted"])
        assert record == (1, ["target"], 0, 0, 0)
    return {"target"}


def medusa():
    seen = set()
    for posterior, options in (("greedy", dict(temperature=0)), ("lossless", {})):
        for seed in range(3):
            model, heads = model_and_heads(seed=seed)
            target, stats = Recorder(model), []
            medusa_decoding([1, 2, 3, 4], target, heads, 20, np.random.default_rng(seed),
                            TREES["seed"], topk=3, posterior=posterior, stats=stats, **options)
            seen |= check_records(stats, target.asked)
    return seen


def blockwise():
    """Block i: the heads' i-th call proposed ŷ_2..; the block keeps p_1's token ("bonus") and a
    prefix of them."""
    seen, k = set(), 4
    for merged in (True, False):
        for seed in range(3):
            model = GPT2(*random_gpt2(n_vocab=16, n_ctx=64, n_embd=32, seed=seed, scale=0.3))
            heads, proposed = random_heads(model, k, False, seed), []

            def recording(h):
                out = heads(h)  # [k - 1, 1, V]
                proposed.append([int(t) for t in np.argmax(out[:, 0], -1)])
                return out

            stats, x, N = [], [1, 2, 3], 20
            blockwise_decoding(x, model, recording, N, k, merged, stats)
            assert len(proposed) == len(stats)
            left = N
            for s, heads_said in zip(stats, proposed):
                n = len(s["tokens"])
                assert s["origins"] == ["bonus"] + ["draft"] * (n - 1) and s["accepted"] == n - 1
                assert s["tokens"][1:] == heads_said[:n - 1] and s["drafted"] == min(k, left) - 1
                left -= n
                seen |= set(s["origins"])
    return seen


REST_TARGET = random_toy_tree(3, seed=7)
STORE = Datastore.build(sum((autoregressive_sampling([0, 1], REST_TARGET, 40,
                                                     np.random.default_rng(seed))
                             for seed in range(10)), []), max_suffix=4)


def rest():
    seen = set()
    for options in ({}, dict(temperature=0)):
        for seed in range(4):
            target, stats = Recorder(REST_TARGET), []
            rest_decoding([0, 1, 2, 0, 1], target, 10, np.random.default_rng(seed), STORE, 8, 3, 6,
                          stats=stats, **options)
            seen |= check_records(stats, target.asked)
    return seen


def lookahead():
    seen, W, L, N = set(), 2, 2, 8
    prompt = [0, 1, 2, 0]

    # the window's W * L nodes first, when this step ran it (never drafts)
    def trie_part(x, tokens, parents):
        n_look = W * L if W + L - 1 <= len(prompt) + N - len(x) else 0
        return tokens[n_look:], [p - n_look if p >= 0 else -1 for p in parents[n_look:]]

    for options in ({}, dict(temperature=0)):
        for seed in range(6):
            target, stats = Recorder(random_toy_tree(3, seed=7, concentration=0.5)), []
            lookahead_decoding(prompt, target, N, np.random.default_rng(seed), W, L + 1, 3,
                               stats=stats, **options)
            seen |= check_records(stats, target.asked, trie_part)
    return seen


# EAGLE's one-block head with fresh random weights, on the engine's features
def eagle_head(model, seed):
    from gpt2.eagle import EagleHead, init_eagle

    params, config = init_eagle(model.hparams["n_embd"], 2, np.random.default_rng(seed))
    return EagleHead(params, config, model.params["wte"], model.n_ctx + 256)


def eagle():
    from picospec.eagle import eagle_decoding

    seen = set()
    for candidates, options in (("sample", {}), ("topk", {}), ("topk", dict(temperature=0))):
        for seed in range(3):
            model, _ = model_and_heads(seed=seed)
            target, stats = Recorder(model), []
            eagle_decoding([1, 2, 3, 4], target, eagle_head(model, seed), 20,
                           np.random.default_rng(seed),
                           TREES["seed"], candidates, stats=stats, **options)
            seen |= check_records(stats, target.asked)
    return seen


def eagle2():
    from picospec.eagle2 import eagle2_decoding

    seen = set()
    for options in ({}, dict(temperature=0)):
        for seed in range(3):
            model, _ = model_and_heads(seed=seed)
            target, stats = Recorder(model), []
            eagle2_decoding([1, 2, 3, 4], target, eagle_head(model, seed), 20,
                            np.random.default_rng(seed), 3, 2, 6, stats=stats, **options)
            seen |= check_records(stats, target.asked)
    return seen


def eagle3():
    from picospec.eagle3 import eagle3_decoding
    from tests.support.feature_toys import engine_and_eagle3_head

    seen = set()
    for options in ({}, dict(temperature=0)):
        for seed in range(3):
            model, head = engine_and_eagle3_head(seed)
            target, stats = Recorder(model), []
            eagle3_decoding([1, 2, 3, 4], target, head, 20, np.random.default_rng(seed), 3, 2, 6,
                            stats=stats, **options)
            seen |= check_records(stats, target.asked)
    return seen


def self_draft(**options):
    """layer_skip and early_exit: the first token is the target's own (drafts only ever extend what
    it has read)."""
    from picospec.self_draft import self_speculative_decoding

    seen = set()
    for seed in range(4):
        target, stats = Recorder(TARGET), []
        self_speculative_decoding([1], DRAFT, target, 11, 4, np.random.default_rng(seed),
                                  stats=stats, **options)
        assert (stats[0]["origins"], stats[0]["drafted"], stats[0]["nodes"]) == (["target"], 0, 0)
        seen |= check_records(stats[1:], target.asked[1:]) | {"target"}
    return seen


def cascade():
    from picospec.cascade import cascade_decoding

    seen = set()
    for seed in range(4):
        target, stats = Recorder(TARGET), []
        cascade_decoding([1], target, DRAFT, perturbed(TARGET, 0.9, seed=9), 11, 3,
                         np.random.default_rng(seed), stats=stats)
        seen |= check_records(stats, target.asked)
    return seen


def drawn_trees(decode, draft, **shape):
    """SpecInfer (i.i.d. siblings, two drafts merged) and Sequoia (siblings without replacement):
    trees of draws."""
    seen = set()
    for options in ({}, dict(temperature=0)):
        for seed in range(4):
            target, stats = Recorder(REST_TARGET), []
            decode([0, 1, 2], draft, target, 10, np.random.default_rng(seed), stats=stats, **shape,
                   **options)
            seen |= check_records(stats, target.asked)
    return seen


def specinfer():
    from picospec.specinfer import specinfer_decoding

    return drawn_trees(specinfer_decoding, [DRAFT, perturbed(TARGET, 0.9, seed=9)],
                       expansion=(2, 2, 1))


def sequoia():
    from picospec.sequoia import sequoia_decoding

    return drawn_trees(sequoia_decoding, DRAFT, nodes=6, depth=3, acceptance=(.6, .1, .05, .03))


RUNS = {"autoregressive": autoregressive, "speculative": speculative, "greedy": greedy,
        "prompt_lookup": prompt_lookup, "medusa": medusa, "blockwise": blockwise, "rest": rest,
        "lookahead": lookahead, "eagle": eagle, "eagle2": eagle2, "eagle3": eagle3,
        "layer_skip": lambda: self_draft(threshold=0.5, adaptive=True), "early_exit": self_draft,
        "cascade": cascade, "specinfer": specinfer, "sequoia": sequoia}


EVERY = {"draft", "resample", "bonus"}
KINDS = {"autoregressive": {"target"}, "blockwise": {"bonus", "draft"},
         "layer_skip": EVERY | {"target"},
         "early_exit": EVERY | {"target"}}  # the origins each method gives; the rest give EVERY


@pytest.mark.parametrize("name", list(TABLE))
def test_origins_are_what_happened(name):
    assert name in RUNS, f"method {name} has no origins check: add a run of it to RUNS"
    # every kind of origin the method can give was given, so each branch of its record was checked
    assert RUNS[name]() == KINDS.get(name, EVERY)
