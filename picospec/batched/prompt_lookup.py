"""Prompt lookup decoding for a batch of prompts (picospec/prompt_lookup.py, B rows at a time): every row drafts
from its own text; the drafts are chains scored in one batched tree call. Shapes: B rows, k drafts, V vocabulary.
Notation in full, worked examples and choices: docs/algorithms.md (batched/prompt_lookup.py).
"""
from picospec.batched.loop import batch_tree_decoding
from picospec.prompt_lookup import find_candidates, verify_copied
from picospec.sampling import check_inputs, warp


def batch_prompt_lookup_decoding(xs, target_model, N, rng, max_ngram_size=3, num_pred_tokens=10, stats=None,
                                 generators=None, **sampling_options):
    """Each prompt of xs followed by N tokens, as prompt_lookup_decoding gives it alone; one batched target call
    per step (picospec.batched.loop.batch_tree_decoding: its stats, generators and target). A row's draft is a chain."""
    for x in xs:
        check_inputs(x, N, num_pred_tokens, **sampling_options)

    def propose(b, x, room):  # the draft as a chain: node i hangs below node i - 1
        drafts = find_candidates(x, max_ngram_size, num_pred_tokens)[:room]
        return drafts, list(range(-1, len(drafts) - 1))

    def verify(b, drafts, parents, probs, rng):  # Step 3 of prompt_lookup_decoding, on the row's [k + 1, V]
        n, token, _ = verify_copied(drafts, warp(probs, **sampling_options), rng)
        return list(range(n)), token

    return batch_tree_decoding(xs, target_model, N, rng, propose, verify, stats, generators)
