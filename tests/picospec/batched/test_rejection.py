"""The batched rejection sampler (vLLM's contract): its layout by hand, the law of its first token
exactly and sampled, seeded rows, and strict mode's errors."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from picospec.batched.rejection import recovered_probs, rejection_sample


V = 3


def probs(rows):
    return np.array(rows, dtype=np.float64)


def test_layout_by_hand():
    """Row 0: both drafts have q >= p (always accepted) -> [d0, d1, bonus]. Row 1: draft 0 has q = 0
    (always rejected) -> the recovered token is the only token with q > p, then -1."""
    p = probs([[[0.5, 0.5, 0], [0.5, 0.5, 0]], [[1, 0, 0], [1, 0, 0]]])
    q = probs([[[0.2, 0.8, 0], [0.6, 0.4, 0], [0, 0, 1]], [[0, 0, 1], [1, 0, 0], [1, 0, 0]]])
    out = rejection_sample(q, np.array([[2], [0]]), p, np.array([[1, 0], [0, 0]]),
                           rng=np.random.default_rng(0), strict=True)
    assert out.tolist() == [[1, 0, 2], [2, -1, -1]]
    assert out.dtype == np.int64


def test_empty_batch():
    out = rejection_sample(np.zeros((0, 3, V)), np.zeros((0, 1), int), np.zeros((0, 2, V)),
                           np.zeros((0, 2), int))
    assert out.shape == (0, 3)


def test_no_drafts_gives_each_row_its_bonus_token():
    """k = 0 (a proposer that found nothing for any row): each row is its bonus token alone."""
    out = rejection_sample(probs([[[0.2, 0.8, 0]], [[0, 0, 1]]]), np.array([[1], [2]]),
                           np.zeros((2, 0, V)), np.zeros((2, 0), dtype=np.int64),
                           rng=np.random.default_rng(0), strict=True)
    assert out.tolist() == [[1], [2]] and out.dtype == np.int64


@given(st.integers(0, 10**6))
def test_first_token_law_is_the_target(seed):
    """Exact law of the first output token of a row, computed from the sampler's own pieces, equals
    q."""
    r = np.random.default_rng(seed)
    p, q = r.dirichlet(np.ones(4) * 0.5), r.dirichlet(np.ones(4) * 0.5)
    p[r.integers(0, 4)] = 0
    p /= p.sum()
    accept = np.where(p > 0, np.minimum(1, q / np.where(p > 0, p, 1)), 0)
    law = p * accept + (1 - (p * accept).sum()) * recovered_probs(q[None, None], p[None, None])[0,
                                                                                                0]
    np.testing.assert_allclose(law, q, atol=1e-12)


def test_first_token_law_sampled():
    r = np.random.default_rng(0)
    p, q = np.array([0.6, 0.3, 0.1]), np.array([0.1, 0.3, 0.6])
    B, n = 4000, 0
    counts = np.zeros(3)
    for _ in range(25):
        drafts = r.choice(3, size=(B, 1), p=p)
        out = rejection_sample(np.tile(q, (B, 2, 1)), np.zeros((B, 1), int), np.tile(p, (B, 1, 1)),
                               drafts, rng=r)
        counts += np.bincount(out[:, 0], minlength=3)
        n += B
    assert np.all(np.abs(counts / n - q) < 5 * np.sqrt(q * (1 - q) / n))



class Fixed:
    """A stand-in generator that hands out preset uniforms: rejection_sample reads row b's from
    generators[b]."""

    def __init__(self, u):
        self.u = np.asarray(u, dtype=np.float64)

    def random(self, n):
        assert n == len(self.u)
        return self.u


def test_one_step_law_by_quadrature_on_a_residual_of_several_tokens():
    """k = 1, p = [.7, .1, .1, .1], q = [.1, .3, .3, .3]. Drafts 1..3 are always kept (q > p); draft
    0 is kept with probability q/p = 1/7, else replaced from norm(max(0, q - p)) = [0, 1/3, 1/3,
    1/3]. So token 0 comes out with probability .7 * 1/7 = .1 and each other token with .1 (kept as
    a draft) + .6 / 3 (draft 0 rejected, with probability .7 * 6/7 = .6, then one of three) = .3:
    the law is q.

    The uniforms are not drawn but laid on a grid: every row gets its own (u_accept, u_recover) from
    the midpoints of a 42 x 42 grid, and 42 is a multiple of 7 and 3, so the thresholds 1/7 and 1/3,
    2/3 fall between grid points and the grid's law is exact. A residual of several tokens is what
    tells the two uniforms apart: recovering with the acceptance uniform (which is >= 1/7 whenever
    it rejects) gives token 1 only 8/36 of the rejections."""
    p, q, M = np.array([0.7, 0.1, 0.1, 0.1]), np.array([0.1, 0.3, 0.3, 0.3]), 42
    grid = (np.arange(M) + 0.5) / M  # [M] midpoints
    # [M * M, 2]: (u_accept, u_recover)
    u = np.stack(np.meshgrid(grid, grid, indexing="ij"), -1).reshape(-1, 2)
    law = np.zeros(4)
    for x in range(4):  # the draft token, weighted by p(x)
        B = len(u)
        out = rejection_sample(np.tile(q, (B, 2, 1)), np.full((B, 1), 3), np.tile(p, (B, 1, 1)),
                               np.full((B, 1), x), {b: Fixed(u[b]) for b in range(B)}, strict=True)
        law += p[x] * np.bincount(out[:, 0], minlength=4) / B
    np.testing.assert_allclose(law, q, atol=1e-12)


def test_seeded_rows_ignore_their_neighbours():
    r = np.random.default_rng(1)
    p, q = r.dirichlet(np.ones(V), size=(4, 3)), r.dirichlet(np.ones(V), size=(4, 4))
    d = np.array([[int(np.argmax(row)) for row in rows] for rows in p])
    a = rejection_sample(q, np.zeros((4, 1), int), p, d, {2: np.random.default_rng(7)},
                         np.random.default_rng(0))
    q2 = q.copy()
    q2[[0, 1, 3]] = np.roll(q2[[0, 1, 3]], 1, axis=-1)  # different neighbours, different shared rng
    b = rejection_sample(q2, np.zeros((4, 1), int), p, d, {2: np.random.default_rng(7)},
                         np.random.default_rng(5))
    assert a[2].tolist() == b[2].tolist()


@pytest.mark.parametrize("change, message", [
    (lambda a: a.update(draft_probs=a["draft_probs"][0]), r"\[B, k, V\]"),
    (lambda a: a.update(bonus_token_ids=a["bonus_token_ids"][:, :0]),
     "bonus_token_ids must have shape"),
    (lambda a: a["draft_probs"].__setitem__((0, 0, 0), np.nan), "NaN"),
    (lambda a: a["target_with_bonus_probs"].__setitem__((0, 0, 0), 5.0), "sum to 1"),
    (lambda a: a.update(draft_token_ids=a["draft_token_ids"] + 10),
     r"draft_token_ids must lie in \[0, 3\); out of range: 10 at \[0, 0\], 10 at \[0, 1\], 10 at "
     r"\[1, 0\] \.\.\.$"),
    (lambda a: a.update(draft_token_ids=a["draft_token_ids"].astype(float)), "integer token ids"),
])
def test_strict_mode_errors(change, message):
    args = {"target_with_bonus_probs": np.full((2, 3, V), 1 / V),
            "bonus_token_ids": np.zeros((2, 1), int),
            "draft_probs": np.full((2, 2, V), 1 / V), "draft_token_ids": np.zeros((2, 2), int)}
    change(args)
    with pytest.raises(ValueError, match=message):
        rejection_sample(**args, strict=True)


@pytest.mark.parametrize("name", ["bonus_token_ids", "draft_token_ids"])
@pytest.mark.parametrize("bad", [-1, V])
def test_strict_mode_names_out_of_vocabulary_ids_before_unnormalised_rows(name, bad):
    """vLLM's test_raises_when_vocab_oob: uniform random rows (not summing to 1) and one id below or
    above the vocabulary; the ids are checked first, so the error names the id, not the rows."""
    r = np.random.default_rng(0)
    args = {"target_with_bonus_probs": r.random((2, 3, V)),
            "bonus_token_ids": np.zeros((2, 1), int), "draft_probs": r.random((2, 2, V)),
            "draft_token_ids": np.zeros((2, 2), int)}
    args[name][1, 0] = bad
    with pytest.raises(ValueError, match=rf"^{name} must lie in \[0, {V}\); out of range: {bad} at "
                                         rf"\[1, 0\]$"):
        rejection_sample(**args, strict=True)
