"""Batched cascade drafting (picospec/cascade.py batch_cascade_decoding: every review step of every
drafter made for all rows at once, one batched call of each model where the recursion calls it, rows
ragged and riding along), row by row against cascade_decoding (tests/support/batchrows.py), so each
row has the law that tests/picospec/test_cascade.py checks:

- on micro GPT-2s of three tokens on batched engines (target and draft: the draft's cache rows also
  serve the rows that ride along) with a toy as the smallest drafter, 48 rows, vertical and
  horizontal at once, at temperature 1.3 with top-p 0.9: each row's tokens are the single form's.
  The broken cascade of tests/picospec/test_cascade.py (a reviewing drafter hands up, as the law of
  its tokens, the smallest drafter's) planted in the batched run is caught;
- each row equals cascade_decoding on its prompt alone with its own generator, tokens and step
  records: on toys for every cascade down to N = 1 (drafts cut short, rows riding along, reviewers
  asked for different numbers of positions in one call), and on the built-in pair with the n-gram at
  temperature 0, 1 and 0.7 with top-k 5 and top-p 0.8;
- the step records have the other batched forms' keys: accepted per row, -1 once a row has finished.
"""
import numpy as np
import pytest

import picospec.batched.cascade as cs
from gpt2.engine import BatchGPT2
from gpt2.engine import GPT2
from picospec.batched.cascade import batch_cascade_decoding
from picospec.batched.loop import batched
from picospec.batched.speculative import batch_speculative_sampling
from picospec.cascade import cascade_decoding
from picospec.sampling import warp

from tests.support.batchrows import (N, ROWS, TEXTS, built_in, check_paths, check_records,
                                     check_rows_alone, generators, micro, model)
from tests.support.micro import random_gpt2
from tests.support.toy import perturbed, random_toy

DRAFT_HP, DRAFT_PARAMS = random_gpt2(n_vocab=3, n_ctx=16, n_embd=8, n_head=2, n_layer=1, seed=11,
                                     scale=0.6)
# the smallest drafter of the micro cascade: a toy over the same three tokens
DRAFT2 = random_toy(3, seed=12)
CASCADES = {"vertical": dict(K=3, K_inner=2, K_tail=0),
            "horizontal": dict(K=2, K_inner=0, K_tail=2), "both": dict(K=3, K_inner=2, K_tail=2)}
WARPED = dict(temperature=1.3, top_p=0.9)


def micro_rows(monkeypatch, broken=None):
    """Both cascades at once on ROWS, warped (a broken batch_review_step planted in the batched
    run), each row against the single form alone -> the batch's step records."""
    target, draft, stats = micro(), GPT2(DRAFT_HP, DRAFT_PARAMS, threads=1), []
    with monkeypatch.context() as patch:
        if broken:
            patch.setattr(cs, "batch_review_step", broken)
        out = batch_cascade_decoding(ROWS, BatchGPT2(target, len(ROWS)),
                                     BatchGPT2(draft, len(ROWS)), batched(DRAFT2), N,
                                     rng=np.random.default_rng(99), stats=stats,
                                     generators=generators(len(ROWS)), **CASCADES["both"], **WARPED)

    def alone(b, steps):
        target.reset(), draft.reset()
        return cascade_decoding(ROWS[b], target, draft, DRAFT2, N, rng=np.random.default_rng(b),
                                stats=steps, **CASCADES["both"], **WARPED)

    check_paths(check_rows_alone(out, alone, monkeypatch))
    return stats


def test_micro_rows_equal_each_row_alone(monkeypatch):
    check_records(micro_rows(monkeypatch))


BATCH_REVIEW_STEP = cs.batch_review_step


def review_with_the_smallest_law(xs, models, k_matrix, limits, rngs, sampling_options):
    """Bug (tests/picospec/test_cascade.py's, batched): each reviewing drafter hands up, as the law
    of the tokens it passes on, what the smallest drafter would have proposed there, not its own law
    (the law the tokens actually follow)."""
    steps = BATCH_REVIEW_STEP(xs, models, k_matrix, limits, rngs, sampling_options)
    smallest = [[warp(models[-1]([x + step[0][:t]])[0, -1], **sampling_options)
                 for t in range(len(step[0]))]
                # [V] per token of each row that reviewed
                if step else None for x, step in zip(xs, steps)]
    return [step and (step[0], laws, *step[2:]) for step, laws in zip(steps, smallest)]


@pytest.mark.filterwarnings("ignore:.*in scalar divide:RuntimeWarning")  # broken laws hold zeros
def test_verifying_against_the_smallest_drafters_law_is_caught(monkeypatch):
    with pytest.raises(AssertionError, match="differs from its single run"):
        micro_rows(monkeypatch, review_with_the_smallest_law)


