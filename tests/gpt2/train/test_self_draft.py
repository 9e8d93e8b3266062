"""python -m gpt2.train.self_draft as a user meets it: a model too deep to score every skip set,
--task exits without a saved search or past the last layer, and a --runs path no folder can be
made at are each refused with one line before any work; the --runs caches are keyed by the
target's weights and --steps / --n_windows, and a broken one is a miss; the chosen exit adapter is
put in the target's folder whole or not at all. Random 2- and 12-layer
models (tests/support/micro.py) with tiny-target's tokenizer keep each run to seconds."""
import os
import shutil
import types

import numpy as np
import pytest

from tests.support.clitools import ROOT, assert_refused, files_under, run_here
from tests.support.micro import random_gpt2

FAST = 10.0  # seconds: refused before the model loads, before any data or search
# a search of seconds on a 2-layer model
TINY = ["--n_prompts", "1", "--prompt_tokens", "4", "--new_tokens", "3"]


def model(folder, n_layer, seed=0):
    """A random GPT-2 of n_layer layers with tiny-target's tokenizer, saved as a local checkpoint in
    folder."""
    from gpt2.weights import save_checkpoint

    save_checkpoint(folder,
                    *random_gpt2(n_vocab=4097, n_ctx=128, n_embd=16, n_head=2, n_layer=n_layer,
                                 seed=seed))
    for name in ("vocab.json", "merges.txt"):
        shutil.copy(ROOT / "gpt2" / "assets" / "tiny-target" / name, folder / name)
    return folder


@pytest.fixture
def folder(tmp_path):
    model(tmp_path / "m2", 2)
    model(tmp_path / "m12", 12)
    (tmp_path / "notes.txt").write_text("a file, not a folder\n")
    return tmp_path


CASES = [
    (["--task", "search", "--target", "./m12"],
     r"12 layers have 2\^24 = 16,777,216 skip sets, too many .*at most 7 layers.*--method "
     r"layer_skip --skip"),
    (["--task", "exits", "--target", "./m2"],
     r"--task exits .*self_draft.json has none: run `python -m gpt2.train.self_draft --task search "
     r"--target ./m2` first"),
    (["--task", "exits", "--exit_layers", "9"],
     r"--exit_layers 9: tiny-target has 6 layers; exit after 1..5, not 9"),
    (["--task", "exits", "--exit_layers", "1,6"], r"exit after 1..5, not 6"),
    (["--task", "search", "--target", "./m2", "--runs", "notes.txt/runs"],
     r"--runs notes.txt/runs: notes.txt is a file"),
    (["--task", "search", "--target", "./m2", "--runs", "notes.txt"],
     r"--runs notes.txt: notes.txt is a file"),
    # the sequences searched must fit the context window, before thousands of prompts are tried
    (["--task", "search", "--target", "./m2", "--new_tokens", "300"],
     r"^error: --prompt_tokens 64 \+ --new_tokens 300 = 364 tokens do not fit ./m2's context "
     r"window of 128: give a smaller --prompt_tokens or --new_tokens$"),
    (["--target", "./m2", "--prompt_tokens", "100000"],
     r"--prompt_tokens 100000 \+ --new_tokens 33 = 100033 tokens do not fit"),
    # an option of the other task is not ignored
    (["--task", "search", "--target", "./m2", "--exit_layers", "1"],
     r"^error: --exit_layers is read by --task exits, not by --task search: leave it out, or run "
     r"--task exits$"),
    (["--target", "./m2", "--steps", "3"], r"--steps is read by --task exits, not by --task "
                                           r"search \(the default\)"),
    (["--task", "exits", "--target", "./m2", "--restarts", "3"],
     r"--restarts is read by --task search, not by --task exits"),
    (["--task", "exits", "--target", "./m2", "--prompt_tokens", "8"],
     r"--prompt_tokens is read by --task search, not by --task exits"),
]


@pytest.mark.parametrize("args, message", CASES, ids=[" ".join(c[0])[:60] for c in CASES])
def test_mistakes_are_refused_before_any_work(args, message, folder):
    before = files_under(folder)
    r = run_here(["-m", "gpt2.train.self_draft", *args, "--no-write"], folder)
    assert_refused(r, message, folder, before, max_seconds=FAST)
    assert (folder / "notes.txt").read_text() == "a file, not a folder\n"


