"""Self-drafting for B sequences at once: gpt2/self_draft.py's draft path and its verification behind the batched model
contract of gpt2/batch_engine.py, on one KV cache per row:

    engine = BatchSelfDraft(self_draft, rows)
    engine.draft(xs, n=1), engine.target(xs, n=1) -> probs [B, n, n_vocab]   (and .logits(xs, n): the logits)

Row b of either side is what that side of the single engine returns for xs[b] alone after the same calls
(tests/test_batch_self_draft.py: within 1e-5). Rows are ragged as in BatchGPT2, whose pieces this engine stands on
(RowCaches: the rows' caches, matched to the sequences of a call, moved up when rows leave; padded_rows; mha_rows):
each row has its own length, positions and rollback, and one batched pass runs every row, the draft through the
sublayers it keeps, the target through all of them.

What is shared, as in the single engine: each row has ONE cache for both sides. The draft reads the keys/values that
the target wrote for the row's verified prefix, and writes its own for the tokens it reads, in the layers it keeps;
the target overwrites them when it verifies. The draft's law depends on this sharing (a draft on a cache of its own
would read its own guesses for the tokens the target accepted, and give other logits than the single engine's).
What is NOT reused: the single engine's verification runs the drafted tokens only through the sublayers from the cut
on, from the residuals the draft saved there. Here the target runs every row's unverified tokens through every
sublayer: the draft's work below the cut is done again (and the keys/values it wrote there are rewritten, equal).

Per row the engine keeps `tokens` (what its cache holds: the single engine's `read`) and `verified`, how many of them
hold the target's keys/values in every layer (the single engine's `full` = tokens[:verified]).
Example: row b holds t0..t8, all verified, and the target has just given t9. The draft reads [t0..t9] (runs t9:
tokens 10, verified 9) and [t0..t9, d1] (runs d1); the target scores [t0..t9, d1, d2] with n = 3: it runs t9, d1, d2
through every sublayer, d1's draft keys/values overwritten, and then verified = 12.

Shapes: B rows, T new tokens per row (padded), C n_embd, V n_vocab, L n_layer.
"""
import numpy as np

from gpt2.backend import threads_for
from gpt2.batch_engine import RowCaches, mha_rows, padded_rows
from gpt2.model import ffn, layer_norm
from gpt2.self_draft import Model, lm_head


def sublayer_rows(x, s, block, n_head, k_cache, v_cache, slots, mask):  # residual sublayer s: [B*T, C] -> [B*T, C]
    """gpt2/self_draft.py's sublayer (s = 2l: layer l's attention, 2l + 1: its MLP) on padded rows, each row's keys
    and values in its own cache row (k_cache, v_cache [B, H, S, D])."""
    if s % 2 == 0:
        return x + mha_rows(layer_norm(x, **block["ln_1"]), **block["attn"], n_head=n_head, k_cache=k_cache,
                            v_cache=v_cache, slots=slots, mask=mask)
    return x + ffn(layer_norm(x, **block["ln_2"]), **block["mlp"])


class BatchSelfDraft(RowCaches):
    """A SelfDraft's two sides, .target and .draft, for `rows` sequences at once, on its weights (shared, not copied)
    and one cache per row."""

    def __init__(self, engine, rows):
        super().__init__(engine.hparams, rows, engine.xp, tree_slots=0, dtype=engine.params["wte"].dtype)
        self.engine = engine
        self.verified = [0] * rows  # per row: the tokens whose keys/values are the target's in every layer
        self.target, self.draft = Model(self, self._verify), Model(self, self._propose)

    def reset(self):
        super().reset()
        self.verified = [0] * self.rows

    def _move(self, order):  # rows move up with what they hold, verified too
        super()._move(order)
        self.verified = [self.verified[r] for r in order]

    def _propose(self, xs, n=1):  # the draft: logits [B, n, V] after the last n prefixes of each xs[b]
        xs = [list(x) for x in xs]
        # Step 1: the tokens each row has read stay read; the verified prefix ends where the row is read again
        p = self._prefixes(xs, n)  # [B]
        self.verified[:len(xs)] = np.minimum(self.verified[:len(xs)], p).tolist()
        # Step 2: the new tokens through the kept sublayers, on the target's keys/values of the verified prefix
        h = self._run(xs, p, n, self.engine.kept)  # [B*n, C]
        with threads_for(len(h), self.xp):
            return lm_head(h, self.engine.params, self.engine.adapter).reshape(len(xs), n, -1)

    def _verify(self, xs, n=1):  # the target: logits [B, n, V] after the last n prefixes of each xs[b]
        xs = [list(x) for x in xs]
        # Step 1: reuse only the prefix whose keys/values are the target's
        p = np.minimum(self._prefixes(xs, n), self.verified[:len(xs)])  # [B]
        # Step 2: everything after it through every sublayer (the draft's keys/values there are overwritten)
        h = self._run(xs, p, n, range(2 * self.hparams["n_layer"]))  # [B*n, C]
        self.verified[:len(xs)] = [len(x) for x in xs]
        with threads_for(len(h), self.xp):
            return lm_head(h, self.engine.params).reshape(len(xs), n, -1)

    def _prefixes(self, xs, n):  # -> [B] the prefix each row holds of its sequence, always running its last n tokens
        if not 1 <= len(xs) <= self.rows:
            raise ValueError(f"this batched engine holds {self.rows} rows; got {len(xs)} sequences")
        for x in xs:
            self.engine._check(x, n)
        return np.minimum(self._match(xs), [len(x) - n for x in xs])

    def _run(self, xs, p, n, sublayers):  # -> the residual stream [B*n, C] at each row's last n tokens
        """Each row's tokens from p_b on through `sublayers` in one batched pass, padded rows as in BatchGPT2."""
        params, xp = self.engine.params, self.xp
        x, slots, mask, new, _ = padded_rows(params, xs, p, [([], [])] * len(xs), self.slots)  # [B*T, C]
        B, T = len(xs), len(x) // len(xs)
        with threads_for(B * T, xp):  # many rows: the BLAS policy's wide count (gpt2/backend.py)
            for s in sublayers:
                x = sublayer_rows(x, s, params["blocks"][s // 2], self.hparams["n_head"], self.k[s // 2, :B],
                                  self.v[s // 2, :B], slots, mask)  # [B*T, C]
        self._ran(xs, int(new.sum()))
        return x[xp.asarray(np.concatenate([b * T + np.arange(new[b] - n, new[b]) for b in range(B)]))]  # [B*n, C]


def batch_side(model, rows):
    """A SelfDraft's .target or .draft -> the same side of a BatchSelfDraft of `rows` rows on that SelfDraft. Both
    sides get the sides of ONE batched engine (kept as the SelfDraft's .batch), so that they share its caches as the
    single sides share theirs (what main.py --batch does with the loaded pair)."""
    engine = model.engine
    if engine.batch is None or engine.batch.rows != rows:
        engine.batch = BatchSelfDraft(engine, rows)
    return engine.batch.target if model is engine.target else engine.batch.draft
