"""Blockwise parallel decoding: Stern, Shazeer, Uszkoreit 2018, "Blockwise Parallel Decoding for
Deep Autoregressive Models", NeurIPS 2018 (arXiv:1811.03115), greedy: predict, verify
(accepted_length), accept; merged = "combined scoring and proposal". k = block size, p_1 the
model, p_2..p_k heads. V = n_vocab, C = n_embd.

Predict: ŷ_{j+i} = argmax p_i(. | y_{<=j}), i = 1..k. Verify: the largest k̂ with ŷ_{j+i} =
argmax p_1(. | y_{<=j}, ŷ_{j+1..j+i-1}) for every i <= k̂. Accept ŷ_{j+1..j+k̂}. Each accepted
token is the one p_1's greedy decoding would pick after the ones before it (ŷ_{j+1} is p_1's
own argmax, so k̂ >= 1): the output is greedy decoding of p_1, in fewer calls."""
import numpy as np

from picospec.sampling import check_inputs
from picospec.verify import step_record


def predict(logits, h, heads, k):
    """Step 1: argmax of p_1 (logits [V]) and of each head on h [C] -> k token ids."""
    # [k - 1, V]
    head_logits = heads(h[None])[:, 0] if k > 1 else np.zeros((0, len(logits)), logits.dtype)
    check_heads(head_logits.shape[0], k)
    return [int(np.argmax(logits))] + [int(t) for t in np.argmax(head_logits, -1)]


def check_heads(n_proposals, k):
    if n_proposals != k - 1:
        raise ValueError(f"heads gave {n_proposals} proposals per position; block size k = {k} "
                         f"needs k - 1")


def accepted_length(y_hat, best):
    """Step 2: k̂, ŷ_{j+1} then each ŷ_{j+i+1} equal to best[i - 1]: [7, 2, 9], [2, 4] -> 2."""
    k_hat = 1
    while k_hat < len(y_hat) and y_hat[k_hat] == best[k_hat - 1]:
        k_hat += 1
    return k_hat


def check_block_size(k):
    if int(k) != k or k < 1:
        raise ValueError(f"k (block size: p_1 and k - 1 heads) must be a positive integer; got {k}")


def blockwise_decoding(x, target, heads, N, k, merged=True, stats=None):
    """x then N tokens of target's greedy decoding, k proposed a block."""
    check_inputs(x, N)
    check_block_size(k)
    x, k = [int(t) for t in x], int(k)
    T = len(x) + N
    y_hat = None  # the proposals of the next block, when the last Verify made them (merged)
    while len(x) < T:
        calls = 0
        # Step 1 (Predict): ŷ = argmax of p_1..p_k at the last position of x; merged, only before
        # the first block
        if y_hat is None:
            logits, h = target.logits(x, 1, hidden=True)  # [1, V], [1, C]
            y_hat, calls = predict(logits[0], h[0], heads, k), calls + 1
        y_hat = y_hat[:T - len(x)]  # never past the N tokens asked for
        # Step 2 (Verify): one call scores every prefix x + ŷ_{j+1..j+i}. The last proposal is run
        # too only when merged and a next block will need the heads after it.
        more = merged and len(x) + len(y_hat) < T
        run = y_hat if more else y_hat[:-1]
        best = []
        if run:
            # [len(run), V], [len(run), C]
            logits, h = target.logits(x + run, len(run), hidden=True)
            # [len(run)]: p_1's choice after each prefix
            best, calls = [int(t) for t in np.argmax(logits, -1)], calls + 1
        k_hat = accepted_length(y_hat, best)
        # Step 3 (Accept): the k̂ proposals that greedy decoding would have produced too
        new = y_hat[:k_hat]
        x.extend(new)
        if stats is not None:
            stats.append(step_record(new, ["bonus"] + ["draft"] * (k_hat - 1),
                                     drafted=len(y_hat) - 1, calls=calls))
        # merged: the next block's ŷ is p_1 and the heads on Verify's row after ŷ_{j+k̂}, with no
        # further call
        y_hat = predict(logits[k_hat - 1], h[k_hat - 1], heads,
                        k) if merged and len(x) < T else None
    return x
