"""Prompt lookup decoding for B prompts: each row's draft copied from its own text, all scored in
one tree call. Shapes: B rows, k drafts, V vocabulary.
"""
from picospec.batched.loop import batch_tree_decoding
from picospec.prompt_lookup import find_candidates, verify_copied
from picospec.sampling import check_inputs, warp


def batch_prompt_lookup_decoding(xs, target_model, N, rng, max_ngram_size=3, num_pred_tokens=10,
                                 stats=None, generators=None, **sampling_options):
    """Each prompt of xs followed by N tokens; row b is prompt_lookup_decoding(xs[b]) with
    generators[b]."""
    for x in xs:
        check_inputs(x, N, num_pred_tokens, **sampling_options)

    def propose(b, x, room):  # the draft as a chain: node i hangs below node i - 1
        drafts = find_candidates(x, max_ngram_size, num_pred_tokens)[:room]
        return drafts, list(range(-1, len(drafts) - 1))

    # Step 3 of prompt_lookup_decoding, on the row's [k + 1, V]
    def verify(b, drafts, parents, probs, rng):
        n, token, _ = verify_copied(drafts, warp(probs, **sampling_options), rng)
        return list(range(n)), token

    return batch_tree_decoding(xs, target_model, N, rng, propose, verify, stats, generators)
