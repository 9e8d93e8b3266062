"""What a newcomer gets wrong past the door: add-ons of the wrong kind, tokenizers that differ,
settings that cannot mean anything, messages that blamed the wrong file, batches larger than memory,
and the sampling filters' order. Every refusal is one true line, exit status 2, no traceback,
nothing left behind (tests/support/clitools.py)."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from gpt2.load import ASSETS

from tests.support.clitools import (ROOT, assert_refused, files_under, run_cli, run_here,
                                    sigint_as_in_a_terminal)
from tests.support.tracked import project_files

FAST = 3.0  # seconds: a mistake in the options is refused before any model loads
TARGET = ASSETS / "tiny-target"
ALL_SUBLAYERS = ",".join(f"{s}{layer}" for layer in range(6) for s in "am")


def without_kind(src, dst, name="heads.json"):
    """A copy of an add-on folder as its trainer wrote it before configs declared their kind."""
    shutil.copytree(src, dst)
    config = json.loads((dst / name).read_text())
    config.pop("kind")
    (dst / name).write_text(json.dumps(config))


def swapped_vocab(src, dst):
    """A copy of a model whose vocab.json maps two ids to each other's strings: the same size,
    another tokenizer."""
    shutil.copytree(src, dst)
    vocab = json.loads((dst / "vocab.json").read_text(encoding="utf-8"))
    by_id = {i: s for s, i in vocab.items()}
    vocab[by_id[300]], vocab[by_id[301]] = 301, 300
    (dst / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """Files the cases name: add-on folders of every kind (declared, and as written before kinds
    were declared), a target whose exit adapter folder holds Medusa heads and whose self_draft.json
    entry is another kind, a model of another tokenizer, configs that contradict their weights, a
    text file, a prompts file."""
    root = tmp_path_factory.mktemp("mistakes")
    for kind in ("medusa", "blockwise", "early_exit"):
        without_kind(TARGET / kind, root / f"old-{kind}")
    without_kind(TARGET / "eagle", root / "old-eagle", "eagle.json")
    model = ("config.json", "model.safetensors", "vocab.json", "merges.txt", "self_draft.json")
    mixed = root / "mixed"
    mixed.mkdir()
    for name in model:
        shutil.copy(TARGET / name, mixed / name)
    shutil.copytree(TARGET / "medusa", mixed / "early_exit")  # where the exit adapter belongs
    settings = json.loads((mixed / "self_draft.json").read_text())
    settings["layer_skip"]["kind"] = "exit_layer"  # the skip set's entry declares another kind
    (mixed / "self_draft.json").write_text(json.dumps(settings))
    swapped_vocab(ASSETS / "tiny-draft", root / "other-tokenizer")
    for name, key, value in (("deep", "n_layer", 1000), ("wide-vocab", "vocab_size", 5000)):
        (root / name).mkdir()
        for file in model[1:4]:
            shutil.copy(TARGET / file, root / name / file)
        config = json.loads((TARGET / "config.json").read_text())
        (root / name / "config.json").write_text(json.dumps({**config, key: value}))
    (root / "notes.txt").write_text("not a datastore\n")
    (root / "prompts.txt").write_text("def f(x):\nimport os\nclass A:\n")
    return root


H = str(TARGET)
M, OFF = "--method", "PICOSPEC_OFFLINE"
# (command line of main.py, what the one line must say, whether a model loads first, environment)
CASES = [
    # add-ons of another kind: the folder's kind and the method's need, both named
    ([M, "blockwise", "--heads", f"{H}/medusa", "--K", "3"],
     r"--heads \S+/medusa holds Medusa heads \(for --method medusa\), not the Blockwise heads "
     r"that --method blockwise runs on: pass a folder of Blockwise heads, or use this one with "
     r"--method medusa$", True, {}),
    ([M, "medusa", "--heads", f"{H}/blockwise", "--tree", "chain"],
     r"holds Blockwise heads \(for --method blockwise\), not the Medusa heads that --method medusa",
     True, {}),
    ([M, "medusa", "--heads", f"{H}/early_exit"],
     r"holds an exit adapter \(for --method early_exit\)", True, {}),
    ([M, "blockwise", "--heads", f"{H}/early_exit"],
     r"holds an exit adapter.*Blockwise heads", True, {}),
    ([M, "medusa", "--heads", f"{H}/eagle"], r"holds an EAGLE head .*not the Medusa heads", True,
     {}),
    ([M, "eagle", "--heads", f"{H}/medusa"],
     r"holds Medusa heads .*not the EAGLE head that --method eagle/eagle2 runs on", True, {}),
    ([M, "eagle2", "--heads", f"{H}/blockwise"], r"holds Blockwise heads .*EAGLE head", True, {}),
    ([M, "eagle2", "--heads", H],
     r"holds a model \(config.json, model.safetensors\) \(for --target or --draft\), not the EAGLE "
     r"head .*\(its eagle/ folder may\)", True, {}),
    (["--target", f"{H}/medusa"], r"model '\S+/medusa' holds Medusa heads \(for --method medusa\), "
                                  r"not the model \(config.json, model.safetensors\) that --target "
                                  r"or --draft runs on", True, {}),
    (["--draft", f"{H}/eagle"], r"holds an EAGLE head \(for --method eagle or eagle2\), not the "
                                r"model", True, {}),
    ([M, "medusa", "--heads", "."], r"no medusa heads for 'tiny-target' at \.: train them", True,
     {}),
    # folders written before kinds were declared: read by their shapes, named correctly
    ([M, "medusa", "--heads", "old-blockwise"], r"--heads old-blockwise holds Blockwise heads",
     True, {}),
    ([M, "blockwise", "--heads", "old-medusa"], r"--heads old-medusa holds Medusa heads", True, {}),
    ([M, "medusa", "--heads", "old-early_exit"], r"holds an exit adapter", True, {}),
    ([M, "medusa", "--heads", "old-eagle"], r"holds an EAGLE head", True, {}),
    ([M, "eagle", "--heads", "old-medusa"], r"holds Medusa heads", True, {}),
    # the target's own add-ons of the wrong kind
    ([M, "early_exit", "--target", "mixed"],
     r"mixed/early_exit \(the target's exit adapter folder\) holds Medusa heads .*the exit adapter "
     r"that --method early_exit", True, {}),
    ([M, "layer_skip", "--target", "mixed"],
     r"the 'layer_skip' entry of mixed/self_draft.json holds an exit layer, but --method "
     r"layer_skip needs a skip set", True, {}),
    # one tokenizer for draft and target; drafters only as drafters
    (["--draft", "other-tokenizer"],
     r"draft 'other-tokenizer' \(other-tokenizer\) and target 'tiny-target' \(\S+\) have 4097 "
     r"tokens each but different tokenizers", True, {}),
    ([M, "cascade", "--draft2", "other-tokenizer"],
     r"--draft2 'other-tokenizer' .*different tokenizers", True, {}),
    ([M, "specinfer", "--draft", "other-tokenizer"], r"different tokenizers", True, {}),
    (["--target", "ngram"], r"--target ngram: the n-gram model drafts only", False, {}),
    (["--target", "ngram", M, "autoregressive"], r"drafts only", False, {}),
    # settings that cannot mean anything
    ([M, "cascade", "--draft2", "tiny-target"], r"--draft2 tiny-target is the target itself", False,
     {}),
    ([M, "cascade", "--draft2", H], r"is the target itself", False, {}),
    ([M, "cascade", "--target", H, "--draft2", "tiny-target"], r"is the target itself", False, {}),
    ([M, "specinfer", "--merge", "--draft2", "tiny-target"], r"is the target itself", False, {}),
    ([M, "layer_skip", "--skip", ALL_SUBLAYERS],
     r"--skip a0,m0,.*,m5 skips all 12 sublayers of the target's 6 layers, so the draft would have "
     r"no layers", True, {}),
    ([], r"PICOSPEC_OFFLINE='maybe': set it to 1 \(on\) or 0 \(off\), or unset it", False,
     {OFF: "maybe"}),
    (["--offline"], r"PICOSPEC_OFFLINE='2'", False, {OFF: "2"}),
    # messages that name the real fault and leave the user's files alone
    (["--target", "deep"],
     r"deep/config.json: n_layer is 1000 but model.safetensors holds 6 layers: the config and the "
     r"weights do not belong together; put this model's own config.json beside", True, {}),
    (["--target", "wide-vocab"], r"vocab_size is 5000 but model.safetensors holds 4097 tokens",
     True, {}),
    ([M, "rest", "--datastore", "notes.txt"],
     r"notes.txt is not a REST datastore: it is a file that begins b'.{4}', not an \.npz archive "
     r".*give a datastore that --build_datastore wrote",
     True, {}),
    # checks before work
    ([M, "rest", "--datastore", "/proc/store.npz", "--build_datastore"],
     r"--datastore /proc/store.npz: cannot write in /proc", False, {}),
    (["--batch_memory", "100"],
     r"--batch_memory sets the memory of --batch's rows: add --batch FILE", False, {}),
    (["--batch", "prompts.txt", "--batch_memory", "1"],
     r"--batch: one row needs about \d+ MB \(KV caches and activations .*\), more than the 1 MB of "
     r"--batch_memory: pass --batch_memory \d+ or more", True, {}),
    (["--batch_memory", "0", "--batch", "prompts.txt"], r"--batch_memory must be >= 1", False, {}),
]


@pytest.mark.parametrize("args, message, loads, env", CASES,
                         ids=[" ".join(c[0])[-60:] or str(c[3]) for c in CASES])
def test_mistakes_end_in_one_true_line(args, message, loads, env, folder):
    before = files_under(folder)
    r = run_here(["main.py", *args, "--n_tokens", "4"], folder, env=env)
    assert_refused(r, message, folder, before, max_seconds=None if loads else FAST)
    assert r.returncode == 2 and "delete" not in r.stderr  # never: delete a file the user supplied


@pytest.mark.parametrize("args", [["--top_k", "5"], ["--top_p", "0.9"],
                                  ["--top_k", "5", "--top_p", "0.9"]])
def test_sampling_filters_at_temperature_zero_get_a_note(args, tmp_path):
    """They have no effect there: one line on stderr, and the run goes on (exit 0, the JSON
    untouched); when sampling they apply, and no note is printed."""
    r = run_here(["main.py", *args, "--n_tokens", "3", "--runs", "1", "--json"], tmp_path)
    assert r.returncode == 0, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("note: --top"), r.stderr
    assert "no effect at --temperature 0" in lines[0]
    assert json.loads(r.stdout)["runs"][1]["output_ids"]
    quiet = run_here(["main.py", *args, "--temperature", "0.8", "--n_tokens", "3", "--runs", "1",
                      "--json"],
                    tmp_path)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr


def test_batch_rows_in_memory_groups_equal_one_batch_and_each_row_alone(tmp_path):
    """--batch_memory small enough for one or two rows at a time gives the texts of all rows at
    once (temperature 0), and groups of one row are each row alone; the budget is found from the
    refusal's own figure, so no gigabytes are needed."""
    lines = ["def f(x):", "import os", "class A:", "for i in range(3):", "x = [1, 2"]
    (tmp_path / "p.txt").write_text("\n".join(lines) + "\n")
    base = ["main.py", "--batch", "p.txt", "--n_tokens", "6", "--temperature", "0", "--json"]
    refused = run_here([*base, "--batch_memory", "1"], tmp_path)
    per_row = int(refused.stderr.split("one row needs about ")[1].split(" MB")[0])
    outs = {}
    for budget in (None, per_row, 2 * per_row + 1):
        r = run_here(base + ([] if budget is None else ["--batch_memory", str(budget)]), tmp_path)
        assert r.returncode == 0, r.stderr
        outs[budget] = json.loads(r.stdout)
    assert outs[None]["groups"] == [5]
    assert outs[per_row]["groups"] == [1, 1, 1, 1, 1]
    assert outs[2 * per_row + 1]["groups"] == [2, 2, 1]
    assert outs[None]["texts"] == outs[per_row]["texts"] == outs[2 * per_row + 1]["texts"]
    assert all(outs[per_row]["same_output"])  # each row alone equals batched autoregressive too


