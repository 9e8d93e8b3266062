"""REST: He, Zhong, Cai, Lee, He 2023, "REST: Retrieval-Based Speculative Decoding", NAACL 2024
(arXiv:2311.08252), section 3; q = the target. n_corpus corpus tokens, m tree nodes, V = n_vocab.

Each step: (1) Datastore.search: the longest suffix of the context (at most max_suffix tokens)
found in the corpus by its suffix array, and what followed its matches; (2) retrieve: those
continuations as a trie, pruned to the num_draft_nodes most frequent prefixes; (3) one tree call
of the target; (4) verify_tree with one-hot proposals. Lossless because the datastore is fixed:
the trie is a function of the text so far, drawn with none of the verifier's coins."""
import os
from bisect import bisect_left, bisect_right

import numpy as np

from picospec.sampling import check_inputs, warp
from picospec.tree import depth, prune, trie
from picospec.verify import step_record, verify_tree
from picospec_cli import replace_file


class Datastore:
    """A corpus [n_corpus] and its suffix array [n_corpus]."""

    def __init__(self, tokens, suffix_array, max_suffix):
        self.tokens, self.sa, self.max_suffix = tokens, suffix_array, int(max_suffix)

    @classmethod
    def build(cls, tokens, max_suffix=16, progress=None):
        """Index a 1-D array of token ids by prefix doubling, to max_suffix tokens."""
        tokens = np.asarray(tokens)  # [n_corpus]
        if (tokens.ndim != 1 or len(tokens) == 0 or not np.issubdtype(tokens.dtype, np.integer)
                or tokens.min() < 0):
            raise ValueError("the datastore needs a non-empty 1-D array of non-negative integer "
                             "token ids")
        if int(max_suffix) != max_suffix or max_suffix < 1:
            raise ValueError(f"max_suffix must be a positive integer; got {max_suffix}")
        n = len(tokens)
        # [n_corpus] order of each suffix's first token: the token itself
        rank = tokens.astype(np.int64)
        sa = np.argsort(rank, kind="stable")  # [n_corpus]
        # doublings to reach depth 2 ** len(steps)
        steps = range((int(max_suffix) - 1).bit_length())
        if progress is not None:  # e.g. functools.partial(tqdm, desc="suffix array")
            steps = progress(steps)
        for step in steps:
            w = 2 ** step  # rank orders the suffixes by their first w tokens
            # [n_corpus] rank of the next w tokens; -1: past the end
            after = np.full(n, -1, dtype=np.int64)
            after[:max(n - w, 0)] = rank[w:]
            # by the first w tokens, then the next w, then position: the first 2w
            sa = np.lexsort((after, rank))  # [n_corpus]
            first, second = rank[sa], after[sa]  # [n_corpus] each, in suffix order
            new = np.zeros(n, dtype=np.int64)
            new[1:] = np.cumsum((first[1:] != first[:-1]) | (second[1:] != second[:-1]))
            rank[sa] = new
            # every prefix already differs: longer ones cannot change the order
            if new[-1] == n - 1:
                break
        small = np.uint16 if tokens.max() < 2 ** 16 else np.int64
        return cls(tokens.astype(small), sa.astype(np.int32 if n < 2 ** 31 else np.int64),
                   max_suffix)

    def save(self, path):
        """Write the arrays to `path` (.npz), whole or not at all."""
        # tokens [n_corpus], suffix_array [n_corpus], max_suffix scalar
        replace_file(path, lambda f: np.savez(f, tokens=self.tokens, suffix_array=self.sa,
                                              max_suffix=self.max_suffix))

    @classmethod
    def load(cls, path):
        """Read what save() wrote; a ValueError says what is wrong with a bad file."""
        if not os.path.isfile(path):
            raise ValueError(f"no REST datastore at {path}")
        with open(path, "rb") as f:
            start = f.read(4)
        if start != b"PK\x03\x04":  # every .npz is a zip archive
            what = "an empty file" if not start else f"a file that begins {start!r}"
            raise ValueError(f"{path} is not a REST datastore: it is {what}, not an .npz archive "
                             f"(the zip of the arrays tokens, suffix_array and max_suffix that "
                             f"--build_datastore writes)")
        try:
            # the arrays save() wrote, [n] and [n] and a scalar; problem() checks their shapes
            with np.load(path, allow_pickle=False) as f:
                tokens, sa, max_suffix = f["tokens"], f["suffix_array"], f["max_suffix"]
        except Exception as e:
            why = ("it holds pickled Python objects, which are never loaded" if "pickle" in str(e)
                   else "not a .npz archive of the arrays tokens, suffix_array and max_suffix: "
                   f"{e}")
            raise ValueError(f"{path} is not a readable REST datastore ({why})") from None
        if (problem := cls.problem(tokens, sa, max_suffix)) is not None:
            raise ValueError(f"{path} is not a consistent REST datastore ({problem})")
        return cls(tokens, sa, int(max_suffix))

    @staticmethod
    def problem(tokens, sa, max_suffix):
        """Why three arrays are not a datastore build() could make, or None."""
        if tokens.ndim != 1 or tokens.dtype.kind not in "ui" or len(tokens) == 0:
            return (f"tokens must be a non-empty 1-D array of token ids; it is {tokens.dtype} of "
                    f"shape {tokens.shape}")
        if sa.shape != tokens.shape or sa.dtype.kind not in "ui":
            return (f"suffix_array must hold {len(tokens)} integer positions; it is {sa.dtype} of "
                    f"shape {sa.shape}")
        if max_suffix.shape != () or max_suffix.dtype.kind not in "ui" or max_suffix < 1:
            return f"max_suffix must be one whole number >= 1; it is {max_suffix.tolist()!r}"
        # tokens, sa [n_corpus]: sa a permutation whose suffixes start in token order
        if tokens.min() < 0 or sa.min() < 0 or sa.max() >= len(tokens) or np.bincount(sa).max() > 1:
            return "suffix_array is not a permutation of the positions, or a token id is negative"
        if np.any(np.diff(tokens[sa].astype(np.int64)) < 0):
            return "suffix_array is not sorted: its suffixes do not start in token order"
        return None

    def search(self, context, max_matches, draft_len):
        """Step 1: longest suffix found (n tokens) -> (max_matches continuations, n); ([], 0)."""
        for n in range(min(self.max_suffix, len(context)), 0, -1):
            s = [int(t) for t in context[-n:]]  # the suffix s of length n

            def key(i):  # the first n tokens of the suffix that starts at i
                return self.tokens[i:i + n].tolist()

            lo = bisect_left(self.sa, s, key=key)
            if lo < len(self.sa) and key(self.sa[lo]) == s:
                hi = bisect_right(self.sa, s, lo=lo, key=key)
                k = min(hi - lo, max_matches)
                # [k] evenly spaced over the run
                starts = self.sa[lo + np.arange(k) * (hi - lo) // k] + n
                return [self.tokens[i:i + draft_len].tolist() for i in starts], n
        return [], 0


def retrieve(datastore, x, room, max_matches, draft_len, num_draft_nodes):
    """Steps 1-2: the continuations' trie, `room` tokens deep, pruned -> (tokens, parents)."""
    continuations, _ = datastore.search(x, max_matches, draft_len)
    tokens, parents, counts = trie(c[:room] for c in continuations)
    tokens, parents, _ = prune(tokens, parents, counts, num_draft_nodes)
    return tokens, parents


def check_rest(x, N, target, datastore, max_matches, draft_len, num_draft_nodes, sampling_options):
    check_inputs(x, N, **sampling_options)
    for name, value in [("max_matches", max_matches), ("draft_len", draft_len),
                        ("num_draft_nodes", num_draft_nodes)]:
        if int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer; got {value}")
    if not isinstance(datastore, Datastore):
        raise ValueError("datastore must be a picospec.rest.Datastore: Datastore.build(tokens) or "
                         "Datastore.load(path)")
    V = getattr(target, "n_vocab", None)
    if V is not None and int(datastore.tokens.max()) >= V:
        raise ValueError(f"the datastore holds token id {int(datastore.tokens.max())} but the "
                         f"target has {V} tokens: build the datastore with the target's tokenizer")


def rest_decoding(x, target, N, rng, datastore, max_matches=100, draft_len=10, num_draft_nodes=7,
                  stats=None, **sampling_options):
    """x then N tokens of the warped target's law (greedy at T = 0)."""
    check_rest(x, N, target, datastore, max_matches, draft_len, num_draft_nodes, sampling_options)
    x = [int(t) for t in x]
    T = len(x) + N
    while len(x) < T:
        # Steps 1-2: the trie of what followed the context's longest suffix in the datastore, pruned
        tokens, parents = retrieve(datastore, x, T - len(x) - 1, max_matches, draft_len,
                                   num_draft_nodes)
        # Step 3: one target pass over x and the tree (zero nodes: a plain next-token call)
        Q = target.tree(x, tokens, parents, probs=True)  # [1 + m, V]
        # Step 4: recursive rejection sampling over the trie (exact match at temperature 0, where q
        # is one-hot)
        path, token, origin = verify_tree(tokens, parents, warp(Q, **sampling_options), rng)
        target.accept(path)
        new = [tokens[i] for i in path] + [int(token)]
        x.extend(new)
        if stats is not None:
            stats.append(step_record(new, ["draft"] * len(path) + [origin], drafted=depth(parents),
                                     nodes=len(tokens)))
    return x
