"""Prompt lookup decoding: Saxena 2023, "Prompt Lookup Decoding" (no paper): the draft copies what
followed an earlier match of the last n-gram (find_candidates); q = the target (verify_copied)."""
import numpy as np

from picospec.sampling import check_inputs, warp
from picospec.verify import step_record, verify_chain


def find_candidates(x, max_ngram_size=3, num_pred_tokens=10):
    """What followed the first earlier match of the longest trailing n-gram."""
    # transformers' rule: any earlier window counts, even one that overlaps the trailing n-gram, and
    # the copy may be short; Saxena's function skips a match whose copy starts in the last n tokens
    for n in range(min(max_ngram_size, len(x) - 1), 0, -1):
        ngram = x[-n:]
        for start in range(len(x) - n):  # windows x[start:start+n] before the trailing one
            if x[start:start + n] == ngram:
                return x[start + n:start + n + num_pred_tokens]
    return []


def verify_copied(drafts, Q, rng):
    """Drafts [k] as one-hot p against Q [k + 1, V] -> (n accepted, next token, origin)."""
    P = np.zeros((len(drafts), Q.shape[-1]), dtype=Q.dtype)  # one-hot proposals [k, V]
    P[np.arange(len(drafts)), drafts] = 1
    return verify_chain(drafts, P, Q, rng)


def prompt_lookup_decoding(x, target_model, N, rng, max_ngram_size=3, num_pred_tokens=10,
                           stats=None, **sampling_options):
    """x then N tokens of the warped target's law (greedy at T = 0)."""
    check_inputs(x, N, num_pred_tokens, **sampling_options)
    x = [int(t) for t in x]
    T = len(x) + N
    while len(x) < T:
        # Step 1: draft by string matching, at most the tokens still needed
        drafts = find_candidates(x, max_ngram_size, num_pred_tokens)[: T - len(x) - 1]
        # Step 2: one target call scores every draft position and the one after
        Q = warp(target_model(x + drafts, len(drafts) + 1), **sampling_options)  # [k + 1, V]
        # Step 3: the lossless verification core, as for any draft
        n, token, origin = verify_copied(drafts, Q, rng)
        new = drafts[:n] + [token]
        x.extend(new)
        if stats is not None:
            stats.append(step_record(new, ["draft"] * n + [origin], drafted=len(drafts)))
    return x
