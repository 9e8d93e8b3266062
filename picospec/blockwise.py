"""Blockwise Parallel Decoding (Stern, Shazeer, Uszkoreit 2018, "Blockwise Parallel Decoding for Deep Autoregressive
Models", arXiv:1811.03115), greedy, as in the paper: its predict / verify / accept loop and the merged variant it
calls "combined scoring and proposal". Draft-then-verify with no draft model: the drafts come from extra heads on
the target's own last hidden state.
k = block size; p_1 = the model's next-token law, p_2..p_k = the proposal heads. Steps: Predict, Verify, Accept.
Shapes: V = n_vocab, C = n_embd.
Notation in full, worked examples and choices: docs/algorithms.md (blockwise.py).
"""
import numpy as np

from picospec.sampling import check_inputs
from picospec.verify import step_record


def predict(logits, h, heads, k):
    """ŷ_{j+1..j+k} from one position: logits [V] of p_1, h [C] its hidden state -> k token ids."""
    return predict_rows(logits[None], h[None], heads, k)[0]


def predict_rows(logits, h, heads, k):
    """predict for n positions at once (one call of the heads): logits [n, V], h [n, C] -> n lists of k token ids."""
    head_logits = heads(h) if k > 1 else np.zeros((0, len(h), logits.shape[-1]), logits.dtype)  # [k - 1, n, V]
    if head_logits.shape[0] != k - 1:
        raise ValueError(f"heads gave {head_logits.shape[0]} proposals per position; block size k = {k} needs k - 1")
    own, proposed = np.argmax(logits, -1), np.argmax(head_logits, -1)  # [n], [k - 1, n]
    return [[int(own[i])] + [int(t) for t in proposed[:, i]] for i in range(len(h))]


def accepted_length(y_hat, best):
    """k̂: ŷ_{j+1} always, then ŷ_{j+i+1} while it equals best[i - 1], p_1's argmax after ŷ_{j+1..j+i}.

    Example: y_hat = [7, 2, 9], best = [2, 4] -> 2;  y_hat = [7, 2, 9], best = [3, 9] -> 1;  y_hat = [7] -> 1.
    """
    k_hat = 1
    while k_hat < len(y_hat) and y_hat[k_hat] == best[k_hat - 1]:
        k_hat += 1
    return k_hat


def check_block_size(k):
    if int(k) != k or k < 1:
        raise ValueError(f"k (block size: p_1 and k - 1 heads) must be a positive integer; got {k}")


def blockwise_decoding(x, target, heads, N, k, merged=True, stats=None):
    """x followed by N tokens of greedy decoding of target, k tokens proposed per block by target's p_1 and heads."""
    check_inputs(x, N)
    check_block_size(k)
    x, k = [int(t) for t in x], int(k)
    T = len(x) + N
    y_hat = None  # the proposals of the next block, when the last Verify made them (merged)
    while len(x) < T:
        calls = 0
        # Step 1 (Predict): ŷ = argmax of p_1..p_k at the last position of x; merged, only before the first block
        if y_hat is None:
            logits, h = target.logits(x, 1, hidden=True)  # [1, V], [1, C]
            y_hat, calls = predict(logits[0], h[0], heads, k), calls + 1
        y_hat = y_hat[:T - len(x)]  # never past the N tokens asked for
        # Step 2 (Verify): one call scores every prefix x + ŷ_{j+1..j+i}. The last proposal is run too only when
        # merged and a next block will need the heads after it.
        more = merged and len(x) + len(y_hat) < T
        run = y_hat if more else y_hat[:-1]
        best = []
        if run:
            logits, h = target.logits(x + run, len(run), hidden=True)  # [len(run), V], [len(run), C]
            best, calls = [int(t) for t in np.argmax(logits, -1)], calls + 1  # p_1's choice after each prefix
        k_hat = accepted_length(y_hat, best)
        # Step 3 (Accept): the k̂ proposals that greedy decoding would have produced too
        new = y_hat[:k_hat]
        x.extend(new)
        if stats is not None:
            stats.append(step_record(new, ["bonus"] + ["draft"] * (k_hat - 1), drafted=len(y_hat) - 1, calls=calls))
        # merged: the next block's ŷ is p_1 and the heads on Verify's row after ŷ_{j+k̂}, with no further call
        y_hat = predict(logits[k_hat - 1], h[k_hat - 1], heads, k) if merged and len(x) < T else None
    return x


def batch_blockwise_decoding(xs, target, heads, N, k, merged=True, stats=None):
    """Each prompt of xs followed by N tokens, as blockwise_decoding gives it alone. More:
    docs/algorithms.md (blockwise.py, batch_blockwise_decoding)."""
    for x in xs:
        check_inputs(x, N)
    check_block_size(k)
    xs, k = [[int(t) for t in x] for x in xs], int(k)
    T = [len(x) + N for x in xs]
    y_hat = [None] * len(xs)  # each row's proposals for its next block, when the last Verify made them (merged)
    while True:
        active = [b for b in range(len(xs)) if len(xs[b]) < T[b]]
        if not active:
            return xs
        calls = 0
        # Step 1 (Predict), every row that has no proposals (all or none of them): one batched call, one heads call
        if y_hat[active[0]] is None:
            logits, h = target.logits([xs[b] for b in active], 1, hidden=True)  # [B, 1, V], [B, 1, C]
            for b, y in zip(active, predict_rows(logits[:, 0], h[:, 0], heads, k)):
                y_hat[b] = y
            calls += 1
        for b in active:
            y_hat[b] = y_hat[b][:T[b] - len(xs[b])]  # never past the N tokens asked for
        # Step 2 (Verify): one batched tree call scores every row's chain x + ŷ_{j+1..}; merged, the last proposal is
        # run too where a next block will need the heads after it
        runs = [y_hat[b] if merged and len(xs[b]) + len(y_hat[b]) < T[b] else y_hat[b][:-1] for b in active]
        verified = any(runs)  # else every row's block is its last token: no Verify call
        if verified:
            logits, h = target.tree([xs[b] for b in active], [(r, list(range(-1, len(r) - 1))) for r in runs],
                                    hidden=True)  # per row [1 + m, V], [1 + m, C]: row 1 + r after ŷ_{j+1..j+r+1}
            calls += 1
        # Step 3 (Accept): each row's k̂ proposals; merged, the next block's ŷ from the row after ŷ_{j+k̂}
        step = {"drafted": max(len(y_hat[b]) - 1 for b in active), "accepted": [-1] * len(xs),
                "tokens": [[] for _ in xs], "calls": calls}
        paths, again = [], []
        for i, (b, run) in enumerate(zip(active, runs)):
            best = [int(t) for t in np.argmax(logits[i][1:], -1)] if run else []  # p_1's choice after each prefix
            k_hat = accepted_length(y_hat[b], best)
            paths.append(list(range(min(k_hat, len(run)))))
            step["accepted"][b], step["tokens"][b] = k_hat - 1, y_hat[b][:k_hat]
            xs[b].extend(y_hat[b][:k_hat])
            y_hat[b] = None
            if merged and len(xs[b]) < T[b]:
                again.append((b, i, k_hat))
        if verified:
            target.accept(paths)
        if again:  # one heads call for every row that goes on
            ys = predict_rows(np.stack([logits[i][k_hat] for _, i, k_hat in again]),
                              np.stack([h[i][k_hat] for _, i, k_hat in again]), heads, k)
            for (b, _, _), y in zip(again, ys):
                y_hat[b] = y
        if stats is not None:
            stats.append(step)
