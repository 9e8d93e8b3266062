"""EAGLE-3: Li, Wei, Zhang, Zhang 2025, "EAGLE-3: Scaling up Inference Acceleration of Large
Language Models via Training-Time Test" (arXiv:2503.01840). The papers' p (target) and p-hat
(draft) are q and p here. V = n_vocab, V_d the draft vocabulary's size, C = n_embd, m kept nodes.

What changes from EAGLE-2 (picospec/eagle2.py), whose dynamic tree drafts here unchanged:
1. features from three depths: the head reads the target's hidden states after a low, a middle and
   a high block, [3C] a position, and fuses them with one linear layer to [C] (gpt2/eagle3.py);
   it predicts tokens only (no feature regression);
2. training-time test: in training the head runs its own next steps on its own outputs, as it
   does when drafting, and the loss sums over those steps (gpt2/train/eagle3.py);
3. a draft vocabulary, as in the authors' code (SafeAILab/EAGLE, whose d2t[i] holds the offset
   from draft id i to its target id): the head's logits cover the V_d most frequent tokens of its
   training data, d2t[i] the target id of draft token i (draft_vocabulary). Its law has no mass
   outside them (draft_law). The head's LM head is V_d columns wide, not V: its cost shrinks.

Each step, in the paper's order:
1. expand: depth calls of the head grow the tree, the top_k tokens of each node's law over the
   draft vocabulary, mapped to target ids by d2t, valued by the path's log-probability (EAGLE-2's
   expand, which reads the head's d2t);
2. rerank: the total_tokens nodes of highest value are kept;
3. verify: one target call scores every node; the tree is verified over all V tokens;
4. extend: the accepted tokens join the text and their three-depth features join F (EAGLE-2's
   steps ask the target for the features the head names: features_read).

Why a draft vocabulary loses nothing. The candidates are deterministic (a node's top_k), and the
verifier proposes each one-hot: a child x is kept with probability q'(x), where q' is the target's
law at that node with the rejected siblings removed and renormalised; when every child is
rejected the next token is drawn from the last q'. For one child, P(out = y) = q(x) [y = x] +
(1 - q(x)) q(y) [y != x] / (1 - q(x)) = q(y); by induction over the siblings, the output law is q
whatever the candidates are. Tokens outside the draft vocabulary are never proposed, and still come
with their probability under q: from the residual after rejections, or as the bonus token. Only
acceptance depends on the draft law; if verification used q over the draft vocabulary only, the
tokens outside it would never come, and the output law would not be the target's.
"""
import numpy as np

from picospec.eagle2 import eagle2_decoding


def draft_vocabulary(counts, V_d):
    """d2t [V_d]: the V_d most frequent target tokens by counts [V], most frequent first, ties to
    the lower id. Example: counts [5, 9, 5, 0], V_d = 2 -> [1, 0]."""
    counts = np.asarray(counts)  # [V]
    if not 1 <= V_d <= len(counts):
        raise ValueError(f"the draft vocabulary holds 1 to {len(counts)} tokens; got {V_d}")
    return np.argsort(-counts, kind="stable")[:V_d].astype(np.int64)  # [V_d]


def draft_law(z, d2t, V):
    """The head's law over all V tokens, float64 [..., V]: softmax of z [..., V_d] at d2t, 0
    outside."""
    e = np.exp(z.astype(np.float64) - z.max(-1, keepdims=True))  # [..., V_d]
    p = np.zeros(z.shape[:-1] + (V,))  # [..., V]
    p[..., d2t] = e / e.sum(-1, keepdims=True)
    return p


def eagle3_decoding(x, target, draft, N, rng, depth=5, tree_top_k=4, total_tokens=16, stats=None,
                    **sampling_options):
    """x then N tokens of the warped target's law: EAGLE-2's four steps with the EAGLE-3 head
    `draft` (logits [1 + m, V_d]; .d2t its target ids, .layers the target's blocks it reads, which
    EAGLE-2's steps ask the target for); tree_top_k is the paper's top-k."""
    return eagle2_decoding(x, target, draft, N, rng, depth, tree_top_k, total_tokens, stats,
                           **sampling_options)

