"""The method table: every row runs through one call and one step record, equals autoregressive
decoding at temperature 0 on the built-in target, refuses to sample when it is greedy-only, and
documents itself in the README."""
from pathlib import Path

import numpy as np
import pytest

from picospec_app.run import run_method, summary
from picospec_cli import check_value
from gpt2.load import load_model
from picospec.methods import METHODS, TABLE, call, check_temperature, defaults, find, law, markdown
from picospec.rest import Datastore
from tests.support.methods import needs_of

ROOT = Path(__file__).resolve().parents[2]
SHARED_NAMES = {"method", "prompt", "prompt_file", "escapes", "n_tokens", "temperature", "top_k",
                "top_p", "seed",
                "target", "draft", "device", "offline", "json", "batch", "help", "runs", "threads"}
RECORD = {"drafted", "nodes", "accepted", "tokens", "origins", "calls"}


@pytest.fixture(scope="module")
def models():
    from picospec_app.load import load_heads

    target, encoder = load_model("tiny-target")
    text = ("def read_lines(path):\n    with open(path) as f:\n        return "
            "f.read().splitlines()\n" * 3)
    store = Datastore.build(np.array(encoder.encode(text), dtype=np.uint16))
    loaded = {"target": target, "draft": load_model("tiny-draft")[0], "datastore": store}
    heads = {kind: load_heads("tiny-target", kind, None, target)
             for kind in ("medusa", "blockwise", "eagle", "eagle3")}
    return loaded, heads, encoder


def test_rows_are_well_formed():
    assert len(TABLE) == len(METHODS) and "autoregressive" in TABLE
    for m in METHODS:
        names = [o.name for o in m.options]
        assert len(set(names)) == len(names) and not set(names) & (SHARED_NAMES - {"K"}), m.name
        assert all(a in {"x", "N", "rng", "target", "draft", "draft2", "heads", "datastore"}
                   | set(names) for a in m.args)
        assert law(m, defaults(m)) in ("lossless", "greedy", "lossy") and m.help and m.paper
        assert (m.instead is not None) == (m.law == "greedy" or callable(m.law)), m.name
        for o in m.options:  # every default passes its own option's checks
            if o.default is not None and not o.load:
                check_value(o, o.default)
        if any(o.type is int for o in m.options):
            assert all(o.low is not None for o in m.options if o.type is int), m.name


def test_find_suggests_the_nearest_name():
    assert find("medusa") is TABLE["medusa"]
    with pytest.raises(ValueError, match="did you mean lookahead"):
        find("lookahed")


@pytest.mark.parametrize("name", [m.name for m in METHODS])
def test_every_row_equals_autoregressive_at_temperature_zero(name, models):
    method, (_, _, encoder) = TABLE[name], models
    x = encoder.encode("import os\n\n\ndef list_files(path):\n    return [")
    base = run_method("autoregressive", x, {"target": models[0]["target"]}, 24, 0,
                      {"temperature": 0})
    run = run_method(method, x, needs_of(method, models), 24, 0, {"temperature": 0})
    assert run["output"] == base["output"]
    # another seed changes no token; nor, where the row draws nothing at temperature 0 (no
    # `seeded`), a call or a step (main.py's note on --seed says so)
    other = run_method(method, x, needs_of(method, models), 24, 7, {"temperature": 0})
    assert other["output"] == base["output"]
    if method.seeded is None:
        assert (other["target_calls"], other["stats"]) == (run["target_calls"], run["stats"])
    # one step record, the same keys for every method, consistent with itself
    for s in run["stats"]:
        assert set(s) == RECORD and len(s["tokens"]) == len(s["origins"]) >= 1
        assert s["accepted"] == s["origins"].count("draft") <= s["drafted"] <= s["nodes"]
        assert set(s["origins"]) <= {"draft", "resample", "bonus", "target"}
    assert sum(len(s["tokens"]) for s in run["stats"]) == 24
    # calls counted by the step = calls made
    assert sum(s["calls"] for s in run["stats"]) == run["target_calls"]
    assert summary(run["stats"])["accepted"] == sum(o == "draft" for s in run["stats"]
                                                    for o in s["origins"])


