"""The heads' trainer (gpt2/train/heads.py): MEDUSA-1 and MEDUSA-2 training lower the head loss,
the self-distillation data come from the backbone, are saved and reused (also by a resumed run),
and bad distillation options give clear errors."""
import json

import numpy as np
import pytest

from gpt2.heads import load_heads

from tests.support.micro import random_gpt2


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


def sha256_of(path):  # the file's digest, computed here apart from gpt2.addons
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_distill_data_of_other_weights_are_made_again(tmp_path, monkeypatch):
    """OUT holds distill.bin (no checkpoint yet) made on backbone a; a run on backbone b of the same
    width makes its own data instead of training on a's; data whose record names no weights (made
    before records kept them) are reused, as they always were. heads.json names the weights the
    heads draft for: the backbone's (MEDUSA-1), the tuned ones written beside them (MEDUSA-2)."""
    import shutil

    import gpt2.train.heads as th
    from gpt2.weights import save_checkpoint

    for seed, name in ((3, "a"), (4, "b")):
        save_checkpoint(tmp_path / name, *random_gpt2(n_vocab=20, n_ctx=32, n_embd=16, n_head=2,
                                                      n_layer=1, seed=seed))
    data = tmp_path / "data"
    data.mkdir()
    (np.arange(600) % 20).astype(np.uint16).tofile(data / "train.bin")
    (np.arange(100) % 20).astype(np.uint16).tofile(data / "val.bin")
    out = tmp_path / "out"
    common = dict(data=str(data), out=str(out), n_heads=1, n_ctx=16, batch_size=2, eval_every=2,
                  max_steps=2, dtype="float32", distill_tokens=256, distill_temperature=0.0)
    th.main(backbone=str(tmp_path / "a"), **common)
    record = json.loads((out / "heads.json").read_text())
    assert record["target_sha256"] == sha256_of(tmp_path / "a" / "model.safetensors")
    sizes = []
    real = th.self_distill
    monkeypatch.setattr(th, "self_distill", lambda *a, **k: sizes.append(a[3]) or real(*a, **k))
    for name in ("ckpt", "heads.json", "heads.safetensors"):
        shutil.rmtree(out / name) if name == "ckpt" else (out / name).unlink()
    th.main(backbone=str(tmp_path / "b"), **common)
    assert sizes == [256, 8 * 8 * 16 + 1]  # made again on b, then the validation continuations
    made = json.loads((out / "distill.json").read_text())
    assert made["backbone_sha256"] == sha256_of(tmp_path / "b" / "model.safetensors")
    del made["backbone_sha256"]
    (out / "distill.json").write_text(json.dumps(made))
    shutil.rmtree(out / "ckpt")
    sizes.clear()
    th.main(backbone=str(tmp_path / "a"), **{**common, "stage": "medusa2", "warmup_heads": 0})
    assert sizes == [8 * 8 * 16 + 1]  # no record of the weights: reused
    record = json.loads((out / "heads.json").read_text())
    assert record["backbone_sha256"] == sha256_of(tmp_path / "a" / "model.safetensors")
    assert record["target_sha256"] == sha256_of(out / "model.safetensors")
    assert record["target_sha256"] != record["backbone_sha256"]
