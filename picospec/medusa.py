"""Medusa: Cai, Li, Geng, Peng, Lee, Chen, Dao 2024, "Medusa: Simple LLM Inference Acceleration
Framework with Multiple Decoding Heads", ICML 2024 (arXiv:2401.10774), section 2; its p_original
is q here. K heads, m nodes, V = n_vocab, C = n_embd.

Each step, after the root (the LM head's token, always kept):
1. generate_candidates: head k reads the last hidden state and guesses the token k + 1 ahead; its
   top-k tokens fill level k of the tree medusa_choices describes (tree.py: medusa_buffers);
2. one tree-attention call of the target scores every node (section 2.1.2);
3. evaluate_posterior: greedy (exact match), lossless (verify.py's rule with one-hot proposals),
   or typical (section 2.3.1) / nucleus (the authors' code's other posterior): the longest path
   whose every token passes the test (the first in node order on a tie, where the authors' code
   takes the likeliest), then the next root drawn from q after it.

Why typical acceptance is not lossless. It keeps x whenever q(x) > min(epsilon, delta exp(-H(q))),
however likely the heads were to propose x, and nothing corrects for that. Example: the tree
[[0]], q = [.6, .4] after the root and head 1's top guess token 1: q(1) = .4 passes (the
threshold is at most epsilon = .09), so the token after the root is 1 every time, where q gives
it .4. Nucleus acceptance fails the same way. At temperature 0 both are greedy, exact there."""
import numpy as np

from picospec.sampling import check_inputs, first_token, sample, softmax, warp
from picospec.tree import check_choices, greedy_origin, greedy_path, medusa_buffers
from picospec.verify import step_record, verify_tree

POSTERIORS = ("greedy", "typical", "nucleus", "lossless")


def generate_candidates(root, head_logits, buffers, topk):
    """The tree's tokens [m]: [root, each head's top-k] at tree_indices."""
    # [K, topk] the top-k, unordered
    part = np.argpartition(-head_logits, topk - 1, axis=-1)[:, :topk]
    order = np.argsort(-np.take_along_axis(head_logits, part, -1), axis=-1, kind="stable")
    top = np.take_along_axis(part, order, -1)  # [K, topk] by decreasing logit
    flat = np.concatenate([[root], top.reshape(-1)])  # [1 + K * topk]
    # the tree's tokens [m], the root left out: it is already in x
    return [int(t) for t in flat[buffers["tree_indices"][1:]]]


def typical_accept(tokens, parents, probs, epsilon, delta):
    """x below a node of law q passes when q(x) > min(epsilon, delta * exp(-H(q)))."""
    with np.errstate(divide="ignore", invalid="ignore"):
        entropy = -np.sum(np.where(probs > 0, probs * np.log(probs), 0.0), -1)  # [1 + m]
    threshold = np.minimum(epsilon, delta * np.exp(-entropy))  # [1 + m]
    return [probs[p + 1, t] > threshold[p + 1] for t, p in zip(tokens, parents)]


def nucleus_accept(tokens, parents, probs, nucleus_p):
    kept = warp(probs, top_p=nucleus_p)  # [1 + m, V]
    return [kept[p + 1, t] > 0 for t, p in zip(tokens, parents)]


def longest_accepted(parents, ok):
    """The longest path whose nodes all pass `ok`."""
    best, path_of = [], {-1: []}
    for i, p in enumerate(parents):
        if ok[i] and p in path_of:
            path_of[i] = path_of[p] + [i]
            if len(path_of[i]) > len(best):
                best = path_of[i]
    return best


def evaluate_posterior(tokens, parents, logits, posterior, rng, epsilon, delta, nucleus_p,
                       **sampling_options):
    """Logits [1 + m, V] -> (accepted path, next token, origin)."""
    greedy = sampling_options.get("temperature", 1) == 0 and posterior != "lossless"
    if posterior == "greedy" or greedy:
        path, token = greedy_path(tokens, parents, logits)
        return path, token, greedy_origin(parents, path)
    probs = warp(softmax(logits), **sampling_options)  # [1 + m, V]
    if posterior == "lossless":
        return verify_tree(tokens, parents, probs, rng)
    ok = (typical_accept(tokens, parents, probs, epsilon, delta) if posterior == "typical"
          else nucleus_accept(tokens, parents, probs, nucleus_p))
    path = longest_accepted(parents, ok)
    # Nothing was rejected by a residual: the next token is drawn from the target's own law after
    # the path, so it is a "bonus" whether or not the path ends at a leaf.
    return path, sample(probs[(path[-1] + 1) if path else 0], rng), "bonus"


def medusa_decoding(x, target, heads, N, rng, medusa_choices, topk=10, posterior="greedy",
                    epsilon=0.09, delta=0.3, nucleus_p=0.8, stats=None, **sampling_options):
    """x then N tokens: greedy, lossless, typical or nucleus acceptance."""
    check_inputs(x, N, 1, **sampling_options)
    if posterior not in POSTERIORS:
        raise ValueError(f"unknown posterior {posterior!r}: choose one of {', '.join(POSTERIORS)}")
    x, T = [int(t) for t in x], len(x) + N
    logits, h = target.logits(x, 1, hidden=True)  # prefill: [1, V], [1, C]
    check_choices(medusa_choices, n_heads=heads(h).shape[0], topk=topk)
    full = medusa_buffers(medusa_choices, topk)
    root = first_token(logits[0], root_is_greedy(posterior, sampling_options), rng,
                       **sampling_options)
    if stats is not None:
        stats.append(step_record([root], ["bonus"], drafted=0))  # the prefill call
    while True:
        # Step 0: the root (the LM head's token) is always accepted
        x.append(root)
        if len(x) == T:
            break
        # Step 1: candidates from the heads' top-k, arranged by medusa_choices, at most the tokens
        # still needed (heads below depth are not needed); the tree's tokens [m]
        buffers, depth = tree_shape(medusa_choices, full, topk, T - len(x) - 1)
        tokens = generate_candidates(root, heads(h, depth)[:, -1], buffers, topk) if depth else []
        parents = buffers["parents"] if depth else []
        # Step 2: one tree-attention forward scores the root's successor and every node's successor
        logits, h_tree = target.tree(x, tokens, parents, hidden=True)  # [1 + m, V], [1 + m, C]
        # Step 3: the posterior picks the accepted path and the next root
        path, root, origin = evaluate_posterior(tokens, parents, logits, posterior, rng, epsilon,
                                                delta, nucleus_p, **sampling_options)
        # Step 4: keep the accepted path in the cache; its last row's hidden state feeds the heads
        # next
        target.accept(path)
        x.extend(tokens[i] for i in path)
        h = h_tree[[(path[-1] + 1) if path else 0]]  # [1, C]
        if stats is not None:
            stats.append(step_record([tokens[i] for i in path] + [root],
                                     ["draft"] * len(path) + [origin],
                                     drafted=depth, nodes=len(tokens)))
    return x


def tree_shape(medusa_choices, full, topk, room):
    """This step's (buffers, depth): the paths no longer than `room`; (None, 0) if none."""
    nodes = [c for c in medusa_choices if len(c) <= room]
    if not nodes:
        return None, 0
    buffers = full if len(nodes) == len(medusa_choices) else medusa_buffers(nodes, topk)
    return buffers, max(len(c) for c in nodes)


def root_is_greedy(posterior, sampling_options):
    return posterior == "greedy" or sampling_options.get("temperature", 1) == 0
