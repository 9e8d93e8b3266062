"""The NumPy trainer: finite-difference and torch gradients, AdamW against torch, the training loop
on any loss, loss goes down, exact resume."""
import json

import numpy as np
import pytest

from gpt2.train.backprop import gpt2_forward_backward, gpt2_loss
from gpt2.engine import tree_map
from gpt2.model import gpt2
from gpt2.train.gpt2 import AdamW, lr_at, main as train_main, train_loop
from gpt2.weights import flatten
from tests.support.micro import random_gpt2

HP, PARAMS = random_gpt2(n_vocab=13, n_ctx=8, n_embd=8, n_head=2, n_layer=2, seed=3, scale=0.3)
rng = np.random.default_rng(0)
IDS, TARGETS = rng.integers(0, 13, (2, 6)), rng.integers(0, 13, (2, 6))


def test_gradients_match_finite_differences_for_every_parameter():
    p64 = tree_map(lambda a: a.astype(np.float64), PARAMS)
    _, grads = gpt2_forward_backward(p64, HP, IDS, TARGETS)
    grads, r = flatten(grads), np.random.default_rng(1)
    for name, a in flatten(p64).items():
        for _ in range(3):
            idx = tuple(r.integers(0, s) for s in a.shape)
            old = a[idx]
            a[idx] = old + 1e-6
            up = gpt2_loss(p64, HP, IDS, TARGETS)
            a[idx] = old - 1e-6
            down = gpt2_loss(p64, HP, IDS, TARGETS)
            a[idx] = old
            numeric = (up - down) / 2e-6
            assert abs(numeric - grads[name][idx]) <= 1e-6 + 1e-5 * abs(numeric), name


def test_gradient_check_can_fail():
    """A broken backward (the GELU derivative without its tanh term) disagrees with finite
    differences."""
    import gpt2.train.backprop as bp

    p64 = tree_map(lambda a: a.astype(np.float64), PARAMS)
    saved = bp.gelu_backward
    bp.gelu_backward = lambda dout, cache: dout * 0.5 * (1 + cache[1])
    try:
        _, grads = gpt2_forward_backward(p64, HP, IDS, TARGETS)
    finally:
        bp.gelu_backward = saved
    _, good = gpt2_forward_backward(p64, HP, IDS, TARGETS)
    assert np.abs(flatten(grads)["blocks.0.mlp.c_fc.w"]
                  - flatten(good)["blocks.0.mlp.c_fc.w"]).max() > 1e-4


def test_training_forward_equals_inference_forward():
    logits = gpt2(IDS[0], **PARAMS, n_head=2)
    z = logits - logits.max(-1, keepdims=True)
    nll = -(z - np.log(np.exp(z).sum(-1, keepdims=True)))[np.arange(6), TARGETS[0]].mean()
    assert abs(gpt2_loss(PARAMS, HP, IDS[:1], TARGETS[:1]) - nll) < 1e-5
    loss, grads = gpt2_forward_backward(PARAMS, HP, IDS, TARGETS)
    assert loss.dtype == np.float32 and all(g.dtype == np.float32 for g in flatten(grads).values())


def test_loss_and_grads_match_torch():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from gpt2.weights import state_dict_from_params

    cfg = transformers.GPT2Config(vocab_size=13, n_positions=8, n_embd=8, n_head=2, n_layer=2,
                                  resid_pdrop=0, embd_pdrop=0, attn_pdrop=0)
    model = transformers.GPT2LMHeadModel(cfg)
    model.transformer.load_state_dict({k: torch.tensor(v) for k,
                                       v in state_dict_from_params(PARAMS).items()},
                                      strict=False)
    model.tie_weights()
    logits = model(torch.tensor(IDS)).logits
    ref = torch.nn.functional.cross_entropy(logits.reshape(-1, 13),
                                            torch.tensor(TARGETS).reshape(-1))
    ref.backward()
    loss, grads = gpt2_forward_backward(PARAMS, HP, IDS, TARGETS)
    assert abs(float(loss) - ref.item()) < 1e-5
    ours = state_dict_from_params(grads)
    for name, p in model.transformer.named_parameters():
        np.testing.assert_allclose(ours[name], p.grad.numpy(), atol=2e-5, err_msg=name)


