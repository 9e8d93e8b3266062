"""The batched token-tree methods (SpecInfer, Sequoia) held row by row to their single forms, on
micro GPT-2s of three tokens and on the built-in pair (tests/support/batchrows.py)."""
import numpy as np

import picospec.sequoia as sequoia
import picospec.specinfer as specinfer
from gpt2.engine import BatchGPT2
from gpt2.engine import GPT2
from picospec.batched.loop import batched
from picospec.batched.sequoia import batch_sequoia_decoding
from picospec.batched.specinfer import batch_specinfer_decoding
from picospec.sequoia import sequoia_decoding
from picospec.specinfer import specinfer_decoding

from tests.support.batchrows import (N, ROWS, check_paths, check_records, check_rows_alone,
                                     generators, micro)
from tests.support.micro import random_gpt2

DRAFT_HP, DRAFT_PARAMS = random_gpt2(n_vocab=3, n_ctx=16, n_embd=8, n_head=2, n_layer=1, seed=11,
                                     scale=0.6)
BUSHY = (.4, .3, .2)  # Sequoia's tree of 4 nodes at depth 2 branches: [[0], [1], [2], [0, 0]]
METHODS = {"specinfer": (specinfer_decoding, batch_specinfer_decoding, {"expansion": (3, 2)}),
           "sequoia": (sequoia_decoding, batch_sequoia_decoding,
                       {"nodes": 4, "depth": 2, "acceptance": BUSHY})}


def micro_rows(monkeypatch, name, broken=None, **options):
    """The batched form of `name` on ROWS (broken: (rule, function) planted in the batched run
    only), each row against the single form alone."""
    single, batch, kwargs = METHODS[name]
    target, draft, stats = micro(), GPT2(DRAFT_HP, DRAFT_PARAMS, threads=1), []
    with monkeypatch.context() as patch:
        if broken:
            patch.setattr({"specinfer": specinfer, "sequoia": sequoia}[name], *broken)
        out = batch(ROWS, BatchGPT2(draft, len(ROWS), tree_slots=12),
                    BatchGPT2(target, len(ROWS), tree_slots=12), N, np.random.default_rng(99),
                    stats=stats, generators=generators(len(ROWS)), **kwargs, **options)

    def alone(b, steps):
        target.reset(), draft.reset()
        return single(ROWS[b], draft, target, N, np.random.default_rng(b), stats=steps, **kwargs,
                      **options)

    check_paths(check_rows_alone(out, alone, monkeypatch))
    check_records(stats)
    assert any(s["nodes"] > s["drafted"] for s in stats)  # the trees branched


def built_in_rows(pair, name, merge, options, monkeypatch):
    """The batched form of `name` on the built-in pair (merge: the n-gram merged in as a second
    draft), each row against the single form alone: token for token, but for a draw within MARGIN
    of a CDF boundary (tests/support/batchrows.py: 1 row in 20 on the built-in pair split so, at
    6e-7)."""
    target, draft, ngram, xs = pair
    single = {"specinfer": specinfer_decoding, "sequoia": sequoia_decoding}[name]
    batch = {"specinfer": batch_specinfer_decoding, "sequoia": batch_sequoia_decoding}[name]
    kwargs = {"expansion": (1, 2, 1)} if name == "specinfer" else {"nodes": 5, "depth": 3,
                                                                   "acceptance": BUSHY}
    drafts = [BatchGPT2(draft, len(xs)), batched(ngram)] if merge else BatchGPT2(draft, len(xs))
    stats = []
    out = batch(xs, drafts, BatchGPT2(target, len(xs)), 24, np.random.default_rng(9), stats=stats,
                generators={b: np.random.default_rng(b) for b in range(len(xs))}, **kwargs,
                **options)

    def alone(b, steps):
        target.reset(), draft.reset()
        drafts = [draft, ngram] if merge else draft
        return single(xs[b], drafts, target, 24, np.random.default_rng(b), stats=steps, **kwargs,
                      **options)

    check_rows_alone(out, alone, monkeypatch)
    check_records(stats)
