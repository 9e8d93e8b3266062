"""Autoregressive sampling (ArS): Chen et al. 2023 (arXiv:2302.01318), Algorithm 1. q = the target model.
Notation in full, worked examples and choices: docs/algorithms.md (autoregressive.py).
"""
from picospec.rejection import row_uniforms, sample_rows
from picospec.sampling import check_inputs, sample, warp
from picospec.verify import step_record


def autoregressive_sampling(x, model, N, rng, stats=None, **sampling_options):
    """x (prompt ids) followed by N tokens sampled one at a time from the warped model."""
    check_inputs(x, N, **sampling_options)
    x = list(x)
    T = len(x) + N
    while len(x) < T:
        q = warp(model(x)[-1], **sampling_options)  # [V] next-token distribution
        token = sample(q, rng)
        x.append(token)
        if stats is not None:
            stats.append(step_record([token], ["target"], drafted=0))
    return x


def batch_autoregressive_sampling(xs, model, N, rng, stats=None, generators=None, **sampling_options):
    """Each prompt of xs followed by N tokens, one batched call per token (picospec/batch.py's
    batched contract). More: docs/algorithms.md (autoregressive.py, batch_autoregressive_sampling)."""
    for x in xs:
        check_inputs(x, N, **sampling_options)
    xs = [[int(t) for t in x] for x in xs]
    for _ in range(N if xs else 0):  # B rows, V vocabulary
        q = warp(model(xs)[:, -1], **sampling_options)  # [B, V] every row's next-token law
        tokens = sample_rows(q, row_uniforms(len(xs), 1, generators, rng)[:, 0])  # [B]
        for x, t in zip(xs, tokens):
            x.append(int(t))
        if stats is not None:
            stats.append({"drafted": 0, "accepted": [0] * len(xs), "tokens": [[int(t)] for t in tokens]})
    return xs
