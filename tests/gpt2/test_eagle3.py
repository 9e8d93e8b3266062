"""The EAGLE-3 head (gpt2/eagle3.py, trained by gpt2/train/eagle3.py): the engine's features from
three depths; training-time test's gradients against finite differences (the fusion layer, every
unrolled step); the unrolled training forward equal to the head drafting a chain, step by step;
the draft targets; a short training lowers the loss at every test step; the batched head; the
vocabulary of the trainer; save/load and its refusals."""
import numpy as np
import pytest

from gpt2.backend import tree_map
from gpt2.eagle import BatchEagleHead
from gpt2.eagle3 import (Eagle3Head, default_layers, eagle3_head, init_eagle3, load_eagle3,
                         save_eagle3)
from gpt2.engine import GPT2, BatchGPT2
from gpt2.model import gpt2_hidden, transformer_block
from gpt2.train.eagle3 import (step_targets, token_counts, ttt_forward, ttt_loss_and_grads,
                               vocabulary)
from gpt2.weights import flatten
from picospec.eagle3 import draft_vocabulary

from tests.support.feature_toys import engine_and_eagle3_head
from tests.support.micro import random_gpt2


# ---- the target's features at three depths ----

@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
def test_engine_reads_the_blocks_outputs(static):
    hparams, params = random_gpt2(n_vocab=12, n_ctx=64, n_embd=16, n_head=2, n_layer=4, seed=3)
    model = GPT2(hparams, params, static=static)
    x = [1, 2, 3, 4, 5]
    # the residual stream after each block, by hand
    h = params["wte"][x] + params["wpe"][:len(x)]
    stream = []
    for block in params["blocks"]:
        h = transformer_block(h[None], **block, n_head=2,
                              mask=np.tril(np.ones((len(x), len(x)), bool)))[0]
        stream.append(h)
    logits, H = model.logits(x, 3, hidden=(0, 2, 3))  # [3, V], [3, 3C]
    assert H.shape == (3, 48)
    assert np.abs(H - np.concatenate([stream[0], stream[2], stream[3]], -1)[-3:]).max() < 1e-4
    plain, last = model.logits(x, 3, hidden=True)
    assert np.abs(logits - plain).max() < 1e-4 and last.shape == (3, 16)
    _, H = model.tree(x[:3], [4, 5, 9], [-1, 0, 0], hidden=(1,))  # [1 + 3, C]
    ref = gpt2_hidden(np.array(x[:3] + [4, 9]), **params, n_head=2, taps=(1,))  # node 9 is 4's
    assert np.abs(H[-1] - ref[-1, 16:]).max() < 1e-4
    _, Hs = BatchGPT2(model, 2).logits([x, x[:4]], 1, hidden=(3,))  # [B, 1, C]
    assert np.abs(Hs[0, 0] - stream[3][-1]).max() < 1e-4
    with pytest.raises(ValueError, match="blocks 0 to 3"):
        model.logits(x, 1, hidden=(4,))


def test_default_layers():
    assert default_layers(6) == (1, 3, 4) and default_layers(12) == (1, 6, 10)
    assert default_layers(3) == (0, 1, 2)
    with pytest.raises(ValueError, match="three depths of the target, which has 2 blocks"):
        default_layers(2)


# ---- training-time test ----

def micro_head(seed=0, C=8, V=11, d2t=(3, 0, 7, 5, 1, 9), dtype=np.float64):
    rng = np.random.default_rng(seed)
    wte = rng.standard_normal((V, C)).astype(dtype)
    params, config = init_eagle3(C, 2, np.array(d2t), (0, 1, 2), wte,
                                 {"g": np.ones(C), "b": np.zeros(C)}, rng)
    d2t = params.pop("d2t")
    params = tree_map(lambda a: (a + 0.2 * rng.standard_normal(a.shape)).astype(dtype), params)
    return params, config, wte, d2t


