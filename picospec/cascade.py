"""Cascade speculative drafting (CS Drafting): Chen et al. 2023, "Cascade Speculative Drafting for
Even Faster LLM Inference" (arXiv:2312.11462), Algorithm 1, with its vertical and horizontal
cascades. models = [M_0 (the target), M_1, .., M_n (drafters, largest first)]; k_matrix[i][j] =
tokens drafter j adds to a draft M_i reviews; p = a drafter's law, q = its reviewer's. Steps:
cascade_draft (horizontal), review_step (vertical), verify_drafts. Shapes: V = n_vocab."""
from picospec.sampling import check_inputs, sample, warp
from picospec.verify import step_record, verify_chain


def cascade(target_model, draft_model, draft2_model, K, K_inner, K_tail):
    """The three-model cascade -> (models, k_matrix)."""
    return [target_model, draft_model, draft2_model], [[0, K, K_tail], [0, 0, K_inner], [0, 0, 0]]


def below(k_matrix, j):
    """Drafter j's K matrix as reviewer of the drafters after it.
    Example: below([[0, 3, 1], [0, 0, 2], [0, 0, 0]], 1) -> [[0, 2], [0, 0]]."""
    return [row[j:] for row in k_matrix[j:]]


def sample_step(p, rng):
    """The smallest drafter's step: one token from its warped p [V] -> ([token], [p])."""
    return [sample(p, rng)], [p]


def append_drafts(drafts, laws, new, new_laws, goal):
    """Extend drafts and laws in place with a step's new tokens, up to goal."""
    drafts += new[:goal - len(drafts)]
    laws += new_laws[:len(drafts) - len(laws)]


def verify_drafts(drafts, laws, Q, rng):
    """The reviewer's check, Q [len(drafts) + 1, V] -> (new tokens, their reviewer laws
    [len(new), V], origins, drafts reviewed)."""
    n, token, origin = verify_chain(drafts, laws, Q, rng)
    return drafts[:n] + [token], list(Q[:n + 1]), ["draft"] * n + [origin], len(drafts)


def review_step(x, models, k_matrix, limit, rng, sampling_options):
    """One speculative step of models[0] on the cascade below it, at most `limit` drafts."""
    drafts, laws = cascade_draft(x, models, k_matrix, limit, rng, sampling_options)
    Q = warp(models[0](x + drafts, len(drafts) + 1), **sampling_options)  # [len(drafts) + 1, V]
    return verify_drafts(drafts, laws, Q, rng)


def cascade_draft(x, models, k_matrix, limit, rng, sampling_options):
    """A draft for models[0]: each drafter j adds k_matrix[0][j] tokens, reviewing the drafters
    below it or sampling -> (drafts, laws [V] each was drawn from), at most `limit` tokens."""
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
    """x followed by exactly N tokens distributed as sampling from the warped target: the
    target reviews K tokens of draft_model (each from K_inner of draft2_model), then K_tail of
    draft2_model."""
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
