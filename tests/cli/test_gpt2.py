"""The engine's commands go through the one door (picospec_cli): a mistake on the command line is
one `error:` line, exit 2, in well under a second, before any work and with no file left behind;
--help prints the options and exits 0.

Commands: python -m gpt2.train.bpe, gpt2.train.corpus, gpt2.train.card, gpt2.train.ngram,
gpt2.heads, bench.engine, bench.gpu.
"""
import json

import numpy as np
import pytest

from gpt2.train.bpe import train_bpe
from gpt2.encoder import save_tokenizer

from tests.support.clitools import (ROOT, assert_bad_command_refused,
                                    assert_gpu_refused_without_cupy, assert_help, assert_refused,
                                    case_ids, file_bytes, files_under, run_here)

# the shipped 2 heads on tiny-target
MEDUSA = str(ROOT / "gpt2" / "assets" / "tiny-target" / "medusa")
COMMANDS = ["gpt2.train.bpe", "gpt2.train.corpus", "gpt2.train.card", "gpt2.train.ngram",
            "gpt2.heads", "bench.engine", "bench.gpu"]


def make_inputs(folder):
    """What the bad command lines point at: a text file, a file that is not UTF-8, an empty folder,
    a tokenizer, and a data folder as gpt2.train.corpus writes it but far too short (and for a
    50257-token vocabulary)."""
    (folder / "lib").mkdir()
    (folder / "lib" / "a.py").write_text("x = 1\n")
    (folder / "latin1.py").write_bytes("caf\u00e9 = 1\n".encode("latin-1"))
    (folder / "empty").mkdir()
    save_tokenizer(folder / "tok", *train_bpe(["x = 1\n"], vocab_size=260))
    (folder / "data").mkdir()
    for name in ("train", "val", "heldout"):
        np.arange(100, dtype=np.uint16).tofile(folder / "data" / f"{name}.bin")
    (folder / "data" / "meta.json").write_text(json.dumps({"n_vocab": 50257}))
    # long enough; a vocab too small
    for name, n_vocab, n in (("gpt2data", 50257, 600), ("smallvocab", 50, 100)):
        (folder / name).mkdir()
        for split in ("train", "val", "heldout"):
            np.arange(n, dtype=np.uint16).tofile(folder / name / f"{split}.bin")
        (folder / name / "meta.json").write_text(json.dumps({"n_vocab": n_vocab}))
    # long enough, no meta.json, ids past the built-in models' 4097 tokens
    (folder / "badids").mkdir()
    for split in ("val", "heldout"):
        np.full(600, 60000, np.uint16).tofile(folder / "badids" / f"{split}.bin")


