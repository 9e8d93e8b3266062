"""Autoregressive sampling (ArS): Chen et al. 2023, "Accelerating Large Language Model Decoding with
Speculative Sampling" (arXiv:2302.01318), Algorithm 1; q = the target."""
from picospec.sampling import check_inputs, sample, warp
from picospec.verify import step_record


def autoregressive_sampling(x, model, N, rng, stats=None, **sampling_options):
    """x then N tokens drawn one at a time from the warped model."""
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
