"""The plan of a run (picospec_app/plan.py): the command line read once into one value that the
rest of the run reads; every refusal that needs no model comes from it, before any model loads;
what asked for no network, the notes for stderr and the method's options are settled there; and
the --json object has one shape, for one prompt and for --batch alike."""
import io
import json
import os
import re
from contextlib import redirect_stdout

import pytest

from picospec.methods import TABLE, defaults
from picospec_app import command
from picospec_app.plan import SHARED, read_plan


@pytest.fixture
def no_model(monkeypatch):
    """A run that would load a model fails the test: the refusal must come first."""
    def loaded(*args, **kwargs):
        pytest.fail("a model was loaded before the refusal")

    monkeypatch.setattr(command, "load_model", loaded)


@pytest.mark.parametrize("argv, env, line", [
    (["--method", "greedy", "--temperature", "0.8"], {},
     "--method greedy is greedy-only (exact at --temperature 0)"),
    (["--batch_memory", "5"], {}, "--batch_memory sets the memory of --batch's rows"),
    (["--target", "ngram"], {}, "--target ngram: the n-gram model drafts only"),
    (["--method", "cascade", "--draft2", "tiny-target"], {},
     "--draft2 tiny-target is the target itself"),
    (["--prompt", ""], {}, "the prompt is empty"),
    (["--K", "0"], {}, "--K must be >= 1; got 0"),
    (["--method", "medusa", "--K", "3"], {}, "--K is an option of"),
    ([], {"PICOSPEC_OFFLINE": "maybe"}, "PICOSPEC_OFFLINE='maybe': set it to 1"),
    (["--offline"], {"PICOSPEC_THREADS": "0"}, "PICOSPEC_THREADS='0'"),
    (["--target", " "], {}, "--target is empty: name a model"),
    (["--draft", ""], {}, "--draft is empty: name a model"),
    (["--method", "cascade", "--draft2", " "], {}, "--draft2 is empty: name a model"),
    (["--method", "rest", "--build_datastore"], {}, "--build_datastore builds the file"),
    (["--method", "rest", "--datastore", "."], {}, "--datastore . is a folder: give a .npz file"),
])
def test_every_refusal_without_a_model_comes_from_the_plan(argv, env, line, no_model,
                                                           monkeypatch):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValueError) as refused:  # UsageError is a ValueError
        command.main(argv)
    assert line in str(refused.value)