BAD = [  # (command, arguments, what the one line must say)
    # gpt2.train.bpe
    ("gpt2.train.bpe", ["--out", "tok2", "--vocab_sise", "300"],
     r"unknown option --vocab_sise: did you mean --vocab_size\?"),
    ("gpt2.train.bpe", ["--out", "/proc/tok"],
     r"--out /proc/tok: cannot write in /proc \(.*\): give a folder you can write to"),
    ("gpt2.train.corpus", ["--tokenizer", "tok", "--out", "/proc/d"],
     r"--out /proc/d: cannot write in /proc"),
    ("gpt2.train.bpe", ["--out", "tok2", "--vocab_size", "nan"],
     r"--vocab_size must be an integer; got 'nan'"),
    ("gpt2.train.bpe", ["--out", "tok2", "--vocab_size", "300.0"],
     r"--vocab_size must be an integer; got '300.0'"),
    ("gpt2.train.bpe", ["--out", "tok2", "--vocab_size", "1e5"],
     r"--vocab_size must be an integer"),
    ("gpt2.train.bpe", ["--out", "tok2", "--vocab_size", "100"],
     r"--vocab_size must be >= 257; got 100"),
    ("gpt2.train.bpe", ["--out", "tok2", "--vocab_size", "70000"],
     r"--vocab_size must be <= 65536"),
    ("gpt2.train.bpe", ["--vocab_size", "300"], r"--out is required"),
    ("gpt2.train.bpe", ["--out", "missing/tok2"],
     r"--out missing/tok2: the folder .*missing does not exist"),
    ("gpt2.train.bpe", ["--out", "lib/a.py"], r"--out lib/a.py: is a file"),
    ("gpt2.train.bpe", ["--out", "tok2", "--files", "lib/a.py,nope.py"],
     r"--files nope.py: no such file"),
    ("gpt2.train.bpe", ["--out", "tok2", "--files", "lib"],
     r"--files lib: no such file \(it is a folder\)"),
    ("gpt2.train.bpe", ["--out", "tok2", "--files", "latin1.py"],
     r"--files latin1.py is not UTF-8 text"),
    ("gpt2.train.bpe", ["tok2"], r"unexpected argument 'tok2'"),
    # gpt2.train.corpus
    ("gpt2.train.corpus", ["--tokenizer", "nope", "--out", "d"],
     r"--tokenizer nope: no such folder"),
    ("gpt2.train.corpus", ["--tokenizer", "empty", "--out", "d"],
     r"--tokenizer empty: has no tokenizer"),
    ("gpt2.train.corpus", ["--tokenizer", "tok"], r"--out is required"),
    ("gpt2.train.corpus", ["--tokenizer", "tok", "--out", "missing/d"],
     r"the folder .*missing does not exist"),
    ("gpt2.train.corpus", ["--tokenizer", "tok", "--out", "d", "--root", "nope"],
     r"--root nope: no such folder"),
    ("gpt2.train.corpus", ["--tokenizer", "tok", "--out", "d", "--root", "empty"],
     r"--root .*empty: no UTF-8 .py files"),
    ("gpt2.train.corpus", ["--tokenizer", "tok", "--out", "d", "--tokeniser", "tok"],
     r"did you mean --tokenizer\?"),
    # gpt2.train.card
    ("gpt2.train.card", [], r"--data is required"),
    ("gpt2.train.card", ["--data", "empty"], r"--data empty: has no val.bin or heldout.bin"),
    ("gpt2.train.card", ["--data", "data", "--n_windows", "0"], r"--n_windows must be >= 1; got 0"),
    ("gpt2.train.card", ["--data", "data", "--n_windows", "inf"],
     r"--n_windows must be an integer; got 'inf'"),
    ("gpt2.train.card", ["--data", "data", "--nwindows", "3"], r"did you mean --n_windows\?"),
    ("gpt2.train.card", ["--data", "data", "--out", "missing/card.md"],
     r"--out missing/card.md: the folder .* does not exist"),
    ("gpt2.train.card", ["--data", "data", "--out", "card.md"],
     r"val.bin holds fewer than 257 tokens"),
    ("gpt2.train.card", ["--data", "gpt2data", "--out", "card.md"],
     r"--data gpt2data holds ids of a 50257-token "
                                                               r"vocabulary, the built-in models "
                                                               r"have 4097"),
    ("gpt2.train.card", ["--data", "badids", "--out", "card.md"],
     r"--data badids: val.bin holds token id 60000, but the model has 4097 tokens: the data were "
     r"made with another tokenizer$"),
    ("gpt2.train.ngram", ["--data", "smallvocab", "--out", "ng.safetensors"],
     r"train.bin holds token id 99, but the model "
                                                                         r"has 50 tokens"),
    # gpt2.ngram
    ("gpt2.train.ngram", ["--data", "data"], r"--out is required"),
    ("gpt2.train.ngram", ["--data", "lib", "--out", "ng.safetensors"],
     r"--data lib: has no train.bin or meta.json"),
    ("gpt2.train.ngram", ["--data", "data", "--out", "."],
     r"--out \. is a folder: give a file name"),
    ("gpt2.train.ngram", ["--data", "data", "--out", "ng.safetensors", "--order", "0"],
     r"--order must be >= 1; got 0"),
    ("gpt2.train.ngram", ["--data", "data", "--out", "ng.safetensors", "--order", "five"],
     r"--order must be an integer; got 'five'"),
    ("gpt2.train.ngram", ["--data", "data", "--out", "ng.safetensors", "--order", "5"],
     r"--order 5 is too high .* int64; use --order 4"),
    ("gpt2.train.ngram", ["--data", "data", "--out", "ng.safetensors", "--min_count", "-1"],
     r"--min_count must be >= 1; got -1"),
    # gpt2.heads
    ("gpt2.heads", ["--src", "nope", "--dst", "kept", "--n", "1"], r"--src nope: no such folder"),
    ("gpt2.heads", ["--src", MEDUSA, "--dst", "kept"], r"--n is required"),
    ("gpt2.heads", ["--src", MEDUSA, "--dst", "kept", "--n", "1.5"],
     r"--n must be an integer; got '1.5'"),
    ("gpt2.heads", ["--src", MEDUSA, "--dst", "kept", "--n", "3"], r"--n 3: .* has 2 heads"),
    ("gpt2.heads", ["--src", MEDUSA, "--dst", "lib/a.py", "--n", "1"],
     r"--dst lib/a.py: is a file"),
    ("gpt2.heads", ["--src", MEDUSA, "--dst", "missing/kept", "--n", "1"],
     r"the folder .*missing does not exist"),
    # no heads.json there
    ("gpt2.heads", ["--src", "empty", "--dst", "kept", "--n", "1"], r"heads"),
    ("gpt2.heads", ["--src", "lib", "--dst", "lib", "--n", "1"], r"--dst lib is the --src folder"),
    ("gpt2.heads", ["--src", MEDUSA, "--dst", "kept", "--n", "1", "-x"], r"unknown option -x"),
    # bench.engine
    ("bench.engine", ["--sizes", "7B"], r"unknown --sizes '7B': choose one of 124M, 355M"),
    ("bench.engine", ["--sizes", "124M,"], r"--sizes must be names"),
    ("bench.engine", ["--device", "tpu"], r"unknown --device 'tpu'.*choose one of cpu, gpu"),
    ("bench.engine", ["--device", "gpu", "--families", "Haswell"],
     r"--families picks OpenBLAS's kernels, which a --device gpu run does not time"),
    ("bench.engine", ["--repeats", "0"], r"--repeats must be >= 1; got 0"),
    ("bench.engine", ["--max_M", "nan"], r"--max_M must be an integer; got 'nan'"),
    ("bench.engine", ["--n_cache", "-5"], r"--n_cache must be >= 1"),
    ("bench.engine", ["--n_cache", "1020"],
     r"--n_cache 1020 \+ --max_M 16 exceeds the 124M shape's context of 1024 tokens"),
    ("bench.engine", ["--sizes", "124M", "--repets", "3"], r"did you mean --repeats\?"),
    ("bench.engine", ["--sizes", "124M", "--sizes", "355M"], r"--sizes is given twice"),
    # bench.gpu
    ("bench.gpu", ["--task", "fast"], r"unknown --task 'fast'.*choose one of check, speed, large"),
    ("bench.gpu", ["--n_prompts", "0"], r"--n_prompts must be >= 1; got 0"),
]


