"""Cascade speculative drafting (CS Drafting): Chen et al. 2023, "Cascade Speculative Drafting for Even Faster LLM
Inference" (arXiv:2312.11462), Algorithm 1 (the recursive step), with the paper's two cascades:

- vertical: a drafter's own tokens come from speculative steps in which it reviews the next smaller drafter's
  drafts (one call scores several tokens), down to the smallest one, which simply samples;
- horizontal: the first positions of a draft come from the larger drafter, later positions (which the reviewer rejects
  more often) from the smaller, cheaper one.

models = [M_0, M_1, ..., M_n]: M_0 the target, then the drafters from largest to smallest (here: target, tiny-draft,
n-gram). k_matrix[i][j] (j > i, the paper's K): tokens drafter j adds, in turn, to a draft that M_i reviews. With
target, tiny-draft and n-gram: k_matrix[0][1] = K (tiny-draft's tokens), k_matrix[0][2] = K_tail (n-gram tokens after
them: horizontal), k_matrix[1][2] = K_inner (n-gram drafts per tiny-draft call: vertical). Letters as in
picospec/speculative.py: p = a drafter's law, q = the reviewer's; every law is warped alike.

Lossless at every temperature: every drafted token carries the law it was drawn from, and the reviewer verifies it
against that law. A token from a reviewing step of M_j follows p_j given the tokens before it (that step is lossless
for M_j: picospec/verify.py), whatever the smaller drafters proposed inside it; a token sampled by the smallest
drafter follows its own p_n. So the draft is an autoregressive draw from the position-wise law r_t (p_1 for the first
K positions, p_2 after them), drawn independently of the reviewer's coins, and verify_chain(drafts, [r_t], Q) keeps
the reviewer's law exactly as for one draft model. Verifying a vertical token against the smallest drafter's law
(what it proposed before its reviewer corrected it) instead breaks this: tests/test_cascade.py rejects that variant.

Example (by hand, temperature 0, K = 3, K_inner = 2, K_tail = 1): the n-gram proposes a, b; tiny-draft keeps a, rejects
b and puts c; the n-gram proposes d (K_inner is capped by the 1 token still needed), tiny-draft keeps it: a c d; the
n-gram adds e; the target scores a c d e in one call.
"""
from picospec.sampling import check_inputs, sample, warp
from picospec.verify import step_record, verify_chain


def review_step(x, models, k_matrix, limit, rng, sampling_options):
    """One speculative step of reviewer models[0] on the cascade below it: at most `limit` drafts.

    -> (new tokens, the reviewer's law of each [len(new), V], origins, drafts it reviewed).
    """
    drafts, laws = cascade_draft(x, models, k_matrix, limit, rng, sampling_options)
    Q = warp(models[0](x + drafts, len(drafts) + 1), **sampling_options)  # [len(drafts) + 1, V]
    n, token, origin = verify_chain(drafts, laws, Q, rng)
    return drafts[:n] + [token], list(Q[:n + 1]), ["draft"] * n + [origin], len(drafts)


def cascade_draft(x, models, k_matrix, limit, rng, sampling_options):
    """A draft for models[0]: drafter j = 1, 2, .. adds k_matrix[0][j] tokens in turn (horizontal), each either from
    review steps of drafter j over the drafters below it (vertical) or, with none below it, sampled from it.

    -> (drafts, laws): laws[t] [V] is the law drafts[t] was drawn from. At most `limit` tokens.
    """
    drafts, laws = [], []
    for j in range(1, len(models)):
        goal = min(len(drafts) + k_matrix[0][j], limit)
        below = [row[j:] for row in k_matrix[j:]]  # drafter j's own K, as a reviewer of the models after it
        while len(drafts) < goal:
            if any(below[0][1:]):  # vertical: drafter j reviews the smaller drafters' tokens
                new, new_laws, _, _ = review_step(x + drafts, models[j:], below, goal - len(drafts) - 1, rng,
                                                  sampling_options)
            else:  # the smallest drafter (or one with none below it) samples
                new_laws = [warp(models[j](x + drafts)[-1], **sampling_options)]  # [V]
                new = [sample(new_laws[0], rng)]
            drafts += new[:goal - len(drafts)]
            laws += new_laws[:len(drafts) - len(laws)]
    return drafts, laws


def cascade_decoding(x, target_model, draft_model, draft2_model, N, K, rng, K_inner=2, K_tail=2, stats=None,
                     **sampling_options):
    """x followed by exactly N tokens distributed as autoregressive sampling from the warped target.

    The target reviews K tokens of draft_model, each made by draft_model reviewing K_inner tokens of draft2_model
    (vertical; 0 = draft_model samples its own), then K_tail tokens of draft2_model (horizontal; 0 = none).
    """
    check_inputs(x, N, K, **sampling_options)
    models, k_matrix = [target_model, draft_model, draft2_model], [[0, K, K_tail], [0, 0, K_inner], [0, 0, 0]]
    x = list(x)
    T = len(x) + N
    while len(x) < T:
        new, _, origins, drafted = review_step(x, models, k_matrix, T - len(x) - 1, rng, sampling_options)
        x.extend(new)
        if stats is not None:
            stats.append(step_record(new, origins, drafted=drafted))
    return x