@pytest.mark.parametrize("steps", [1, 3])
def test_gradients_match_finite_differences(steps):
    """Every parameter group, the fusion layer and the block through the unrolled steps, with
    positions left out (target tokens outside the vocabulary, the row's end)."""
    params, _, wte, d2t = micro_head()
    rng = np.random.default_rng(5)
    B, T, k, C = 2, 6, 3, 8
    F, ids = rng.standard_normal((B, T - 1, k * C)), rng.integers(0, 11, (B, T))
    target = 2 * rng.standard_normal((B, T, 11))
    _, parts, grads = ttt_loss_and_grads(F, ids, target, d2t, params, wte, 2, steps, 0.8)
    assert len(parts["loss_by_step"]) == steps
    flat_p, flat_g = flatten(params), flatten(grads)
    assert set(flat_p) == set(flat_g)
    for name, p in flat_p.items():
        for idx in [tuple(rng.integers(0, s) for s in p.shape) for _ in range(3)]:
            old = p[idx]
            p[idx] = old + 1e-6
            up = ttt_loss_and_grads(F, ids, target, d2t, params, wte, 2, steps, 0.8)[0]
            p[idx] = old - 1e-6
            down = ttt_loss_and_grads(F, ids, target, d2t, params, wte, 2, steps, 0.8)[0]
            p[idx] = old
            assert flat_g[name][idx] == pytest.approx((up - down) / 2e-6, rel=1e-4, abs=1e-8), name


def test_each_unrolled_step_is_the_head_drafting_a_chain():
    """Step s at item j of the training forward = the head's row s - 1 after x = ids[:j + 2] and
    the chain of the true next tokens: training sees what drafting sees."""
    params, config, wte, d2t = micro_head(dtype=np.float32)
    rng = np.random.default_rng(7)
    T, steps = 9, 4
    ids = rng.integers(0, 11, (1, T))
    F = rng.standard_normal((1, T - 1, 24)).astype(np.float32)
    logits, _ = ttt_forward(F, ids, params, wte, 2, steps)  # per step [1, J, V_d]
    head = Eagle3Head({**params, "d2t": d2t}, config, wte, 64)
    for j in range(T - 2):
        m = min(steps - 1, T - 2 - j)  # drafted nodes with a true token
        x = [int(t) for t in ids[0, :j + 2]]
        head.reset()
        rows = head(x, list(F[0, :j + 1]), [int(t) for t in ids[0, j + 2:j + 2 + m]],
                    list(range(-1, m - 1)))  # [1 + m, V_d]
        for s in range(1, m + 2):
            assert np.abs(rows[s - 1] - logits[s - 1][0, j]).max() < 1e-4, (j, s)


def test_step_targets():
    rng = np.random.default_rng(0)
    target = rng.standard_normal((2, 6, 11))
    target[0, 3, 8] = 50  # position 3's token is 8, outside the vocabulary
    d2t = np.array([3, 0, 7, 5, 1, 9])
    q, keep = step_targets(target, d2t, 2, 5)  # items j = 0..4 learn positions 2..6
    e = np.exp(target[:, 2:6][..., d2t])
    assert np.allclose(q[:, :4], e / e.sum(-1, keepdims=True))
    assert not keep[:, 4].any()  # position 6 does not exist
    assert not keep[0, 1] and keep[1, 1] == (target[1, 3].argmax() in d2t)


def test_a_short_training_lowers_the_loss_at_every_step():
    params, _, wte, d2t = micro_head(dtype=np.float32, seed=2)
    rng = np.random.default_rng(3)
    F = rng.standard_normal((4, 11, 24)).astype(np.float32)
    ids = rng.integers(0, 11, (4, 12))
    target = (4 * rng.standard_normal((4, 12, 11))).astype(np.float32)
    target[..., d2t] += 3  # most positions' tokens in the vocabulary
    first = None
    for _ in range(60):
        _, parts, grads = ttt_loss_and_grads(F, ids, target, d2t, params, wte, 2, 3)
        first = first or parts["loss_by_step"]
        for name, g in flatten(grads).items():
            node = params
            *path, last = name.split(".")
            for key in path:
                node = node[key]
            node[last] -= 0.05 * g
    assert all(after < 0.9 * before for after, before in zip(parts["loss_by_step"], first))


def test_the_trainers_vocabulary_is_the_methods():
    rows = np.random.default_rng(0).zipf(1.5, (20, 40)) % 50
    counts = token_counts(rows, 50, start=8)
    assert counts.sum() == 20 * 32
    assert (vocabulary(counts, 12) == draft_vocabulary(counts, 12)).all()
    assert (vocabulary(np.array([5, 9, 5, 0]), 3) == [1, 0, 2]).all()


# ---- the head ----

