"""Batched cascade drafting (picospec/cascade.py batch_cascade_decoding: every review step of every drafter made for all
rows at once, one batched call of each model where the recursion calls it, rows ragged and riding along):

- each row keeps the target's exact law: micro GPT-2s of three tokens on batched engines (target and draft: the
  draft's cache rows also serve the rows that ride along) with a toy as the smallest drafter, 1,500 rows a batch,
  vertical and horizontal at once, warped. The broken cascade of tests/test_cascade.py (a reviewing drafter hands up,
  as the law of its tokens, the smallest drafter's) on the same engines is rejected by the same check;
- each row equals cascade_decoding on its prompt alone with its own generator, tokens and step records: on toys for
  every cascade down to N = 1 (drafts cut short, rows riding along, reviewers asked for different numbers of
  positions in one call), and on the built-in pair with the n-gram at temperature 0 and 1;
- the step records have the other batched forms' keys: accepted per row, -1 once a row has finished.
"""
import numpy as np
import pytest

import batchrows
import picospec.cascade as cs
from batchrows import COPIES, TEXTS, built_in, check_laws, check_records, check_rejected
from checker import SAMPLES
from gpt2.engine import BatchGPT2
from gpt2.engine import GPT2
from gpt2.load import load_model
from micro import random_gpt2
from picospec.batch import batch_speculative_sampling, batched
from picospec.cascade import batch_cascade_decoding, cascade_decoding
from picospec.sampling import warp
from toy import perturbed, random_toy

DRAFT_HP, DRAFT_PARAMS = random_gpt2(n_vocab=3, n_ctx=16, n_embd=8, n_head=2, n_layer=1, seed=11, scale=0.6)
DRAFT2 = random_toy(3, seed=12)  # the smallest drafter of the micro cascade: a toy over the same three tokens
CASCADES = {"vertical": dict(K=3, K_inner=2, K_tail=0), "horizontal": dict(K=2, K_inner=0, K_tail=2),
            "both": dict(K=3, K_inner=2, K_tail=2)}


def sampled_rows(n, **options):  # -> per prompt, n sampled continuations (both cascades), COPIES rows of each per batch
    def method(target):
        draft = BatchGPT2(GPT2(DRAFT_HP, DRAFT_PARAMS), len(batchrows.PROMPTS) * COPIES)
        return lambda xs, batch, rng, stats: batch_cascade_decoding(xs, batch, draft, batched(DRAFT2), batchrows.N,
                                                                    rng=rng, stats=stats, **CASCADES["both"], **options)

    return batchrows.sampled_rows(method, n)


