"""The batched rejection sampler with vLLM's contract: Chen et al. 2023 Alg. 2's accept / resample /
bonus steps for B rows, vectorised. p = draft (vLLM's draft_probs), q = target (its
target_with_bonus_probs). Shapes: B rows, k drafts, V vocabulary.
More: docs/algorithms.md (batched/rejection.py).
"""
import numpy as np


def row_uniforms(B, n, generators, rng):  # -> [B, n]
    generators = generators or {}
    return np.stack([(generators[b] if b in generators else rng).random(n)
                     for b in range(B)]) if B else np.zeros((0, n))


def sample_rows(probs, u):  # probs [..., V], u [...] in [0, 1) -> token ids [...] by inverse CDF
    cdf = np.cumsum(probs, axis=-1, dtype=np.float64)  # [..., V]
    return (cdf <= (u * cdf[..., -1])[..., None]).sum(-1)


def recovered_probs(q, p):  # q, p [..., V] -> norm(max(0, q - p)), or q where that is all 0
    r = np.maximum(q - p, 0)  # [..., V]
    total = r.sum(-1, keepdims=True)  # [..., 1]
    return np.where(total > 0, r / np.where(total > 0, total, 1), q)


def rejection_sample(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids,
                     generators=None, rng=None, strict=False):
    """vLLM's contract: q [B, k + 1, V], bonus [B, 1], p [B, k, V], drafts [B, k] -> [B, k + 1]:
    accepted drafts, the recovered or bonus token, then -1. generators: {row: its Generator}."""
    if strict:
        check_inputs(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids)
    B, k, _ = draft_probs.shape  # p [B, k, V]
    if B == 0:
        return np.zeros((0, k + 1), dtype=np.int64)
    rng = rng if rng is not None else np.random.default_rng()
    q = target_with_bonus_probs[:, :k]  # [B, k, V]
    u = row_uniforms(B, 2 * k, generators, rng)  # [B, 2k]
    rows, cols = np.arange(B)[:, None], np.arange(k)[None, :]
    # Step 1: accept draft t with probability min(1, q(x_t) / p(x_t))
    p_x, q_x = draft_probs[rows, cols, draft_token_ids], q[rows, cols, draft_token_ids]  # [B, k]
    accepted = u[:, :k] < np.minimum(1, q_x / p_x)  # [B, k]
    # [B]: position of the first rejection (k where every draft is kept, and with no drafts)
    n_accepted = np.where(accepted.all(1), k, accepted.argmin(1) if k else 0)
    # Step 2: the recovered token, only at each rejecting row's first rejection (R rows), with that
    # position's uniform
    last = bonus_token_ids[:, 0].astype(np.int64)  # [B]
    rejected = np.flatnonzero(n_accepted < k)  # [R]
    if len(rejected):
        at = n_accepted[rejected]  # [R]
        U = u[:, k:][rejected, at]  # [R]: the recovering uniform of that position
        # [R, V] -> [R]
        last[rejected] = sample_rows(recovered_probs(q[rejected, at], draft_probs[rejected, at]), U)
    # Step 3: assemble [accepted drafts, recovered or bonus, -1 ...]
    out = np.full((B, k + 1), -1, dtype=np.int64)
    keep = cols < n_accepted[:, None]  # [B, k]
    out[:, :k] = np.where(keep, draft_token_ids, -1)
    out[np.arange(B), n_accepted] = last
    return out


def check_inputs(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, atol=1e-3):
    """Strict mode: shapes, the ids' dtypes and ranges, then finite, non-negative, normalised
    probabilities."""
    arrays = {"target_with_bonus_probs": target_with_bonus_probs,
              "bonus_token_ids": bonus_token_ids,
              "draft_probs": draft_probs, "draft_token_ids": draft_token_ids}
    for name, a in arrays.items():
        if not isinstance(a, np.ndarray):
            raise ValueError(f"{name} must be a numpy array; got {type(a).__name__}")
    if draft_probs.ndim != 3:
        raise ValueError(f"draft_probs must be [B, k, V]; got shape {draft_probs.shape}")
    B, k, V = draft_probs.shape
    expected = {"target_with_bonus_probs": (B, k + 1, V), "bonus_token_ids": (B, 1),
                "draft_token_ids": (B, k)}
    for name, shape in expected.items():
        if arrays[name].shape != shape:
            raise ValueError(f"{name} must have shape {shape} to match draft_probs "
                             f"{draft_probs.shape}; got {arrays[name].shape}")
    for name in ("bonus_token_ids", "draft_token_ids"):  # ids first, as vLLM checks them
        a = arrays[name]
        if a.dtype.kind not in "iu":
            raise ValueError(f"{name} must hold integer token ids; got dtype {a.dtype}")
        if (bad := (a < 0) | (a >= V)).any():
            where = np.argwhere(bad)[:3].tolist()  # [row, position] of the first few
            raise ValueError(f"{name} must lie in [0, {V}); out of range: "
                             f"{', '.join(f'{a[tuple(i)]} at {i}' for i in where)}"
                             f"{' ...' if bad.sum() > 3 else ''}")
    for name in ("target_with_bonus_probs", "draft_probs"):
        a = arrays[name]  # [B, k + 1, V] or [B, k, V]
        if a.dtype.kind != "f":
            raise ValueError(f"{name} must hold floats; got dtype {a.dtype}")
        if not np.all(np.isfinite(a)) or np.any(a < 0):
            raise ValueError(f"{name} has NaN, infinite or negative entries")
        if np.any(np.abs(a.sum(-1) - 1) > atol):  # row sums [B, k + 1] or [B, k]
            raise ValueError(f"{name} rows must sum to 1 (within {atol}); worst row sums to "
                             f"{a.sum(-1).flat[np.abs(a.sum(-1) - 1).argmax()]:.6f}")
    # [B, k, 1]: each draft's probability under draft_probs
    drawn = np.take_along_axis(draft_probs, draft_token_ids[..., None], -1)
    if draft_token_ids.size and np.any(drawn == 0):
        raise ValueError("a draft token has probability 0 under draft_probs: drafts must be "
                         "sampled from draft_probs")