def check_steps_alone(xs, out, stats, alone):
    """Row b of the batch equals alone(b) = (tokens, step records) of cascade_decoding on xs[b]
    alone: its tokens, its new tokens and accepted drafts step by step; a batched step's `drafted`
    is the longest draft of its rows."""
    drafted = {}
    for b in range(len(xs)):
        tokens, steps = alone(b)
        assert out[b] == tokens, (b, xs[b])
        mine = [s for s in stats if s["accepted"][b] >= 0]
        assert [(s["tokens"][b], s["accepted"][b]) for s in mine] == [(s["tokens"], s["accepted"])
                                                                      for s in steps]
        for i, s in enumerate(steps):
            drafted.setdefault(i, []).append(s["drafted"])
    assert [s["drafted"] for s in stats] == [max(d) for d in drafted.values()]


TOYS = [random_toy(5, seed=7), perturbed(random_toy(5, seed=7), 0.5, seed=8),
        perturbed(random_toy(5, seed=7), 0.9, seed=9)]


@pytest.mark.parametrize("N", [1, 2, 7])
@pytest.mark.parametrize("name", CASCADES)
@pytest.mark.parametrize("options",
                         [{"temperature": 0}, {"temperature": 1.0},
                          {"temperature": 0.7, "top_k": 3, "top_p": 0.8}],
                         ids=["T=0", "T=1", "T=0.7-top_k-top_p"])
def test_batched_rows_equal_each_row_alone_on_toys(N, name, options):
    xs, stats = [[1], [0, 2, 3], [4, 4], [2], [3, 1, 1, 0]], []
    out = batch_cascade_decoding(xs, *[batched(m) for m in TOYS], N, rng=np.random.default_rng(0),
                                 stats=stats,
                                 generators={b: np.random.default_rng(b) for b in range(len(xs))},
                                 **CASCADES[name], **options)

    def alone(b):
        steps = []
        return cascade_decoding(xs[b], *TOYS, N, rng=np.random.default_rng(b), stats=steps,
                                **CASCADES[name], **options), steps

    check_steps_alone(xs, out, stats, alone)


@pytest.fixture(scope="module")
def pair():
    target, xs = built_in()
    return target, model("tiny-draft")[0], model("ngram")[0], xs


@pytest.mark.parametrize("name", CASCADES)
@pytest.mark.parametrize("options", [{"temperature": 0}, {"temperature": 1.0},
                                     {"temperature": 0.7, "top_k": 5, "top_p": 0.8}],
                         ids=["T=0", "T=1", "T=0.7-top_k-top_p"])
def test_batched_rows_equal_each_row_alone(pair, name, options):
    """The built-in target, tiny-draft and the n-gram on code prompts of different lengths: each row
    of one batch, with its own generator, is token for token and step for step what cascade_decoding
    gives its prompt alone."""
    target, draft, ngram, xs = pair
    stats = []
    out = batch_cascade_decoding(xs, BatchGPT2(target, len(xs)), BatchGPT2(draft, len(xs)),
                                 batched(ngram), 24, rng=np.random.default_rng(9), stats=stats,
                                 generators={b: np.random.default_rng(b) for b in range(len(xs))},
                                 **CASCADES[name], **options)

    def alone(b):
        target.reset(), draft.reset()
        steps = []
        return cascade_decoding(xs[b], target, draft, ngram, 24, rng=np.random.default_rng(b),
                                stats=steps, **CASCADES[name], **options), steps

    check_steps_alone(xs, out, stats, alone)
    # drafts accepted, rows ragged, some finished first; a record: kept drafts, then one token
    check_records(stats)
    if options["temperature"]:
        # the rows drew differently
        assert len({tuple(o[len(x):]) for o, x in zip(out, xs)}) == len(TEXTS)


def test_step_records_have_the_batched_keys():
    """The keys of batch_speculative_sampling's records; a finished row: accepted -1 and no tokens;
    the tokens of a row's steps are its output; the rows share no generator here (rng alone), and
    still each gets exactly N tokens."""
    xs, N, stats, spec = [[1], [0, 2, 3, 4, 1, 2], [4]], 9, [], []
    out = batch_cascade_decoding(xs, *[batched(m) for m in TOYS], N, 3, np.random.default_rng(1),
                                 stats=stats)
    batch_speculative_sampling(xs, batched(TOYS[1]), batched(TOYS[0]), N, 3,
                               np.random.default_rng(1), stats=spec)
    assert all(set(s) == set(spec[0]) == {"drafted", "accepted", "tokens"} for s in stats)
    for b, x in enumerate(xs):
        assert [t for s in stats
                for t in s["tokens"][b]] == out[b][len(x):] and len(out[b]) == len(x) + N
        assert all(s["tokens"][b] == [] for s in stats if s["accepted"][b] == -1)
    check_records(stats)
