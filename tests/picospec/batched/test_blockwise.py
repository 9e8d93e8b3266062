"""Batched Blockwise Parallel Decoding (picospec/blockwise.py batch_blockwise_decoding): every row's
Predict in one batched call and one heads call, every row's Verify chain in one batched tree call.
On the built-in target and its shipped Blockwise heads, each row equals blockwise_decoding on its
prompt alone in its tokens and in its blocks (the tokens each block added), merged and not, for
block sizes 1 to 4, with rows going ragged and finishing at different steps; each block makes the
single form's calls (0-2: merged, Predict only before the first block), which main.py --batch and
bench.batch add up."""
import pytest

from gpt2.engine import BatchGPT2
from picospec.batched.blockwise import batch_blockwise_decoding
from picospec.blockwise import blockwise_decoding

from tests.support.batchrows import built_in, check_records, heads

N = 30


@pytest.fixture(scope="module")
def shipped():
    target, xs = built_in()
    return target, heads("blockwise")["fn"], xs


@pytest.mark.parametrize("merged", [True, False])
@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_batched_rows_equal_each_row_alone(shipped, merged, k):
    target, fn, xs = shipped
    heads = lambda h: fn(h)[:k - 1]  # noqa: E731 - p_2..p_k, as the method table prepares them
    stats = []
    out = batch_blockwise_decoding(xs, BatchGPT2(target, len(xs)), heads, N, k, merged=merged,
                                   stats=stats)
    for b, x in enumerate(xs):
        target.reset()
        blocks = []
        assert out[b] == blockwise_decoding(x, target, heads, N, k, merged=merged, stats=blocks)
        assert [s["tokens"][b] for s in stats if s["accepted"][b] >= 0] == [s["tokens"]
                                                                            for s in blocks]
        # a block's calls are the single form's, except a last one-token block that needs no Verify
        # alone: another row's Verify call serves it too
        together = [s["calls"] for s in stats if s["accepted"][b] >= 0]
        assert all(t == s["calls"] or (t == s["calls"] + 1 and len(s["tokens"]) == 1)
                   for t, s in zip(together, blocks))
    if k > 1:
        # proposals accepted, rows ragged, some finished first; a record: k̂ - 1 kept, k̂ tokens
        check_records(stats)
    calls = [s["calls"] for s in stats]
    if merged:  # Predict and Verify first, then Verify alone (none for a last block of one token)
        assert calls[0] == 2 and set(calls[1:]) <= {0, 1}
    else:  # Predict, and Verify unless every row's block is one token
        assert calls[0] == (2 if k > 1 else 1) and set(calls) <= {1, 2}


def test_bad_block_size_is_refused(shipped):
    target, fn, xs = shipped
    with pytest.raises(ValueError, match="positive integer"):
        batch_blockwise_decoding(xs, BatchGPT2(target, len(xs)), fn, 4, 0)