def test_row_bytes_bound_what_the_batched_engines_allocate():
    """The bound per row is at least the caches the engines really make, so a budget holds them."""
    from picospec_app.load import batch_row_bytes, batched_models, load_needs
    from gpt2.load import load_model
    from picospec.methods import TABLE, defaults

    target, encoder = load_model("tiny-target")
    for name in ("speculative", "eagle", "early_exit"):
        method = TABLE[name]
        loaded = load_needs(method, defaults(method), target, "tiny-target", encoder)
        engines = [getattr(m, "engine", m) for m in batched_models(loaded, 3).values()]
        # a self-drafting pair's one
        caches = {id(e): e.cache for e in engines if hasattr(e, "cache")}
        cached = sum(c.k.nbytes + c.v.nbytes for c in caches.values()) / 3
        assert cached <= batch_row_bytes(loaded, 20) <= 4 * cached, name


# ---- add-on kinds, unit by unit ----

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


# ---- one tokenizer ----

def test_tokenizer_fingerprint_is_the_vocabulary_and_merges_not_the_files(folder, tmp_path):
    from gpt2.encoder import load_encoder

    target = load_encoder(TARGET).fingerprint
    assert load_encoder(ASSETS / "tiny-draft").fingerprint == target  # one tokenizer, two folders
    assert load_encoder(folder / "other-tokenizer").fingerprint != target  # two ids swapped
    # the same tokenizer in OpenAI's file names, another key order and spacing: the same fingerprint
    vocab = json.loads((TARGET / "vocab.json").read_text(encoding="utf-8"))
    reordered = json.dumps(dict(reversed(vocab.items())), indent=2)
    (tmp_path / "encoder.json").write_text(reordered, encoding="utf-8")
    shutil.copy(TARGET / "merges.txt", tmp_path / "vocab.bpe")
    assert load_encoder(tmp_path).fingerprint == target
    merges = (TARGET / "merges.txt").read_text(encoding="utf-8").split("\n")
    body = [line for line in merges if line.strip() and not line.startswith("#")]
    swapped = "\n".join(body[1:2] + body[:1] + body[2:])  # two merges' ranks swapped
    (tmp_path / "vocab.bpe").write_text(swapped, encoding="utf-8")
    assert load_encoder(tmp_path).fingerprint != target