def test_batched_head_rows_equal_the_head_alone():
    model, head = engine_and_eagle3_head(1)
    rng = np.random.default_rng(2)
    xs = [[1, 2, 3, 4], [5, 6, 7]]
    Fs = [list(rng.standard_normal((len(x) - 1, 48)).astype(np.float32)) for x in xs]
    trees = [([2, 3], [-1, 0]), ([4], [-1])]
    batched = BatchEagleHead(head, 2)
    together = batched([0, 1], xs, Fs, trees)
    for b in range(2):
        head.reset()
        alone = head(xs[b], Fs[b], *trees[b])
        assert np.abs(together[b] - alone).max() < 1e-4
    assert (batched.d2t == head.d2t).all() and batched.layers == head.layers == (0, 1, 2)


def test_save_load_and_refusals(tmp_path):
    model, head = engine_and_eagle3_head(0)
    params, config = head.params, {"kind": "eagle3", "n_embd": 16, "n_head": 2,
                                   "layers": [0, 1, 2], "n_draft": 7}
    save_eagle3(tmp_path, params, config, dtype="float32", record={"note": 1})
    loaded, config2 = load_eagle3(tmp_path, 16, 3, 12)
    assert config2["note"] == 1 and loaded["d2t"].dtype == np.int64
    for k, v in flatten(params).items():
        assert (flatten(loaded)[k] == v).all()
    again, _ = eagle3_head(tmp_path, model)
    assert (again.d2t == head.d2t).all()
    with pytest.raises(ValueError, match=r"reads blocks \[0, 1, 2\], but the target has 2: give a "
                                         r"head trained on this target \(python -m "
                                         r"gpt2.train.eagle3 --backbone"):
        load_eagle3(tmp_path, 16, 2, 12)
    with pytest.raises(ValueError, match="d2t must hold distinct target ids 0 to 5"):
        load_eagle3(tmp_path, 16, 3, 6)
    with pytest.raises(ValueError, match="no EAGLE-3 head"):
        load_eagle3(tmp_path / "missing")
    save_eagle3(tmp_path, params, {**config, "layers": "low"}, dtype="float32")
    with pytest.raises(ValueError, match="layers must be a list"):
        load_eagle3(tmp_path)
    save_eagle3(tmp_path, params, {**config, "n_draft": 6}, dtype="float32")
    with pytest.raises(ValueError, match="has shape"):
        load_eagle3(tmp_path)


def test_the_trainer_writes_a_head_the_method_runs(tmp_path):
    """python -m gpt2.train.eagle3's main on a random 3-block backbone: the head, its card (the
    vocabulary, the loss by test step, the accuracy per step ahead), and greedy decoding with it
    equal to the backbone's own."""
    import json

    from gpt2.train.eagle3 import main
    from gpt2.weights import save_checkpoint
    from picospec.autoregressive import autoregressive_sampling
    from picospec.eagle3 import eagle3_decoding

    hparams, params = random_gpt2(n_vocab=40, n_ctx=160, n_embd=16, n_head=2, n_layer=3, seed=4,
                                  scale=0.6)
    save_checkpoint(tmp_path / "bb", hparams, params, dtype="float32")
    (tmp_path / "data").mkdir()
    tokens = np.random.default_rng(1).integers(0, 40, 20_000).astype(np.uint16)
    tokens.tofile(tmp_path / "data" / "train.bin")
    tokens[:4000].tofile(tmp_path / "data" / "val.bin")
    (tmp_path / "data" / "meta.json").write_text(json.dumps({"n_vocab": 40}))
    main(backbone=str(tmp_path / "bb"), data=str(tmp_path / "data"), out=str(tmp_path / "e3"),
         distill_tokens=1000, test_steps=2, batch_size=2, max_steps=4, eval_every=2, eval_rows=2,
         steps=2, dtype="float32")
    card = json.loads((tmp_path / "e3" / "eagle3.json").read_text())
    assert card["vocabulary"]["size"] == 10 and card["layers"] == [0, 1, 2]
    assert len(card["history"][-1]["val_loss_by_step"]) == 2 and len(card["accuracy"]["top1"]) == 2
    model = GPT2(hparams, params)
    head, _ = eagle3_head(tmp_path / "e3", model)
    assert len(head.d2t) == 10
    x = [1, 2, 3]
    expected = autoregressive_sampling(x, model, 12, np.random.default_rng(0), temperature=0)
    model.reset()
    assert eagle3_decoding(x, model, head, 12, np.random.default_rng(0), depth=2, tree_top_k=2,
                           total_tokens=4, temperature=0) == expected
