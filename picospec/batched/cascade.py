"""Cascade speculative drafting (arXiv:2312.11462, Alg. 1) for B prompts, each model called once
for all rows. p = a drafter's law, q = its reviewer's. Shapes: B rows, n positions, V vocabulary.
"""
from picospec.cascade import append_drafts, below, cascade, sample_step, verify_drafts
from picospec.sampling import check_inputs, warp
from picospec.verify import step_record


def batch_review_step(xs, models, k_matrix, limits, rngs, sampling_options):
    """review_step for every row -> per row verify_drafts' tuple, None where limits[b] is None."""
    drafts, laws = batch_cascade_draft(xs, models, k_matrix, limits, rngs, sampling_options)
    # every row's reviewer laws: row b reads the last len(drafts[b]) + 1
    n = max(len(d) for d in drafts) + 1
    Q = warp(models[0]([x + d for x, d in zip(xs, drafts)], n), **sampling_options)  # [B, n, V]
    return [None if limit is None else verify_drafts(d, p, q[n - len(d) - 1:], rng)
            for d, p, q, rng, limit in zip(drafts, laws, Q, rngs, limits)]


def batch_cascade_draft(xs, models, k_matrix, limits, rngs, sampling_options):
    """cascade_draft for every row (none where limits[b] is None) -> per row (drafts, laws)."""
    drafts, laws = [[] for _ in xs], [[] for _ in xs]
    for j in range(1, len(models)):
        goals = [0 if limit is None else min(len(d) + k_matrix[0][j], limit)
                 for d, limit in zip(drafts, limits)]
        while any(len(d) < goal for d, goal in zip(drafts, goals)):
            ys = [x + d for x, d in zip(xs, drafts)]
            # room for drafts below drafter j; None: the row has reached its goal and rides along
            rooms = [goal - len(d) - 1 if len(d) < goal else None for d, goal in zip(drafts, goals)]
            # vertical: drafter j reviews the smaller drafters' tokens
            if any(below(k_matrix, j)[0][1:]):
                steps = batch_review_step(ys, models[j:], below(k_matrix, j), rooms, rngs,
                                          sampling_options)
            else:  # the smallest drafter samples
                P = warp(models[j](ys)[:, -1], **sampling_options)  # [B, V]
                steps = [None if room is None else sample_step(p, rng)
                         for p, rng, room in zip(P, rngs, rooms)]
            for d, p, step, goal in zip(drafts, laws, steps, goals):
                if step is not None:
                    append_drafts(d, p, step[0], step[1], goal)
    return drafts, laws


def batch_cascade_decoding(xs, target_model, draft_model, draft2_model, N, K, rng, K_inner=2,
                           K_tail=2, stats=None, generators=None, **sampling_options):
    """Each prompt of xs followed by N tokens; row b is cascade_decoding(xs[b]) with
    generators[b]."""
    for x in xs:
        check_inputs(x, N, K, **sampling_options)
    models, k_matrix = cascade(target_model, draft_model, draft2_model, K, K_inner, K_tail)
    xs, T = [list(x) for x in xs], [len(x) + N for x in xs]
    gen = [(generators or {}).get(b, rng) for b in range(len(xs))]
    while True:
        active = [b for b in range(len(xs)) if len(xs[b]) < T[b]]
        if not active:
            return xs
        # Step 1: the target's review step for every active row
        steps = batch_review_step([xs[b] for b in active], models, k_matrix,
                                  [T[b] - len(xs[b]) - 1 for b in active],
                                  [gen[b] for b in active], sampling_options)
        records = {b: step_record(new, origins, drafted)
                   for b, (new, _, origins, drafted) in zip(active, steps)}
        # Step 2: each row takes its own new tokens
        for b, record in records.items():
            xs[b].extend(record["tokens"])
        if stats is not None:
            stats.append({"drafted": max(r["drafted"] for r in records.values()),
                          "accepted": [records[b]["accepted"] if b in records else -1
                                       for b in range(len(xs))],
                          "tokens": [records[b]["tokens"] if b in records else []
                                     for b in range(len(xs))]})
