"""The training commands go through the one door (picospec_cli): a mistake on the command line is
one `error:` line, exit 2, in well under 3 seconds, before any work and with no file or folder left
behind; a run that fails or is interrupted after it started leaves no empty OUT/ or OUT/ckpt/
either.

--out is new, empty, or a run of the same command (resumed). Any other folder is refused unless
--overwrite; starting over (--no-resume on a run, or --overwrite) writes beside OUT and swaps the
new outputs in whole when the run ends, so no stale file (an old medusa_choices.json) survives and a
failed or interrupted run leaves OUT as it was.

Commands: python -m gpt2.train.gpt2, python -m gpt2.train.heads, python -m gpt2.train.eagle,
python -m gpt2.train.eagle3.
"""
import errno
import inspect
import json
import re
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gpt2.weights import save_checkpoint, write_safetensors

from tests.support.clitools import (ROOT, assert_bad_command_refused,
                                    assert_gpu_refused_without_cupy, assert_help, assert_refused,
                                    case_ids, file_bytes, files_under, run_cli, run_here,
                                    sigint_as_in_a_terminal)

# a good start for gpt2.train.gpt2; each case adds its mistake
TRAIN = ["--data", "data", "--out", "runs/m"]
# the same for gpt2.train.heads (backbone: the built-in tiny-target)
HEADS = ["--data", "data", "--out", "runs/h"]
TINY = ["--n_layer", "1", "--n_embd", "16", "--n_head", "2", "--n_ctx", "16", "--batch_size", "2",
        "--dtype", "float32"]


BAD_META = {"vocab-huge": '{"n_vocab": 1e9}', "vocab-negative": '{"n_vocab": -5}',
            "vocab-zero": '{"n_vocab": 0}',
            "vocab-text": '{"n_vocab": "20"}', "vocab-fraction": '{"n_vocab": 20.5}',
            "vocab-over-uint16": '{"n_vocab": 65537}',
            "vocab-none": '{"tokens": 2000}', "meta-broken": '{"n_vocab": 2', "meta-list": '[20]'}


def make_inputs(folder):
    """What the bad command lines point at: a good data folder (20 tokens repeating), one without
    train.bin, one whose token ids do not fit its meta.json, a plain file, a checkpoint of another
    model in runs/other/ckpt (beside a distill.bin), and a tiny backbone in bb (20 tokens, n_ctx
    32)."""
    from tests.support.micro import random_gpt2

    (folder / "data").mkdir()
    tokens = np.tile(np.arange(20, dtype=np.uint16), 100)  # [2000]
    tokens.tofile(folder / "data" / "train.bin")
    tokens[:400].tofile(folder / "data" / "val.bin")
    (folder / "data" / "meta.json").write_text(json.dumps({"n_vocab": 20}))
    (folder / "empty").mkdir()
    (folder / "small").mkdir()
    for name in ("train.bin", "val.bin", "meta.json"):
        (folder / "small" / name).write_bytes((folder / "data" / name).read_bytes())
    # ids up to 19 do not fit
    (folder / "small" / "meta.json").write_text(json.dumps({"n_vocab": 10}))
    # the good token files beside a corrupt or mismatched meta.json
    for name, meta in BAD_META.items():
        (folder / name).mkdir()
        for file in ("train.bin", "val.bin"):
            (folder / name / file).write_bytes((folder / "data" / file).read_bytes())
        (folder / name / "meta.json").write_text(meta)
    (folder / "notes.txt").write_text("not a folder\n")
    other = {"log": {"hparams": {"n_vocab": 20, "n_ctx": 16, "n_embd": 32, "n_head": 2,
                                 "n_layer": 1}}}
    (folder / "runs" / "other" / "ckpt").mkdir(parents=True)
    write_safetensors(folder / "runs" / "other" / "ckpt" / "state.safetensors",
                      {"x": np.zeros(1, np.float32)}, metadata={"state": json.dumps(other)})
    tokens.tofile(folder / "runs" / "other" / "distill.bin")
    save_checkpoint(folder / "bb",
                    *random_gpt2(n_vocab=20, n_ctx=32, n_embd=16, n_head=2, n_layer=1))
    # token files made with a tokenizer other than tiny-target's, as meta.json records it
    (folder / "othertok").mkdir()
    for file in ("train.bin", "val.bin"):
        (folder / "othertok" / file).write_bytes((folder / "data" / file).read_bytes())
    (folder / "othertok" / "meta.json").write_text(json.dumps(
        {"n_vocab": 4097, "tokenizer": "ab" * 32, "tokenizer_folder": "/elsewhere/tok"}))
    # self-distilled tokens beside a record (FILE.json) that is not --distill_tokens'
    (folder / "rec").mkdir()
    for name, record in (("x", "{}"), ("y", "not json"), ("z", '{"temperature": NaN}')):
        tokens.tofile(folder / "rec" / f"{name}.bin")
        (folder / "rec" / f"{name}.json").write_text(record)
    tokens[:10].tofile(folder / "short.bin")  # too short for a row of self-distilled tokens
    (folder / "few").mkdir()
    for file in ("train.bin", "val.bin"):
        tokens[:50].tofile(folder / "few" / file)
    (folder / "few" / "meta.json").write_text(json.dumps({"n_vocab": 20}))


# where data made with another tokenizer than the backbone's is refused
OTHER_TOKENIZER = (r"--data othertok was tokenized with another tokenizer \(abababababab, "
                   r"/elsewhere/tok\) than --backbone tiny-target's \([0-9a-f]{12}, "
                   r".*tiny-target\): remake it with `python -m gpt2.train.corpus --tokenizer "
                   r".*tiny-target --out DIR`$")