def test_the_ngram_file_carries_the_tokenizer_it_was_counted_with(tmp_path):
    from gpt2.encoder import load_encoder
    from gpt2.load import load_model
    from gpt2.ngram import NGram
    from gpt2.train.ngram import main as build

    fingerprint = load_encoder(TARGET).fingerprint
    assert NGram.load(ASSETS / "ngram.safetensors").tokenizer == fingerprint  # in the shipped file
    assert load_model("ngram")[0].tokenizer == fingerprint
    data = tmp_path / "data"
    data.mkdir()
    np.arange(200, dtype=np.uint16).tofile(data / "train.bin")
    (data / "meta.json").write_text(json.dumps({"n_vocab": 300, "tokenizer": "ab" * 32}))
    build(data, tmp_path / "n.safetensors", order=2, min_count=1)
    assert NGram.load(tmp_path / "n.safetensors").tokenizer == "ab" * 32
    (data / "meta.json").write_text(json.dumps({"n_vocab": 300}))  # data made before the record
    build(data, tmp_path / "old.safetensors", order=2, min_count=1)
    assert NGram.load(tmp_path / "old.safetensors").tokenizer is None


def test_check_tokenizers_names_both_folders_and_passes_one_tokenizer(folder):
    from gpt2.load import check_tokenizers, load_model

    target, draft = load_model("tiny-target")[0], load_model("tiny-draft")[0]
    check_tokenizers(draft, target, "tiny-draft", "tiny-target")
    check_tokenizers(load_model("ngram")[0], target, "ngram", "tiny-target")
    other = load_model(str(folder / "other-tokenizer"))[0]
    with pytest.raises(ValueError, match=r"other-tokenizer.*tiny-target.*different tokenizers"):
        check_tokenizers(other, target, str(folder / "other-tokenizer"), "tiny-target")


