"""Autoregressive sampling for B prompts at once, one batched target call per token. Shapes: B rows,
V vocabulary. More: docs/algorithms.md (batched/autoregressive.py).
"""
from picospec.batched.rejection import row_uniforms, sample_rows
from picospec.sampling import check_inputs, warp


def batch_autoregressive_sampling(xs, model, N, rng, stats=None, generators=None,
                                  **sampling_options):
    """Each prompt of xs followed by N tokens: row b is what autoregressive_sampling gives xs[b]
    alone with generators[b] (else rng)."""
    for x in xs:
        check_inputs(x, N, **sampling_options)
    xs = [[int(t) for t in x] for x in xs]
    for _ in range(N if xs else 0):  # B rows, V vocabulary
        q = warp(model(xs)[:, -1], **sampling_options)  # [B, V] every row's next-token law
        tokens = sample_rows(q, row_uniforms(len(xs), 1, generators, rng)[:, 0])  # [B]
        for x, t in zip(xs, tokens):
            x.append(int(t))
        if stats is not None:
            stats.append({"drafted": 0, "accepted": [0] * len(xs),
                          "tokens": [[int(t)] for t in tokens]})
    return xs