ROW = r"a row of 128 tokens \(16 of a prompt and 112 the backbone writes\)"

BAD = [  # (command, arguments, what the one line must say)
    # gpt2.train.gpt2: the options one by one
    ("gpt2.train.gpt2", [*TRAIN, "--lrr", "0.1"], r"unknown option --lrr: did you mean --lr\?"),
    ("gpt2.train.gpt2", [*TRAIN, "--n_layer", "two"], r"--n_layer must be an integer; got 'two'"),
    ("gpt2.train.gpt2", [*TRAIN, "--max_steps", "10.5"],
     r"--max_steps must be an integer; got '10.5'"),
    ("gpt2.train.gpt2", [*TRAIN, "--lr", "nan"], r"--lr must be a finite number; got 'nan'"),
    ("gpt2.train.gpt2", [*TRAIN, "--clip", "inf"], r"--clip must be a finite number; got 'inf'"),
    ("gpt2.train.gpt2", [*TRAIN, "--max_minutes", "-inf"],
     r"--max_minutes must be a finite number"),
    ("gpt2.train.gpt2", [*TRAIN, "--lr", "ten"], r"--lr must be a number; got 'ten'"),
    ("gpt2.train.gpt2", [*TRAIN, "--batch_size", "0"], r"--batch_size must be >= 1; got 0"),
    ("gpt2.train.gpt2", [*TRAIN, "--lr", "0"], r"--lr must be > 0; got 0.0"),
    ("gpt2.train.gpt2", [*TRAIN, "--min_lr_ratio", "1.5"], r"--min_lr_ratio must be <= 1; got 1.5"),
    ("gpt2.train.gpt2", [*TRAIN, "--seed", "-1"], r"--seed must be >= 0; got -1"),
    ("gpt2.train.gpt2", [*TRAIN, "--device", "tpu"],
     r"unknown --device 'tpu'.*choose one of cpu, gpu"),
    ("gpt2.train.gpt2", [*TRAIN, "--dtype", "float61"],
     r"unknown --dtype 'float61' \(did you mean float16\?\)"),
    ("gpt2.train.gpt2", [*TRAIN, "--resume", "maybe"], r"--resume is a switch and takes no value"),
    ("gpt2.train.gpt2", [*TRAIN, "--lr", "1e-3", "--lr", "2e-3"], r"--lr is given twice"),
    ("gpt2.train.gpt2", [*TRAIN, "200"], r"unexpected argument '200'"),
    ("gpt2.train.gpt2", ["--out", "runs/m"], r"--data is required"),
    ("gpt2.train.gpt2", ["--data", "data"], r"--out is required"),
    # gpt2.train.gpt2: the folders and files
    ("gpt2.train.gpt2", ["--data", "nope", "--out", "runs/m"], r"--data nope: no such folder"),
    ("gpt2.train.gpt2", ["--data", "notes.txt", "--out", "runs/m"],
     r"--data notes.txt: no such folder \(it is a file\)"),
    ("gpt2.train.gpt2", ["--data", "empty", "--out", "runs/m"],
     r"--data empty has no train.bin: make the token files"),
    ("gpt2.train.gpt2", ["--data", "data", "--out", "notes.txt"],
     r"--out notes.txt is a file: give a folder"),
    ("gpt2.train.gpt2", ["--data", "data", "--out", "notes.txt/m"],
     r"--out notes.txt/m: .*notes.txt is a file"),
    ("gpt2.train.gpt2", [*TRAIN, "--n_ctx", "5000"],
     r"--data data/train.bin holds 2000 tokens, too few for a window"),
    ("gpt2.train.gpt2", ["--data", "small", "--out", "runs/m", *TINY],
     r"small/train.bin holds token id 19, but the model "
                                                                 r"has 10 tokens"),
    ("gpt2.train.gpt2", ["--data", "vocab-huge", "--out", "runs/m"],
     r"vocab-huge/meta.json: n_vocab 1000000000.0 "
                                                                r"is not a vocabulary size \(an "
                                                                r"integer from 1 to 65536"
                                                                r".*remake the token files with "
                                                                r"`python -m gpt2.train.corpus"),
    ("gpt2.train.gpt2", ["--data", "vocab-negative", "--out", "runs/m"],
     r"vocab-negative/meta.json: n_vocab -5 is not a "
                                                                    r"vocabulary size"),
    ("gpt2.train.gpt2", ["--data", "vocab-zero", "--out", "runs/m"],
     r"vocab-zero/meta.json: n_vocab 0 is not"),
    ("gpt2.train.gpt2", ["--data", "vocab-text", "--out", "runs/m"],
     r"vocab-text/meta.json: n_vocab \"20\" is not"),
    ("gpt2.train.gpt2", ["--data", "vocab-fraction", "--out", "runs/m"],
     r"vocab-fraction/meta.json: n_vocab 20.5 is not"),
    ("gpt2.train.gpt2", ["--data", "vocab-over-uint16", "--out", "runs/m"],
     r"n_vocab 65537 is not a vocabulary size"),
    ("gpt2.train.gpt2", ["--data", "vocab-none", "--out", "runs/m"],
     r"vocab-none/meta.json: expected JSON with an integer "
                                                                r"n_vocab; remake the token files"),
    ("gpt2.train.gpt2", ["--data", "meta-broken", "--out", "runs/m"],
     r"meta-broken/meta.json: expected JSON"),
    ("gpt2.train.gpt2", ["--data", "meta-list", "--out", "runs/m"],
     r"meta-list/meta.json: expected JSON"),
    # gpt2.train.gpt2: options that contradict each other or the checkpoint in OUT
    ("gpt2.train.gpt2", [*TRAIN, "--n_embd", "10", "--n_head", "3"],
     r"--n_embd 10 must be a multiple of --n_head 3"),
    # a model past the machine's memory: refused at once, not after filling it block by block
    ("gpt2.train.gpt2", [*TRAIN, "--n_layer", "1000000000", "--n_embd", "16", "--n_head", "2",
                         "--n_ctx", "16"],
     r"--n_layer 1000000000 and --n_embd 16 make 3,280,000,000,608 parameters: training holds "
     r"each 4 times in float32 \(weights, gradients, AdamW's two moments\), 52,480.0 GB, more "
     r"than this machine's [\d,.]+ GB of memory; give a smaller model$"),
    ("gpt2.train.gpt2", [*TRAIN, "--max_steps", "10", "--stop_at", "20"],
     r"--stop_at 20 is past --max_steps 10"),
    ("gpt2.train.gpt2", ["--data", "data", "--out", "runs/other", *TINY],
     r"runs/other/ckpt was trained with hparams .*"
     r"'n_embd': 32.*--no-resume to start over"),
    # an --out that holds something else is refused, naming --overwrite; starting over never removes
    # an input
    ("gpt2.train.gpt2", ["--data", "data", "--out", "data"],
     r"--out data is not empty \(meta.json, train.bin, val.bin\) "
                                                        r"and holds no run of this command to "
                                                        r"resume: give a new or "
                                                        r"empty folder, or --overwrite to replace "
                                                        r"its contents"),
    ("gpt2.train.gpt2", ["--data", "data", "--out", "data", "--no-resume"],
     r"--out data is not empty"),
    ("gpt2.train.gpt2", ["--data", "data", "--out", "data", "--overwrite"],
     r"--overwrite replaces data when the run ends, "
                                                                       r"and --data data lies "
                                                                       r"inside it: move it out"),
    ("gpt2.train.gpt2", ["--data", "data", "--out", ".", "--overwrite"],
     r"--overwrite replaces \. when the run ends, and "
                                                                    r"--data data lies inside it"),
    ("gpt2.train.gpt2", [*TRAIN, "--overwrite=maybe"],
     r"--overwrite is a switch: write --overwrite or --no-overwrite"),
    ("gpt2.train.heads", ["--data", "data", "--out", "runs/other"],
     r"--out runs/other is not empty \(ckpt, "
                                                                    r"distill.bin\) and holds no "
                                                                    r"run of this command"),
    ("gpt2.train.heads", ["--data", "data", "--out", "runs/other", "--no-resume"],
     r"--out runs/other is not empty"),
    ("gpt2.train.heads", ["--data", "data", "--out", "bb", "--backbone", "bb", "--overwrite"],
     r"--overwrite replaces "
                                                                    r"bb when the run ends, and "
                                                                    r"--backbone bb lies"),
    ("gpt2.train.heads",
     ["--data", "data", "--out", "runs", "--overwrite", "--distill_data", "runs/other/distill.bin"],
     r"--overwrite replaces runs when the run ends, and --distill_data runs/other/distill.bin lies "
     r"inside it"),
    ("gpt2.train.eagle", ["--data", "data", "--out", "runs/other", "--distill_tokens", "1000"],
     r"--out runs/other is not empty"),
    ("gpt2.train.eagle",
     ["--data", "data", "--out", "runs", "--overwrite", "--distill_data", "runs/other/distill.bin"],
     r"--distill_data runs/other/distill.bin lies inside it"),
    ("gpt2.train.eagle3", ["--data", "data", "--out", "runs/e3", "--distill_tokens", "1000",
                           "--draft_vocab", "5000"],
     r"--draft_vocab 5000 is more than the backbone's 4097 tokens"),
    ("gpt2.train.eagle3", ["--data", "data", "--out", "runs/e3", "--distill_tokens", "1000",
                           "--test_steps", "0"], r"--test_steps must be >= 1; got 0"),
    # the token files and the backbone share one tokenizer
    # (one step: where the check is missing, the run ends soon, exit 0, and the case fails)
    ("gpt2.train.heads", ["--data", "othertok", "--out", "runs/h", "--max_steps", "1"],
     OTHER_TOKENIZER),
    ("gpt2.train.eagle", ["--data", "othertok", "--out", "runs/e", "--distill_tokens", "1000",
                          "--max_steps", "1"], OTHER_TOKENIZER),
    ("gpt2.train.eagle3", ["--data", "othertok", "--out", "runs/e3", "--distill_tokens", "1000",
                           "--max_steps", "1"], OTHER_TOKENIZER),
    # the record beside --distill_data names the temperature the data were made at
    ("gpt2.train.heads", [*HEADS, "--distill_data", "rec/x.bin"],
     r"--distill_data rec/x.bin: rec/x.json beside it is not the record --distill_tokens writes "
     r"\(a JSON object with the temperature >= 0 the data were made at\): restore it, or copy "
     r"x.bin into a folder of its own and give --distill_temperature$"),
    ("gpt2.train.heads", [*HEADS, "--distill_data", "rec/y.bin"],
     r"rec/y.json beside it is not the record"),
    ("gpt2.train.eagle", ["--data", "data", "--out", "runs/e", "--distill_data", "rec/z.bin"],
     r"rec/z.json beside it is not the record"),
    # EAGLE's rows, not a --n_ctx it does not have
    ("gpt2.train.eagle", ["--data", "data", "--out", "runs/e", "--distill_data", "short.bin"],
     rf"--distill_data short.bin holds 10 tokens, too few for {ROW}; give a longer file, or make "
     rf"one with --distill_tokens 256 or more$"),
    ("gpt2.train.eagle3", ["--data", "few", "--out", "runs/e3", "--distill_tokens", "1000"],
     rf"--data few/train.bin holds 50 tokens, too few for {ROW}; give more data$"),
    ("gpt2.train.eagle3", ["--data", "data", "--out", "runs/e3", "--distill_tokens", "1000",
                           "--backbone", "bb", "--draft_vocab", "10"],
     r"EAGLE-3 reads three depths of the target, which has \d blocks: give a backbone of 3"),
    # gpt2.train.heads
    ("gpt2.train.heads", [*HEADS, "--n_head", "2"],
     r"unknown option --n_head: did you mean --n_heads\?"),
    ("gpt2.train.heads", [*HEADS, "--stage", "medusa3"],
     r"unknown --stage 'medusa3' \(did you mean medusa.\?\)"),
    ("gpt2.train.heads", [*HEADS, "--act", "gelu"],
     r"unknown --act 'gelu'.*choose one of silu, relu"),
    ("gpt2.train.heads", [*HEADS, "--n_heads", "2.5"], r"--n_heads must be an integer; got '2.5'"),
    ("gpt2.train.heads", [*HEADS, "--n_ctx", "1000"],
     r"--n_ctx 1000 is longer than the backbone's context window of 256 tokens: give --n_ctx 256"),
    ("gpt2.train.heads", [*HEADS, "--decay", "1.5"], r"--decay must be <= 1; got 1.5"),
    ("gpt2.train.heads", [*HEADS, "--decay", "nan"], r"--decay must be a finite number; got 'nan'"),
    ("gpt2.train.heads", [*HEADS, "--distill_temperature", "-1"],
     r"--distill_temperature must be >= 0; got -1.0"),
    ("gpt2.train.heads", [*HEADS, "--distill_tokens", "1e5"],
     r"--distill_tokens must be an integer; got '1e5'"),
    ("gpt2.train.heads", ["--data", "data"], r"--out is required"),
    ("gpt2.train.heads", ["--out", "runs/h"], r"--data is required"),
    ("gpt2.train.heads", ["--data", "empty", "--out", "runs/h"], r"--data empty has no train.bin"),
    ("gpt2.train.heads", ["--data", "data", "--out", "notes.txt"], r"--out notes.txt is a file"),
    ("gpt2.train.heads", [*HEADS, "--backbone", "gpt5"], r"unknown model 'gpt5'"),
    ("gpt2.train.heads", [*HEADS, "--backbone", "empty"],
     r"--backbone empty: empty has no config.json"),
    ("gpt2.train.heads", [*HEADS, "--tied", "--stage", "medusa2"],
     r"train them with a frozen backbone"),
    ("gpt2.train.heads", [*HEADS, "--distill_tokens", "1000", "--distill_data", "data/train.bin"],
     r"not both"),
    ("gpt2.train.heads", [*HEADS, "--distill_data", "nope.bin"],
     r"--distill_data nope.bin: no such file; make one "
                                                                 r"with --distill_tokens"),
    ("gpt2.train.heads", [*HEADS, "--distill_data", "notes.txt"],
     r"--distill_data notes.txt: 13 bytes is not a file "
                                                                  r"of uint16"),
    ("gpt2.train.heads", [*HEADS, "--distill_tokens", "100"],
     r"--distill_tokens 100 is too few .* at least 130"),
    ("gpt2.train.heads", [*HEADS, "--n_ctx", "4", "--n_heads", "4"],
     r"--n_ctx 4 leaves head 4 no target"),
    ("gpt2.train.heads", [*HEADS, "--max_steps", "5", "--stop_at", "6"],
     r"--stop_at 6 is past --max_steps 5"),
]


