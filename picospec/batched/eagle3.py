"""EAGLE-3 (arXiv:2503.01840) for B prompts: batched EAGLE-2 (picospec/batched/eagle2.py) with the
batched EAGLE-3 head, which names its draft vocabulary (d2t) and the target's blocks it reads
(picospec/eagle3.py)."""
from picospec.batched.eagle2 import batch_eagle2_decoding


def batch_eagle3_decoding(xs, target, draft, N, rng, depth=5, tree_top_k=4, total_tokens=16,
                          stats=None, generators=None, **sampling_options):
    """Each prompt of xs followed by N tokens; row b is eagle3_decoding(xs[b]) with
    generators[b]."""
    return batch_eagle2_decoding(xs, target, draft, N, rng, depth, tree_top_k, total_tokens, stats,
                                 generators, **sampling_options)
