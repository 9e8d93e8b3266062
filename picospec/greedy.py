"""Greedy draft-and-verify (assisted generation): Leviathan, Kalman, Matias 2023, "Fast Inference
from Transformers via Speculative Decoding", ICML 2023 (arXiv:2211.17192), Algorithm 1 (section
2.3) at temperature 0, where argmax is sampling from a one-hot law (section 2.2). p = draft,
q = target (the paper's M_q and M_p: its letters are swapped).

With p and q one-hot, min(1, q(x) / p(x)) is 1 when the draft x is argmax q and 0 otherwise, and
the residual norm(max(0, q - p)) is the one-hot of argmax q: accept-or-resample becomes exact
match (matched), and the output is greedy decoding of q token for token. K per step: constant,
or transformers' assisted-generation heuristic (K + 2 after a full accept, else K - 1, at least
1; here a full accept is of the k drafts made, where transformers asks for all K); confidence
stops drafting once the draft's top probability falls below it, before that token."""
import numpy as np

from picospec.sampling import check_inputs, check_vocab
from picospec.verify import step_record

SCHEDULES = ("constant", "heuristic")


def matched(drafts, best):
    """Drafts equal to the target's argmax, to the first mismatch: [5, 7, 2], [5, 7, 9, 4] -> 2."""
    n = 0
    while n < len(drafts) and drafts[n] == best[n]:
        n += 1
    return n


def greedy_decoding(x, draft_model, target_model, N, K, stats=None, schedule="constant",
                    confidence=None):
    """x then N tokens of target_model's greedy decoding, k <= K drafts a call."""
    check_inputs(x, N, K)
    check_vocab(draft_model, target_model)
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}: use one of {', '.join(SCHEDULES)}")
    x = list(x)
    T = len(x) + N
    while len(x) < T:
        # Step 1: draft greedily, at most the tokens still needed, stopping early when the draft is
        # unsure
        drafts = []
        for _ in range(min(K, T - len(x) - 1)):
            p = draft_model(x + drafts)[-1]  # [V]
            if confidence is not None and p.max() < confidence:
                break
            drafts.append(int(np.argmax(p)))
        k = len(drafts)
        # Step 2: one target call: its argmax after x and after each draft prefix
        q = target_model(x + drafts, k + 1)  # [k + 1, V]
        best = [int(t) for t in np.argmax(q, -1)]
        # Step 3: keep drafts while they equal the target's choice, then the target's token
        n = matched(drafts, best)
        new = drafts[:n] + [best[n]]
        x.extend(new)
        if stats is not None:
            stats.append(step_record(new, ["draft"] * n + ["bonus" if n == k else "resample"],
                                     drafted=k))
        # Step 4: the next K
        if schedule == "heuristic":
            K = K + 2 if n == k else max(1, K - 1)
    return x
