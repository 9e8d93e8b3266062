"""Self-speculative decoding for B prompts, each row with its own threshold. p = draft, q = target.
Shapes: B rows, k drafts, V vocabulary.
"""
from picospec.sampling import check_inputs, sample, warp
from picospec.self_draft import adapt_threshold, draw
from picospec.verify import verify_chain


def batch_self_speculative_decoding(xs, draft_model, target_model, N, K, rng, threshold=0.0,
                                    adaptive=False, alpha=0.9, epsilon=0.01, beta1=0.5, beta2=0.9,
                                    stats=None, generators=None, **sampling_options):
    """Each prompt of xs followed by N tokens; row b is self_speculative_decoding(xs[b]) with
    generators[b]."""
    for x in xs:
        check_inputs(x, N, K, **sampling_options)
    xs, B = [list(x) for x in xs], len(xs)
    T, gen = [len(x) + N for x in xs], [(generators or {}).get(b, rng) for b in range(B)]
    gamma, AR = [threshold] * B, [0.0] * B
    # Step 0: every row's first token from the target, in one call
    Q = warp(target_model(xs)[:, -1], **sampling_options)  # [B, V]
    for x, q, g in zip(xs, Q, gen):
        x.append(sample(q, g))
    if stats is not None:
        stats.append({"drafted": 0, "accepted": [0] * B, "tokens": [x[-1:] for x in xs]})
    while True:
        active = [b for b in range(B) if len(xs[b]) < T[b]]
        if not active:
            return xs
        # Step 1: every row drafts until its K tokens or until unsure, one batched draft call per
        # draft position
        drafts, P = draft_rows(draft_model, [xs[b] for b in active],
                               [min(K, T[b] - len(xs[b]) - 1) for b in active],
                               [gamma[b] for b in active], [gen[b] for b in active],
                               **sampling_options)
        # Step 2: ONE batched target call scores every row's drafts. Rows with fewer drafts than k
        # are filled up to k with token 0, whose laws come after the ones read and change none of
        # them (the target is causal)
        k = max(len(d) for d in drafts)
        padded = [xs[b] + d + [0] * (k - len(d)) for b, d in zip(active, drafts)]
        Q = warp(target_model(padded, k + 1), **sampling_options)  # [B, k + 1, V]
        step = {"drafted": k, "accepted": [-1] * B, "tokens": [[] for _ in xs]}
        for i, (b, d) in enumerate(zip(active, drafts)):
            n, token, _ = verify_chain(d, P[i], Q[i, :len(d) + 1], gen[b])
            xs[b].extend(d[:n] + [token])
            step["accepted"][b], step["tokens"][b] = n, d[:n] + [token]
            # Step 3: the row's own threshold moves towards the acceptance rate alpha
            if adaptive and d:
                gamma[b], AR[b] = adapt_threshold(gamma[b], AR[b], n, len(d), alpha, epsilon, beta1,
                                                  beta2)
        if stats is not None:
            stats.append(step)


def draft_rows(draft_model, rows, ks, gammas, gens, **sampling_options):
    """Step 1: row i drafts up to ks[i] tokens, stopping below confidence gammas[i] -> per row
    (drafts, their laws [V])."""
    drafts, P, going = [[] for _ in rows], [[] for _ in rows], [k > 0 for k in ks]
    while any(going):
        # [B, V] the draft's own laws
        p_raw = draft_model([x + d for x, d in zip(rows, drafts)])[:, -1]
        for i in [i for i, g in enumerate(going) if g]:
            token, p, confidence = draw(p_raw[i], gens[i], **sampling_options)
            drafts[i].append(token)
            P[i].append(p)
            going[i] = len(drafts[i]) < ks[i] and confidence >= gammas[i]
    return drafts, P
