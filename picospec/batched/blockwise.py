"""Blockwise parallel decoding (Stern et al. 2018, arXiv:1811.03115) for B prompts. The paper's
letters: p_1 = the target's law, p_2..p_k = the heads'. Shapes: B rows, k block, V vocab, C n_embd.
"""
import numpy as np

from picospec.blockwise import accepted_length, check_block_size, check_heads
from picospec.sampling import check_inputs


def predict_rows(logits, h, heads, k):
    """Step 1 (Predict) at n positions: logits [n, V], h [n, C] -> n lists of k ids (p_1's argmax,
    then each head's)."""
    # [k - 1, n, V]
    head_logits = heads(h) if k > 1 else np.zeros((0, len(h), logits.shape[-1]), logits.dtype)
    check_heads(head_logits.shape[0], k)
    own, proposed = np.argmax(logits, -1), np.argmax(head_logits, -1)  # [n], [k - 1, n]
    return [[int(own[i])] + [int(t) for t in proposed[:, i]] for i in range(len(h))]


def batch_blockwise_decoding(xs, target, heads, N, k, merged=True, stats=None):
    """Each prompt of xs followed by N tokens; row b is blockwise_decoding(xs[b])."""
    for x in xs:
        check_inputs(x, N)
    check_block_size(k)
    xs, k = [[int(t) for t in x] for x in xs], int(k)
    T = [len(x) + N for x in xs]
    # each row's proposals for its next block, when the last Verify made them (merged)
    y_hat = [None] * len(xs)
    while True:
        active = [b for b in range(len(xs)) if len(xs[b]) < T[b]]
        if not active:
            return xs
        calls = 0
        # Step 1 (Predict), rows without proposals (all or none): one batched call, one heads call
        if y_hat[active[0]] is None:
            # [B, 1, V], [B, 1, C]
            logits, h = target.logits([xs[b] for b in active], 1, hidden=True)
            for b, y in zip(active, predict_rows(logits[:, 0], h[:, 0], heads, k)):
                y_hat[b] = y
            calls += 1
        for b in active:
            y_hat[b] = y_hat[b][:T[b] - len(xs[b])]  # never past the N tokens asked for
        # Step 2 (Verify): one batched tree call scores every row's chain x + ŷ_{j+1..}; merged, the
        # last proposal is run too where a next block will need the heads after it
        runs = [y_hat[b] if merged and len(xs[b]) + len(y_hat[b]) < T[b] else y_hat[b][:-1]
                for b in active]
        verified = any(runs)  # else every row's block is its last token: no Verify call
        if verified:
            chains = [(r, list(range(-1, len(r) - 1))) for r in runs]
            # per row [1 + m, V], [1 + m, C]: row 1 + r after ŷ_{j+1..j+r+1}
            logits, h = target.tree([xs[b] for b in active], chains, hidden=True)
            calls += 1
        # Step 3 (Accept): each row's k̂ proposals; merged, the next block's ŷ from the row after
        # ŷ_{j+k̂}
        step = {"drafted": max(len(y_hat[b]) - 1 for b in active), "accepted": [-1] * len(xs),
                "tokens": [[] for _ in xs], "calls": calls}
        paths, again = [], []
        for i, (b, run) in enumerate(zip(active, runs)):
            # [len(run)]: p_1's choice after each prefix
            best = [int(t) for t in np.argmax(logits[i][1:], -1)] if run else []
            k_hat = accepted_length(y_hat[b], best)
            paths.append(list(range(min(k_hat, len(run)))))
            step["accepted"][b], step["tokens"][b] = k_hat - 1, y_hat[b][:k_hat]
            xs[b].extend(y_hat[b][:k_hat])
            y_hat[b] = None
            if merged and len(xs[b]) < T[b]:
                again.append((b, i, k_hat))
        if verified:
            target.accept(paths)
        if again:  # one heads call for every row that goes on: [n, V], [n, C] rows after ŷ_{j+k̂}
            ys = predict_rows(np.stack([logits[i][k_hat] for _, i, k_hat in again]),
                              np.stack([h[i][k_hat] for _, i, k_hat in again]), heads, k)
            for (b, _, _), y in zip(again, ys):
                y_hat[b] = y
        if stats is not None:
            stats.append(step)