def test_every_command_has_bad_command_lines():
    assert {module for module, _, _ in BAD} == {"gpt2.train.gpt2", "gpt2.train.heads",
                                                "gpt2.train.eagle", "gpt2.train.eagle3"}


@pytest.mark.parametrize("module, args, pattern", BAD, ids=case_ids(BAD, 80))
def test_a_bad_command_line_is_one_line_and_leaves_nothing(tmp_path, module, args, pattern):
    make_inputs(tmp_path)
    assert_bad_command_refused(tmp_path, module, args, pattern)


@pytest.mark.parametrize("module, extra", [("gpt2.train.gpt2", []), ("gpt2.train.heads", []),
                                           ("gpt2.train.eagle", ["--distill_tokens", "1000"]),
                                           ("gpt2.train.eagle3", ["--distill_tokens", "1000"])])
def test_device_gpu_without_cupy_is_one_line(tmp_path, module, extra):
    make_inputs(tmp_path)
    out = "runs/m" if module == "gpt2.train.gpt2" else "runs/h"
    assert_gpu_refused_without_cupy(
        tmp_path, ["-m", module, "--data", "data", "--out", out, *extra, "--device", "gpu"])


@pytest.mark.parametrize("module", ["gpt2.train.gpt2", "gpt2.train.heads", "gpt2.train.eagle",
                                    "gpt2.train.eagle3"])
