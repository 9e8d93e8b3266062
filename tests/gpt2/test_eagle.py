"""The EAGLE head (gpt2/eagle.py, trained by gpt2/train/eagle.py): its gradients against finite
differences, its decoding path against its training forward, calls that reuse its cache, training
lowers the loss, the accuracy record, save/load."""
import json

import numpy as np
import pytest

from gpt2.eagle import EagleHead, init_eagle, load_eagle, save_eagle
from gpt2.train.eagle import eagle_forward, eagle_loss_and_grads
from gpt2.weights import flatten

from tests.support.micro import random_gpt2, random_head


def test_head_gradients_match_finite_differences():
    rng = np.random.default_rng(1)
    V, C, B, T = 11, 8, 2, 5
    params, _ = random_head(C, dtype=np.float64)
    wte = rng.standard_normal((V, C))
    # SmoothL1 on both of its sides
    f, f_next = rng.standard_normal((B, T, C)), 2 * rng.standard_normal((B, T, C))
    tokens = rng.integers(0, V, (B, T))
    _, _, grads, df = eagle_loss_and_grads(f, tokens, f_next, params, wte, 2)
    flat_p, flat_g = flatten(params), flatten(grads)
    for name, p in list(flat_p.items()) + [("f", f)]:
        g = df if name == "f" else flat_g[name]
        for idx in [tuple(rng.integers(0, s) for s in p.shape) for _ in range(3)]:
            old = p[idx]
            p[idx] = old + 1e-6
            up = eagle_loss_and_grads(f, tokens, f_next, params, wte, 2)[0]
            p[idx] = old - 1e-6
            down = eagle_loss_and_grads(f, tokens, f_next, params, wte, 2)[0]
            p[idx] = old
            assert g[idx] == pytest.approx((up - down) / 2e-6, rel=1e-4, abs=1e-8), name


def test_fresh_head_guesses_the_current_feature():
    """fc starts as [0; I] beside GPT-2's small block init: the first guess is near f_i itself."""
    params, _ = init_eagle(16, 2, np.random.default_rng(0))
    f = np.random.default_rng(1).standard_normal((1, 4, 16)).astype(np.float32)
    g, _ = eagle_forward(f, np.zeros((1, 4), int), params, np.zeros((5, 16), np.float32), 2)
    assert g.dtype == np.float32 and np.abs(g - f).max() < 0.3


@pytest.fixture(scope="module")
def head_and_inputs():
    rng = np.random.default_rng(2)
    params, config = random_head(C=8)
    wte = rng.standard_normal((9, 8)).astype(np.float32)
    x = [int(t) for t in rng.integers(0, 9, 7)]
    F = list(rng.standard_normal((6, 8)).astype(np.float32))
    return EagleHead(params, config, wte, 64), params, wte, x, F


def test_decoding_path_equals_the_training_forward(head_and_inputs):
    """Row 0 and a chain drafted on the head's own features equal eagle_forward fed those features
    by hand."""
    head, params, wte, x, F = head_and_inputs
    head.reset()
    out = head(x, F, [3, 5], [-1, 0])  # [3, V]
    f, tokens, g = np.stack(F), list(x[1:]), None
    for k, t in enumerate([None, 3, 5]):
        if t is not None:  # feed the guessed feature of the previous row and the drafted token
            f, tokens = np.concatenate([f, g[:, -1]]), tokens + [t]
        g, _ = eagle_forward(f[None], np.array([tokens]), params, wte, 2)
        np.testing.assert_allclose(out[k], g[0, -1] @ wte.T, rtol=1e-4, atol=1e-4)