def test_every_command_has_bad_command_lines():
    assert {module for module, _, _ in BAD} == set(COMMANDS)


@pytest.mark.parametrize("module, args, pattern", BAD, ids=case_ids(BAD, 70))
def test_a_bad_command_line_is_one_line_and_leaves_nothing(tmp_path, module, args, pattern):
    make_inputs(tmp_path)
    assert_bad_command_refused(tmp_path, module, args, pattern)


@pytest.mark.parametrize("module", COMMANDS)
def test_help_prints_the_options_and_exits_0(tmp_path, module):
    assert_help(tmp_path, module, "options:")


@pytest.mark.parametrize("args", [["-m", "bench.gpu", "--task", "check"],
                                  ["-m", "bench.engine", "--device", "gpu"],
                                  ["-m", "bench.batch", "--device", "gpu"]])
def test_bench_gpu_without_cupy_is_one_line(tmp_path, args):
    """A GPU run is one process (no kernel family's header before the refusal)."""
    assert_gpu_refused_without_cupy(tmp_path, args)


def test_the_data_pipeline_runs_through_the_door(tmp_path):
    """bpe -> corpus -> ngram -> heads on a toy corpus, each as a user runs it, each writing only
    its outputs."""
    (tmp_path / "lib").mkdir()
    for i in range(60):  # every split of the corpus gets a file
        (tmp_path / "lib" / f"m{i}.py").write_text(f"def f{i}(x):\n    return x + {i}\n")
    steps = [["-m", "gpt2.train.bpe", "--out", "tok", "--vocab_size", "280", "--files",
              "lib/m0.py,lib/m1.py"],
             ["-m", "gpt2.train.corpus", "--tokenizer", "tok", "--out", "data", "--root", "lib"],
             ["-m", "gpt2.train.ngram", "--data", "data", "--out", "ng.safetensors", "--order", "3",
              "--min_count", "1"],
             ["-m", "gpt2.heads", "--src", MEDUSA, "--dst", "kept", "--n", "1"]]
    for args in steps:
        r = run_here(args, tmp_path)
        assert r.returncode == 0, r.stderr[-800:]
    made = set(files_under(tmp_path)) - {"lib"} - {f"lib/m{i}.py" for i in range(60)}
    assert made == {"tok", "tok/vocab.json", "tok/merges.txt", "data", "ng.safetensors", "kept",
                    "kept/heads.json",
                    "kept/heads.safetensors",
                    *(f"data/{n}" for n in ("train.bin", "val.bin", "heldout.bin", "meta.json"))}
    assert json.loads((tmp_path / "kept" / "heads.json").read_text())["n_heads"] == 1
    assert json.loads((tmp_path / "data" / "meta.json").read_text())["n_vocab"] <= 280