# ---- environment flags, the program's name, messages about files ----

@pytest.mark.parametrize("value, expected", [
    ("1", True), ("true", True), ("YES", True), ("on", True), ("0", False), ("false", False),
    ("No", False), ("off", False), ("", "default"), (None, "default")])
def test_env_flags_take_their_documented_values(value, expected, monkeypatch):
    from picospec_cli import env_flag

    if value is None:
        monkeypatch.delenv("PICOSPEC_X", raising=False)
    else:
        monkeypatch.setenv("PICOSPEC_X", value)
    assert env_flag("PICOSPEC_X", "default") == expected


@pytest.mark.parametrize("value", ["maybe", "2", "offline", "y"])
def test_other_env_flag_values_are_refused(value, monkeypatch):
    from picospec_app.settings import read_settings
    from picospec_cli import env_flag

    monkeypatch.setenv("PICOSPEC_OFFLINE", value)
    with pytest.raises(ValueError, match=f"PICOSPEC_OFFLINE='{value}': set it to 1"):
        env_flag("PICOSPEC_OFFLINE")
    with pytest.raises(ValueError, match="PICOSPEC_OFFLINE"):
        read_settings()


def test_the_command_names_itself_as_invoked(tmp_path):
    """The installed command (a script named picospec that calls the app's cli, as pip writes it)
    says picospec in its usage lines; python main.py says python and the path it was given."""
    script = tmp_path / "bin" / "picospec"
    script.parent.mkdir()
    script.write_text("import sys\nfrom picospec_app.command import cli\nsys.exit(cli())\n")
    for args, usage in (([str(script), "--help"], "usage: picospec [--option"),
                        ([str(script), M, "medusa", "--help"], "usage: picospec --method medusa"),
                        (["main.py", "--help"], f"usage: python {ROOT / 'main.py'} [--option")):
        r = run_cli(args, tmp_path)
        assert r.returncode == 0 and r.stdout.startswith(usage), r.stdout[:200] + r.stderr
        assert "python main.py" not in r.stdout or args[0] == "main.py"


