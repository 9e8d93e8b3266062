"""Cascade speculative drafting (CS Drafting): Chen et al. 2023, "Cascade Speculative Drafting for Even Faster LLM
Inference" (arXiv:2312.11462), Algorithm 1 (the recursive step), with the paper's vertical and horizontal cascades. models = [M_0 (the
target), M_1, .., M_n (drafters, largest first)]; k_matrix[i][j] = tokens drafter j adds to a draft M_i reviews.
p = a drafter's law, q = the reviewer's. Shapes: B rows of a batch, n positions scored, V vocabulary.
Lossless: each drafted token is verified against the law it was drawn from (docs/proofs.md).
Notation in full, worked examples and choices: docs/algorithms.md (cascade.py).
"""
from picospec.sampling import check_inputs, sample, warp
from picospec.verify import step_record, verify_chain


def cascade(target_model, draft_model, draft2_model, K, K_inner, K_tail):
    """-> (models, k_matrix) of the three-model cascade (the module docstring's example)."""
    return [target_model, draft_model, draft2_model], [[0, K, K_tail], [0, 0, K_inner], [0, 0, 0]]


def below(k_matrix, j):
    """The K matrix of drafter j as a reviewer of the drafters after it: below(k_matrix, j)[0][1:] all zero = drafter j
    has none to review and samples alone. Example: below([[0, 3, 1], [0, 0, 2], [0, 0, 0]], 1) = [[0, 2], [0, 0]]."""
    return [row[j:] for row in k_matrix[j:]]


def sample_step(p, rng):
    """The smallest drafter's step: one token from its warped law p [V] -> (new tokens, their laws)."""
    return [sample(p, rng)], [p]


def keep(drafts, laws, new, new_laws, goal):
    """Add a step's new tokens to the draft up to goal, each with the law it was drawn from (in place)."""
    drafts += new[:goal - len(drafts)]
    laws += new_laws[:len(drafts) - len(laws)]


def verify_drafts(drafts, laws, Q, rng):
    """The reviewer's check of its draft: Q [len(drafts) + 1, V] its warped law after each prefix.

    -> (new tokens, the reviewer's law of each [len(new), V], origins, drafts it reviewed).
    """
    n, token, origin = verify_chain(drafts, laws, Q, rng)
    return drafts[:n] + [token], list(Q[:n + 1]), ["draft"] * n + [origin], len(drafts)


def review_step(x, models, k_matrix, limit, rng, sampling_options):
    """One speculative step of reviewer models[0] on the cascade below it: at most `limit` drafts (verify_drafts)."""
    drafts, laws = cascade_draft(x, models, k_matrix, limit, rng, sampling_options)
    Q = warp(models[0](x + drafts, len(drafts) + 1), **sampling_options)  # [len(drafts) + 1, V]
    return verify_drafts(drafts, laws, Q, rng)


def cascade_draft(x, models, k_matrix, limit, rng, sampling_options):
    """A draft for models[0]: drafter j = 1, 2, .. adds k_matrix[0][j] tokens in turn (horizontal), each either from
    review steps of drafter j over the drafters below it (vertical) or, with none below it, sampled from it.

    -> (drafts, laws): laws[t] [V] is the law drafts[t] was drawn from. At most `limit` tokens.
    """
    drafts, laws = [], []
    for j in range(1, len(models)):
        goal = min(len(drafts) + k_matrix[0][j], limit)
        while len(drafts) < goal:
            if any(below(k_matrix, j)[0][1:]):  # vertical: drafter j reviews the smaller drafters' tokens
                new, new_laws, _, _ = review_step(x + drafts, models[j:], below(k_matrix, j), goal - len(drafts) - 1,
                                                  rng, sampling_options)
            else:  # the smallest drafter (or one with none below it) samples
                new, new_laws = sample_step(warp(models[j](x + drafts)[-1], **sampling_options), rng)  # [V]
            keep(drafts, laws, new, new_laws, goal)
    return drafts, laws


def cascade_decoding(x, target_model, draft_model, draft2_model, N, K, rng, K_inner=2, K_tail=2, stats=None,
                     **sampling_options):
    """x followed by exactly N tokens distributed as autoregressive sampling from the warped target.

    The target reviews K tokens of draft_model, each made by draft_model reviewing K_inner tokens of draft2_model
    (vertical; 0 = draft_model samples its own), then K_tail tokens of draft2_model (horizontal; 0 = none).
    """
    check_inputs(x, N, K, **sampling_options)
    models, k_matrix = cascade(target_model, draft_model, draft2_model, K, K_inner, K_tail)
    x = list(x)
    T = len(x) + N
    while len(x) < T:
        new, _, origins, drafted = review_step(x, models, k_matrix, T - len(x) - 1, rng, sampling_options)
        x.extend(new)
        if stats is not None:
            stats.append(step_record(new, origins, drafted=drafted))
    return x


