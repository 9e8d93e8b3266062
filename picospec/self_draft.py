"""Self-speculative decoding: the draft is the target itself, on a shorter path through its own layers.
Shapes: B rows, V vocabulary.
Notation in full, worked examples and choices: docs/algorithms.md (self_draft.py).
"""
from picospec.sampling import check_inputs, sample, warp
from picospec.verify import step_record, verify_chain


def adapt_threshold(gamma, AR, accepted, drafted, alpha, epsilon, beta1, beta2):
    """Draft & Verify's adaptive draft-exiting: one update of the running acceptance AR and the threshold gamma.
    -> (gamma, AR).

    Example: gamma 0.6, AR 0.9, 1 of 4 drafts kept, alpha 0.9, epsilon 0.01, beta1 0.5, beta2 0.9 -> AR 0.575 <= 0.9,
    so gamma' = 0.61 and gamma = 0.9 * 0.6 + 0.1 * 0.61 = 0.601.
    """
    AR = beta1 * AR + (1 - beta1) * accepted / drafted
    gamma_next = gamma + epsilon if AR <= alpha else gamma - epsilon  # the paper's gamma tilde
    return beta2 * gamma + (1 - beta2) * gamma_next, AR


def draft_token(draft_model, x, rng, **sampling_options):
    """One draft token after x -> (token, the law it was drawn from [V], the draft's own probability of it)."""
    return draw(draft_model(x)[-1], rng, **sampling_options)


def draw(p_raw, rng, **sampling_options):
    """A token from the draft's law after some prefix, p_raw [V] -> (token, warped law [V], confidence)."""
    p = warp(p_raw, **sampling_options)  # [V] the law the token is drawn from; p_raw is the draft's own: its confidence
    token = sample(p, rng)
    return token, p, float(p_raw[token])


def self_speculative_decoding(x, draft_model, target_model, N, K, rng, threshold=0.0, adaptive=False, alpha=0.9,
                              epsilon=0.01, beta1=0.5, beta2=0.9, stats=None, **sampling_options):
    """x followed by exactly N tokens distributed as autoregressive sampling from the warped target.

    threshold: gamma, the confidence below which drafting stops (0: always K drafts); adaptive: update gamma after
    every step (Draft & Verify's rule). `stats`, if a list, gets one picospec.verify.step_record per target call.
    """
    check_inputs(x, N, K, **sampling_options)
    x, gamma, AR = list(x), threshold, 0.0
    T = len(x) + N
    # Step 0: the first token comes from the target, so the draft only ever extends a prefix the target has read
    token = sample(warp(target_model(x)[-1], **sampling_options), rng)
    x.append(token)
    if stats is not None:
        stats.append(step_record([token], ["target"], drafted=0))
    while len(x) < T:
        k = min(K, T - len(x) - 1)
        # Step 1: draft until K tokens, or until the draft is unsure of the token it drew
        drafts, P = [], []
        while len(drafts) < k:
            token, p, confidence = draft_token(draft_model, x + drafts, rng, **sampling_options)
            drafts.append(token)
            P.append(p)
            if confidence < gamma:
                break
        # Step 2: the target scores the drafts (and the position after them) in one call; accept or resample
        Q = warp(target_model(x + drafts, len(drafts) + 1), **sampling_options)  # [len(drafts) + 1, V]
        n, token, origin = verify_chain(drafts, P, Q, rng)
        new = drafts[:n] + [token]
        x.extend(new)
        if stats is not None:
            stats.append(step_record(new, ["draft"] * n + [origin], drafted=len(drafts)))
        # Step 3: move the threshold towards the acceptance rate alpha
        if adaptive and drafts:
            gamma, AR = adapt_threshold(gamma, AR, n, len(drafts), alpha, epsilon, beta1, beta2)
    return x


def batch_self_speculative_decoding(xs, draft_model, target_model, N, K, rng, threshold=0.0, adaptive=False, alpha=0.9,
                                    epsilon=0.01, beta1=0.5, beta2=0.9, stats=None, generators=None,
                                    **sampling_options):
    """Each prompt of xs followed by N tokens. More: docs/algorithms.md (self_draft.py,
    batch_self_speculative_decoding)."""
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
        # Step 1: every row drafts until its K tokens or until unsure, one batched draft call per draft position
        drafts, P = draft_rows(draft_model, [xs[b] for b in active], [min(K, T[b] - len(xs[b]) - 1) for b in active],
                               [gamma[b] for b in active], [gen[b] for b in active], **sampling_options)
        # Step 2: ONE batched target call scores every row's drafts. Rows with fewer drafts than k are filled up to k
        # with token 0, whose laws come after the ones read and change none of them (the target is causal)
        k = max(len(d) for d in drafts)
        Q = warp(target_model([xs[b] + d + [0] * (k - len(d)) for b, d in zip(active, drafts)], k + 1),
                 **sampling_options)  # [B, k + 1, V]
        step = {"drafted": k, "accepted": [-1] * B, "tokens": [[] for _ in xs]}
        for i, (b, d) in enumerate(zip(active, drafts)):
            n, token, _ = verify_chain(d, P[i], Q[i, :len(d) + 1], gen[b])
            xs[b].extend(d[:n] + [token])
            step["accepted"][b], step["tokens"][b] = n, d[:n] + [token]
            # Step 3: the row's own threshold moves towards the acceptance rate alpha
            if adaptive and d:
                gamma[b], AR[b] = adapt_threshold(gamma[b], AR[b], n, len(d), alpha, epsilon, beta1, beta2)
        if stats is not None:
            stats.append(step)


def draft_rows(draft_model, rows, ks, gammas, gens, **sampling_options):
    """Step 1 for B rows at once: row i drafts until it has ks[i] tokens or drew one of confidence below gammas[i],
    each draw from its generator gens[i] -> (drafts, laws), per row a list of tokens and one of warped laws [V].
    Every call has all B rows: a row that stopped rides along (its cache stays put) and its law is not read."""
    drafts, P, going = [[] for _ in rows], [[] for _ in rows], [k > 0 for k in ks]
    while any(going):
        p_raw = draft_model([x + d for x, d in zip(rows, drafts)])[:, -1]  # [B, V] the draft's own laws
        for i in [i for i, g in enumerate(going) if g]:
            token, p, confidence = draw(p_raw[i], gens[i], **sampling_options)
            drafts[i].append(token)
            P[i].append(p)
            going[i] = len(drafts[i]) < ks[i] and confidence >= gammas[i]
    return drafts, P
