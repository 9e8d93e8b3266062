"""Cascade speculative drafting (CS Drafting): Chen et al. 2023, "Cascade Speculative Drafting for
Even Faster LLM Inference" (arXiv:2312.11462), Algorithm 1 (the recursive step), with the paper's
vertical and horizontal cascades. models = [M_0 (the target), M_1, .., M_n (drafters, largest
first)]; k_matrix[i][j] = tokens drafter j adds to a draft M_i reviews. p = a drafter's law, q = the
reviewer's. Shapes: n positions scored, V vocabulary. Lossless: each drafted token is verified
against the law it was drawn from (docs/proofs.md). More: docs/algorithms.md (cascade.py).
"""
from picospec.sampling import check_inputs, sample, warp
from picospec.verify import step_record, verify_chain


def cascade(target_model, draft_model, draft2_model, K, K_inner, K_tail):
    """-> (models, k_matrix) of the three-model cascade (the module docstring's example)."""
    return [target_model, draft_model, draft2_model], [[0, K, K_tail], [0, 0, K_inner], [0, 0, 0]]


def below(k_matrix, j):
    """The K matrix of drafter j as a reviewer of the drafters after it: below(k_matrix, j)[0][1:]
    all zero = drafter j has none to review and samples alone. Example: below([[0, 3, 1], [0, 0, 2],
    [0, 0, 0]], 1) = [[0, 2], [0, 0]]."""
    return [row[j:] for row in k_matrix[j:]]


def sample_step(p, rng):
    """The smallest drafter's step: one token from its warped law p [V] -> (new tokens, their
    laws)."""
    return [sample(p, rng)], [p]


def append_drafts(drafts, laws, new, new_laws, goal):
    """Add a step's new tokens to the draft up to goal, each with the law it was drawn from (in
    place)."""
    drafts += new[:goal - len(drafts)]
    laws += new_laws[:len(drafts) - len(laws)]


def verify_drafts(drafts, laws, Q, rng):
    """The reviewer's check of its draft: Q [len(drafts) + 1, V] its warped law after each prefix.

    -> (new tokens, the reviewer's law of each [len(new), V], origins, drafts it reviewed).
    """
    n, token, origin = verify_chain(drafts, laws, Q, rng)
    return drafts[:n] + [token], list(Q[:n + 1]), ["draft"] * n + [origin], len(drafts)


def review_step(x, models, k_matrix, limit, rng, sampling_options):
    """One speculative step of reviewer models[0] on the cascade below it: at most `limit` drafts
    (verify_drafts)."""
    drafts, laws = cascade_draft(x, models, k_matrix, limit, rng, sampling_options)
    Q = warp(models[0](x + drafts, len(drafts) + 1), **sampling_options)  # [len(drafts) + 1, V]
    return verify_drafts(drafts, laws, Q, rng)


def cascade_draft(x, models, k_matrix, limit, rng, sampling_options):
    """A draft for models[0]: drafter j = 1, 2, .. adds k_matrix[0][j] tokens in turn (horizontal),
    each either from review steps of drafter j over the drafters below it (vertical) or, with none
    below it, sampled from it.

    -> (drafts, laws): laws[t] [V] is the law drafts[t] was drawn from. At most `limit` tokens.
    """
    drafts, laws = [], []
    for j in range(1, len(models)):
        goal = min(len(drafts) + k_matrix[0][j], limit)
        while len(drafts) < goal:
            # vertical: drafter j reviews the smaller drafters' tokens
            if any(below(k_matrix, j)[0][1:]):
                new, new_laws, _, _ = review_step(x + drafts, models[j:], below(k_matrix, j),
                                                  goal - len(drafts) - 1, rng, sampling_options)
            else:  # the smallest drafter (or one with none below it) samples
                new, new_laws = sample_step(warp(models[j](x + drafts)[-1], **sampling_options),
                                            rng)  # [V]
            append_drafts(drafts, laws, new, new_laws, goal)
    return drafts, laws


def cascade_decoding(x, target_model, draft_model, draft2_model, N, K, rng, K_inner=2, K_tail=2,
                     stats=None, **sampling_options):
    """x followed by exactly N tokens distributed as autoregressive sampling from the warped target.

    The target reviews K tokens of draft_model, each made by draft_model reviewing K_inner tokens of
    draft2_model (vertical; 0 = draft_model samples its own), then K_tail tokens of draft2_model
    (horizontal; 0 = none).
    """
    check_inputs(x, N, K, **sampling_options)
    models, k_matrix = cascade(target_model, draft_model, draft2_model, K, K_inner, K_tail)
    x = list(x)
    T = len(x) + N
    while len(x) < T:
        new, _, origins, drafted = review_step(x, models, k_matrix, T - len(x) - 1, rng,
                                               sampling_options)
        x.extend(new)
        if stats is not None:
            stats.append(step_record(new, origins, drafted=drafted))
    return x