def test_the_library_refuses_too_many_layers_and_an_exit_past_the_last():
    from gpt2.train.exit_adapter import train_exit_adapter
    from gpt2.train.skip_search import skip_set_search

    hparams, params = random_gpt2(n_layer=8)
    with pytest.raises(ValueError, match=r"8 layers have 2\^16 = 65,536 skip sets"):
        # before 2^16 x B x m arrays are made
        skip_set_search(params, hparams, np.zeros((1, 6), dtype=int), 2)
    hparams, params = random_gpt2(n_layer=2)
    with pytest.raises(ValueError, match=r"exit layer 2: the model has 2 layers.*1\.\.1"):
        train_exit_adapter(params, hparams, np.zeros((1, 8), dtype=int), 2, "unused", steps=1)


@pytest.mark.slow
def test_a_broken_search_cache_is_a_miss_and_is_rewritten_whole(folder):
    args = ["-m", "gpt2.train.self_draft", "--task", "search", "--target", "./m2", *TINY, "--runs",
            "r", "--no-write"]
    r = run_here(args, folder)
    assert r.returncode == 0, r.stderr
    (saved,) = (folder / "r").iterdir()
    # as an interrupted save of an older version left it
    saved.write_bytes(saved.read_bytes()[:100])
    r = run_here(args, folder)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    # rewritten in place of the broken one, no temp file left
    assert files_under(folder / "r") == [saved.name]
    assert np.load(saved)["agree"].shape[0] == 2 ** 4


@pytest.mark.slow
def test_exit_adapters_are_kept_per_target_steps_and_windows(folder):
    r = run_here(["-m", "gpt2.train.self_draft", "--task", "search", "--target", "./m2", *TINY,
                  "--runs", "r"], folder)
    assert r.returncode == 0, r.stderr
    exits = ["-m", "gpt2.train.self_draft", "--task", "exits", "--target", "./m2", "--exit_layers",
             "1", "--n_windows", "1", "--runs", "r", "--no-write"]
    for steps in ("1", "2"):
        r = run_here(exits + ["--steps", steps], folder)
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    adapters = sorted(p.name for p in (folder / "r").iterdir() if p.name.startswith("exit"))
    assert (len(adapters) == 2 and adapters[0].endswith("-1steps-1windows")
            and adapters[1].endswith("-2steps-1windows"))


def test_the_cache_key_tells_targets_apart():
    from gpt2.train.self_draft import fingerprint

    a, b, c = (types.SimpleNamespace(**dict(zip(("hparams", "params"),
                                                random_gpt2(n_layer=2, seed=s))))
               for s in (0, 1, 0))
    assert fingerprint(a) != fingerprint(b) and fingerprint(a) == fingerprint(c)


def adapter_files(folder):
    """{name: text} of an adapter folder's files, or None when there is no folder."""
    return {p.name: p.read_text() for p in folder.iterdir()} if folder.exists() else None


@pytest.mark.parametrize("stop_at", range(1, 5))
def test_an_adapter_is_installed_whole_or_not_at_all(tmp_path, monkeypatch, stop_at):
    """Ctrl-C at any copy or rename of an install leaves the old adapter or the new one, never the
    new heads.json beside the old tensors, and nothing aside; the next install is whole."""
    from gpt2.train.self_draft import ADAPTER, install_adapter

    def adapter(where, text):
        where.mkdir()
        for name in ("heads.json", "heads.safetensors"):
            (where / name).write_text(f"{text} {name}")
        return adapter_files(where)

    folder = tmp_path / "target"
    folder.mkdir()
    old, new = adapter(folder / ADAPTER, "old"), adapter(tmp_path / "trained", "new")
    calls = []

    def stopping(real):
        def call(*args, **kwargs):
            calls.append(1)
            if len(calls) == stop_at:  # the 2 file copies, then the 2 renames
                raise KeyboardInterrupt
            return real(*args, **kwargs)
        return call

    monkeypatch.setattr(shutil, "copy2", stopping(shutil.copy2))
    monkeypatch.setattr(os, "replace", stopping(os.replace))
    with pytest.raises(KeyboardInterrupt):
        install_adapter(tmp_path / "trained", folder)
    assert adapter_files(folder / ADAPTER) in (old, new)
    assert sorted(p.name for p in folder.iterdir()) == [ADAPTER]  # nothing left aside
    monkeypatch.undo()
    install_adapter(tmp_path / "trained", folder)
    assert adapter_files(folder / ADAPTER) == new
    assert sorted(p.name for p in folder.iterdir()) == [ADAPTER]
