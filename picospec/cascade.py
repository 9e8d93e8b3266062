"""Cascade speculative drafting: Chen et al. 2023, "Cascade Speculative Drafting for Even Faster LLM
Inference", NeurIPS 2024 (arXiv:2312.11462), Algorithm 1. models = [M_0 target, M_1, ..];
k_matrix[i][j]: tokens drafter j adds for reviewer M_i; p = a drafter's law, q = its reviewer's.

A step of reviewer M_0 (review_step): the draft grows drafter by drafter (horizontal cascade,
cascade_draft), drafter j adding k_matrix[0][j] tokens; a drafter with drafters below it makes
its tokens by its own review steps over them (vertical cascade), the smallest samples; then one
call of M_0 and verify_chain. Lossless: each token follows a law r_t given the tokens before it
(a review step of M_j is lossless for M_j, so its tokens follow M_j's law), drawn before
M_0's coins, and verify_chain judges each against its own r_t (docs/proofs.md)."""
from picospec.sampling import check_inputs, check_vocab, sample, warp
from picospec.verify import step_record, verify_chain


def cascade(target_model, draft_model, draft2_model, K, K_inner, K_tail):
    for drafter in (draft_model, draft2_model):  # one vocabulary for the three models
        check_vocab(drafter, target_model)
    return [target_model, draft_model, draft2_model], [[0, K, K_tail], [0, 0, K_inner], [0, 0, 0]]


def below(k_matrix, j):
    """Drafter j's K matrix: below([[0, 3, 1], [0, 0, 2], [0, 0, 0]], 1) -> [[0, 2], [0, 0]]."""
    return [row[j:] for row in k_matrix[j:]]


def sample_step(p, rng):
    return [sample(p, rng)], [p]


def append_drafts(drafts, laws, new, new_laws, goal):
    drafts += new[:goal - len(drafts)]
    laws += new_laws[:len(drafts) - len(laws)]


def verify_drafts(drafts, laws, Q, rng):
    """Q [len(drafts) + 1, V] -> (new tokens, their laws, origins, drafts reviewed)."""
    n, token, origin = verify_chain(drafts, laws, Q, rng)
    return drafts[:n] + [token], list(Q[:n + 1]), ["draft"] * n + [origin], len(drafts)


def review_step(x, models, k_matrix, limit, rng, sampling_options):
    """One speculative step of models[0] over the cascade below it."""
    drafts, laws = cascade_draft(x, models, k_matrix, limit, rng, sampling_options)
    Q = warp(models[0](x + drafts, len(drafts) + 1), **sampling_options)  # [len(drafts) + 1, V]
    return verify_drafts(drafts, laws, Q, rng)


def cascade_draft(x, models, k_matrix, limit, rng, sampling_options):
    """A draft for models[0], at most `limit` tokens -> (drafts, laws [V] they came from)."""
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
    """x then exactly N tokens of the warped target's law: K tokens of draft_model, which reviews
    K_inner drafts of draft2_model at a time (0: it samples them), then K_tail of draft2_model."""
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