def test_calls_reuse_the_cache_and_give_the_same_rows(head_and_inputs):
    head, params, wte, x, F = head_and_inputs
    tokens, parents = [1, 2, 3, 4, 5], [-1, -1, 0, 0, 2]
    fresh = EagleHead(params, {"n_head": 2}, wte, 64)
    whole = fresh(x, F, tokens, parents)  # one call: waves of levels
    head.reset()
    head(x[:5], F[:4])  # an older, shorter context
    head(x, F, tokens[:2], parents[:2])  # level by level, as the methods call it
    calls = head.calls
    levels = head(x, F, tokens, parents)
    assert head.calls == calls + 2  # only the two new levels ran
    np.testing.assert_allclose(levels, whole, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(head(x, F, tokens[:3], parents[:3]), whole[:4], rtol=1e-5, atol=1e-5)


def test_training_lowers_the_loss(tmp_path):
    from gpt2.train.eagle import main
    from gpt2.weights import save_checkpoint

    hparams, params = random_gpt2(n_vocab=20, n_ctx=32, n_embd=16, n_head=2, n_layer=1, seed=3,
                                  scale=0.5)
    save_checkpoint(tmp_path / "backbone", hparams, params)
    text = np.tile(np.random.default_rng(0).integers(0, 20, 37), 60).astype(np.uint16)
    (tmp_path / "data").mkdir()
    text.tofile(tmp_path / "data" / "train.bin")
    text[:400].tofile(tmp_path / "data" / "val.bin")
    main(backbone=str(tmp_path / "backbone"), data=str(tmp_path / "data"),
         out=str(tmp_path / "out"),
         distill_tokens=3200, distill_temperature=1.0, batch_size=8, lr=3e-3, warmup=5,
         max_steps=150, eval_every=50, eval_rows=4, steps=3, dtype="float32")
    record = json.loads((tmp_path / "out" / "eagle.json").read_text())
    assert record["history"][-1]["loss"] < 0.8 * record["first_losses"]["loss"]
    assert record["history"][-1]["val_loss"] < record["history"][0]["val_loss"]
    assert np.array(record["accuracy"]["rank_share"]).shape == (3, 10)
    loaded, config = load_eagle(tmp_path / "out", n_embd=16)
    assert config["n_head"] == 2 and set(loaded) == {"fc", "block"}


@pytest.mark.parametrize("accuracy",
                         ["x", {"rank_share": "x"}, {"rank_share": [[0.5, "x"]]},
                          {"rank_share": []},
                                      {"rank_share": [[0.5, 0.2], [0.5]]}, {"rank_share": [[1.5]]}])
def test_a_damaged_accuracy_record_is_named(tmp_path, accuracy):
    """eagle.json's accuracy.rank_share builds EAGLE-1's sparse tree: anything but a table of shares
    is refused when the head loads, naming the file (before: an AttributeError or TypeError when the
    tree was built)."""
    params, config = random_head(C=8)
    save_eagle(tmp_path, params, config, dtype="float32", record={"accuracy": accuracy})
    with pytest.raises(ValueError,
                       match=f"{tmp_path / 'eagle.json'}: accuracy.rank_share must be a table of "
                             f"shares from 0 to 1.*re-train the head"):
        load_eagle(tmp_path, n_embd=8)


def test_save_load_round_trip_and_errors(tmp_path):
    params, config = random_head(C=8)
    save_eagle(tmp_path, params, config, dtype="float32", record={"note": 1})
    loaded, config2 = load_eagle(tmp_path, n_embd=8)
    assert config2["note"] == 1
    for k, v in flatten(params).items():
        np.testing.assert_array_equal(flatten(loaded)[k], v)
    with pytest.raises(ValueError, match=r"n_embd 8, but the target has 16: give a head trained on "
                                         r"this target \(python -m gpt2.train.eagle --backbone"):
        load_eagle(tmp_path, n_embd=16)
    with pytest.raises(ValueError, match="no EAGLE head"):
        load_eagle(tmp_path / "missing")
    params["fc"]["b"][0] = np.nan
    save_eagle(tmp_path, params, config, dtype="float32")
    with pytest.raises(ValueError, match="NaN"):
        load_eagle(tmp_path)
