"""Speculative sampling (Chen et al. 2023, Alg. 2) for B prompts, verified by the vLLM-contract
rejection sampler. p = draft, q = target. Shapes: B rows, k drafts, V vocabulary.
"""
import numpy as np

from picospec.batched.rejection import rejection_sample, row_uniforms, sample_rows
from picospec.sampling import check_inputs, check_vocab, warp


def batch_speculative_sampling(xs, draft_model, target_model, N, K, rng, stats=None,
                               generators=None, **sampling_options):
    """Each prompt of xs followed by N tokens, row b distributed as speculative_sampling gives
    xs[b], drawn with generators[b]."""
    for x in xs:
        check_inputs(x, N, K, **sampling_options)
    check_vocab(draft_model, target_model)
    xs = [list(x) for x in xs]
    T = [len(x) + N for x in xs]
    while True:
        active = [b for b, x in enumerate(xs) if len(x) < T[b]]
        if not active:
            return xs
        rows = [xs[b] for b in active]
        gens = {i: generators[b] for i, b in enumerate(active) if generators and b in generators}
        k = min(K, max(T[b] - len(xs[b]) for b in active) - 1) or 1
        # a row that needs r + 1 < k + 1 more tokens feeds the models its first r + 1 drafts only
        # (its context window may end there): the rest are drawn, never read, and cut in Step 3
        room = [T[b] - len(xs[b]) - 1 for b in active]  # r per row
        # Step 1: draft k tokens for every active row (k batched draft calls)
        drafts, drawn, P = [[] for _ in active], [[] for _ in active], []  # fed; every draft
        for _ in range(k):
            # [B, V]
            p = warp(draft_model([x + d for x, d in zip(rows, drafts)])[:, -1], **sampling_options)
            P.append(p)
            for d, t in zip(drawn, sample_rows(p, row_uniforms(len(active), 1, gens, rng)[:, 0])):
                d.append(int(t))
            drafts = [d[:r + 1] for d, r in zip(drawn, room)]
        # Step 2: one batched target call scores k + 1 positions of every row
        # [B, k + 1, V]
        Q = warp(target_model([x + d for x, d in zip(rows, drafts)], k + 1), **sampling_options)
        # [B, k + 1, V]: a cut row's law after x + d[:j] moved to j (the cut ones repeat the last)
        Q = np.stack([q if r + 1 >= k else
                      np.concatenate([q[k - r - 1:], np.repeat(q[-1:], k - r - 1, 0)])
                      for q, r in zip(Q, room)])
        # [B, 1]
        bonus = sample_rows(Q[:, -1], row_uniforms(len(active), 1, gens, rng)[:, 0])[:, None]
        # Step 3: the rejection sampler; each row advances by its own count
        out = rejection_sample(Q, bonus, np.stack(P, axis=1), np.array(drawn, dtype=np.int64),
                               gens, rng)
        step = {"drafted": k, "accepted": [-1] * len(xs), "tokens": [[] for _ in xs]}
        for i, b in enumerate(active):
            new = [int(t) for t in out[i] if t >= 0][: T[b] - len(xs[b])]
            xs[b].extend(new)
            kept = min(int((out[i] >= 0).sum()) - 1, len(new))  # a row cut short keeps only drafts
            step["accepted"][b], step["tokens"][b] = kept, new
        if stats is not None:
            stats.append(step)