def test_every_parameter_has_its_option(module):
    """The door's options and main's signature name the same parameters with the same defaults."""
    mod = __import__(module, fromlist=["main"])
    signature = {n: p.default for n, p in inspect.signature(mod.main).parameters.items()}
    options = {o.name: o.default for o in mod.OPTIONS}
    assert options == {n: (None if d is inspect.Parameter.empty else d) for n,
                       d in signature.items()}


@pytest.mark.parametrize("module", ["gpt2.train.gpt2", "gpt2.train.heads"])
def test_help_prints_the_options_and_exits_0(tmp_path, module):
    assert_help(tmp_path, module, "--max_steps N")


def test_training_runs_through_the_door(tmp_path):
    """gpt2.train.gpt2 then gpt2.train.heads on its model, as a user runs them, each writing only
    its outputs."""
    make_inputs(tmp_path)
    before = set(files_under(tmp_path))
    steps = [["-m", "gpt2.train.gpt2", *TRAIN, *TINY, "--max_steps", "4", "--eval_every", "2",
              "--warmup", "1"],
             ["-m", "gpt2.train.heads", "--backbone", "runs/m", *HEADS, "--n_heads", "1", "--n_ctx",
              "16",
              "--batch_size", "2", "--max_steps", "4", "--eval_every", "2", "--dtype", "float32"]]
    for args in steps:
        r = run_here(args, tmp_path)
        assert r.returncode == 0, r.stderr[-800:]
    made = set(files_under(tmp_path)) - before
    assert made == {"runs/m", "runs/m/ckpt", "runs/m/ckpt/state.json",
                    "runs/m/ckpt/state.safetensors",
                    "runs/m/config.json", "runs/m/model.safetensors", "runs/m/train_log.json",
                    "runs/h", "runs/h/ckpt", "runs/h/ckpt/state.json",
                    "runs/h/ckpt/state.safetensors",
                    "runs/h/heads.json", "runs/h/heads.safetensors"}
    assert json.loads((tmp_path / "runs/m/train_log.json").read_text())["step"] == 4
    assert json.loads((tmp_path / "runs/h/heads.json").read_text())["args"]["max_steps"] == 4


