"""Autoregressive sampling (Chen et al. 2023, Alg. 1) for B prompts, a batched target call per
token. q = the target's law. Shapes: B rows, V vocabulary.
"""
from picospec.batched.rejection import row_uniforms, sample_rows
from picospec.sampling import check_inputs, warp


def batch_autoregressive_sampling(xs, model, N, rng, stats=None, generators=None,
                                  **sampling_options):
    """Each prompt of xs followed by N tokens; row b is autoregressive_sampling(xs[b]) with
    generators[b]."""
    for x in xs:
        check_inputs(x, N, **sampling_options)
    xs = [[int(t) for t in x] for x in xs]
    for _ in range(N if xs else 0):
        q = warp(model(xs)[:, -1], **sampling_options)  # [B, V] every row's next-token law
        tokens = sample_rows(q, row_uniforms(len(xs), 1, generators, rng)[:, 0])  # [B]
        for x, t in zip(xs, tokens):
            x.append(int(t))
        if stats is not None:
            stats.append({"drafted": 0, "accepted": [0] * len(xs),
                          "tokens": [[int(t)] for t in tokens]})
    return xs
