"""Samplers picospec did not write, behind picospec.check's contracts (adapters of a few lines
each).

    python -m picospec.check tests/support/outside_samplers.py:hf_chain --contract chain
    python -m picospec.check tests/support/outside_samplers.py:vllm_style --contract rejection

hf_chain          transformers' `_speculative_sampling` (transformers/generation/utils.py), the
acceptance step of
                  assisted generation with do_sample=True. Its notation is Leviathan et al.'s: q =
                  draft (candidate logits), p = target (new logits); it takes logits, so the adapter
                  passes log-probabilities.
hf_ensemble       the same step with `assistant_ensemble_weight=0.5` (DIVERSE static ensemble
verification), which
                  its docstring says trades "controlled distributional bias" for acceptance: it must
                  fail.
vllm_style        a rejection sampler written here in torch to vLLM's published RejectionSampler
contract
                  (forward(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids,
                  seeded_seqs) -> [B, k + 1], -1 after the first rejection), with the numerics vLLM
                  documents: float32 probabilities and uniforms, the residual clamped at the
                  smallest positive float instead of 0, recovered tokens drawn by an exponential
                  race (argmax of probs / Exp(1)).
Randomness: both draw from torch's global generator, seeded from the checker's rng the first time a
case hands that rng over (seeding costs more than the step itself), so a run is reproducible.
"""
import inspect

import numpy as np
import torch
from transformers.generation.utils import _speculative_sampling

torch.set_num_threads(1)  # tiny tensors: threads only add synchronisation
# earlier transformers also take is_done_candidate (an EOS among the drafts): none here
NOT_DONE = ({"is_done_candidate": False}
            if "is_done_candidate" in inspect.signature(_speculative_sampling).parameters else {})


def seed_torch(rng, seen=[]):  # noqa: B006 (the rngs already used to seed torch, by identity)
    if not any(rng is r for r in seen):
        seen[:] = [rng]
        torch.manual_seed(int(rng.integers(2**62)))


def hf_chain(drafts, P, Q, rng, assistant_ensemble_weight=None):
    seed_torch(rng)
    with np.errstate(divide="ignore"):
        draft_logits, target_logits = (torch.from_numpy(np.log(P))[None],
                                       torch.from_numpy(np.log(Q))[None])
    # [1, K] ids: a long tensor also when K = 0 (torch.tensor([[]]) is a float one)
    tokens, n = _speculative_sampling(torch.tensor([drafts], dtype=torch.long), draft_logits,
                                      len(drafts), target_logits, **NOT_DONE,
                                      assistant_ensemble_weight=assistant_ensemble_weight)
    return int(n), int(tokens[0, -1])


def hf_ensemble(drafts, P, Q, rng):
    return hf_chain(drafts, P, Q, rng, assistant_ensemble_weight=0.5)


def vllm_style_forward(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids,
                       seeded_seqs=None):
    """[B, k + 1, V], [B, 1], [B, k, V], [B, k] (torch) -> [B, k + 1] token ids, -1 after the first
    rejection."""
    B, k, V = draft_probs.shape
    if B == 0:
        return torch.empty(0, k + 1, dtype=torch.long)
    u = torch.rand(B, k)  # [B, k] float32
    # a seeded request draws from its own generator
    for b, generator in (seeded_seqs or {}).items():
        u[b] = torch.rand(k, generator=generator)
    q = target_with_bonus_probs[:, :k]  # [B, k, V]
    rows, cols = torch.arange(B)[:, None], torch.arange(k)[None, :]
    ratio = q[rows, cols, draft_token_ids] / draft_probs[rows, cols, draft_token_ids]  # [B, k]
    accepted = u < torch.clamp(ratio, max=1)
    f = torch.clamp(q - draft_probs, min=torch.finfo(q.dtype).tiny)  # [B, k, V]
    # [B, k]
    recovered = (f / f.sum(-1, keepdim=True) / torch.empty_like(f).exponential_(1)).argmax(-1)
    first_rejected = torch.where(accepted.all(1), k, (~accepted).int().argmax(1))  # [B]
    out = torch.where(cols < first_rejected[:, None], draft_token_ids, -1)
    out = torch.cat([out, torch.full((B, 1), -1)], 1)  # [B, k + 1]
    last = torch.where(first_rejected == k, bonus_token_ids[:, 0],
                       recovered[torch.arange(B), first_rejected.clamp(max=k - 1)])
    out[torch.arange(B), first_rejected] = last
    return out


def vllm_style(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng):
    seed_torch(rng)
    out = vllm_style_forward(torch.from_numpy(target_with_bonus_probs).float(),
                             torch.from_numpy(bonus_token_ids),
                             torch.from_numpy(draft_probs).float(),
                             torch.from_numpy(draft_token_ids))
    return out.numpy()