@pytest.mark.parametrize("module", ["gpt2.train.gpt2", "gpt2.train.heads"])
def test_a_failed_write_leaves_no_empty_folders(tmp_path, monkeypatch, capsys, module):
    """The disk fills up while the first checkpoint is written (simulated): the run fails with one
    line and takes away the folders it made (runs/x/, runs/x/y/, runs/x/y/ckpt/); nothing
    half-written is left."""
    import gpt2.weights
    from picospec_cli import command
    from tests.support.micro import random_gpt2

    make_inputs(tmp_path)
    gpt2.weights.save_checkpoint(tmp_path / "bb",
                                 *random_gpt2(n_vocab=20, n_ctx=16, n_embd=16, n_head=2, n_layer=1))
    monkeypatch.chdir(tmp_path)
    before = files_under(tmp_path)

    def disk_full(path, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(gpt2.weights, "write_safetensors", disk_full)
    mod = __import__(module, fromlist=["main"])
    model = TINY if module == "gpt2.train.gpt2" else ["--backbone", "bb", "--n_heads", "1",
                                                      "--n_ctx", "16",
                                                 "--batch_size", "2", "--dtype", "float32"]
    with pytest.raises(SystemExit) as e:
        command(mod.main, mod.OPTIONS,
                ["--data", "data", "--out", "runs/x/y", *model, "--max_steps", "4",
                 "--eval_every", "2"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "error: runs/x/y/ckpt/state.safetensors: No space left on device", err[-1]
    assert files_under(tmp_path) == before  # no runs/x/, runs/x/y/, runs/x/y/ckpt/, and no *.tmp


def test_ctrl_c_during_training_leaves_nothing(tmp_path):
    """An honest interruption: SIGINT while the model trains, before its first checkpoint. Exit 130,
    one line 'interrupted' after the progress bar, no traceback, and no empty runs/m/ made."""
    make_inputs(tmp_path)
    before = files_under(tmp_path)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "PICOSPEC_OFFLINE": "1",
           "HOME": str(tmp_path), "PYTHONUNBUFFERED": "1"}
    p = subprocess.Popen([sys.executable, "-m", "gpt2.train.gpt2", *TRAIN, *TINY, "--max_steps",
                          "1000000",
                          "--eval_every", "1000000"], cwd=tmp_path, env=env, stderr=subprocess.PIPE,
                          text=True,
                         preexec_fn=sigint_as_in_a_terminal)
    seen = ""
    while "train:" not in seen:  # the progress bar appears when the loop starts
        seen += p.stderr.read(1) or pytest.fail(f"exited early: {seen}")
    p.send_signal(signal.SIGINT)
    rest = p.communicate(timeout=30)[1]
    assert p.returncode == 130, seen + rest
    assert "Traceback" not in rest and rest.strip().splitlines()[-1] == "interrupted"
    assert files_under(tmp_path) == before


def unwritable_folder(tmp_path):
    """A folder in which this user cannot make folders: a read-only one, or for root (who may write
    anywhere) /proc."""
    if os.geteuid() != 0:
        (tmp_path / "ro").mkdir(mode=0o555)
        return "ro"
    if not Path("/proc/self").is_dir():
        pytest.skip("running as root without /proc: no folder here refuses a new folder")
    return "/proc"


@pytest.mark.parametrize("module, extra", [
    ("gpt2.train.gpt2", [*TINY, "--max_steps", "200", "--eval_every", "200"]),
    ("gpt2.train.heads",
     ["--n_heads", "1", "--n_ctx", "16", "--batch_size", "2", "--max_steps", "200"]),
    ("gpt2.train.eagle", ["--distill_tokens", "1000", "--batch_size", "2", "--max_steps", "200"])])
@pytest.mark.parametrize("below", ["m", "new/deeper/m"])
def test_an_unwritable_out_is_refused_before_any_work(tmp_path, module, extra, below):
    """--out in a folder the user cannot write to (or below it, in folders still to be made): one
    line, at once, not when the first file is written after minutes of training."""
    make_inputs(tmp_path)
    out = f"{unwritable_folder(tmp_path)}/{below}"
    before = files_under(tmp_path)
    r = run_here(["-m", module, "--data", "data", "--out", out, *extra], tmp_path)
    if (tmp_path / "ro").exists():
        (tmp_path / "ro").chmod(0o755)  # so that pytest can remove it
    assert r.returncode == 2, (r.returncode, r.stderr[-500:])
    folder = out.rsplit("/", below.count("/") + 1)[0]
    assert_refused(r,
                   f"^error: --out {out}: cannot write in .*{folder} .*: give a folder you can "
                   f"write to", tmp_path,
                   before, max_seconds=3)


# a run of each trainer in seconds, on the tiny backbone bb; -> (arguments, the files it makes in
# OUT)
RUNS = {
    "gpt2.train.gpt2": ([*TINY, "--eval_every", "2", "--warmup", "1"],
                   {"ckpt", "ckpt/state.json", "ckpt/state.safetensors", "config.json",
                    "model.safetensors", "train_log.json"}),
    "gpt2.train.heads": (["--backbone", "bb", "--n_heads", "1", "--n_ctx", "16", "--batch_size",
                          "2", "--eval_every", "2", "--dtype", "float32"],
                         {"ckpt", "ckpt/state.json", "ckpt/state.safetensors", "heads.json",
                          "heads.safetensors"}),
    "gpt2.train.eagle": (["--backbone", "bb", "--distill_tokens", "64", "--batch_size", "2",
                          "--eval_every", "2",
                          "--eval_rows", "2", "--steps", "2", "--dtype", "float32"],
                         {"ckpt", "ckpt/state.json", "ckpt/state.safetensors", "eagle.json",
                          "eagle.safetensors", "distill.bin", "distill.json"}),
}


def train(tmp_path, module, out, *extra, steps=4):
    args, _ = RUNS[module]
    r = run_here(["-m", module, "--data", "data", "--out", out, *args, "--max_steps", str(steps),
                  *extra], tmp_path)
    assert r.returncode == 0, r.stderr[-800:]
    return r


@pytest.mark.parametrize("module", RUNS)
def test_starting_over_leaves_no_stale_file(tmp_path, module):
    """--no-resume on a run, or --overwrite on a folder of other files: the new run's outputs
    replace the folder's whole contents when it ends (an old medusa_choices.json or notes do not
    stay beside them); no temporary folder is left."""
    make_inputs(tmp_path)
    made = RUNS[module][1]
    train(tmp_path, module, "runs/x")
    assert set(files_under(tmp_path / "runs/x")) == made
    # built from the old run
    (tmp_path / "runs/x/medusa_choices.json").write_text('{"medusa_choices": [[0]]}')
    (tmp_path / "runs/x/notes.txt").write_text("about the old run\n")
    r = train(tmp_path, module, "runs/x", "--no-resume", "--seed", "1")
    assert ("starting over: this run's outputs replace the contents of runs/x when it ends"
            in r.stderr)
    assert set(files_under(tmp_path / "runs/x")) == made
    assert json.loads((tmp_path / "runs/x/ckpt/state.json").read_text())["log"]["args"]["seed"] == 1
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "old.txt").write_text("replaced\n")
    train(tmp_path, module, "mine", "--overwrite")
    assert set(files_under(tmp_path / "mine")) == made
    # no .x.new-* nor .x.old-*
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["other", "x"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".mine.")]


