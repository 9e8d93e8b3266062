"""Sampling pieces every method shares. p = draft, q = target (Chen et al. 2023,
arXiv:2302.01318); V = n_vocab, [..., V] any leading axes; float dtypes kept."""
import numpy as np


def warp(probs, temperature=1.0, top_k=None, top_p=None):
    """Temperature, then top-k, then top-p, row-wise on probs [..., V] -> [..., V] renormalised."""
    probs = np.asarray(probs)  # [..., V]
    if temperature == 0:
        one_hot = np.zeros_like(probs)  # [..., V]
        np.put_along_axis(one_hot, probs.argmax(-1)[..., None], 1, axis=-1)  # [..., 1] argmax ids
        return one_hot
    if temperature != 1:
        with np.errstate(divide="ignore"):
            logs = np.log(probs)  # [..., V]; log(0) = -inf stays excluded
        # the top token at 0 before dividing: no T, however small, loses it
        logs = logs - logs.max(-1, keepdims=True)
        # q^(1/T) in log space, divided in float64 (T = 1e-40 is 0 in float32)
        with np.errstate(over="ignore"):
            # far tokens may become -inf: excluded
            logits = (logs / np.float64(temperature)).astype(probs.dtype)
        probs = np.exp(logits)  # [..., V] q^(1/T), not yet normalised
    if top_k is not None or top_p is not None:
        order = np.argsort(-probs, axis=-1, kind="stable")  # token ids by decreasing probability
        ranked = np.take_along_axis(probs, order, -1)  # [..., V] sorted
        keep = np.ones(ranked.shape, dtype=bool)
        if top_k is not None:
            keep[..., top_k:] = False
        if top_p is not None:  # on the law top-k left: the kept tokens are a prefix of the ranking
            # [..., V] the mass of the tokens ranked above each one
            mass_before = np.cumsum(ranked, -1) - ranked
            kept_mass = np.where(keep, ranked, 0).sum(-1, keepdims=True)  # [..., 1] what top-k kept
            keep &= mass_before < top_p * kept_mass
            # the top token always stays, even when top_p * mass underflows to 0
            keep[..., 0] = True
        mask = np.zeros(probs.shape, dtype=bool)  # [..., V] keep, back in token order
        np.put_along_axis(mask, order, keep, axis=-1)
        probs = np.where(mask, probs, 0)  # [..., V]
    return probs / probs.sum(-1, keepdims=True)


def sample(p, rng):
    """One token id from p [V] by inverse CDF; a token of probability 0 is never returned."""
    # [V] float64 sum: float32 rounding never shifts mass between tokens
    cdf = np.asarray(p).cumsum(dtype=np.float64)
    return int(cdf.searchsorted(rng.random() * cdf[-1], side="right"))


def sample_without_replacement(p, k, rng):
    """Up to k distinct tokens from p [V], each drawn from p with the earlier draws removed."""
    p, picks = np.array(p, dtype=np.float64), []  # [V] a copy: picks are zeroed in it
    for _ in range(min(k, int(np.count_nonzero(p)))):  # tokens with p > 0
        picks.append(sample(p, rng))  # sample() renormalises what is left
        p[picks[-1]] = 0
    return picks


def softmax(logits):
    """[..., V] in float64."""
    z = np.exp(logits.astype(np.float64) - logits.max(-1, keepdims=True))  # [..., V]
    return z / z.sum(-1, keepdims=True)


def first_token(logits, greedy, rng, **sampling_options):
    """The target's token after logits [V]: argmax when greedy, else a warped draw."""
    if greedy:
        return int(np.argmax(logits))
    return sample(warp(softmax(logits), **sampling_options), rng)


def residual(q, p):
    """norm(max(0, q - p)) [V], the law a rejected draft is replaced from (q when q == p)."""
    r = np.maximum(q - p, 0)  # [V]
    total = r.sum()
    return r / total if total > 0 else q


def check_inputs(x, N, K=1, temperature=1.0, top_k=None, top_p=None):
    if len(x) == 0:
        raise ValueError("the prompt x is empty: pass at least one token id")
    if int(N) != N or N < 1:
        raise ValueError(f"N (new tokens) must be a positive integer; got {N}")
    if int(K) != K or K < 1:
        raise ValueError(f"K (draft tokens per step) must be a positive integer; got {K}")
    if temperature is None or temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0 is greedy); got {temperature}")
    if top_k is not None and (int(top_k) != top_k or top_k < 1):
        raise ValueError(f"top_k must be a positive integer or None; got {top_k}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1] or None; got {top_p}")


def check_vocab(draft, target):
    """Before any call: a draft and a target that say their vocabulary size (n_vocab) must agree.
    Example: n_vocab 4097 and 50257 -> ValueError."""
    a, b = getattr(draft, "n_vocab", None), getattr(target, "n_vocab", None)
    if a is not None and b is not None and a != b:
        raise ValueError(f"draft and target disagree on the vocabulary ({a} vs {b} tokens): "
                         f"speculative decoding needs one shared tokenizer")