def test_a_bad_file_is_for_deletion_only_inside_the_cache(tmp_path):
    """A file of a snapshot in the Hugging Face cache is a link to a blob: both go, or the next run
    links the same bad blob again."""
    from gpt2.weights import CorruptFile

    snapshot = tmp_path / "hf" / "models--openai-community--gpt2" / "snapshots" / ("c" * 40)
    blob = tmp_path / "hf" / "models--openai-community--gpt2" / "blobs" / ("e" * 40)
    snapshot.mkdir(parents=True)
    blob.parent.mkdir()
    blob.write_text("{")
    (snapshot / "config.json").symlink_to(blob)
    assert str(CorruptFile(snapshot / "config.json", "not valid JSON")).endswith(
        f"not valid JSON; delete it (and {blob}, the file it links to) to download it again")
    theirs = str(CorruptFile(tmp_path / "mine" / "config.json", "not valid JSON"))
    assert "delete" not in theirs and "replace it with a good copy" in theirs


def test_check_prints_one_line_on_ctrl_c(tmp_path):
    """python -m picospec.check, interrupted while a sampler runs: exit 130 and one line."""
    (tmp_path / "slow.py").write_text("import time\nprint('ready', flush=True)\n\n\n"
                                      "def sampler(*args, **kwargs):\n    time.sleep(60)\n")
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}",
           "HOME": str(tmp_path)}
    command = [sys.executable, "-m", "picospec.check", "slow:sampler", "--samples", "100"]
    p = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, preexec_fn=sigint_as_in_a_terminal)
    deadline = time.time() + 60
    while "ready" not in p.stdout.readline() and time.time() < deadline:
        assert p.poll() is None, p.stderr.read()
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130 and "Traceback" not in err
    assert err.strip().splitlines() == ["interrupted"]


# ---- repo ids with whole .. parts ----

@pytest.mark.parametrize("name", ["a/..", "../b", "../..", "a/../b", "./..", "../a/b", "..",
                                  "a/b/.."])
def test_repo_ids_with_a_whole_dotdot_part_are_refused(name, tmp_path, monkeypatch):
    """As repo ids they are all refused; as model names, those that are no local path (".." and
    "../b" are: the user's folders) never reach the cache or the network."""
    from gpt2.hub import REPO_PART, check_repo_id, is_local, resolve

    monkeypatch.chdir(tmp_path)
    assert REPO_PART.fullmatch("..") is None and REPO_PART.fullmatch(".") is None
    with pytest.raises(ValueError, match="unknown model"):
        check_repo_id(name)
    if not is_local(name):
        with pytest.raises(ValueError, match="unknown model"):  # before any download could start
            resolve(name, offline=False, cache=tmp_path / "cache", endpoint="http://127.0.0.1:9")
    assert not (tmp_path / "cache").exists()