def test_a_resumed_heads_run_that_trains_on_drops_the_stale_tree(tmp_path):
    """OUT/medusa_choices.json was built from the heads' accuracy: a resumed run that trains them
    further removes it (saying how to rebuild it); a rerun that trains nothing more keeps it."""
    make_inputs(tmp_path)
    tree = tmp_path / "runs/h/medusa_choices.json"
    train(tmp_path, "gpt2.train.heads", "runs/h")
    tree.write_text('{"medusa_choices": [[0]]}')
    r = train(tmp_path, "gpt2.train.heads", "runs/h", steps=6)
    assert (not tree.exists()
            and "rebuild it with `python -m bench.trees --build runs/h`" in r.stderr)
    assert json.loads((tmp_path / "runs/h/heads.json").read_text())["step"] == 6
    tree.write_text('{"medusa_choices": [[0]]}')
    train(tmp_path, "gpt2.train.heads", "runs/h", steps=6)
    assert tree.exists()


@pytest.mark.parametrize("module", ["gpt2.train.gpt2", "gpt2.train.heads"])
def test_a_failed_start_over_leaves_out_as_it_was(tmp_path, monkeypatch, capsys, module):
    """The disk fills up after the new run wrote its first checkpoint (simulated): OUT keeps the old
    run, byte for byte, and the new run's folder beside it is gone."""
    import gpt2.weights
    from picospec_cli import command

    make_inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    mod = __import__(module, fromlist=["main"])
    args = ["--data", "data", "--out", "runs/x", *RUNS[module][0], "--max_steps", "4"]
    command(mod.main, mod.OPTIONS, args)  # the old run
    before = file_bytes(tmp_path)

    written, write = [], gpt2.weights.write_safetensors

    def disk_full_at_the_second_write(path, *args, **kwargs):
        if written:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        written.append(path)
        return write(path, *args, **kwargs)

    monkeypatch.setattr(gpt2.weights, "write_safetensors", disk_full_at_the_second_write)
    with pytest.raises(SystemExit) as e:
        command(mod.main, mod.OPTIONS, [*args, "--no-resume", "--seed", "1"])
    assert e.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith("state.safetensors: No space "
                                                                     "left on device")
    assert file_bytes(tmp_path) == before
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["other", "x"]


def signals_as_in_a_terminal():
    """Popen(preexec_fn=...): SIGINT and SIGTERM reach the child with their default disposition,
    whatever the shell that started the suite passed on."""
    sigint_as_in_a_terminal()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