@pytest.mark.parametrize("argv, env, offline", [
    ([], {}, False), (["--offline"], {}, "--offline"), ([], {"PICOSPEC_OFFLINE": "1"},
                                                       "PICOSPEC_OFFLINE"),
    (["--no-offline"], {"PICOSPEC_OFFLINE": "1"}, False), (["--offline"], {"PICOSPEC_OFFLINE":
                                                                           "0"}, "--offline"),
])
def test_what_asked_for_no_network_is_settled_in_the_plan(argv, env, offline, monkeypatch):
    monkeypatch.delenv("PICOSPEC_OFFLINE", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert read_plan(argv).offline == offline


def test_the_plan_holds_the_method_options_sampling_and_order():
    plan = read_plan(["--method", "medusa", "--tree", "chain", "--temperature", "0.5",
                      "--top_k", "7"])
    assert plan.method is TABLE["medusa"] and plan.draft is None
    assert plan.options == {**defaults(TABLE["medusa"]), "tree": "chain"}
    assert plan.sampling == {"temperature": 0.5, "top_k": 7, "top_p": None}
    assert plan.order == ("autoregressive", "medusa") and plan.notes == ()
    assert read_plan(["--method", "autoregressive"]).order == ("autoregressive",)
    assert read_plan(["--method", "medusa", "--help"]) is None


def test_help_says_what_the_command_does(capsys):
    """--help's description is the command's (decode with a method and autoregressively), not the
    plan module's docstring."""
    assert read_plan(["--help"]) is None
    about = " ".join(capsys.readouterr().out.split("\n\n")[1].split())  # below the usage line
    assert about.startswith("Decode a prompt with a speculative method and with plain "
                            "autoregressive decoding"), about
    assert "command line read once" not in about


def test_an_option_whose_help_says_its_default_gets_no_second_one(capsys):
    """--help: an option whose help already says what it does when not given (--runs: "about a
    second of measurement", --threads, --batch_memory, --progress) shows that one default, not a
    second "(default: ...)" that contradicts it."""
    assert read_plan(["--help"]) is None
    entries = {e.split()[0].rstrip(","): " ".join(e.split())
               for e in re.split(r"\n  (?=-)", capsys.readouterr().out)}
    described = [o.name for o in SHARED if "(default: " in o.help]
    assert {"runs", "threads", "batch_memory", "progress"} <= set(described)
    for name in described:
        assert entries[f"--{name}"].count("default: ") == 1, entries[f"--{name}"]


def test_notes_are_made_in_the_plan_and_printed_before_loading():
    cpus = len(os.sched_getaffinity(0))
    notes = read_plan(["--top_k", "5", "--threads", str(cpus + 1)]).notes
    assert [n.split(" ")[1] for n in notes] == ["--top_k", str(cpus + 1)]
    assert "no effect at --temperature 0" in notes[0] and "oversubscribe" in notes[1]


@pytest.mark.parametrize("cpus, note", [
    (1, "note: 2 BLAS threads oversubscribe the 1 CPU this process may use: each forward waits on "
        "threads that share a core (slower, often many times); give --threads 1"),
    (2, "note: 3 BLAS threads oversubscribe the 2 CPUs this process may use: each forward waits on "
        "threads that share a core (slower, often many times); give --threads 2 or fewer"),
    (4, "note: 5 BLAS threads oversubscribe the 4 CPUs this process may use: each forward waits on "
        "threads that share a core (slower, often many times); give --threads 4 or fewer")])
def test_the_oversubscription_note_on_one_cpu_and_on_several(monkeypatch, cpus, note):
    """One usable CPU (a container's --cpus=1, taskset -c 0): "the 1 CPU", and no "1 or fewer"
    (no fewer is allowed); the CPUs counted are the plan's usable ones, within a CPU quota."""
    from picospec_app import plan

    monkeypatch.setattr(plan, "usable_cpus", lambda: (set(range(8)), cpus))
    assert read_plan(["--threads", str(cpus + 1)]).notes == (note,)
    assert read_plan(["--threads", str(cpus)]).notes == ()


def json_of(argv):
    out = io.StringIO()
    with redirect_stdout(out):
        command.main(argv + ["--json", "--runs", "1", "--n_tokens", "3"])
    return json.loads(out.getvalue())


def test_one_json_shape_for_one_prompt_and_for_a_batch(tmp_path):
    (tmp_path / "p.txt").write_text("def f(x):\nimport os\n")
    one, batch = json_of(["--prompt", "def f(x):"]), json_of(["--batch", str(tmp_path / "p.txt")])
    assert set(one) == set(batch)
    assert [set(r) for r in one["runs"]] == [set(r) for r in batch["runs"]]
    assert len(one["prompts"]) == len(one["same_output"]) == len(one["runs"][1]["texts"]) == 1
    assert len(batch["prompts"]) == len(batch["same_output"]) == len(batch["runs"][1]["texts"]) == 2
    assert one["groups"] == [1] and batch["groups"] == [2]
    assert one["cost_model"]["E"] > 0 and batch["cost_model"] is None


@pytest.mark.parametrize("argv, name, value", [
    (["--method", "specinfer", "--expansion", "2,1"], "expansion", [2, 1]),
    (["--method", "specinfer"], "expansion", list(defaults(TABLE["specinfer"])["expansion"])),
    (["--method", "sequoia", "--acceptance", "0.5,0.25"], "acceptance", [0.5, 0.25]),
])
def test_the_json_options_hold_every_option_of_the_method(argv, name, value):
    """Options given as lists (--expansion, --acceptance) are in the --json object's "options"
    with the others, not left out."""
    options = json_of(argv)["options"]
    assert set(options) == {o.name for o in TABLE[argv[1]].options}
    assert options[name] == value


@pytest.mark.parametrize("argv, settled", [
    (["--method", "layer_skip"], {"K": int, "skip": str, "threshold": float}),
    (["--method", "early_exit"], {"K": int, "exit_layer": int, "adapter": bool}),
    (["--method", "medusa"], {"posterior": "greedy"}),  # auto at temperature 0
    (["--method", "medusa", "--temperature", "0.7"], {"posterior": "lossless"}),
    (["--method", "sequoia"], {"acceptance": list}),
    (["--method", "eagle3"], {"draft_vocab": int}),
])
def test_the_json_options_are_those_the_run_decoded_with(argv, settled):
    """An option left to be settled (None, --posterior auto) is reported as what the run took:
    the searched --K and --threshold, the skip set, the exit layer, Sequoia's measured vector,
    EAGLE-3's draft vocabulary; a reader of --json can rerun with them."""
    from picospec.methods import TABLE, settled as settle

    options = json_of(argv)["options"]
    for name, want in settled.items():
        assert (isinstance(options[name], want) and options[name] is not None
                if isinstance(want, type) else options[name] == want), (name, options)
    assert set(options) == {o.name for o in TABLE[argv[1]].options}
    assert settle(TABLE["speculative"], {"K": 3}, {}) == {"K": 3}  # given: as given


def test_the_help_of_escapes_names_every_prompt_it_decodes(tmp_path):
    """--escapes decodes \\n in --prompt, in --prompt_file's text and in --batch lines: its help
    names each of them (it named --prompt and --batch only)."""
    path = tmp_path / "p.txt"
    path.write_text("a\\nb")
    decoded = [name for name, argv in (("--prompt", ["--prompt", "a\\nb"]),
                                       ("--prompt_file", ["--prompt_file", str(path)]),
                                       ("--batch", ["--batch", str(path)]))
               if read_plan([*argv, "--escapes"]).prompts == ["a\nb"]]
    assert decoded == ["--prompt", "--prompt_file", "--batch"]
    text = next(o.help for o in SHARED if o.name == "escapes")
    assert all(name in text for name in decoded), text


@pytest.mark.parametrize("argv, said", [
    (["--top_k", "5"], ("--top_k has no effect at", "; it applies when sampling")),
    (["--top_p", "0.9"], ("--top_p has no effect at", "; it applies when sampling")),
    (["--top_k", "5", "--top_p", "0.9"],
     ("--top_k and --top_p have no effect at", "; they apply when sampling"))])
def test_the_filters_note_agrees_with_how_many_were_given(argv, said):
    (note,) = read_plan(argv).notes
    assert all(words in note for words in said), note


@pytest.mark.parametrize("argv, noted", [(["--seed", "7"], True),
                                          (["--seed", "7", "--temperature", "0.5"], False),
                                          (["--temperature", "0"], False)])
def test_a_seed_at_temperature_0_is_noted(argv, noted):
    """Greedy decoding draws nothing (every method: the same tokens and calls whatever the seed),
    so --seed given at temperature 0 gets a note; a seed left to its default does not."""
    notes = [n for n in read_plan(argv).notes if "--seed" in n]  # temperature 0 by default
    assert notes == (["note: --seed has no effect at --temperature 0 (greedy decoding draws "
                      "nothing); it seeds the sampling, at --temperature > 0"] if noted else [])


def test_a_seed_at_temperature_0_is_noted_as_drawing_what_the_row_draws():
    """Lookahead draws its first window of guesses from the seed at temperature 0 too: the
    tokens stay, its calls move."""
    (note,) = [n for n in read_plan(["--method", "lookahead", "--seed", "3"]).notes
               if "--seed" in n]
    assert note == ("note: --seed changes no token at --temperature 0 (greedy decoding); it draws "
                    "lookahead's first window of guesses (prompt tokens), so its calls and "
                    "acceptance move with it")


@pytest.mark.parametrize("argv, said", [
    (["--posterior", "typical"], ["--posterior typical has no effect at --temperature 0"]),
    (["--posterior", "nucleus", "--nucleus_p", "0.5"],
     ["--posterior nucleus has no effect at", "--nucleus_p has no effect here"]),
    (["--epsilon", "0.2", "--temperature", "0.7"], ["--epsilon has no effect here: it is the "
                                                    "typical posterior's"]),
    (["--delta", "0.2", "--posterior", "nucleus", "--temperature", "0.7"],
     ["--delta has no effect here"]),
    (["--posterior", "typical", "--epsilon", "0.2", "--delta", "0.5", "--temperature", "0.7"],
     []),
    (["--posterior", "nucleus", "--nucleus_p", "0.5", "--temperature", "0.7"], []),
    (["--posterior", "lossless"], [])])
def test_a_posterior_or_threshold_that_does_nothing_is_noted(argv, said):
    """At temperature 0 every Medusa posterior but lossless takes the argmax; epsilon and delta
    serve the typical posterior alone, nucleus_p the nucleus one."""
    notes = read_plan(["--method", "medusa", *argv]).notes
    assert len(notes) == len(said) and all(w in n for w, n in zip(said, notes)), notes


@pytest.mark.parametrize("argv, said", [
    (["--method", "eagle", "--tree", "chain", "--nodes", "3"], "--nodes has no effect here"),
    (["--method", "eagle", "--tree", "[[0],[0,0]]", "--depth", "3"], "--depth has no effect here"),
    (["--method", "eagle", "--candidates", "topk"], "--candidates has no effect here: temperature"),
    (["--method", "layer_skip", "--alpha", "0.5", "--no-adaptive"], "--alpha has no effect here"),
    (["--method", "specinfer", "--draft2", "tiny-draft"], "--draft2 has no effect here: it is the "
                                                          "second drafter of --merge"),
    (["--method", "eagle", "--tree", "chain", "--depth", "3"], None),
    (["--method", "eagle", "--nodes", "3", "--candidates", "topk", "--temperature", "1"], None),
    (["--method", "layer_skip", "--alpha", "0.5"], None),
    (["--method", "specinfer", "--merge", "--draft2", "tiny-draft"], None),
    (["--method", "specinfer", "--no-merge"], None),  # --draft2 left at its default: no note
    # a value past what the others let it reach: the run is the one at the largest that counts
    (["--method", "eagle2", "--total_tokens", "100"],
     "note: --total_tokens 100 is more than the 68 nodes --depth 5 and --tree_top_k 4 draft (4 + 4 "
     "x 4 x 4): every one is kept, as at --total_tokens 68"),
    (["--method", "eagle3", "--depth", "2", "--tree_top_k", "3", "--total_tokens", "13"],
     "more than the 12 nodes --depth 2 and --tree_top_k 3 draft (3 + 1 x 3 x 3)"),
    (["--method", "eagle3", "--depth", "2", "--tree_top_k", "3", "--total_tokens", "12"], None),
    (["--method", "medusa", "--tree", "chain", "--topk", "2"],
     "note: --topk 2 offers more candidates than --tree chain reads: its paths use rank 0 alone, "
     "so the run is the one at --topk 1"),
    (["--method", "medusa", "--tree", "[[0],[0,4]]", "--topk", "6"], "ranks 0..4, so the run is "
                                                                     "the one at --topk 5"),
    (["--method", "medusa", "--tree", "cartesian", "--topk", "3"], "ranks 0..1"),
    (["--method", "medusa", "--tree", "[[0],[0,4]]", "--topk", "5"], None),
    (["--method", "medusa", "--topk", "100"], None),  # the heads' own tree: read as they load
    (["--method", "cascade", "--K", "4", "--K_inner", "8"],
     "note: --K_inner 8 runs as --K_inner 3: a --draft review call checks at most --K - 1 = 3"),
    (["--method", "cascade", "--K", "4", "--K_inner", "4"],
     "note: --K_inner 4 runs as --K_inner 3"),
    (["--method", "cascade", "--K", "4", "--K_inner", "3"], None),
    (["--method", "cascade", "--K", "1", "--K_inner", "2"], "--K_inner 2 has no effect at --K 1"),
    (["--method", "cascade", "--K_inner", "0", "--K_tail", "0", "--draft2", "tiny-draft"],
     "note: --draft2 has no effect here: --K 4, --K_inner 0 and --K_tail 0 leave it no token"),
    (["--method", "cascade", "--K_tail", "0", "--draft2", "tiny-draft"], None)])
def test_a_method_option_the_others_void_is_noted(argv, said):
    """An option whose value the method's other options (or temperature 0) leave unread: a note,
    and none where it is read or was not given."""
    notes = read_plan(argv).notes
    assert list(notes) == ([] if said is None else [notes[0]]) and (said is None
                                                                      or said in notes[0]), notes


class Stream(io.StringIO):
    def __init__(self, tty):
        super().__init__()
        self.tty = tty

    def isatty(self):
        return self.tty


@pytest.mark.parametrize("progress, stderr, json_, stdout, wanted", [
    (None, True, False, False, True),  # text to a pipe, a terminal for stderr: bars
    (None, True, True, False, False),  # --json to a pipe: no bars among its reader's input
    (None, True, True, True, True),  # --json on a terminal
    (None, False, False, True, False),  # stderr to a file
    (True, False, True, False, True), (False, True, False, True, False)])  # as asked
def test_progress_bars_on_a_terminal_and_never_for_json_to_a_pipe(monkeypatch, progress, stderr,
                                                                   json_, stdout, wanted):
    import sys

    from picospec_app.plan import progress_wanted

    monkeypatch.setattr(sys, "stderr", Stream(stderr))
    monkeypatch.setattr(sys, "stdout", Stream(stdout))
    assert progress_wanted({"progress": progress, "json": json_}) is wanted


def test_same_model_by_name_and_by_folder(tmp_path):
    from picospec_app.plan import same_model

    (tmp_path / "m").mkdir()
    assert same_model("tiny-target", "tiny-target") and not same_model("tiny-target", "tiny-draft")
    assert not same_model("gpt2", "gpt2-medium")
    assert same_model(str(tmp_path / "m"), f"{tmp_path / 'm'}/")  # one folder, spelt twice


def test_a_model_name_too_long_for_a_path_is_not_the_target():
    """--draft2 of 300 letters: no file can have that name (the system refuses to look it up), so
    it is a repo id, not the target, and the plan is made; the lookup's error is no traceback."""
    plan = read_plan(["--method", "cascade", "--draft2", "x" * 300])
    assert plan.options["draft2"] == "x" * 300


def test_a_prompt_may_fill_the_context_window_exactly():
    from types import SimpleNamespace

    from picospec_app.plan import check_length
    from picospec_cli import UsageError

    models, names = {"target": SimpleNamespace(n_ctx=16)}, {"target": "tiny-target"}
    check_length([1] * 10, 6, models, names)  # 10 + 6 = 16 tokens: they fit
    with pytest.raises(UsageError, match=r"^the prompt \(10 tokens\) plus --n_tokens 7 exceeds "
                                         r"the context window of the target 'tiny-target', 16"):
        check_length([1] * 10, 7, models, names)


def test_check_loaded_measures_every_prompt_against_the_target_and_the_draft():
    """check_loaded: each prompt against the target's and the draft's context windows (a draft of
    8 positions refuses 5 + 4 tokens the target of 16 takes), the row named as in messages; other
    loaded things (a second drafter with no window) are not models to measure."""
    from types import SimpleNamespace

    from picospec_app.plan import check_loaded
    from picospec_cli import UsageError

    plan = read_plan(["--n_tokens", "4"])
    loaded = {"target": SimpleNamespace(n_ctx=16), "draft": SimpleNamespace(n_ctx=8),
              "draft2": object()}
    assert check_loaded(plan, [[1] * 4], loaded) is None  # 4 + 4 = 8: fits both; no --batch
    with pytest.raises(UsageError, match=r"^the prompt \(5 tokens\) plus --n_tokens 4 exceeds "
                                         r"the context window of the draft 'tiny-draft', 8 "):
        check_loaded(plan, [[1] * 5], loaded)


def test_the_rest_cache_is_checked_for_rest_only_and_only_without_a_datastore(monkeypatch):
    """REST builds its datastore into the cache: its folder is checked before any model loads,
    for --method rest with no --datastore only."""
    from picospec_app import plan

    checked = []
    monkeypatch.setattr(plan, "check_cache_dir", checked.append)
    read_plan(["--method", "rest"])
    assert checked == ["rest"]
    read_plan([])
    assert checked == ["rest"]


def test_no_colours_for_a_pipe(monkeypatch):
    import sys

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setattr(sys, "stdout", Stream(False))
    assert read_plan([]).color is False
    monkeypatch.setattr(sys, "stdout", Stream(True))
    assert read_plan([]).color is True


@pytest.mark.parametrize("option, taken, refused", [
    ("n_tokens", ["1"], ["0"]), ("top_k", ["1"], ["0"]),
    ("top_p", ["1", "1e-9"], ["0", "1.000001"]),  # a probability mass: more than 0, at most 1
    ("seed", ["0"], ["-1"]),  # numpy.random.Generator's seeds are not negative
    ("threads", ["1", "256"], ["0", "257"]),  # as PICOSPEC_THREADS: 1..256
    ("runs", ["1"], ["0", "1000000"]),  # a million timed rounds: hours, refused at once
    ("batch_memory", ["1"], ["0"])])
def test_the_bounds_of_the_shared_options_at_their_edges(tmp_path, option, taken, refused):
    from picospec_cli import UsageError

    (tmp_path / "p.txt").write_text("def f(x):\n")
    batch = ["--batch", str(tmp_path / "p.txt")] if option == "batch_memory" else []
    for value in taken:
        assert read_plan([f"--{option}", value, *batch]) is not None
    for value in refused:
        with pytest.raises(UsageError, match=f"^--{option} must be "):
            read_plan([f"--{option}", value, *batch])


@pytest.mark.parametrize("argv0, name", [
    ("main.py", "python main.py"), ("bench/../main.py", "python bench/../main.py"),
    ("/usr/local/bin/picospec", "picospec"), ("/opt/bin/picospec.exe", "picospec"),
    ("", "python main.py"), (None, "python main.py")])
def test_the_usage_line_names_the_command_as_typed(monkeypatch, argv0, name):
    import sys

    from picospec_app.plan import program

    monkeypatch.setattr(sys, "argv", [] if argv0 is None else [argv0, "--help"])
    assert program() == name


@pytest.mark.parametrize("method, option", [("medusa", "K"), ("autoregressive", "K")])
def test_another_methods_option_names_what_this_method_takes(method, option):
    from picospec_cli import UsageError

    own = TABLE[method].options
    takes = ", ".join(f"--{o.name}" for o in own) if own else "no options of its own"
    with pytest.raises(UsageError, match=f"not of --method {method} \\(which takes {takes}\\)$"):
        read_plan(["--method", method, f"--{option}", "3"])


def test_the_readmes_demo_is_a_run_of_the_defaults():
    """README's demo, `python main.py --method speculative --K 4`, shows what the command does
    when nothing else is given: its count of new tokens, text rather than JSON, a prompt its texts
    begin with, greedy decoding ("temperature 0: they must be identical") and the built-in pair
    named beside the command."""
    import shlex
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    demo = readme.split("<!-- demo:begin", 1)[1].split("<!-- demo:end", 1)[0]
    command_line = re.search(r"^\$ (python main\.py .*)$", demo, flags=re.M)[1]
    plan = read_plan(shlex.split(command_line)[2:])
    counts = re.findall(r"^(\d+) tokens in ", demo, flags=re.M)
    assert len(counts) == 2 and {int(n) for n in counts} == {plan.n_tokens}
    assert not plan.json  # the demo's text: a rule naming each decoder, not one JSON object
    text = demo.split("── autoregressive ", 1)[1].split("\n", 1)[1]
    assert text.startswith(plan.prompts[0]) and plan.prompts[0].strip()
    assert "(temperature 0: they must be identical)" in demo
    assert plan.sampling == {"temperature": 0, "top_k": None, "top_p": None}
    pair = re.search(rf"`{re.escape(command_line)}` \(built-in `([\w-]+)` \+ `([\w-]+)`", readme)
    assert (plan.target, plan.draft) == pair.groups()


def documented_methods():
    """docs/methods.md's method table -> {method: (what it needs, its law at temperature > 0)}."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "methods.md").read_text()
    table = text.split("<!-- methods:begin", 1)[1].split("\n\n", 1)[0]  # the first table
    rows = [[cell.strip() for cell in line.strip("|").split("|")]
            for line in table.splitlines() if line.startswith("| `")]
    return {row[0].strip("`"): (row[3], row[4]) for row in rows}


def test_draft_for_a_method_without_one_names_the_methods_that_use_one():
    """--draft given to a method that loads no draft model: the refusal names the methods whose
    "needs" in docs/methods.md include a draft model, in the table's order."""
    from picospec_cli import UsageError

    users = ", ".join(m for m, (needs, _) in documented_methods().items()
                      if "draft" in needs.split(", "))
    assert users.startswith("speculative, greedy, ")
    with pytest.raises(UsageError) as refused:
        read_plan(["--method", "prompt_lookup", "--draft", "ngram"])
    assert str(refused.value) == ("--method prompt_lookup uses no draft model, so --draft does not "
                                  f"apply (it is for {users})")


def test_the_method_list_tags_the_methods_that_are_not_lossless():
    """-h's list of methods: a greedy-only method's line ends with [greedy-only], a lossy one's with
    [lossy], as docs/methods.md's law column says; a lossless one's, and one whose law depends on
    its options, with its help alone."""
    from picospec_app.plan import method_list

    laws = documented_methods()
    lines = method_list().splitlines()
    assert [line.split()[0] for line in lines] == list(laws)
    for line, law in zip(lines, (law for _, law in laws.values())):
        tag = f" [{law}]" if law in ("greedy-only", "lossy") else ""
        assert line.endswith(tag) and not line.removesuffix(tag).endswith("]"), line
    assert sum(line.endswith(" [greedy-only]") for line in lines) >= 2  # greedy and blockwise


def test_the_method_list_lines_up_the_help_of_every_method():
    from picospec.methods import METHODS
    from picospec_app.plan import method_list

    lines = method_list().splitlines()
    assert len(lines) == len(METHODS)
    assert len({line.index(m.help) for line, m in zip(lines, METHODS)}) == 1


def test_batch_lines_by_hand(tmp_path):
    """--batch --escapes on a file of 5 lines, the second blank: lines end at \\n or \\r\\n only (a
    lone \\r, a form feed and U+2028 stay in their line), the blank line is skipped, each prompt is
    its own line decoded, and each name gives its line number in the file."""
    path = tmp_path / "p.txt"
    path.write_bytes("a\\tb\n\nx\ry\x0cz\u2028w\r\nlast\n".encode())
    plan = read_plan(["--batch", str(path), "--escapes"])
    assert plan.prompts == ["a\tb", "x\ry\x0cz\u2028w", "last"]
    assert plan.names == [f"the prompt on line {n} of {path}" for n in (1, 3, 4)]


def test_batch_from_standard_input_and_a_closed_one(monkeypatch, tmp_path):
    """--batch - reads standard input, its prompts named by line "of standard input"; with standard
    input closed (None), --batch - and --prompt_file - are refused in one line, while a --batch
    file is read as ever."""
    import sys

    from picospec_cli import UsageError

    monkeypatch.setattr(sys, "stdin", io.StringIO("def f(x):\n\nimport os\n"))
    plan = read_plan(["--batch", "-"])
    assert plan.prompts == ["def f(x):", "import os"]
    assert plan.names == ["the prompt on line 1 of standard input",
                          "the prompt on line 3 of standard input"]
    monkeypatch.setattr(sys, "stdin", None)
    for flag in ("--batch", "--prompt_file"):
        with pytest.raises(UsageError, match=f"^{flag} -: standard input is closed; pipe "):
            read_plan([flag, "-"])
    (tmp_path / "p.txt").write_text("x = 1\n")
    assert read_plan(["--batch", str(tmp_path / "p.txt")]).prompts == ["x = 1"]


def test_a_prompt_file_past_the_bound_is_refused_naming_it(monkeypatch, tmp_path):
    """--prompt_file and --batch read at most MOST_TEXT characters (here 10), a file's or standard
    input's: the bound itself is read, one character past it is refused in one line (an endless
    /dev/zero too, not read until memory runs out)."""
    import sys

    from picospec_app import plan
    from picospec_cli import UsageError

    monkeypatch.setattr(plan, "MOST_TEXT", 10)
    (tmp_path / "ten.txt").write_text("def f(x):\n")
    (tmp_path / "eleven.txt").write_text("def fg(x):\n")
    assert read_plan(["--prompt_file", str(tmp_path / "ten.txt")]).prompts == ["def f(x):\n"]
    assert read_plan(["--batch", str(tmp_path / "ten.txt")]).prompts == ["def f(x):"]
    for flag in ("--prompt_file", "--batch"):
        for path, stdin in ((str(tmp_path / "eleven.txt"), None), ("-", "def fg(x):\n"),
                            ("/dev/zero", None)):
            monkeypatch.setattr(sys, "stdin", io.StringIO(stdin or ""))
            with pytest.raises(UsageError) as refused:
                read_plan([flag, path])
            assert str(refused.value) == (
                f"{flag} {path}: more than 10 characters (is it endless?); a prompt is a few "
                f"thousand at most (GPT-2 reads 1,024 tokens): name the file of the prompt"
                + "s" * (flag == "--batch"))
        monkeypatch.setattr(sys, "stdin", io.StringIO("def f(x):\n"))
        assert read_plan([flag, "-"]).prompts == [
            "def f(x):\n" if flag == "--prompt_file" else "def f(x):"]


def test_a_byte_order_mark_is_no_text(tmp_path):
    """A file saved with a UTF-8 byte order mark (as some editors do): the mark is not the first
    character of the prompt, nor of --batch's first line."""
    path = tmp_path / "p.txt"
    path.write_bytes(b"\xef\xbb\xbfdef f(x):\n")
    assert read_plan(["--prompt_file", str(path)]).prompts == ["def f(x):\n"]
    assert read_plan(["--batch", str(path)]).prompts == ["def f(x):"]


def test_a_file_that_cannot_be_read_is_named_with_the_systems_reason(monkeypatch, tmp_path):
    """An OSError while reading (a failing disk): one line with the system's words for it, else
    the error itself where it has none."""
    import errno

    from picospec_app import plan
    from picospec_cli import UsageError

    path = tmp_path / "p.txt"
    path.write_text("x = 1\n")
    for error, said in ((OSError(errno.EIO, "Input/output error"), "Input/output error"),
                        (OSError("no words"), "no words")):
        def failing(*args, error=error, **kwargs):
            raise error

        monkeypatch.setattr(plan, "open", failing, raising=False)
        for flag in ("--prompt_file", "--batch"):
            with pytest.raises(UsageError) as refused:
                read_plan([flag, str(path)])
            assert str(refused.value) == f"{flag} {path}: cannot read it ({said})"


@pytest.mark.parametrize("argv, noted", [
    (["--draft", "tiny-target"], True),
    (["--method", "cascade", "--draft", "gpt2/assets/tiny-target/"], True),  # one folder, named so
    (["--method", "specinfer", "--target", "tiny-draft", "--draft", "tiny-draft"], True),
    (["--target", "tiny-draft"], True),  # the default draft: the note names the n-gram alone
    (["--draft", "tiny-draft"], False),
    (["--draft", "ngram"], False)])
def test_a_draft_that_is_the_target_is_noted(argv, noted):
    """A draft that is the target itself has every draft accepted, yet each costs a target call:
    a note says so and names smaller drafts."""
    notes = [n for n in read_plan(argv).notes if "is the target itself" in n]
    assert len(notes) == noted and all(n.startswith("note: --draft ") and "slower than "
                                       "autoregressive decoding" in n for n in notes), notes
    if "--target" in argv:
        assert notes[0].endswith("give a smaller draft (ngram)"), notes


@pytest.mark.parametrize("argv, said", [
    (["--temperature", "1", "--top_p", "1"], "note: --top_p 1 keeps the whole law"),
    (["--temperature", "0.7", "--top_k", "1", "--top_p", "0.5"],
     "note: --top_p has no effect with --top_k 1"),
    (["--temperature", "1", "--top_p", "0.99"], None),
    (["--temperature", "1", "--top_k", "2", "--top_p", "0.5"], None)])
def test_a_filter_that_keeps_the_whole_law_is_noted(argv, said):
    """When sampling, a nucleus of mass 1, or one taken after top-k has left one token, cuts
    nothing: a note says so."""
    notes = [n for n in read_plan(argv).notes if "--top_" in n]
    assert notes == [] if said is None else len(notes) == 1 and notes[0].startswith(said), notes
