"""Add-on folders declare their kind (Medusa, Blockwise, exit adapter, EAGLE): the shipped ones,
folders written before kinds were declared (read by shape), what the trainers write, a declared
kind that is no kind, and the self-draft entries."""
import json
import shutil

import numpy as np
import pytest

from gpt2.load import ASSETS

from tests.support.addon_folders import without_kind

FAST = 3.0  # seconds: a mistake in the options is refused before any model loads
TARGET = ASSETS / "tiny-target"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """Add-on folders of every kind as their trainers wrote them before kinds were declared."""
    root = tmp_path_factory.mktemp("addons")
    for kind in ("medusa", "blockwise", "early_exit"):
        without_kind(TARGET / kind, root / f"old-{kind}")
    without_kind(TARGET / "eagle", root / "old-eagle", "eagle.json")
    return root


def test_every_shipped_add_on_declares_its_kind_and_old_folders_are_read_by_shape(folder):
    from gpt2.addons import folder_kind, heads_kind

    for kind in ("medusa", "blockwise", "early_exit", "eagle"):
        assert folder_kind(TARGET / kind) == kind
        assert folder_kind(folder / f"old-{kind}") == kind
    assert folder_kind(TARGET) == "model" and folder_kind(folder) is None
    assert heads_kind({"n_heads": 3, "tied": True, "act": "relu"}) == "blockwise"
    assert heads_kind({"n_heads": 1, "tied": True, "act": "silu", "exit_layer": 2}) == "early_exit"
    assert heads_kind({"n_heads": 2, "tied": False, "act": "silu"}) == "medusa"
    declared = {"kind": "medusa", "n_heads": 2, "tied": True, "act": "silu"}
    assert heads_kind(declared) == "medusa"  # the declared kind wins over the shape


def test_a_medusa2_folder_is_a_model_and_medusa_heads(tmp_path):
    """MEDUSA-2 writes the fine-tuned backbone beside its heads: the folder loads as a model and its
    heads serve --method medusa, but not --method blockwise."""
    from gpt2.addons import check_kind
    from gpt2.load import load_model

    shutil.copytree(TARGET / "medusa", tmp_path / "m2")
    for name in ("config.json", "model.safetensors", "vocab.json", "merges.txt"):
        shutil.copy(TARGET / name, tmp_path / "m2" / name)
    assert load_model(str(tmp_path / "m2"))[0].n_vocab == 4097
    check_kind(tmp_path / "m2", "medusa", "--heads m2", "--method medusa")
    with pytest.raises(ValueError, match="holds Medusa heads .*not the Blockwise heads"):
        check_kind(tmp_path / "m2", "blockwise", "--heads m2", "--method blockwise")


def test_trainers_write_the_kind(tmp_path):
    from gpt2.addons import folder_kind
    from gpt2.eagle import init_eagle, save_eagle
    from gpt2.heads import init_heads, keep_first_heads, save_heads

    wte = np.random.default_rng(0).standard_normal((7, 4)).astype(np.float32)
    for tied, kind in ((False, "medusa"), (True, "blockwise")):
        save_heads(tmp_path / kind, *init_heads(2, wte, tied=tied))
        assert folder_kind(tmp_path / kind) == kind
    save_heads(tmp_path / "exit", *init_heads(1, wte, tied=True, kind="early_exit"))
    assert folder_kind(tmp_path / "exit") == "early_exit"
    save_eagle(tmp_path / "eagle", *init_eagle(4, 2, np.random.default_rng(0)))
    assert folder_kind(tmp_path / "eagle") == "eagle"
    keep_first_heads(TARGET / "blockwise", tmp_path / "kept", 1)  # kept heads keep their kind
    assert json.loads((tmp_path / "kept" / "heads.json").read_text())["kind"] == "blockwise"


def test_a_declared_kind_that_is_no_kind_is_a_corrupt_file(tmp_path):
    from gpt2.heads import load_heads

    shutil.copytree(TARGET / "medusa", tmp_path / "h")
    config = json.loads((tmp_path / "h" / "heads.json").read_text())
    (tmp_path / "h" / "heads.json").write_text(json.dumps({**config, "kind": "lasso"}))
    with pytest.raises(ValueError, match=r"kind is 'lasso'; it must be one of medusa, blockwise"):
        load_heads(tmp_path / "h")


def test_the_shipped_self_draft_entries_declare_their_kinds():
    from gpt2.self_draft import ENTRY_KINDS, entry_kind, read_config

    assert {k: entry_kind(v) for k, v in read_config(TARGET).items()} == ENTRY_KINDS
    assert entry_kind({"skip": "a1", "K": 2}) == "skip_set"
    assert entry_kind({"exit_layer": 1}) == "exit_layer"


@pytest.mark.parametrize("kind", ["eagle", "eagle3"])
def test_an_eagle_head_of_other_weights_is_noted(kind, tmp_path, capsys):
    """An EAGLE head records the weights it drafts for (target_sha256): loaded beside a target of
    other weights it says so in one line; beside its own, or with no record, nothing."""
    import hashlib

    from gpt2.eagle import eagle_head
    from gpt2.eagle3 import eagle3_head
    from gpt2.load import load_model

    model, _ = load_model("tiny-target")
    ours = hashlib.sha256((TARGET / "model.safetensors").read_bytes()).hexdigest()
    head, name = tmp_path / kind, f"{kind}.json"
    shutil.copytree(TARGET / kind, head)
    config = json.loads((head / name).read_text())
    assert "target_sha256" not in config  # the shipped heads carry no record: quiet
    load = {"eagle": eagle_head, "eagle3": eagle3_head}[kind]
    for made_for, noted in [(None, False), (ours, False), ("ab" * 32, True)]:
        record = config if made_for is None else {**config, "target_sha256": made_for}
        (head / name).write_text(json.dumps(record))
        load(head, model)
        err = capsys.readouterr().err
        assert err.count("\n") == noted, err
        if noted:
            assert err.startswith(f"note: {head} holds ") and "sha256 abababababab" in err
            assert f"sha256 {ours[:12]}" in err and f"python -m gpt2.train.{kind} " in err