@pytest.mark.parametrize("sig, code, line", [(signal.SIGINT, 130, "interrupted"),
                                             (signal.SIGTERM, 143, "terminated")])
def test_ctrl_c_while_starting_over_keeps_the_old_run(tmp_path, sig, code, line):
    """SIGINT (Ctrl-C) or SIGTERM (`kill`, a scheduler's time limit) during a --no-resume run into
    an existing run: one line, exit 128 + the signal, OUT holds the old run as it was, and the new
    run's folder beside it is gone."""
    make_inputs(tmp_path)
    train(tmp_path, "gpt2.train.gpt2", "runs/m")
    before = file_bytes(tmp_path)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "PICOSPEC_OFFLINE": "1",
           "HOME": str(tmp_path), "PYTHONUNBUFFERED": "1"}
    p = subprocess.Popen([sys.executable, "-m", "gpt2.train.gpt2", *TRAIN, *TINY, "--no-resume",
                          "--max_steps", "1000000",
                          "--eval_every", "1000000"], cwd=tmp_path, env=env, stderr=subprocess.PIPE,
                          text=True,
                         preexec_fn=signals_as_in_a_terminal)
    seen = ""
    # the progress bar appears when the loop starts, in its folder beside runs/m
    while "train:" not in seen:
        seen += p.stderr.read(1) or pytest.fail(f"exited early: {seen}")
    assert len(list((tmp_path / "runs").glob(".m.new-*"))) == 1
    p.send_signal(sig)
    rest = p.communicate(timeout=30)[1]
    assert p.returncode == code and rest.strip().splitlines()[-1] == line, (p.returncode, rest)
    assert "Traceback" not in rest, rest
    assert file_bytes(tmp_path) == before
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["m", "other"]


def test_overwrite_never_replaces_the_current_or_the_home_folder(tmp_path):
    make_inputs(tmp_path)
    (tmp_path / "work" / "here").mkdir(parents=True)
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "notes.txt").write_text("mine\n")
    data = str(tmp_path / "data")
    before = files_under(tmp_path)
    r = run_here(["-m", "gpt2.train.gpt2", "--data", data, "--out", "..", "--overwrite"],
                 tmp_path / "work" / "here")
    assert_refused(r,
                   r"^error: --overwrite would replace \.\., which holds the current folder: give "
                   r"another --out",
                   tmp_path, before, max_seconds=3)
    r = run_here(["-m", "gpt2.train.gpt2", "--data", data, "--out", str(tmp_path / "home"),
                  "--overwrite"], tmp_path / "work",
                env={"HOME": str(tmp_path / "home")})
    assert_refused(r, r"which holds your home folder: give another --out", tmp_path, before,
                   max_seconds=3)


@pytest.mark.parametrize("module", ["gpt2.train.gpt2", "gpt2.train.heads"])
@pytest.mark.parametrize("keep", [4, 100, -40])
def test_a_damaged_checkpoint_is_named_and_the_run_kept(tmp_path, module, keep):
    """A checkpoint cut short (a full disk, a copy stopped half-way: its first 4 or 100 bytes, or
    all but its last 40) is named as damaged, and the run is neither called foreign nor offered to
    --overwrite: OUT stays byte for byte."""
    make_inputs(tmp_path)
    train(tmp_path, module, "runs/x", "--stop_at", "2")
    state = tmp_path / "runs/x/ckpt/state.safetensors"
    state.write_bytes(state.read_bytes()[:keep])
    before = file_bytes(tmp_path)
    args, _ = RUNS[module]
    r = run_here(["-m", module, "--data", "data", "--out", "runs/x", *args, "--max_steps", "4"],
                 tmp_path)
    assert_refused(r, r"^error: the checkpoint runs/x/ckpt/state.safetensors is damaged \(.+\): "
                      r"the run is left as it is")
    assert "--overwrite" not in r.stderr and "--no-resume" not in r.stderr
    assert before == file_bytes(tmp_path)


DIVERGING = [  # (command, arguments, the step whose numbers are no longer finite)
    ("gpt2.train.gpt2", [*TINY, "--max_steps", "1", "--eval_every", "1"], "the weights are not "
                                                                          "finite at step 1"),
    ("gpt2.train.gpt2", [*TINY, "--max_steps", "3", "--warmup", "0"], "the loss is nan at step 2"),
    ("gpt2.train.heads", [*RUNS["gpt2.train.heads"][0], "--max_steps", "3", "--warmup", "0"],
     "the loss is nan at step 2"),
    ("gpt2.train.eagle", [*RUNS["gpt2.train.eagle"][0], "--max_steps", "3", "--warmup", "0"],
     "the loss is nan at step 2"),
]


@pytest.mark.parametrize("module, args, what", DIVERGING, ids=case_ids(DIVERGING, 60))
def test_a_diverging_run_stops_with_one_line_and_writes_no_model(tmp_path, module, args, what):
    """--lr 1e308 overflows the weights at the first update: the run stops at the step where the
    loss (each step) or the weights (before a checkpoint) are no longer finite, with one line and
    no RuntimeWarning (a terminal shows it alone: the progress bar is taken away), and writes no
    checkpoint or model of such weights (EAGLE keeps the rows it distilled, for the next run)."""
    make_inputs(tmp_path)
    before = files_under(tmp_path)
    r = run_cli(["-m", module, "--data", "data", "--out", "runs/x", *args, "--lr", "1e308"],
                tmp_path)
    assert r.returncode == 2, r.stderr[-800:]
    assert "Warning" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    *bars, last = [line for line in r.stderr.splitlines() if line.strip()]
    assert last == f"error: {what}: training diverged; lower --lr (1e+308 now)", r.stderr
    assert all("[00:" in line for line in bars), r.stderr  # progress bars, nothing else
    kept = {"runs/x", "runs/x/distill.bin", "runs/x/distill.json"} if "eagle" in module else set()
    assert set(files_under(tmp_path)) == set(before) | kept


