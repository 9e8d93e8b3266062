"""Greedy draft-and-verify for B prompts, each row with its own K. p = draft, q = target.
Shapes: B rows, k drafts, V vocabulary.
"""
import numpy as np

from picospec.batched.loop import batch_tree_decoding
from picospec.greedy import SCHEDULES, matched
from picospec.sampling import check_inputs, check_vocab


def batch_greedy_decoding(xs, draft_model, target_model, N, K, stats=None, schedule="constant",
                          confidence=None):
    """Each prompt of xs followed by N tokens; row b is greedy_decoding(xs[b])."""
    for x in xs:
        check_inputs(x, N, K)
    check_vocab(draft_model, target_model)
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}: use one of {', '.join(SCHEDULES)}")
    Ks = [K] * len(xs)

    # Step 1 for every active row: one batched draft call per draft position
    def propose(bs, rows, rooms):
        limit = [min(Ks[b], room) for b, room in zip(bs, rooms)]
        drafts, going = [[] for _ in rows], [n > 0 for n in limit]
        # a row that stopped still rides along (its cache stays put); its draft is not read
        while any(going):
            p = draft_model([x + d for x, d in zip(rows, drafts)])[:, -1]  # [B, V]
            for i in range(len(rows)):
                if going[i] and confidence is not None and p[i].max() < confidence:
                    going[i] = False  # unsure: this row stops drafting
                elif going[i]:  # p[i] [V]: the row's draft law
                    drafts[i].append(int(np.argmax(p[i])))
                    going[i] = len(drafts[i]) < limit[i]
        return [(d, list(range(-1, len(d) - 1))) for d in drafts]

    # Steps 3-4 on the row's [k + 1, V]: keep drafts up to the first mismatch
    def verify(b, drafts, parents, q, rng):
        best = [int(t) for t in np.argmax(q, -1)]  # [k + 1] the target's choices
        n = matched(drafts, best)
        if schedule == "heuristic":
            Ks[b] = Ks[b] + 2 if n == len(drafts) else max(1, Ks[b] - 1)
        return list(range(n)), best[n]

    return batch_tree_decoding(xs, target_model, N, None, propose, verify, stats, propose_rows=True)
