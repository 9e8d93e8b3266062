"""What a newcomer gets wrong at main.py past the door: add-ons of the wrong kind, tokenizers that
differ, settings that cannot mean anything, batches larger than memory, sampling filters that do
nothing at temperature 0, the program's name, --batch rounds, threads and progress. Every refusal
is one true line, exit status 2, no traceback, nothing left behind (tests/support/clitools.py)."""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from gpt2.load import ASSETS

from tests.support.addon_folders import swapped_vocab, without_kind
from tests.support.clitools import (ROOT, assert_refused, files_under, run_cli, run_here)

FAST = 3.0  # seconds: a mistake in the options is refused before any model loads
TARGET = ASSETS / "tiny-target"
ALL_SUBLAYERS = ",".join(f"{s}{layer}" for layer in range(6) for s in "am")


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
     rf"--heads {re.escape(H)}/medusa holds Medusa heads \(for --method medusa\), not the "
     r"Blockwise heads that --method blockwise runs on: pass a folder of Blockwise heads, or use "
     r"this one with --method medusa$", True, {}),
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
    (["--target", f"{H}/medusa"], rf"model '{re.escape(H)}/medusa' holds Medusa heads \(for "
                                  r"--method medusa\), not the model \(config.json, "
                                  r"model.safetensors\) that --target or --draft runs on", True,
     {}),
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
     rf"draft 'other-tokenizer' \(other-tokenizer\) and target 'tiny-target' \({re.escape(H)}\) "
     r"have 4097 tokens each but different tokenizers", True, {}),
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
    ([M, "layer_skip", "--skip", "a1,m2,a01"],
     r"--skip a1,m2,a01: a01 names a sublayer given before it: name each sublayer once", False, {}),
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
    texts = [outs[b]["runs"][-1]["texts"] for b in (None, per_row, 2 * per_row + 1)]
    assert texts[0] == texts[1] == texts[2]
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


# ---- the program's name ----

def test_the_command_names_itself_as_invoked(tmp_path):
    """The installed command (a script named picospec that calls the app's cli, as pip writes it)
    says picospec in its usage lines; python main.py says python and the path it was given."""
    script = tmp_path / "bin" / "picospec"
    script.parent.mkdir()
    script.write_text("import sys\nfrom picospec_app import cli\nsys.exit(cli())\n")
    for args, usage in (([str(script), "--help"], "usage: picospec [--option"),
                        ([str(script), M, "medusa", "--help"], "usage: picospec --method medusa"),
                        (["main.py", "--help"], f"usage: python {ROOT / 'main.py'} [--option")):
        r = run_cli(args, tmp_path)
        assert r.returncode == 0 and r.stdout.startswith(usage), r.stdout[:200] + r.stderr
        assert "python main.py" not in r.stdout or args[0] == "main.py"


# ---- --batch rounds, threads, progress ----

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
    assert once["rounds"] == 1 and once["runs"][-1]["texts"] == out["runs"][-1]["texts"]


def test_more_threads_than_cpus_get_a_note(tmp_path):
    """--threads 64 on a machine of a few CPUs ran many times slower without a word."""
    from gpt2.fast.policy import usable_cpus

    cpus = usable_cpus()[1]  # the child's count: its affinity, within a cgroup CPU quota
    r = run_here(["main.py", "--threads", str(cpus + 1), "--n_tokens", "2", "--runs", "1",
                  "--json"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip().splitlines() == [
        f"note: {cpus + 1} BLAS threads oversubscribe the {cpus} CPU{'s' if cpus != 1 else ''} "
        f"this process may use: each forward waits on threads that share a core (slower, often "
        f"many times); give --threads {cpus}{' or fewer' if cpus > 1 else ''}"]
    assert json.loads(r.stdout)["threads"]["threads"] == cpus + 1
    quiet = run_here(["main.py", "--threads", str(cpus), "--n_tokens", "2", "--runs", "1",
                      "--json"], tmp_path)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr


def in_a_terminal(args, cwd, stream="stderr", env=None):
    """main.py ARGS with `stream` (stderr or stdout) on a pseudo-terminal and the other on a pipe
    -> (stdout, stderr)."""
    import fcntl
    import pty
    import struct
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 24 x 100
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), "PICOSPEC_OFFLINE": "1",
           "HOME": str(cwd), **(env or {})}
    streams = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, stream: follower}
    p = subprocess.Popen([sys.executable, str(ROOT / "main.py"), *args], cwd=cwd, env=env,
                         **streams)
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the terminal closed: the process is done
            break
        if not chunk:
            break
        seen += chunk
    piped = (p.stderr if stream == "stdout" else p.stdout).read()
    p.wait(timeout=120)
    os.close(leader)
    seen = seen.decode(errors="replace").replace("\r\n", "\n")  # the terminal's line ends
    return (seen, piped.decode()) if stream == "stdout" else (piped.decode(), seen)


def test_the_text_is_coloured_on_a_terminal_unless_no_color(tmp_path):
    """Tokens coloured by origin, with the legend, where stdout is a terminal; plain text where
    it is a pipe, NO_COLOR is set (no-color.org: any value but the empty one) or TERM is dumb."""
    base = ["--n_tokens", "8", "--runs", "1"]
    out, _ = in_a_terminal(base, tmp_path, "stdout", {"TERM": "xterm"})
    assert "\033[" in out and "green: draft token accepted" in out, out
    for env in ({"NO_COLOR": "1"}, {"NO_COLOR": "0"}, {"TERM": "dumb"}):
        out, _ = in_a_terminal(base, tmp_path, "stdout", env)
        assert "\033[" not in out and "green:" not in out and "speedup" in out, (env, out)
    out, _ = in_a_terminal(base, tmp_path, "stdout", {"NO_COLOR": ""})
    assert "\033[" in out, out
    piped = run_here(["main.py", *base], tmp_path)
    assert piped.returncode == 0 and "\033[" not in piped.stdout and "green:" not in piped.stdout


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