@pytest.mark.parametrize("module", ["gpt2.train.gpt2", "gpt2.train.heads"])
def test_a_run_diverging_from_its_checkpoints_weights_says_to_start_over(tmp_path, module):
    """--lr 1e30 leaves finite but huge weights after step 1, checkpointed (--eval_every 1); the
    loss of those weights is not finite at step 2 whatever the rate, so lowering --lr and resuming
    cannot help: the line says to start over, and a lower rate that does trains."""
    make_inputs(tmp_path)
    own = RUNS[module][0]  # its options but --eval_every's and --warmup's
    own = [a for i, a in enumerate(own) if a not in ("--eval_every", "--warmup")
           and (i == 0 or own[i - 1] not in ("--eval_every", "--warmup"))]
    args = ["-m", module, "--data", "data", "--out", "runs/x", *own, "--max_steps", "3",
            "--warmup", "0", "--eval_every", "1"]
    r = run_cli([*args, "--lr", "1e30"], tmp_path)
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 2 and re.fullmatch(
        r"error: the (loss|gradient's norm) is (nan|inf) at step 2: training diverged; lower --lr "
        r"\(1e\+30 now\) and start over with --no-resume \(the checkpoint at step 1 holds the "
        r"weights that diverged: a run resumed from it diverges too\)", last), r.stderr
    r = run_cli([*args, "--lr", "1e-3"], tmp_path)  # resumed from step 1: as the line said
    assert r.returncode == 2 and "at step 2: training diverged" in r.stderr, r.stderr
    assert "resumed from step 1 (--lr 0.001 now, 1e+30 before)" in r.stdout, r.stdout
    r = run_cli([*args, "--lr", "1e-3", "--no-resume"], tmp_path)
    assert r.returncode == 0, r.stderr


def test_the_progress_bar_ends_at_the_step_the_run_ends_at(tmp_path, capsys):
    """The bar counts the step the loop stops at (--stop_at, the last): 2/2, not 1/2."""
    from gpt2.train.gpt2 import train_loop

    params = {"w": np.zeros(2, np.float32)}

    def loss_and_grads(params, step, rng):
        return {"loss": 1.0}, {"w": np.ones(2, np.float32)}
    for steps, stop_at, shown in ((2, None, "2/2"), (10, 3, "3/10")):
        train_loop(params, loss_and_grads, tmp_path / f"ckpt{steps}", steps, lambda step: 0.1,
                   np.random.default_rng(0), stop_at=stop_at)
        bars = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()
        assert f" {shown} " in bars[-1], bars


def drop_backbone_record(ckpt):
    """Rewrite a checkpoint as one written before its log kept backbone_sha256."""
    from gpt2.weights import read_header, read_safetensors

    path = ckpt / "state.safetensors"
    state = json.loads(read_header(path)[0]["__metadata__"]["state"])
    del state["log"]["backbone_sha256"]
    write_safetensors(path, read_safetensors(path), metadata={"state": json.dumps(state)})


def resume_on(tmp_path, module, backbone, steps):  # the run in runs/x, on another backbone
    args = [backbone if a == "bb" else a for a in RUNS[module][0]]
    return run_here(["-m", module, "--data", "data", "--out", "runs/x", *args, "--max_steps",
                     str(steps)], tmp_path)


REFUSED = (r"^error: runs/x/ckpt was begun on other backbone weights \(bb, sha256 [0-9a-f]{{12}}\) "
           r"than --backbone {}'s \(sha256 [0-9a-f]{{12}}\): resume with --backbone bb, give "
           r"another --out, or --no-resume to start over$")


@pytest.mark.parametrize("module", ["gpt2.train.heads", "gpt2.train.eagle"])
def test_a_resume_onto_other_backbone_weights_is_refused(tmp_path, module):
    """A run begun on bb, resumed on other weights of bb's width (bb2; or bb itself, its weights
    replaced by bb2's), is refused with one line naming both (exit 2, every file byte for byte).
    The same weights under another name resume (heads; EAGLE refuses another name before), and a
    checkpoint written before the log kept the weights resumes as it always did."""
    from tests.support.micro import random_gpt2

    make_inputs(tmp_path)
    save_checkpoint(tmp_path / "bb2", *random_gpt2(n_vocab=20, n_ctx=32, n_embd=16, n_head=2,
                                                   n_layer=1, seed=1))
    train(tmp_path, module, "runs/x", "--stop_at", "2")
    shutil.copytree(tmp_path / "bb", tmp_path / "bb-copy")
    if module == "gpt2.train.heads":
        before = file_bytes(tmp_path)
        r = resume_on(tmp_path, module, "bb2", 4)
        assert r.returncode == 2
        assert_refused(r, REFUSED.format("bb2"))
        assert before == file_bytes(tmp_path)
        assert "resumed from step 2" in resume_on(tmp_path, module, "bb-copy", 3).stdout
    shutil.copy(tmp_path / "bb2" / "model.safetensors", tmp_path / "bb" / "model.safetensors")
    before = file_bytes(tmp_path)
    r = resume_on(tmp_path, module, "bb", 4)
    assert r.returncode == 2
    assert_refused(r, REFUSED.format("bb"))
    assert before == file_bytes(tmp_path)
    drop_backbone_record(tmp_path / "runs/x/ckpt")
    shutil.copy(tmp_path / "bb-copy" / "model.safetensors", tmp_path / "bb" / "model.safetensors")
    assert "resumed from step" in train(tmp_path, module, "runs/x").stdout
