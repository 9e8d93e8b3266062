"""Medusa / Blockwise heads: gradients by finite differences (float64), MEDUSA-1 and MEDUSA-2
training lower the head loss, save/load round trip with clear errors, and the accuracy record the
sparse tree is built from."""
import json
from pathlib import Path

import numpy as np
import pytest

from gpt2.train.backprop import gpt2_hidden_backward, gpt2_hidden_forward, lm_head_forward_backward
from gpt2.heads import heads_loss_and_grads, init_heads, load_heads, ranks_of_targets, save_heads
from gpt2.engine import tree_map
from gpt2.weights import flatten
from tests.support.micro import random_gpt2


def random_heads(n_heads, wte, tied, act, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    heads, config = init_heads(n_heads, wte, tied=tied, act=act)
    for v in flatten(heads).values():
        v[...] = rng.standard_normal(v.shape) * 0.3
    return [{a: {b: w.astype(dtype) for b, w in d.items()} for a, d in h.items()}
            for h in heads], config


@pytest.mark.parametrize("tied, act", [(False, "silu"), (True, "relu"), (False, "relu")])
def test_head_gradients_match_finite_differences(tied, act):
    rng = np.random.default_rng(1)
    V, C, B, T = 7, 5, 2, 6
    wte = rng.standard_normal((V, C))
    heads, config = random_heads(3, wte, tied, act)
    h = rng.standard_normal((B, T, C))
    targets = rng.integers(0, V, (B, T))
    lambdas = [0.8, 0.64, 0.512]
    loss, _, grads, dh = heads_loss_and_grads(h, targets, heads, wte, config, lambdas)
    flat_p, flat_g = flatten(heads), flatten(grads)
    eps = 1e-6
    for name, p in list(flat_p.items()) + [("h", h)]:
        g = dh if name == "h" else flat_g[name]
        for idx in [tuple(rng.integers(0, s) for s in p.shape) for _ in range(4)]:
            old = p[idx]
            p[idx] = old + eps
            up = heads_loss_and_grads(h, targets, heads, wte, config, lambdas)[0]
            p[idx] = old - eps
            down = heads_loss_and_grads(h, targets, heads, wte, config, lambdas)[0]
            p[idx] = old
            assert g[idx] == pytest.approx((up - down) / (2 * eps), rel=1e-4, abs=1e-7), name


def test_joint_medusa2_gradient_reaches_backbone():
    """MEDUSA-2's loss lambda_0 L_LM + sum_k lambda_k L_k: the backbone gradient matches finite
    differences."""
    hp, tree = random_gpt2(n_vocab=11, n_ctx=8, n_embd=8, n_head=2, n_layer=1)
    tree = tree_map(lambda a: a.astype(np.float64), tree)
    heads, config = random_heads(2, tree["wte"], False, "silu")
    rng = np.random.default_rng(0)
    ids, targets = rng.integers(0, 11, (2, 6)), rng.integers(0, 11, (2, 6))

    def loss_and_grad():
        h, cache = gpt2_hidden_forward(tree, hp, ids)
        loss, _, _, dh = heads_loss_and_grads(h, targets, heads, tree["wte"], config, [0.8, 0.64])
        lm, dh_lm, dwte = lm_head_forward_backward(h, tree["wte"], targets)
        g = gpt2_hidden_backward(dh + 0.5 * dh_lm, cache, tree)
        return loss + 0.5 * float(lm), g

    _, g = loss_and_grad()
    w = tree["blocks"][0]["mlp"]["c_fc"]["w"]
    for idx in [(0, 0), (3, 5), (7, 31)]:
        old = w[idx]
        w[idx] = old + 1e-6
        up = loss_and_grad()[0]
        w[idx] = old - 1e-6
        down = loss_and_grad()[0]
        w[idx] = old
        assert g["blocks"][0]["mlp"]["c_fc"]["w"][idx] == pytest.approx((up - down) / 2e-6,
                                                                        rel=1e-4, abs=1e-8)


def test_fresh_head_copies_lm_head():
    rng = np.random.default_rng(0)
    wte = rng.standard_normal((9, 4)).astype(np.float32)
    heads, config = init_heads(2, wte)
    h = rng.standard_normal((3, 4)).astype(np.float32)
    from gpt2.heads import heads_logits

    out = heads_logits(h, heads, wte, config)
    assert out.dtype == np.float32 and out.shape == (2, 3, 9)
    np.testing.assert_allclose(out[1], h @ wte.T, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("stage, tied", [("medusa1", False), ("medusa2", False), ("medusa1", True)])
def test_training_lowers_head_loss(tmp_path, stage, tied):
    from gpt2.train.heads import main
    from gpt2.weights import save_checkpoint

    hparams, params = random_gpt2(n_vocab=20, n_ctx=16, n_embd=16, n_head=2, n_layer=1, seed=3)
    save_checkpoint(tmp_path / "backbone", hparams, params)
    rng = np.random.default_rng(0)
    # a repeating pattern: every head can learn it
    text = np.tile(rng.integers(0, 20, 37), 60).astype(np.uint16)
    data = tmp_path / "data"
    data.mkdir()
    text.tofile(data / "train.bin")
    text[:400].tofile(data / "val.bin")
    main(backbone=str(tmp_path / "backbone"), data=str(data), out=str(tmp_path / "out"), n_heads=2,
         stage=stage,
         tied=tied, act="relu" if tied else "silu", n_ctx=16, batch_size=4, lr=3e-2, warmup=2,
         warmup_heads=5, max_steps=300, eval_every=150, dtype="float32")
    record = json.loads((tmp_path / "out" / "heads.json").read_text())
    first, last = record["first_losses"], record["history"][-1]["losses"]
    assert all(b < a for a, b in zip(first[-2:], last[-2:]))  # both heads' losses fell
    heads, config = load_heads(tmp_path / "out", n_embd=16, n_vocab=20)
    assert config["tied"] == tied and len(heads) == 2
    if not tied:  # untied heads have the capacity to learn the pattern (chance is 1/20)
        assert record["accuracy"]["top1"][1] > 0.5


def test_load_heads_errors(tmp_path):
    with pytest.raises(ValueError, match="no heads in"):
        load_heads(tmp_path)
    heads, config = init_heads(1, np.zeros((5, 3), np.float32))
    save_heads(tmp_path, heads, config)
    assert not list(tmp_path.glob("*.tmp"))
    with pytest.raises(ValueError, match="n_embd 3, but the backbone has 4"):
        load_heads(tmp_path, n_embd=4)
    with pytest.raises(ValueError, match="predict 5 tokens"):
        load_heads(tmp_path, n_embd=3, n_vocab=6)


def test_ranks_of_targets():
    logits = np.array([[0.1, 0.5, 0.2], [3.0, 1.0, 2.0]])
    assert ranks_of_targets(logits, np.array([2, 1])).tolist() == [1, 2]


def test_self_distillation_data_come_from_the_backbone(tmp_path):
    """--distill_tokens: the training tokens are the backbone's own samples (from text prompts), not
    the text."""
    from gpt2.train.heads import self_distill

    hparams, params = random_gpt2(n_vocab=20, n_ctx=32, n_embd=16, n_head=2, n_layer=1, seed=4)
    params["wte"][:, :] = 0
    # the model puts nearly all mass on token 7 after any text
    params["wte"][7, :] = 20 * params["ln_f"]["g"]
    text = np.zeros(500, dtype=np.uint16)  # text of token 0 only
    ids = self_distill(hparams, params, text, 300, np.random.default_rng(0), prompt_len=4,
                       new_tokens=20, batch_size=5)
    assert ids.dtype == np.uint16 and len(ids) == 300
    generated = np.concatenate([ids[i + 4:i + 24] for i in range(0, 288, 24)])
    assert (generated == 7).mean() > 0.9 and (ids[:4] == 0).all()


def test_distill_data_is_saved_and_reused(tmp_path):
    """--distill_tokens writes OUT/distill.bin (atomically); --distill_data FILE trains on exactly
    those tokens."""
    from gpt2.train.heads import main
    from gpt2.weights import save_checkpoint

    hparams, params = random_gpt2(n_vocab=20, n_ctx=32, n_embd=16, n_head=2, n_layer=1, seed=3)
    save_checkpoint(tmp_path / "backbone", hparams, params)
    data = tmp_path / "data"
    data.mkdir()
    # text: 0, 1, 2, ..., 19, 0, 1, ...
    (np.arange(600) % 20).astype(np.uint16).tofile(data / "train.bin")
    (np.arange(100) % 20).astype(np.uint16).tofile(data / "val.bin")
    common = dict(backbone=str(tmp_path / "backbone"), data=str(data), n_heads=1, n_ctx=16,
                  batch_size=2, max_steps=2, eval_every=2, dtype="float32")
    main(out=str(tmp_path / "a"), distill_tokens=256, distill_temperature=0.0, **common)
    made = np.fromfile(tmp_path / "a" / "distill.bin", dtype=np.uint16)
    assert len(made) == 256 and not list((tmp_path / "a").glob("*.tmp"))
    # the first row: 16 tokens of text, then 112 of the backbone's
    steps = np.diff(made[:128].astype(int)) % 20
    assert (steps[:15] == 1).all() and (steps[15:] == 1).mean() < 0.5
    main(out=str(tmp_path / "b"), distill_data=str(tmp_path / "a" / "distill.bin"), **common)
    record = json.loads((tmp_path / "b" / "heads.json").read_text())
    assert record["args"]["distill_data"] == str(tmp_path / "a" / "distill.bin")


def test_keep_first_heads(tmp_path):
    from gpt2.heads import keep_first_heads

    hparams, params = random_gpt2(n_vocab=20, n_embd=16, seed=2)
    heads, config = random_heads(3, params["wte"], tied=False, act="silu", dtype=np.float32)
    record = {"accuracy": {"top1": [0.9, 0.5, 0.4, 0.3], "on": "text"}}
    save_heads(tmp_path / "all", heads, config, dtype="float32", record=record)
    keep_first_heads(tmp_path / "all", tmp_path / "two", 2)
    kept, kept_config = load_heads(tmp_path / "two", n_embd=16, n_vocab=20)
    assert kept_config["n_heads"] == 2 and kept_config["accuracy"] == {"top1": [0.9, 0.5, 0.4],
                                                                       "on": "text"}
    for a, b in zip(kept, heads[:2]):
        np.testing.assert_array_equal(a["out"]["w"], b["out"]["w"])
        np.testing.assert_array_equal(a["res"]["w"], b["res"]["w"])
    with pytest.raises(ValueError, match="cannot keep the first 4"):
        keep_first_heads(tmp_path / "all", tmp_path / "four", 4)


@pytest.mark.parametrize("options, message", [
    ({"distill_tokens": 100, "distill_data": "x.bin"}, "not both"),
    ({"distill_tokens": 100, "distill_temperature": -1.0}, "distill_temperature must be >= 0"),
    ({"distill_data": "missing.bin"}, "no such file; make one with --distill_tokens"),
])
def test_bad_distill_options_give_clear_errors(tmp_path, options, message):
    from gpt2.train.heads import main

    with pytest.raises(ValueError, match=message):
        main(data=str(tmp_path), out=str(tmp_path / "out"), **options)


def test_resumed_run_reuses_its_distill_data(tmp_path, monkeypatch):
    """A second run into the same OUT with --distill_tokens reads OUT/distill.bin instead of
    decoding it again."""
    import gpt2.train.heads as th
    from gpt2.weights import save_checkpoint

    hparams, params = random_gpt2(n_vocab=20, n_ctx=32, n_embd=16, n_head=2, n_layer=1, seed=3)
    save_checkpoint(tmp_path / "backbone", hparams, params)
    data = tmp_path / "data"
    data.mkdir()
    (np.arange(600) % 20).astype(np.uint16).tofile(data / "train.bin")
    (np.arange(100) % 20).astype(np.uint16).tofile(data / "val.bin")
    common = dict(backbone=str(tmp_path / "backbone"), data=str(data), out=str(tmp_path / "a"),
                  n_heads=1, n_ctx=16,
                  batch_size=2, eval_every=2, dtype="float32", distill_tokens=256,
                  distill_temperature=0.0)
    th.main(max_steps=2, **common)
    made = (tmp_path / "a" / "distill.bin").read_bytes()
    sizes = []
    real = th.self_distill
    monkeypatch.setattr(th, "self_distill", lambda *a, **k: sizes.append(a[3]) or real(*a, **k))
    th.main(max_steps=4, **common)
    assert sizes == [8 * 8 * 16 + 1]  # only the validation continuations were decoded again
    assert (tmp_path / "a" / "distill.bin").read_bytes() == made


def test_heads_cli_errors_are_one_line(tmp_path):
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-m", "gpt2.heads", "--src", str(tmp_path / "none"),
                          "--dst",
                          str(tmp_path / "out"), "--n", "2"], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert (run.returncode == 2 and run.stderr.startswith("error: --src")
            and "no such folder" in run.stderr and "Traceback" not in run.stderr)
