"""Self-speculative decoding: Zhang et al. 2023, "Draft & Verify: Lossless Large Language Model
Acceleration via Self-Speculative Decoding", ACL 2024 (arXiv:2309.08168), also Elhoushi et al.
2024, "LayerSkip: Enabling Early Exit Inference and Self-Speculative Decoding" (arXiv:2404.16710):
the draft is the target on a shorter path (sublayers skipped, or the first E layers). p = draft,
q = target; gamma, AR, alpha, epsilon, beta1, beta2 as in Draft & Verify.

Each step: (1) draft up to K tokens, stopping after one whose draft probability p_raw(x) is
below gamma; (2) one target call scores them, verify_chain; (3) adaptive draft-exiting
(adapt_threshold), from the step's acceptance accepted / drafted:
    AR <- beta1 AR + (1 - beta1) accepted / drafted
    gamma~ = gamma + epsilon if AR <= alpha else gamma - epsilon
    gamma <- beta2 gamma + (1 - beta2) gamma~

Why stopping early keeps the law: whether token t + 1 is drafted depends only on the drafts so
far, never on the target or the verifier's coins, so each drafted token is still a draw of p
given the ones before it, and verify_chain's rule applies; gamma changes between steps only,
as a function of the past."""
from picospec.sampling import check_inputs, sample, warp
from picospec.verify import step_record, verify_chain


def adapt_threshold(gamma, AR, accepted, drafted, alpha, epsilon, beta1, beta2):
    """One update of the acceptance AR and the threshold gamma -> (gamma, AR)."""
    AR = beta1 * AR + (1 - beta1) * accepted / drafted
    gamma_next = gamma + epsilon if AR <= alpha else gamma - epsilon  # the paper's gamma tilde
    return beta2 * gamma + (1 - beta2) * gamma_next, AR


def draft_token(draft_model, x, rng, **sampling_options):
    return draw(draft_model(x)[-1], rng, **sampling_options)


def draw(p_raw, rng, **sampling_options):
    """A token from the warped p_raw [V] -> (token, law [V], confidence p_raw[token])."""
    # [V] the law the token is drawn from; p_raw is the draft's own: its confidence
    p = warp(p_raw, **sampling_options)
    token = sample(p, rng)
    return token, p, float(p_raw[token])


def self_speculative_decoding(x, draft_model, target_model, N, K, rng, threshold=0.0,
                              adaptive=False, alpha=0.9,
                              epsilon=0.01, beta1=0.5, beta2=0.9, stats=None, **sampling_options):
    """x then exactly N tokens of the warped target's law."""
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
        # Step 2: the target scores the drafts and the position after them; accept or resample
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
