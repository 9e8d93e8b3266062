"""What an add-on folder holds, by the "kind" its config declares (heads.json: medusa, blockwise
or early_exit; eagle.json: eagle; eagle3.json: eagle3; self_draft.json: skip_set or exit_layer),
else by its shape:

    folder_kind("gpt2/assets/tiny-target/medusa") -> "medusa"
    check_kind(folder, "blockwise", "--heads DIR", "--method blockwise")  # ValueError naming both
"""
import sys
from pathlib import Path

NAMES = {"medusa": "Medusa heads", "blockwise": "Blockwise heads", "early_exit": "an exit adapter",
         "eagle": "an EAGLE head", "eagle3": "an EAGLE-3 head",
         "model": "a model (config.json, model.safetensors)"}
HEADS_KINDS = ("medusa", "blockwise", "early_exit")  # the kinds heads.json may declare
USED_BY = {"medusa": "--method medusa", "blockwise": "--method blockwise",
           "early_exit": "--method early_exit", "eagle": "--method eagle or eagle2",
           "eagle3": "--method eagle3",
           "model": "--target or --draft"}
TRAINED_BY = {"medusa": "gpt2.train.heads", "blockwise": "gpt2.train.heads",
              "early_exit": "gpt2.train.exit_adapter", "eagle": "gpt2.train.eagle",
              "eagle3": "gpt2.train.eagle3"}


def heads_kind(config):
    """A heads.json's kind: declared, else by shape. {"tied": true, ...} -> "blockwise"."""
    if config.get("kind") is not None:
        return config["kind"]
    if "exit_layer" in config:
        return "early_exit"
    return "blockwise" if config["tied"] else "medusa"


def folder_kind(folder):
    """The kind of add-on in `folder` (a key of NAMES), or None."""
    folder = Path(folder)
    if (folder / "heads.json").is_file():
        return heads_kind(read_heads_config(folder / "heads.json"))
    if (folder / "eagle.json").is_file():
        return "eagle"
    if (folder / "eagle3.json").is_file():
        return "eagle3"
    return "model" if is_model(folder) else None


def is_model(folder):
    """config.json and model.safetensors: a model (MEDUSA-2 keeps heads beside it)."""
    folder = Path(folder)
    return (folder / "config.json").is_file() and (folder / "model.safetensors").is_file()


def check_kind(folder, kind, where, method):
    """ValueError where `folder` holds another add-on than `kind`: what it holds, what to do."""
    held = folder_kind(folder)
    if held in (kind, None) or kind == "model" and is_model(folder):
        return
    inside = held == "model" and (Path(folder) / kind).is_dir()
    raise ValueError(f"{where} holds {NAMES[held]} (for {USED_BY[held]}), not the "
                     f"{NAMES[kind].removeprefix('an ').removeprefix('a ')} that {method} runs on"
                     f"{f' (its {kind}/ folder may)' if inside else ''}: pass a folder of "
                     f"{NAMES[kind]}, or use this one with {USED_BY[held]}")


def weights_sha256(folder):
    """The sha256 of folder/model.safetensors: how a trainer records the backbone it trained on,
    and an add-on's record (target_sha256) the target it drafts for."""
    import hashlib

    with open(Path(folder) / "model.safetensors", "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def note_other_target(folder, kind, config, model):
    """One note line on stderr where the add-on of `kind` in `folder` records (target_sha256) other
    weights than `model`'s (model.folder, as load_model sets it); a record without them: none."""
    made_for, where = config.get("target_sha256"), getattr(model, "folder", None)
    if not isinstance(made_for, str) or where is None or not is_model(where):
        return
    ours = weights_sha256(where)
    if ours == made_for:
        return
    # MEDUSA-2 tunes its backbone: the weights are no longer the named one's
    named = config.get("backbone") if config.get("stage") != "medusa2" else None
    named = f"{named}, " if isinstance(named, str) else ""
    print(f"note: {folder} holds {NAMES[kind]} trained on other weights ({named}sha256 "
          f"{made_for[:12]}) than the target's ({where}, sha256 {ours[:12]}): expect few drafts "
          f"to be accepted; train them on this target (python -m {TRAINED_BY[kind]} --backbone "
          f"NAME) and pass --heads DIR", file=sys.stderr)


ACTIVATIONS = ("silu", "relu")  # of Medusa heads (SiLU), Blockwise heads (ReLU), exit adapters
RETRAIN = "re-train the heads with `python -m gpt2.train.heads` (see README)"


def read_heads_config(path):
    """heads.json, each field checked."""
    from gpt2.weights import CorruptFile, read_json

    config = read_json(path, fix=RETRAIN)
    if not isinstance(config, dict):
        raise CorruptFile(path, "not a JSON object", RETRAIN)
    n, tied, act = config.get("n_heads"), config.get("tied"), config.get("act")
    if type(n) is not int or n < 1:
        raise CorruptFile(path, f"n_heads is {n!r}; it must be a whole number >= 1", RETRAIN)
    if type(tied) is not bool:
        raise CorruptFile(path, f"tied is {tied!r}; it must be true or false", RETRAIN)
    if act not in ACTIVATIONS:
        raise CorruptFile(path, f"act is {act!r}; it must be one of {', '.join(ACTIVATIONS)}",
                          RETRAIN)
    if config.get("kind") is not None and config["kind"] not in HEADS_KINDS:
        raise CorruptFile(path, f"kind is {config['kind']!r}; it must be one of "
                                f"{', '.join(HEADS_KINDS)}", RETRAIN)
    return config