@pytest.mark.parametrize("key", ["accuracy", "accuracy_text"])
def test_keeping_heads_of_a_damaged_record_is_one_line(tmp_path, key):
    """gpt2.heads on heads whose heads.json has an accuracy record that is no table (edited by
    hand): one line naming the file and the field, exit 2, no --dst folder."""
    import shutil

    shutil.copytree(MEDUSA, tmp_path / "src")
    config = json.loads((tmp_path / "src" / "heads.json").read_text())
    config[key] = [0.5, 0.25]
    (tmp_path / "src" / "heads.json").write_text(json.dumps(config))
    before = files_under(tmp_path)
    r = run_here(["-m", "gpt2.heads", "--src", "src", "--dst", "kept", "--n", "1"], tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr[-500:])
    assert_refused(r, rf"^error: src/heads.json: {key} is \[0.5, 0.25\]; it must be an object",
                   tmp_path, before)


@pytest.mark.parametrize("kind, name", [("eagle", "an EAGLE head"), ("eagle3", "an EAGLE-3 head"),
                                        ("blockwise", "Blockwise heads")])
def test_keeping_heads_into_another_add_on_is_refused(tmp_path, kind, name):
    """gpt2.heads --dst a folder of another add-on: its heads.json would hide that add-on (or
    replace its heads); one line, exit 2, the folder as it was."""
    import shutil

    shutil.copytree(ROOT / "gpt2" / "assets" / "tiny-target" / kind, tmp_path / "other")
    before = file_bytes(tmp_path / "other")
    r = run_here(["-m", "gpt2.heads", "--src", MEDUSA, "--dst", "other", "--n", "1"], tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr[-500:])
    assert_refused(r, rf"^error: --dst other holds {name}: Medusa heads written there would hide "
                      rf"or replace it; give a new folder$")
    assert file_bytes(tmp_path / "other") == before
