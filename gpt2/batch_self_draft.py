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
What is reused, as in the single engine: everything the draft computes below its cut (its first skipped sublayer) is
the target's own computation, so each row keeps the residuals at the cut of the tokens the draft read and the
verification is two batched passes: the tokens the draft never read (usually its last proposal) through the sublayers
below the cut, then every unverified token of every row through the sublayers from the cut on, starting from the
kept residuals. A row whose call leaves its verified prefix runs everything from where it parts.

Per row the engine keeps `tokens` (what its cache holds: the single engine's `read`), `verified`, how many of them
hold the target's keys/values in every layer (the single engine's `full` = tokens[:verified]), and `h_cut`, the
residuals at the cut of tokens[verified:] (the single engine's h_cut).
Example (cut 8): row b holds t0..t8, all verified, and the target has just given t9. The draft reads [t0..t9] (runs
t9: tokens 10, verified 9, h_cut [1, C]) and [t0..t9, d1] (runs d1: h_cut [2, C]); the target scores
[t0..t9, d1, d2] with n = 3: it runs d2 through sublayers 0-7, then t9, d1, d2 through sublayers 8.. from their
residuals at the cut (d1's draft keys/values there overwritten), and then verified = 12, h_cut empty.

Shapes: B rows, T new tokens per row (padded), C n_embd, V n_vocab, L n_layer.
"""
import numpy as np

from gpt2.backend import threads_for
from gpt2.batch_engine import RowCaches, mha_rows, padded_rows, row_layout
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
        self.target, self.draft = Model(self, self._verify), Model(self, self._propose)
        self.reset()

    def reset(self):
        super().reset()
        self.verified = [0] * self.rows  # per row: the tokens whose keys/values are the target's in every layer
        self.h_cut = [self._no_residuals() for _ in range(self.rows)]  # per row [tokens - verified, C] at the cut

    def _no_residuals(self):  # -> [0, C]
        return self.xp.zeros((0, self.hparams["n_embd"]), dtype=self.engine.params["wte"].dtype)

    def _move(self, order):  # rows move up with what they hold, verified and residuals too
        super()._move(order)
        self.verified = [self.verified[r] for r in order]
        self.h_cut = [self.h_cut[r] for r in order]

    def _propose(self, xs, n=1):  # the draft: logits [B, n, V] after the last n prefixes of each xs[b]
        xs, B, cut = [list(x) for x in xs], len(xs), self.engine.cut
        # Step 1: the tokens each row has read stay read; the verified prefix ends where the row is read again
        p = np.minimum(self._prefixes(xs, n), [len(x) - n for x in xs])  # [B]
        self.verified[:B] = np.minimum(self.verified[:B], p).tolist()
        # Step 2: the new tokens through the sublayers below the cut (the target's own computation), kept per row
        x, slots, mask, new, _ = padded_rows(self.engine.params, xs, p, [([], [])] * B, self.slots)  # [B*T, C]
        x = self._pass(x, slots, mask, range(cut))
        at_cut = x.reshape(B, -1, x.shape[-1])  # [B, T, C]
        for b in range(B):
            self.h_cut[b] = self.xp.concatenate([self.h_cut[b][:p[b] - self.verified[b]], at_cut[b, :new[b]]])
        # Step 3: the rest of the draft's path (its keys/values above the cut are its own)
        x = self._pass(x, slots, mask, [s for s in self.engine.kept if s >= cut])
        self._ran(xs, int(new.sum()))
        h = x[self.xp.asarray(last(new, n))]  # [B*n, C]
        with threads_for(len(h), self.xp):
            return lm_head(h, self.engine.params, self.engine.adapter, self.engine.head).reshape(B, n, -1)

    def _verify(self, xs, n=1):  # the target: logits [B, n, V] after the last n prefixes of each xs[b]
        xs, B, cut, C = [list(x) for x in xs], len(xs), self.engine.cut, self.hparams["n_embd"]
        # Step 1: per row, u the prefix whose keys/values are the target's; when the row keeps its verified prefix,
        # its tokens up to r (those the draft read) have their residuals at the cut, and only the rest runs below it
        read = self._prefixes(xs, n)  # [B]
        lengths = np.array([len(x) for x in xs])  # [B]
        u = np.minimum(np.minimum(read, lengths - n), self.verified[:B])  # [B]
        r = np.where(u == self.verified[:B], read, u)  # [B]
        # Step 2: the tokens from r on through the sublayers below the cut
        below, ran = None, int((lengths - r).sum())
        if ran:
            x, slots, mask, new, _ = padded_rows(self.engine.params, xs, r, [([], [])] * B, self.slots)  # [B*T1, C]
            below = self._pass(x, slots, mask, range(cut)).reshape(B, -1, C)  # [B, T1, C]
        # Step 3: every row's tokens from u on, from their residuals at the cut, through the sublayers from the cut on
        _, _, slots, mask, new, _ = row_layout(xs, u, [([], [])] * B, self.slots, self.xp)
        x = self.xp.zeros((B, int(new.max()), C), dtype=self.engine.params["wte"].dtype)  # [B, T, C]
        for b in range(B):
            x[b, :r[b] - u[b]] = self.h_cut[b][:r[b] - u[b]]
            if r[b] < lengths[b]:
                x[b, r[b] - u[b]:new[b]] = below[b, :lengths[b] - r[b]]
        x = self._pass(x.reshape(-1, C), slots, mask, range(cut, 2 * self.hparams["n_layer"]))  # [B*T, C]
        self._ran(xs, ran + int(new.sum()))
        self.verified[:B] = lengths.tolist()
        self.h_cut[:B] = [self._no_residuals() for _ in range(B)]
        h = x[self.xp.asarray(last(new, n))]  # [B*n, C]
        with threads_for(len(h), self.xp):
            return lm_head(h, self.engine.params, head=self.engine.head).reshape(B, n, -1)

    def _prefixes(self, xs, n):  # -> [B] the prefix each row's cache holds of its sequence (rows matched, moved up)
        if not 1 <= len(xs) <= self.rows:
            raise ValueError(f"this batched engine holds {self.rows} rows; got {len(xs)} sequences")
        for x in xs:
            self.engine._check(x, n)
        return np.array(self._match(xs))

    def _pass(self, x, slots, mask, sublayers):  # padded rows [B*T, C] through `sublayers` in one batched pass
        B = slots.shape[0]
        with threads_for(len(x), self.xp):  # many rows: the BLAS policy's wide count (gpt2/backend.py)
            for s in sublayers:
                x = sublayer_rows(x, s, self.engine.params["blocks"][s // 2], self.hparams["n_head"],
                                  self.k[s // 2, :B], self.v[s // 2, :B], slots, mask)  # [B*T, C]
        return x


def last(new, n):  # -> the flat indices [B*n] of each row's last n real rows in a padded [B, T] pass
    T = int(new.max())
    return np.concatenate([b * T + np.arange(new[b] - n, new[b]) for b in range(len(new))])


def batch_side(model, rows):
    """A SelfDraft's .target or .draft -> the same side of a BatchSelfDraft of `rows` rows on that SelfDraft. Both
    sides get the sides of ONE batched engine (kept as the SelfDraft's .batch), so that they share its caches as the
    single sides share theirs (what main.py --batch does with the loaded pair)."""
    engine = model.engine
    if engine.batch is None or engine.batch.rows != rows:
        engine.batch = BatchSelfDraft(engine, rows)
    return engine.batch.target if model is engine.target else engine.batch.draft