def test_each_of_the_two_dotdot_checks_refuses_alone(monkeypatch):
    """The part pattern and the `..` test each refuse "a/.." by themselves: weakening one leaves
    the other."""
    import re

    import gpt2.hub as hub

    monkeypatch.setattr(hub, "REPO_PART", re.compile(r"[A-Za-z0-9_.-]+"))  # lets ".." through
    for name in ("a/..", "../b"):
        with pytest.raises(ValueError, match="no \\.\\. or --"):
            hub.check_repo_id(name)
    monkeypatch.undo()
    assert hub.REPO_PART.fullmatch("..") is None  # and the real pattern refuses the part itself


# ---- EAGLE-2's rerank, by hand ----

def test_eagle2_rerank_worked_example():
    """Nodes (token, parent, value = cumulative draft probability):
        0: (10, root, .5)   1: (11, root, .2)   2: (12, 0, .45)   3: (13, 1, .1)   4: (14, 0, .3)
    total_tokens 3 keeps the three of highest value, 0 (.5), 2 (.45), 4 (.3), in drafted order and
    re-indexed: tokens [10, 12, 14], parents [-1, 0, 0]. total_tokens 4 adds node 1 (.2), which
    comes before node 2 in drafted order: tokens [10, 11, 12, 14], parents [-1, -1, 0, 0] (value
    order would give [10, 12, 14, 11]). Ties go to the node drafted first: values .5, .3, .3
    (nodes 1 and 2) with total_tokens 2 keep nodes 0 and 1."""
    from picospec.eagle2 import rerank

    tokens, parents = [10, 11, 12, 13, 14], [-1, -1, 0, 1, 0]
    values = list(np.log([0.5, 0.2, 0.45, 0.1, 0.3]))
    kept = rerank(tokens, parents, values, 3)
    assert kept[:2] == ([10, 12, 14], [-1, 0, 0])
    np.testing.assert_allclose(np.exp(kept[2]), [0.5, 0.45, 0.3])
    kept = rerank(tokens, parents, values, 4)
    assert kept[:2] == ([10, 11, 12, 14], [-1, -1, 0, 0])
    np.testing.assert_allclose(np.exp(kept[2]), [0.5, 0.2, 0.45, 0.3])
    tie = rerank([10, 11, 12], [-1, -1, 0], list(np.log([0.5, 0.3, 0.3])), 2)
    assert tie[:2] == ([10, 11], [-1, -1])
    assert rerank(tokens, parents, values, 9)[:2] == (tokens, parents)  # room for every node


# ---- sampling filters in the ecosystem's order ----

def old_order_warp(probs, top_k, top_p):
    """The broken variant: top-p cut against the mass before top-k (what warp did before)."""
    order = np.argsort(-probs, kind="stable")
    ranked = probs[order]
    keep = np.arange(len(probs)) < top_k
    keep &= np.cumsum(ranked) - ranked < top_p * ranked.sum()
    keep[0] = True
    out = np.zeros_like(probs)
    out[order[keep]] = ranked[keep]
    return out / out.sum()


def test_warp_top_k_then_top_p_by_hand():
    """[.5, .3, .2], top_k 2: [.625, .375, 0]; then top_p .6: .625 alone reaches it -> [1, 0, 0]
    (the old order cut against .5 + .3 of the whole law, keeping two); top_p .7 keeps both."""
    from picospec.sampling import warp

    p = np.array([0.5, 0.3, 0.2])
    np.testing.assert_allclose(warp(p, top_k=2, top_p=0.6), [1, 0, 0])
    np.testing.assert_allclose(old_order_warp(p, 2, 0.6), [0.625, 0.375, 0])  # rejected above
    np.testing.assert_allclose(warp(p, top_k=2, top_p=0.7), [0.625, 0.375, 0])


def transformers_law(probs, temperature, top_k, top_p):
    """transformers' own warpers in generate()'s order, on log-probabilities -> the sampling law."""
    import torch
    from transformers.generation.logits_process import (TemperatureLogitsWarper,
                                                         TopKLogitsWarper, TopPLogitsWarper)

    scores = torch.log(torch.tensor(probs, dtype=torch.float64))[None]
    ids = torch.zeros((1, 1), dtype=torch.long)
    warpers = [TemperatureLogitsWarper(temperature)] if temperature != 1 else []
    warpers += [TopKLogitsWarper(top_k)] if top_k is not None else []
    warpers += [TopPLogitsWarper(top_p)] if top_p is not None else []
    for w in warpers:
        scores = w(ids, scores)
    return torch.softmax(scores, -1)[0].numpy()


