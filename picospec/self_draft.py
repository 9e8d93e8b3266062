"""Self-speculative decoding: the draft is the target itself, on a shorter path through its own
layers. Shapes: K drafts, V vocabulary.
More: docs/algorithms.md (self_draft.py).
"""
from picospec.sampling import check_inputs, sample, warp
from picospec.verify import step_record, verify_chain


def adapt_threshold(gamma, AR, accepted, drafted, alpha, epsilon, beta1, beta2):
    """Draft & Verify's adaptive draft-exiting: one update of the running acceptance AR and the
    threshold gamma. -> (gamma, AR).

    Example: gamma 0.6, AR 0.9, 1 of 4 drafts kept, alpha 0.9, epsilon 0.01, beta1 0.5, beta2 0.9 ->
    AR 0.575 <= 0.9, so gamma' = 0.61 and gamma = 0.9 * 0.6 + 0.1 * 0.61 = 0.601.
    """
    AR = beta1 * AR + (1 - beta1) * accepted / drafted
    gamma_next = gamma + epsilon if AR <= alpha else gamma - epsilon  # the paper's gamma tilde
    return beta2 * gamma + (1 - beta2) * gamma_next, AR


def draft_token(draft_model, x, rng, **sampling_options):
    """One draft token after x -> (token, the law it was drawn from [V], the draft's own probability
    of it)."""
    return draw(draft_model(x)[-1], rng, **sampling_options)


def draw(p_raw, rng, **sampling_options):
    """A token from the draft's law after some prefix, p_raw [V] -> (token, warped law [V],
    confidence)."""
    # [V] the law the token is drawn from; p_raw is the draft's own: its confidence
    p = warp(p_raw, **sampling_options)
    token = sample(p, rng)
    return token, p, float(p_raw[token])


def self_speculative_decoding(x, draft_model, target_model, N, K, rng, threshold=0.0,
                              adaptive=False, alpha=0.9,
                              epsilon=0.01, beta1=0.5, beta2=0.9, stats=None, **sampling_options):
    """x followed by exactly N tokens distributed as autoregressive sampling from the warped target.

    threshold: gamma, the confidence below which drafting stops (0: always K drafts); adaptive:
    update gamma after every step (Draft & Verify's rule). `stats`, if a list, gets one
    picospec.verify.step_record per target call.
    """
    check_inputs(x, N, K, **sampling_options)
    x, gamma, AR = list(x), threshold, 0.0
    T = len(x) + N
    # Step 0: the first token comes from the target, so the draft only ever extends a prefix the
    # target has read
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
        # Step 2: the target scores the drafts (and the position after them) in one call; accept or
        # resample
        # [len(drafts) + 1, V]
        Q = warp(target_model(x + drafts, len(drafts) + 1), **sampling_options)
        n, token, origin = verify_chain(drafts, P, Q, rng)
        new = drafts[:n] + [token]
        x.extend(new)
        if stats is not None:
            stats.append(step_record(new, ["draft"] * n + [origin], drafted=len(drafts)))
        # Step 3: move the threshold towards the acceptance rate alpha
        if adaptive and drafts:
            gamma, AR = adapt_threshold(gamma, AR, n, len(drafts), alpha, epsilon, beta1, beta2)
    return x
