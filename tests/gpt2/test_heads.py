"""Medusa / Blockwise heads (gpt2/heads.py): gradients by finite differences (float64), a fresh
head copies the LM head, save/load round trip with clear errors, the accuracy record the sparse tree
is built from, keeping the first heads. Their trainer is tested in
tests/gpt2/train/test_heads.py."""
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


def test_load_heads_errors(tmp_path):
    with pytest.raises(ValueError, match="no heads in"):
        load_heads(tmp_path)
    heads, config = init_heads(1, np.zeros((5, 3), np.float32))
    save_heads(tmp_path, heads, config)
    assert not list(tmp_path.glob("*.tmp"))
    trained_here = r"give heads trained on this backbone \(python -m gpt2.train.heads --backbone"
    with pytest.raises(ValueError, match=f"n_embd 3, but the backbone has 4: {trained_here}"):
        load_heads(tmp_path, n_embd=4)
    with pytest.raises(ValueError, match=f"predict 5 tokens; the backbone has 6: {trained_here}"):
        load_heads(tmp_path, n_embd=3, n_vocab=6)


def test_ranks_of_targets():
    logits = np.array([[0.1, 0.5, 0.2], [3.0, 1.0, 2.0]])
    assert ranks_of_targets(logits, np.array([2, 1])).tolist() == [1, 2]


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


@pytest.mark.parametrize("dtype, stored", [("float64", "F64"), (np.int32, "F32")])
def test_keep_first_heads_of_any_dtype_load_heads_reads(tmp_path, dtype, stored):
    """Heads stored as float64 (or integers) load; keeping some of them works too."""
    from gpt2.heads import keep_first_heads
    from gpt2.weights import read_header

    heads, config = init_heads(2, np.ones((5, 3), np.float32))
    if dtype is np.int32:  # save_heads casts floats only
        heads = [{k: {n: a.astype(np.int32) for n, a in part.items()} for k, part in head.items()}
                 for head in heads]
    save_heads(tmp_path / "all", heads, config, dtype=None if dtype is np.int32 else dtype)
    keep_first_heads(tmp_path / "all", tmp_path / "one", 1)
    kept, _ = load_heads(tmp_path / "one", n_embd=3, n_vocab=5)
    np.testing.assert_array_equal(kept[0]["out"]["w"], np.ones((3, 5), np.float32))
    header = read_header(tmp_path / "one" / "heads.safetensors")[0]
    assert header["heads.0.out.w"]["dtype"] == stored


def test_heads_cli_errors_are_one_line(tmp_path):
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-m", "gpt2.heads", "--src", str(tmp_path / "none"),
                          "--dst",
                          str(tmp_path / "out"), "--n", "2"], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert (run.returncode == 2 and run.stderr.startswith("error: --src")
            and "no such folder" in run.stderr and "Traceback" not in run.stderr)