def test_adamw_matches_torch():
    torch = pytest.importorskip("torch")
    w = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    params = {"w": w.copy()}
    opt = AdamW(params, lr=0.01, betas=(0.9, 0.95), weight_decay=0.1)
    tw = torch.tensor(w.copy(), requires_grad=True)
    topt = torch.optim.AdamW([tw], lr=0.01, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    for step in range(5):
        g = np.random.default_rng(step).standard_normal((3, 4)).astype(np.float32)
        opt.step(params, {"w": g})
        tw.grad = torch.tensor(g)
        topt.step()
    np.testing.assert_allclose(params["w"], tw.detach().numpy(), atol=1e-6)


def test_adamw_groups_get_their_own_rates():
    """lr={group: rate}: the same update as one rate for every group, and a group at rate 0 stays
    where it is."""
    r = np.random.default_rng(0)
    start = {"a": {"w": r.standard_normal((3, 4), dtype=np.float32)},
             "b": r.standard_normal((2, 2), dtype=np.float32)}
    grads = {"a.w": r.standard_normal((3, 4), dtype=np.float32),
             "b": r.standard_normal((2, 2), dtype=np.float32)}
    one, two, frozen = (tree_map(np.copy, start) for _ in range(3))
    for params, lr in ((one, 0.01), (two, {"a": 0.01, "b": 0.01}), (frozen, {"a": 0.01, "b": 0.0})):
        opt = AdamW(params)
        for _ in range(3):
            opt.step(params, grads, lr)
    np.testing.assert_array_equal(flatten(one)["a.w"], flatten(two)["a.w"])
    np.testing.assert_array_equal(one["b"], two["b"])
    np.testing.assert_array_equal(frozen["a"]["w"], one["a"]["w"])
    np.testing.assert_array_equal(frozen["b"], start["b"])
    assert not np.array_equal(one["b"], start["b"])


def least_squares_run(ckpt, **options):
    """train_loop on a toy loss: fit w to y = x @ [1, -2, 3] on batches drawn from the loop's rng;
    group "b" is frozen by a learning rate of 0 (though its gradient is not 0)."""
    true_w = np.array([1.0, -2.0, 3.0], np.float32)
    params = {"a": {"w": np.zeros(3, np.float32)}, "b": np.ones(2, np.float32)}

    def loss_and_grads(params, step, rng):
        x = rng.standard_normal((8, 3), dtype=np.float32)  # [8, 3]: a batch
        err = x @ params["a"]["w"] - x @ true_w  # [8]
        return {"loss": float((err ** 2).mean())}, {"a": {"w": 2 * x.T @ err / 8},
                                                    "b": np.ones(2, np.float32)}

    log = train_loop(params, loss_and_grads, ckpt, 60, lambda step: {"a": 0.1, "b": 0.0},
                     np.random.default_rng(0),
                     evaluate=lambda step: {"w0": float(params["a"]["w"][0])}, eval_every=20,
                     **options)
    return params, log


def test_train_loop_trains_any_loss_and_resumes_exactly(tmp_path):
    params, log = least_squares_run(tmp_path / "a")
    assert [h["step"] for h in log["history"]] == [20, 40, 60] and log["step"] == 60
    assert list(log["history"][0]) == ["step", "loss", "w0", "grad_norm", "seconds"]
    assert (log["history"][-1]["loss"] < log["history"][0]["loss"] / 10
            and abs(log["history"][-1]["w0"] - 1) < 0.1)
    np.testing.assert_array_equal(params["b"], np.ones(2))
    least_squares_run(tmp_path / "b", stop_at=30)  # stop at 30 ...
    resumed, resumed_log = least_squares_run(tmp_path / "b")  # ... then resume to 60
    assert [h["step"] for h in resumed_log["history"]] == [20, 30, 40, 60]
    np.testing.assert_array_equal(resumed["a"]["w"], params["a"]["w"])
    assert resumed_log["history"][-1]["loss"] == log["history"][-1]["loss"]


def test_schedule():
    assert lr_at(0, 100, 1.0, 10) == pytest.approx(0.1)
    assert lr_at(9, 100, 1.0, 10) == pytest.approx(1.0)
    assert lr_at(100, 100, 1.0, 10) == pytest.approx(0.1)


def make_data(tmp_path):
    tokens = np.tile(np.arange(20, dtype=np.uint16), 300)  # a learnable pattern
    tokens.tofile(tmp_path / "train.bin")
    tokens[:600].tofile(tmp_path / "val.bin")
    (tmp_path / "meta.json").write_text(json.dumps({"n_vocab": 20}))
    return tmp_path


def test_training_lowers_loss_and_resumes_exactly(tmp_path):
    data = make_data(tmp_path)
    args = dict(n_layer=1, n_embd=16, n_head=2, n_ctx=16, batch_size=4, lr=3e-3, warmup=5,
                eval_every=10, dtype="float32")
    train_main(data, tmp_path / "a", max_steps=40, **args)
    log = json.loads((tmp_path / "a" / "train_log.json").read_text())
    assert log["history"][-1]["val_loss"] < log["history"][0]["val_loss"] - 0.5
    train_main(data, tmp_path / "b", max_steps=40, stop_at=20, **args)  # stop at 20 ...
    train_main(data, tmp_path / "b", max_steps=40, **args)  # ... then resume to 40
    resumed = json.loads((tmp_path / "b" / "train_log.json").read_text())
    assert [h["val_loss"] for h in resumed["history"]][-2:] == [h["val_loss"]
                                                                for h in log["history"]][-2:]


@pytest.mark.parametrize("hparams", [
    {"n_vocab": 20, "n_ctx": 16, "n_embd": 16, "n_head": 2, "n_layer": 1},
    {"n_vocab": 13, "n_ctx": 8, "n_embd": 8, "n_head": 2, "n_layer": 3}])
def test_the_parameter_count_is_that_of_the_model_built(hparams):
    """n_params, which the memory check reads, counts what init_params makes."""
    from gpt2.train.gpt2 import init_params, n_params

    made = flatten(init_params(hparams, np.random.default_rng(0)))
    assert n_params(hparams) == sum(a.size for a in made.values())
