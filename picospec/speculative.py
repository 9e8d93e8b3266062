"""Speculative sampling (SpS): Chen, Borgeaud, Irving, Lespiau, Sifre, Jumper 2023, "Accelerating
Large Language Model Decoding with Speculative Sampling" (arXiv:2302.01318), Algorithm 2, in its
letters: p = draft, q = target, K drafts (the lookahead), T the length to reach (here len(x) + N
for N new tokens; the paper indexes from 1). Step 3 is verify_chain.

The paper's T is a minimum: its last step may pass it by up to K tokens. Here a step drafts at
most the tokens still needed minus one, so exactly N come, each step still the paper's step.
With each draft kept with probability alpha, independently, a step of k drafts yields
(1 - alpha^(k+1)) / (1 - alpha) tokens on average (the proof: theory.py)."""
import numpy as np

from picospec.sampling import check_inputs, check_vocab, sample, warp
from picospec.verify import step_record, verify_chain


def speculative_sampling(x, draft_model, target_model, N, K, rng, stats=None, **sampling_options):
    """x then exactly N tokens of the warped target's law."""
    check_inputs(x, N, K, **sampling_options)
    check_vocab(draft_model, target_model)
    x = list(x)
    T = len(x) + N
    while len(x) < T:
        # never draft past N: a step yields up to k + 1 tokens (the drafts and the target's own)
        k = min(K, T - len(x) - 1)
        # Step 1: draft k tokens autoregressively from p
        drafts, P = [], []
        for _ in range(k):
            p = warp(draft_model(x + drafts)[-1], **sampling_options)  # [V]
            P.append(p)
            drafts.append(sample(p, rng))
        # Step 2: the target scores all k drafts (and the position after them) in one call
        Q = warp(target_model(x + drafts, k + 1), **sampling_options)  # [k + 1, V]
        # Step 3: accept or reject each draft; at the first rejection resample from the residual,
        # else a bonus token
        n, token, origin = verify_chain(drafts, np.asarray(P), Q, rng)  # P [k, V]
        new = drafts[:n] + [token]
        x.extend(new)
        if stats is not None:
            stats.append(step_record(new, ["draft"] * n + [origin], drafted=k))
    return x