# ---- the batched form: the same steps for B rows, one model call for all of them ----

def batch_review_step(xs, models, k_matrix, limits, rngs, sampling_options):
    """review_step for every row b of xs with at most limits[b] drafts and generator rngs[b]: one batched call of
    the reviewer. A row whose limit is None rides along (no draft, no draw) -> per row verify_drafts' tuple, or None.
    """
    drafts, laws = batch_cascade_draft(xs, models, k_matrix, limits, rngs, sampling_options)
    n = max(len(d) for d in drafts) + 1  # every row's reviewer laws: row b reads the last len(drafts[b]) + 1
    Q = warp(models[0]([x + d for x, d in zip(xs, drafts)], n), **sampling_options)  # [B, n, V]
    return [None if limit is None else verify_drafts(d, p, q[n - len(d) - 1:], rng)
            for d, p, q, rng, limit in zip(drafts, laws, Q, rngs, limits)]


def batch_cascade_draft(xs, models, k_matrix, limits, rngs, sampling_options):
    """cascade_draft for every row b of xs (limits[b] None: the row rides along, its draft stays empty); each step of a
    turn calls the drafter once for all rows, and a row that has reached its goal rides along -> (drafts, laws)."""
    drafts, laws = [[] for _ in xs], [[] for _ in xs]
    for j in range(1, len(models)):
        goals = [0 if limit is None else min(len(d) + k_matrix[0][j], limit) for d, limit in zip(drafts, limits)]
        while any(len(d) < goal for d, goal in zip(drafts, goals)):
            ys = [x + d for x, d in zip(xs, drafts)]
            # room for drafts below drafter j; None: the row has reached its goal and rides along
            rooms = [goal - len(d) - 1 if len(d) < goal else None for d, goal in zip(drafts, goals)]
            if any(below(k_matrix, j)[0][1:]):  # vertical: drafter j reviews the smaller drafters' tokens
                steps = batch_review_step(ys, models[j:], below(k_matrix, j), rooms, rngs, sampling_options)
            else:  # the smallest drafter samples
                P = warp(models[j](ys)[:, -1], **sampling_options)  # [B, V]
                steps = [None if room is None else sample_step(p, rng) for p, rng, room in zip(P, rngs, rooms)]
            for d, p, step, goal in zip(drafts, laws, steps, goals):
                if step is not None:
                    keep(d, p, step[0], step[1], goal)
    return drafts, laws


def batch_cascade_decoding(xs, target_model, draft_model, draft2_model, N, K, rng, K_inner=2, K_tail=2, stats=None,
                           generators=None, **sampling_options):
    """Each prompt of xs followed by exactly N tokens, row b distributed as cascade_decoding gives
    xs[b] alone, and equal to it draw for draw with generators[b] (a numpy Generator). More:
    docs/algorithms.md (cascade.py, batch_cascade_decoding)."""
    for x in xs:
        check_inputs(x, N, K, **sampling_options)
    models, k_matrix = cascade(target_model, draft_model, draft2_model, K, K_inner, K_tail)
    xs, T = [list(x) for x in xs], [len(x) + N for x in xs]
    gen = [(generators or {}).get(b, rng) for b in range(len(xs))]
    while True:
        active = [b for b in range(len(xs)) if len(xs[b]) < T[b]]
        if not active:
            return xs
        # Step 1: the target's review step for every active row (each model called once where the recursion calls it)
        steps = batch_review_step([xs[b] for b in active], models, k_matrix, [T[b] - len(xs[b]) - 1 for b in active],
                                  [gen[b] for b in active], sampling_options)
        records = {b: step_record(new, origins, drafted) for b, (new, _, origins, drafted) in zip(active, steps)}
        # Step 2: each row takes its own new tokens
        for b, record in records.items():
            xs[b].extend(record["tokens"])
        if stats is not None:
            stats.append({"drafted": max(r["drafted"] for r in records.values()),
                          "accepted": [records[b]["accepted"] if b in records else -1 for b in range(len(xs))],
                          "tokens": [records[b]["tokens"] if b in records else [] for b in range(len(xs))]})
