"""Loading through the front door (load_model, heads_function): every broken input is a ValueError
that names the file or the name and says what to do, and nothing reaches the network
(huggingface_hub is offline)."""
import json
import shutil

import numpy as np
import pytest

from gpt2.heads import init_heads, load_heads, save_heads
from gpt2.load import ASSETS, heads_folder, heads_function, load_model
from gpt2.weights import save_checkpoint
from tests.support.micro import random_gpt2


@pytest.fixture(autouse=True)
def no_hub(monkeypatch):
    """huggingface_hub offline, as HF_HUB_OFFLINE=1 sets it: a test that tried to download would
    fail at once, before any request."""
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)


@pytest.fixture
def checkpoint(tmp_path):
    """A small random GPT-2 with the built-in tokenizer, in a local folder."""
    folder = tmp_path / "ckpt"
    hparams, params = random_gpt2(n_vocab=4097)
    save_checkpoint(folder, hparams, params)
    for name in ("vocab.json", "merges.txt"):
        shutil.copy(ASSETS / "tiny-target" / name, folder / name)
    return folder


def test_a_local_checkpoint_loads(checkpoint):
    model, encoder = load_model(str(checkpoint))
    assert model(encoder.encode("def f(x):"), 1).shape == (1, 4097)


@pytest.mark.parametrize("file, damage, message", [
    ("config.json", lambda b: b[:20], "not valid JSON"),
    ("config.json", lambda b: b.replace(b'"n_head": 2', b'"n_head": 3'),
     "n_embd 16 is not divisible by n_head 3"),
    ("model.safetensors", lambda b: b[:-64], "outside the file's data"),
    ("vocab.json", lambda b: b[: len(b) // 2], "not valid JSON"),
    ("merges.txt", lambda b: b + b"loose\n", "is not a merge"),
])
def test_corrupt_files_are_named(checkpoint, file, damage, message):
    path = checkpoint / file
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(ValueError, match=message) as e:
        load_model(str(checkpoint))
    assert str(e.value).startswith(f"{path}: ") and "replace it with a good copy" in str(e.value)
    assert "delete" not in str(e.value)  # the user's folder: never advised to delete their file


@pytest.mark.parametrize("n_vocab", [4000, 4200])
def test_a_tokenizer_that_does_not_fit_the_weights_is_named(checkpoint, n_vocab):
    """The built-in tokenizer has 4097 tokens: beside a model of 4000 rows its ids 4000+ would index
    past the embedding, beside one of 4200 the rows 4097+ could be sampled and never printed."""
    save_checkpoint(checkpoint, *random_gpt2(n_vocab=n_vocab))
    with pytest.raises(ValueError,
                       match=f"the tokenizer has 4097 tokens .*but the model has {n_vocab} .*do "
                             f"not belong together; put the tokenizer files of this model beside "
                             f"its weights"):
        load_model(str(checkpoint))


def test_nan_weights_are_named(tmp_path, checkpoint):
    hparams, params = random_gpt2(n_vocab=4097)
    params["ln_f"]["g"][7] = np.nan
    save_checkpoint(checkpoint, hparams, params)
    with pytest.raises(ValueError, match="model.safetensors: tensor 'ln_f.weight' holds NaN"):
        load_model(str(checkpoint))


def test_names_that_cannot_load(tmp_path):
    with pytest.raises(ValueError, match=f"local folder {tmp_path / 'gone'} does not exist"):
        load_model(str(tmp_path / "gone"))
    for offline in (True, False):  # --offline, or HF_HUB_OFFLINE alone
        with pytest.raises(ValueError, match="^offline: distilbert/distilgpt2 is not in the "
                                             "Hugging Face cache .* .missing config.json"):
            load_model("distilbert/distilgpt2", offline=offline)


@pytest.fixture
def heads(tmp_path):
    """Two untied heads for a backbone of n_embd 16 and 4097 tokens."""
    folder = tmp_path / "heads"
    save_heads(folder, *init_heads(2, np.zeros((4097, 16), np.float32)), dtype="float32")
    return folder


def edit_heads_json(folder, **changes):
    config = json.loads((folder / "heads.json").read_text())
    (folder / "heads.json").write_text(json.dumps({**config, **changes}))


@pytest.mark.parametrize("changes, message", [
    ({"n_heads": 0}, "n_heads is 0"), ({"n_heads": 1.5}, "n_heads is 1.5"),
    ({"n_heads": 3}, "'heads.2.res.w' is missing"),
    ({"tied": "no"}, "tied is 'no'"), ({"act": "gelu"}, "act is 'gelu'"),
])
def test_bad_heads_json(heads, changes, message):
    edit_heads_json(heads, **changes)
    with pytest.raises(ValueError, match=message) as e:
        load_heads(heads)
    assert str(e.value).startswith(str(heads)) and "re-train the heads" in str(e.value)


def test_corrupt_heads_are_named(heads, checkpoint):
    from gpt2.weights import read_safetensors, write_safetensors

    model, _ = load_model(str(checkpoint))
    assert heads_function(heads_folder(str(checkpoint), "medusa", heads=heads),
                          model)[1]["n_heads"] == 2
    good = (heads / "heads.json").read_text()
    (heads / "heads.json").write_text("{")
    with pytest.raises(ValueError, match=f"{heads / 'heads.json'}: not valid JSON"):
        heads_function(heads, model)
    (heads / "heads.json").write_text(good)
    tensors = read_safetensors(heads / "heads.safetensors")
    for name, value, message in [("heads.1.out.w", np.full((16, 4097), np.inf, np.float32),
                                  "holds NaN or infinite"),
                                 ("heads.1.res.b", np.zeros(15, np.float32),
                                  r"has shape \(15,\), not \[C\]")]:
        write_safetensors(heads / "heads.safetensors", {**tensors, name: value})
        with pytest.raises(ValueError, match=f"heads.safetensors: tensor '{name}' {message}"):
            heads_function(heads, model)


def test_the_heads_run_on_the_targets_blas_threads(heads, checkpoint, monkeypatch):
    """Medusa's and Blockwise's heads multiply on the host as the target's engine does: at its
    thread count, not the library's (which oversubscribes busy cores)."""
    import gpt2.heads
    from threadpoolctl import threadpool_limits

    from gpt2.fast.policy import blas_threads

    seen, real = [], gpt2.heads.heads_logits
    monkeypatch.setattr(gpt2.heads, "heads_logits",
                        lambda *args: seen.append(blas_threads()) or real(*args))
    with threadpool_limits(limits=2, user_api="blas"):
        model, _ = load_model(str(checkpoint), threads=1)
        fn, config = heads_function(heads, model)
        assert fn(np.zeros((1, 16), np.float32)).shape == (2, 1, 4097)
        assert seen == [1] and blas_threads() == 2


# the command line prints them as one line `error: ...`, exit 2
def test_every_loading_error_is_a_value_error():
    from gpt2.hub import DownloadError, Unreachable
    from gpt2.weights import CorruptFile

    assert all(issubclass(e, ValueError) for e in (CorruptFile, DownloadError, Unreachable))


def test_heads_trained_on_other_weights_of_the_same_width_are_noted(heads, checkpoint, tmp_path,
                                                                     capsys):
    """heads.json's target_sha256 names the weights the heads were trained for: other weights of
    the target's width get one note line on stderr (naming both, MEDUSA-2's without the backbone's
    name: it tuned them); the target's own weights, or a record without them (the built-in heads),
    load quietly."""
    import hashlib

    model, _ = load_model(str(checkpoint))
    other = tmp_path / "other"
    save_checkpoint(other, *random_gpt2(n_vocab=4097, seed=1))
    ours, theirs = (hashlib.sha256((f / "model.safetensors").read_bytes()).hexdigest()
                    for f in (checkpoint, other))
    assert ours != theirs
    for record, named in [({}, None), ({"target_sha256": ours}, None),
                          ({"target_sha256": theirs, "backbone": "gpt2-other"}, "gpt2-other, "),
                          ({"target_sha256": theirs, "backbone": "gpt2-other",
                            "stage": "medusa2"}, "")]:
        edit_heads_json(heads, **record)
        heads_function(heads, model)
        err = capsys.readouterr().err
        assert err == ("" if named is None else
                       f"note: {heads} holds Medusa heads trained on other weights ({named}sha256 "
                       f"{theirs[:12]}) than the target's ({checkpoint}, sha256 {ours[:12]}): "
                       f"expect few drafts to be accepted; train them on this target (python -m "
                       f"gpt2.train.heads --backbone NAME) and pass --heads DIR\n"), err
    target, _ = load_model("tiny-target")
    heads_function(heads_folder("tiny-target", "medusa"), target)
    assert capsys.readouterr().err == ""