def test_warp_equals_transformers_warpers_on_random_laws():
    """Random laws (V 3 to 50, some with tiny masses) and settings: the same kept tokens and the
    same law as TopKLogitsWarper then TopPLogitsWarper; the old order (top-p before renormalising)
    differs on many of them."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from picospec.sampling import warp

    rng = np.random.default_rng(0)
    old_differs = 0
    for _ in range(300):
        V = int(rng.integers(3, 50))
        probs = rng.dirichlet(np.full(V, rng.choice([0.1, 0.5, 2.0])))
        probs = np.maximum(probs, 1e-12) / np.maximum(probs, 1e-12).sum()
        temperature = float(rng.choice([1.0, 0.7, 1.5]))
        top_k = int(rng.integers(1, V + 2)) if rng.random() < 0.8 else None
        top_p = float(rng.uniform(0.05, 1.0)) if rng.random() < 0.8 else None
        ours = warp(probs, temperature, top_k, top_p)
        theirs = transformers_law(probs, temperature, top_k, top_p)
        np.testing.assert_array_equal(ours > 0, theirs > 0)
        np.testing.assert_allclose(ours, theirs, atol=1e-9, rtol=1e-7)
        if top_k is not None and top_p is not None and temperature == 1.0:
            old = old_order_warp(probs, top_k, top_p)
            old_differs += not np.array_equal(old > 0, theirs > 0)
    assert old_differs >= 5  # the broken variant is caught by the same comparison


# ---- the edges: the checker, --batch rounds, threads, progress, the notebooks' quick mode ----

def test_the_checker_names_a_package_a_found_module_imports_but_lacks(tmp_path):
    """The sampler's file is found; what is missing is a package it imports: the line says so, for
    FILE.py:FUNCTION and MODULE:FUNCTION alike, and no longer suggests moving to another folder."""
    (tmp_path / "mod.py").write_text("import notapkg_picospec\n\n\ndef f(*args):\n    pass\n")
    env = {"PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"}
    for spec in ("mod.py:f", "mod:f"):
        r = run_cli(["-m", "picospec.check", spec], tmp_path, env=env)
        assert r.returncode == 2
        assert_refused(r, rf"^error: {spec.split(':')[0]} is found, but it imports "
                          r"notapkg_picospec, which is not installed here")
        assert "run from the folder" not in r.stderr


def test_the_checker_refuses_samples_beyond_memory_before_any_case(tmp_path):
    """--samples 2000000000 was a MemoryError inside every case and a "fail" verdict (exit 1): a
    usage error now, before any case runs."""
    r = run_here(["-m", "picospec.check", "picospec.verify:verify_chain", "--samples",
                  "2000000000"], tmp_path)
    assert r.returncode == 2 and r.stdout == ""
    assert_refused(r, r"^error: --samples 2,000,000,000: a case holds its sequences at once, about "
                      r"[\d,]+ GB .* more than the [\d.]+ GB of memory free here: give --samples "
                      r"[\d,]+ or fewer", max_seconds=FAST)


def test_batch_runs_the_rounds_it_is_asked_for(tmp_path):
    """--runs 3 with --batch: three interleaved rounds, the median time (it was ignored)."""
    (tmp_path / "p.txt").write_text("def f(x):\nimport os\n")
    r = run_here(["main.py", "--batch", "p.txt", "--runs", "3", "--n_tokens", "3", "--json"],
                 tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["rounds"] == 3 and all(out["same_output"])
    text = run_here(["main.py", "--batch", "p.txt", "--runs", "2", "--n_tokens", "3"], tmp_path)
    assert "(median of 2 rounds)" in text.stdout, text.stdout
    once = json.loads(run_here(["main.py", "--batch", "p.txt", "--n_tokens", "3", "--json"],
                               tmp_path).stdout)
    assert once["rounds"] == 1 and once["texts"] == out["texts"]


def test_more_threads_than_cpus_get_a_note(tmp_path):
    """--threads 64 on a machine of a few CPUs ran many times slower without a word."""
    cpus = len(os.sched_getaffinity(0))
    r = run_here(["main.py", "--threads", str(cpus + 1), "--n_tokens", "2", "--runs", "1",
                  "--json"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip().splitlines() == [
        f"note: {cpus + 1} BLAS threads oversubscribe the {cpus} CPUs this process may use: each "
        f"forward waits on threads that share a core (slower, often many times); give --threads "
        f"{cpus} or fewer"]
    assert json.loads(r.stdout)["threads"]["threads"] == cpus + 1
    quiet = run_here(["main.py", "--threads", str(cpus), "--n_tokens", "2", "--runs", "1",
                      "--json"], tmp_path)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr


def in_a_terminal(args, cwd):
    """main.py ARGS with stderr on a pseudo-terminal and stdout on a pipe -> (stdout, stderr)."""
    import fcntl
    import pty
    import struct
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 24 x 100
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), "PICOSPEC_OFFLINE": "1",
           "HOME": str(cwd)}
    p = subprocess.Popen([sys.executable, str(ROOT / "main.py"), *args], cwd=cwd, env=env,
                         stdout=subprocess.PIPE, stderr=follower)
    os.close(follower)
    err = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the terminal closed: the process is done
            break
        if not chunk:
            break
        err += chunk
    out = p.stdout.read().decode()
    p.wait(timeout=120)
    os.close(leader)
    return out, err.decode(errors="replace")


def test_batch_progress_shows_on_a_terminal_and_only_when_it_should(tmp_path):
    """A bar of rows done (and the group) on stderr where stderr is a terminal; none for --json
    written to a pipe or when stderr is not a terminal, unless --progress asks; --no-progress
    silences it."""
    (tmp_path / "p.txt").write_text("def f(x):\nimport os\nclass A:\n")
    base = ["--batch", "p.txt", "--n_tokens", "3"]
    _, err = in_a_terminal(base, tmp_path)
    assert "row" in err and "group 1 of 1" in err, err
    out, err = in_a_terminal([*base, "--json"], tmp_path)
    assert "row" not in err and json.loads(out)["prompts"]
    _, err = in_a_terminal([*base, "--json", "--progress"], tmp_path)
    assert "group 1 of 1" in err, err
    _, err = in_a_terminal([*base, "--no-progress"], tmp_path)
    assert "row" not in err, err
    piped = run_here(["main.py", *base], tmp_path)  # stderr captured: not a terminal
    assert piped.returncode == 0 and piped.stderr == "", piped.stderr
    asked = run_here(["main.py", *base, "--progress"], tmp_path)
    assert asked.returncode == 0 and "group 1 of 1" in asked.stderr, asked.stderr


def test_notebooks_read_picospec_quick_as_every_flag(monkeypatch):
    """PICOSPEC_QUICK=true ran the notebooks in full (only "1" counted): each notebook's own QUICK
    line, run as it is committed, reads it as the other flags are read."""
    import nbformat

    for path in project_files(ROOT, "*.ipynb", "notebooks", recursive=False):
        lines = [line for cell in nbformat.read(path, as_version=4).cells
                 if cell.cell_type == "code" for line in cell.source.splitlines()]
        quick = next(line for line in lines if line.startswith("QUICK ="))
        setup = [line for line in lines if "import env_flag" in line]
        for value, expected in (("true", True), ("1", True), ("yes", True), ("0", False),
                                ("", False)):
            monkeypatch.setenv("PICOSPEC_QUICK", value)
            scope = {}
            exec("\n".join(["import os", *setup, quick]), scope)
            assert scope["QUICK"] is expected, (path.name, value)


def test_notebook_io_runs_quick_mode_as_asked_and_keeps_the_committed_notebook(tmp_path,
                                                                              monkeypatch, capsys):
    """PICOSPEC_QUICK=1 python notebooks/src/notebook_io.py NB ran in full and rewrote NB: now it
    runs quick mode and says it writes nothing back; without it, full mode writes NB."""
    sys.path.insert(0, str(ROOT / "notebooks" / "src"))
    import notebook_io

    runs, saved = [], []
    monkeypatch.setattr(notebook_io, "execute", lambda name, quick=False: runs.append(quick) or {})
    monkeypatch.setattr(notebook_io, "save", lambda nb, name: saved.append(name))
    notebook_io.main(["nb.ipynb"], environ={"PICOSPEC_QUICK": "true"})
    assert runs == [True] and saved == []
    assert "ran in quick mode and is not written back" in capsys.readouterr().out
    notebook_io.main(["nb.ipynb"], environ={})
    assert runs == [True, False] and saved == ["nb.ipynb"]
