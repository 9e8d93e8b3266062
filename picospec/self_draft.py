"""Self-speculative decoding: the draft is the target itself, on a shorter path through its own layers.

Draft & Verify (Zhang et al. 2023, arXiv:2309.08168), self-speculative decoding with its adaptive draft-exiting
mechanism: the draft skips a set of attention and MLP sublayers, stops drafting early when it is unsure, and the
threshold of "unsure" follows the measured acceptance. LayerSkip (Elhoushi et al. 2024, arXiv:2404.16710) runs the same
loop (its self-speculative decoding) with a draft that exits after the first E layers and a fixed number of drafts.

Notation as in picospec/speculative.py (Chen's letters): p = draft, q = target, K = most drafts per step, N = new
tokens. Draft & Verify's own: gamma = the confidence threshold, AR = the running acceptance rate, alpha = the rate the
threshold aims at, epsilon = its step, beta1 / beta2 = the momenta of AR and gamma.
To this file the draft is one more model function. That it is the target on a shorter path, reading and writing the
target's KV cache, and that the verification reuses what the draft computed before its first skipped sublayer, is
the engine's business (gpt2/self_draft.py).

One step:
  1. draft up to K tokens from p; stop after a token whose probability under the draft's own (unwarped) law is below
     gamma (at temperature 0 that is the draft's top probability: its confidence);
  2. the target scores them in one call; accept or resample with verify_chain;
  3. AR <- beta1 AR + (1 - beta1) accepted / drafted;  gamma' = gamma + epsilon if AR <= alpha else gamma - epsilon;
     gamma <- beta2 gamma + (1 - beta2) gamma'  (fewer drafts while they are rejected, more while they are kept).
Why stopping early keeps the target's law: whether token t + 1 is drafted depends only on the tokens drafted so far
(their draft probabilities are functions of them), never on the target or on the verifier's coins, so each drafted
token is still drawn from p given the ones before it, which is all that verify_chain needs (picospec/verify.py). gamma
changes between steps as a function of what came before; given that past, every step is a lossless step.
Example (by hand, temperature 0): gamma = 0.5, the draft's top probabilities 0.9, 0.7, 0.4 -> 3 drafts, then stop.

The batched form runs B prompts at once (models behind picospec/batch.py's batched contract; for the self-drafting
engine, gpt2/self_draft.py): every row keeps its own gamma, AR and stop, and the draft calls and the target call
of a step take all active rows. The target's call asks every row for k + 1 laws (k: the most drafts of a row), so a row
with fewer drafts is filled up to k with a token whose laws are not read. Shapes: B rows, V vocabulary.
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
    """Each prompt of xs followed by N tokens; the models follow the batched contract (picospec/batch.py), called for
    all active rows at once. Row b is what self_speculative_decoding gives xs[b] alone with generators[b] (else rng,
    drawn in row order): its own confidence stop, its own gamma and AR when adaptive, the same draws.

    Needs room for len(x) + N + K - 1 tokens per row. `stats`, if a list, gets one dict per target call:
    {"drafted": the most drafts of a row, "accepted": [per row, -1 for finished rows], "tokens": [new ids per row]}.
    """
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