def test_batched_rows_keep_the_exact_law():
    """15,000 runs per prompt, three prompts of different lengths in every batch, warped (temperature 1.3, top-p 0.9;
    at temperature 1 and other warps the toy tests below show each row is the single form's, draw for draw)."""
    options = dict(temperature=1.3, top_p=0.9)
    samples, target = sampled_rows(SAMPLES // 2, **options)
    check_laws(samples, target, **options)


BATCH_REVIEW_STEP = cs.batch_review_step


def review_with_the_smallest_law(xs, models, k_matrix, limits, rngs, sampling_options):
    """Bug (tests/test_cascade.py's, batched): each reviewing drafter hands up, as the law of the tokens it passes on,
    what the smallest drafter would have proposed there, not its own law (the law the tokens actually follow)."""
    steps = BATCH_REVIEW_STEP(xs, models, k_matrix, limits, rngs, sampling_options)
    smallest = [[warp(models[-1]([x + step[0][:t]])[0, -1], **sampling_options) for t in range(len(step[0]))]
                if step else None for x, step in zip(xs, steps)]  # [V] per token of each row that reviewed
    return [step and (step[0], laws, *step[2:]) for step, laws in zip(steps, smallest)]


def test_verifying_against_the_smallest_drafters_law_is_rejected(monkeypatch):
    monkeypatch.setattr(cs, "batch_review_step", review_with_the_smallest_law)
    samples, target = sampled_rows(2 * COPIES)  # 1,000 runs of the first prompt: G = 978, p ~ 1e-192
    check_rejected(samples, target)


def check_rows_alone(xs, out, stats, alone):
    """Row b of the batch equals alone(b) = (tokens, step records) of cascade_decoding on xs[b] alone: its tokens,
    its new tokens and accepted drafts step by step; a batched step's `drafted` is the longest draft of its rows."""
    drafted = {}
    for b in range(len(xs)):
        tokens, steps = alone(b)
        assert out[b] == tokens, (b, xs[b])
        mine = [s for s in stats if s["accepted"][b] >= 0]
        assert [(s["tokens"][b], s["accepted"][b]) for s in mine] == [(s["tokens"], s["accepted"]) for s in steps]
        for i, s in enumerate(steps):
            drafted.setdefault(i, []).append(s["drafted"])
    assert [s["drafted"] for s in stats] == [max(d) for d in drafted.values()]


TOYS = [random_toy(5, seed=7), perturbed(random_toy(5, seed=7), 0.5, seed=8),
        perturbed(random_toy(5, seed=7), 0.9, seed=9)]


@pytest.mark.parametrize("N", [1, 2, 7])
@pytest.mark.parametrize("name", CASCADES)
@pytest.mark.parametrize("options", [{"temperature": 0}, {"temperature": 1.0}, {"temperature": 0.7, "top_p": 0.8}],
                         ids=["T=0", "T=1", "T=0.7-top_p"])
def test_batched_rows_equal_each_row_alone_on_toys(N, name, options):
    xs, stats = [[1], [0, 2, 3], [4, 4], [2], [3, 1, 1, 0]], []
    out = batch_cascade_decoding(xs, *[batched(m) for m in TOYS], N, rng=np.random.default_rng(0), stats=stats,
                                 generators={b: np.random.default_rng(b) for b in range(len(xs))}, **CASCADES[name],
                                 **options)

    def alone(b):
        steps = []
        return cascade_decoding(xs[b], *TOYS, N, rng=np.random.default_rng(b), stats=steps, **CASCADES[name],
                                **options), steps

    check_rows_alone(xs, out, stats, alone)


@pytest.fixture(scope="module")
def pair():
    target, xs = built_in()
    return target, load_model("tiny-draft")[0], load_model("ngram")[0], xs


@pytest.mark.parametrize("name", CASCADES)
@pytest.mark.parametrize("options", [{"temperature": 0}, {"temperature": 1.0}], ids=["T=0", "T=1"])
def test_batched_rows_equal_each_row_alone(pair, name, options):
    """The built-in target, tiny-draft and the n-gram on code prompts of different lengths: each row of one batch, with
    its own generator, is token for token and step for step what cascade_decoding gives its prompt alone."""
    target, draft, ngram, xs = pair
    stats = []
    out = batch_cascade_decoding(xs, BatchGPT2(target, len(xs)), BatchGPT2(draft, len(xs)), batched(ngram), 24,
                                 rng=np.random.default_rng(9), stats=stats,
                                 generators={b: np.random.default_rng(b) for b in range(len(xs))}, **CASCADES[name],
                                 **options)

    def alone(b):
        target.reset(), draft.reset()
        steps = []
        return cascade_decoding(xs[b], target, draft, ngram, 24, rng=np.random.default_rng(b), stats=steps,
                                **CASCADES[name], **options), steps

    check_rows_alone(xs, out, stats, alone)
    check_records(stats)  # drafts accepted, rows ragged, some finished first; a record: kept drafts, then one token
    if options["temperature"]:
        assert len({tuple(o[len(x):]) for o, x in zip(out, xs)}) == len(TEXTS)  # the rows drew differently


def test_step_records_have_the_batched_keys():
    """The keys of batch_speculative_sampling's records; a finished row: accepted -1 and no tokens; the tokens of a
    row's steps are its output; the rows share no generator here (rng alone), and still each gets exactly N tokens."""
    xs, N, stats, spec = [[1], [0, 2, 3, 4, 1, 2], [4]], 9, [], []
    out = batch_cascade_decoding(xs, *[batched(m) for m in TOYS], N, 3, np.random.default_rng(1), stats=stats)
    batch_speculative_sampling(xs, batched(TOYS[1]), batched(TOYS[0]), N, 3, np.random.default_rng(1), stats=spec)
    assert all(set(s) == set(spec[0]) == {"drafted", "accepted", "tokens"} for s in stats)
    for b, x in enumerate(xs):
        assert [t for s in stats for t in s["tokens"][b]] == out[b][len(x):] and len(out[b]) == len(x) + N
        assert all(s["tokens"][b] == [] for s in stats if s["accepted"][b] == -1)
    check_records(stats)