@pytest.mark.parametrize("name", [m.name for m in METHODS if law(m, defaults(m)) != "greedy"])
def test_sampling_rows_run_at_temperature_one(name, models):
    method, x = TABLE[name], [5, 6, 7, 8]
    run = run_method(method, x, needs_of(method, models), 12, 1, {"temperature": 1.0, "top_k": 50})
    assert len(run["output"]) == len(x) + 12


def test_greedy_only_rows_refuse_to_sample(models):
    greedy = [m for m in METHODS if law(m, defaults(m)) == "greedy"] + [TABLE["medusa"]]
    assert {m.name for m in greedy} >= {"greedy", "blockwise", "medusa"}
    for m in greedy:
        options = {**defaults(m), **({"posterior": "greedy"} if m.name == "medusa" else {})}
        check_temperature(m, options, 0.0)  # fine at temperature 0
        with pytest.raises(ValueError, match=f"greedy-only.*--method {m.instead}"):
            call(m, [1, 2], 4, np.random.default_rng(0), needs_of(m, models), {"temperature": 0.5},
                 options)


def test_medusa_warps_with_top_p_like_every_method(models):
    """--top_p reaches the target's law (it was once taken as the nucleus posterior's threshold
    instead)."""
    x = [5, 6, 7, 8]
    runs = [run_method("medusa", x, needs_of(TABLE["medusa"], models), 16, 3,
                       {"temperature": 1.0, "top_p": p},
                       posterior="lossless")["output"] for p in (None, 1e-6)]
    greedy = run_method("autoregressive", x, {"target": models[0]["target"]}, 16, 3,
                        {"temperature": 0})["output"]
    # top_p 1e-6 keeps only the top token: greedy text
    assert runs[1] == greedy and runs[0] != greedy


def test_readme_tables_are_generated_from_the_table():
    from tools.readme import method_summary, section

    assert section((ROOT / "docs"
                    / "methods.md").read_text(encoding="utf-8")) == "\n" + markdown() + "\n"
    assert section((ROOT
                    / "README.md").read_text(encoding="utf-8")) == "\n" + method_summary() + "\n"
    for m in METHODS:
        assert f"`{m.name}`" in markdown() and all(f"`--{o.name}`" in markdown() for o in m.options)


@pytest.mark.parametrize("K", [2, 3])
def test_blockwise_block_size_through_the_table(K, models):
    """--K k runs p_1 and the first k - 1 heads: every block proposes exactly k - 1 tokens (fewer
    only at the end), and the output is still the target's greedy text. A head slice of the wrong
    length ([:K] or all heads) fails."""
    method, (_, _, encoder) = TABLE["blockwise"], models
    x, N = encoder.encode("import os\n\n\ndef list_files(path):\n    return ["), 20
    base = run_method("autoregressive", x, {"target": models[0]["target"]}, N, 0,
                      {"temperature": 0})
    run = run_method(method, x, needs_of(method, models), N, 0, {"temperature": 0}, K=K)
    assert run["output"] == base["output"]
    left = N
    for s in run["stats"]:
        assert s["drafted"] == min(K, left) - 1, (K, s)
        left -= len(s["tokens"])
    too_many = models[1]["blockwise"]["n_heads"] + 2
    with pytest.raises(ValueError, match="blockwise heads"):
        run_method(method, x, needs_of(method, models), N, 0, {"temperature": 0}, K=too_many)


def test_batch_refusal_names_the_batched_rows():
    """Every row has a batched form today; a row without one is refused by --batch with the rows
    that have one."""
    from picospec.methods import batch_refusal

    assert all(batch_refusal(m) is None for m in METHODS)
    message = batch_refusal(TABLE["speculative"]._replace(batch=None))
    assert message.startswith("--batch runs methods with a batched form (autoregressive, ")
    assert message.endswith("--method speculative has none")
