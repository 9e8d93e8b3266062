"""The text of a run (picospec_app/report.py): on a terminal, tokens coloured by origin and the
text itself the same as without colours, characters whose bytes span tokens included; counts of
one in the singular."""
import io
import itertools
import json
import re
from contextlib import redirect_stdout

import numpy as np
import pytest

from gpt2.encoder import load_encoder
from gpt2.load import ASSETS
from picospec_app import command
from picospec_app.report import COLORS, colored

ENCODER = load_encoder(ASSETS / "tiny-target")
CODES = re.compile("\033\\[[0-9]+m")


def test_colored_text_keeps_characters_split_over_tokens_whole():
    """A CJK character, an accent and an emoji are several byte tokens each: the coloured text,
    codes removed, is the plain text (it was one replacement character per token), and each
    character takes the colour of the token that completes it."""
    text = "# 中文 é 🎉 x"
    ids = ENCODER.encode(text)
    assert any("\ufffd" in ENCODER.decode([t]) for t in ids)  # some character spans tokens
    origins = list(itertools.islice(itertools.cycle(["draft", "bonus", "resample", "target"]),
                                    len(ids)))
    shown = colored(ENCODER, ids, origins, True)
    assert CODES.sub("", shown) == text == colored(ENCODER, ids, origins, False)
    for char in "中é🎉":
        last = next(i for i in range(len(ids)) if char in ENCODER.decode(ids[:i + 1]))
        if origins[last] in COLORS:
            assert COLORS[origins[last]] + char in shown, (char, shown)


def test_a_character_over_three_tokens_is_one_span_in_its_last_tokens_colour():
    """x, the three byte tokens of 中 (drafted, drafted, then the bonus token), y: 中 is shown once,
    whole, in the bonus token's blue; the tokens that only begin it add no span (no empty pair
    of codes)."""
    ids = ENCODER.encode("x中y")
    assert len(ids) == 5  # x, three bytes, y
    reset = "\033[0m"
    shown = colored(ENCODER, ids, ["draft", "draft", "draft", "bonus", "resample"], True)
    assert shown == (COLORS["draft"] + "x" + reset + COLORS["bonus"] + "中" + reset
                     + COLORS["resample"] + "y" + reset)


def test_colored_text_of_bytes_that_are_no_character():
    """A lead byte before an ASCII letter and a lone continuation byte: each shown as the plain
    text shows it (a replacement character), nothing lost or added."""
    ids = [ENCODER.encoder[ENCODER.byte_encoder[b]] for b in (0xE4, ord("a"), 0xB8)]
    shown = colored(ENCODER, ids, ["draft"] * 3, True)
    assert CODES.sub("", shown) == ENCODER.decode(ids) == "\ufffda\ufffd"


def text_of(argv):
    out = io.StringIO()
    with redirect_stdout(out):
        command.main(argv)
    return out.getvalue()


def test_counts_of_one_read_in_the_singular(tmp_path):
    """--n_tokens 1 --runs 1: one token, one target call each (no room for a draft), one round:
    "1 token", "1 target call", "1 run", "1 round", and for a one-line --batch "1 prompt" and
    "1 batched target call", not "1 tokens", "median of 1 runs" and the like; each decoder's text
    under a rule that names it."""
    text = text_of(["--n_tokens", "1", "--runs", "1"])
    assert text.count("1 token in ") == 2 and text.count("(1 run, ") == 2, text
    assert text.count("1 target call (1.00 tokens per target call)") == 2, text
    assert "speedup" in text and "(1 round); texts" in text, text
    heads = [line for line in text.splitlines() if line.startswith("── ")]
    assert [re.fullmatch(r"── (\w+) ─+", line)[1] for line in heads] == ["autoregressive",
                                                                        "speculative"], text
    (tmp_path / "one.txt").write_text("x = 1\n")
    batch = text_of(["--batch", str(tmp_path / "one.txt"), "--n_tokens", "1"])
    assert "speculative: 1 prompt x 1 token in " in batch and ", 1 batched target call\n" in batch
    assert "batched the same way: " in batch and batch.count(" 1 batched target call\n") == 2
    for wrong in ("1 tokens", "1 runs", "1 target calls", "1 rounds", "1 prompts"):
        # a count of one, not the last digit of a figure such as "353.1 tokens/s"
        assert not re.search(rf"(?<![\d.]){wrong}\b", text + batch), wrong


def printed_equation(line):
    """The why line's equation as printed -> (its value from the printed figures, the printed
    prediction, the figures the sentence before it printed (c, c_d, r, r_0), the equation's)."""
    m = re.search(r"= ([\d.]+) x ([\d.]+) / \(([^)]*)\) = ([\d.]+)x from this run's own costs",
                  line)
    E, tokens, step, predicted = m[1], m[2], m[3].split(" + "), m[4]
    total = sum(float(a) * float(b) for a, b in (t.split(" x ") for t in step if " x " in t))
    total += sum(float(t) for t in step if " x " not in t)
    said = re.findall(r"(?:c|c_d|c_d2|r|r_0) = ([\d.]+)", line.split("; cost model")[0])
    r_0 = float(said[-1])
    shown = [step[0], *(t.split(" x ")[1] for t in step if " x " in t), step[-1]]
    return float(E) * float(tokens) / total, float(predicted), said[:-1], shown, r_0, tokens


COSTS = [{"E": 1.0, "rest_base": 0.0349, "c": 0.5549, "rest": 0.0449, "drafts": {}},  # 1.75 vs 1.73
         {"E": 4.996, "rest_base": 0.0549, "c": 0.9949, "rest": 0.0049,  # E large, a small step
          "drafts": {"draft": {"per_target_call": 3.996, "c_d": 0.01049},
                     "draft2": {"per_target_call": 2.004, "c_d": 0.00549}}}]


def random_costs(rng):
    names = ["draft", "draft2"][:rng.integers(0, 3)]
    return {"E": 1 + 6 * rng.random(), "rest_base": 0.2 * rng.random(),
            "c": 0.3 + 3 * rng.random(), "rest": 0.6 * rng.random(),
            "drafts": {n: {"per_target_call": 6 * rng.random(), "c_d": 0.3 * rng.random()}
                       for n in names}}


def test_the_cost_models_equation_as_printed_gives_the_prediction_printed():
    """E (1 + r_0) / (c + k c_d + r) evaluated on the figures the why line prints rounds to the
    prediction it prints (at 2 decimals r = 0.0449 and r_0 = 0.0349
    printed 1.00 x 1.03 / (0.55 + 0.04) = 1.75 beside 1.73x), the prediction is the cost model's,
    and the sentence's c, c_d and r are the equation's figures, its r_0 the one in 1 + r_0."""
    from picospec.theory import cost_model_speedup
    from picospec_app.report import cost_line

    rng = np.random.default_rng(0)
    for costs in COSTS + [random_costs(rng) for _ in range(2000)]:
        pairs = [(d["per_target_call"], d["c_d"]) for d in costs["drafts"].values()]
        costs["predicted"] = cost_model_speedup(costs["E"], costs["c"], pairs, costs["rest"],
                                                costs["rest_base"])
        line = cost_line(costs, 1.0)
        value, predicted, said, shown, r_0, tokens = printed_equation(line)
        assert predicted == float(f"{costs['predicted']:.2f}"), line
        # a reader who works the printed equation out gets the printed prediction
        assert f"{value:.2f}" == f"{predicted:.2f}", (value, line)
        # equation_digits' own aim: the printed figures give the prediction within 0.005
        assert abs(value - costs["predicted"]) <= 0.005 + 1e-9, (value, costs["predicted"], line)
        assert said == shown and float(tokens) == pytest.approx(1 + r_0), line
    assert "token r_0 = 0.10; " in cost_line({**COSTS[0], "rest_base": 0.1, "c": 1.0, "rest": 0.1,
                                          "predicted": 1.0}, 1.0)  # 2 when they do
    # the fewest: 1.000 x 1.035 / (0.555 + 0.045) = 1.725 is within 0.005 of 1.0349 / 0.5998 =
    # 1.7254, but a tie a reader may round to 1.72; at 4 decimals 1.0349 / 0.5998 itself
    assert "token r_0 = 0.0349; " in cost_line({**COSTS[0], "predicted": 1.0349 / 0.5998}, 1.0)
    # r = 0.0459: 1.0349 / 0.6008 = 1.7225; at 2 decimals 1.00 x 1.03 / (0.55 + 0.05) = 1.7167,
    # 1.72 but 0.006 off; at 3, 1.000 x 1.035 / (0.555 + 0.046) = 1.7221
    three = {**COSTS[0], "rest": 0.0459, "predicted": 1.0349 / 0.6008}
    assert "token r_0 = 0.035; " in cost_line(three, 1.0), cost_line(three, 1.0)
    # a tie: 1.00 x 1.10 / (0.80 + 0.00) = 1.375, 1.38 in floating point but 1.37 to one who
    # rounds half to even; at 4 decimals 1.1 / 0.7998 = 1.3753
    tie = {"E": 1.0, "rest_base": 0.1, "c": 0.79982, "rest": 0.0, "drafts": {},
           "predicted": 1.1 / 0.79982}
    assert "(c + r) = 1.0000 x 1.1000 / (0.7998 + 0.0000) = 1.38x" in cost_line(tie, 1.0)


def test_the_cost_models_formula_names_k_c_d_only_where_there_are_drafters():
    """The formula before the figures is E (1 + r_0) / (c + k c_d + r) with a drafter (README's
    why line), E (1 + r_0) / (c + r) with none (prompt lookup: no draft calls to count), and a
    term per drafter with two (cascade's --draft2: k_2 calls of c_d2, each named in the
    sentence)."""
    from picospec_app.report import cost_line

    one = {**COSTS[1], "drafts": {"draft": COSTS[1]["drafts"]["draft"]}}
    for costs, formula in zip(COSTS + [one], ["(c + r)", "(c + k c_d + k_2 c_d2 + r)",
                                             "(c + k c_d + r)"]):
        line = cost_line({**costs, "predicted": 1.0}, 1.0)
        assert f"; cost model E (1 + r_0) / {formula} = " in line, line
        assert ("a draft2 call c_d2 = " in line) == ("k_2" in formula), line


def test_the_equation_takes_the_fewest_decimals_that_give_the_prediction():
    """E = 2, r_0 = 0.05, c = 1, one drafter of k = 2 calls of c_d = 0.1, r = 0.1: the prediction
    2 x 1.05 / (1 + 2 x 0.1 + 0.1) = 2.1 / 1.3 = 1.62x is exact at 2 decimals, so the line takes 2
    (c_d 3); c = 0.004 and r = 0 print a step of 0.00 at 2 decimals, which gives no prediction:
    3 decimals, 1 / 0.004 = 250.00x."""
    from picospec_app.report import cost_line

    costs = {"E": 2.0, "rest_base": 0.05, "c": 1.0, "rest": 0.1, "predicted": 2.1 / 1.3,
             "drafts": {"draft": {"per_target_call": 2.0, "c_d": 0.1}}}
    line = cost_line(costs, 1.0)
    assert ("(c + k c_d + r) = 2.00 x 1.05 / (1.00 + 2.00 x 0.100 + 0.10) = 1.62x from this run's "
            "own costs"
            in line), line
    tiny = {"E": 1.0, "rest_base": 0.0, "c": 0.004, "rest": 0.0, "drafts": {}, "predicted": 250.0}
    assert ("(c + r) = 1.000 x 1.000 / (0.004 + 0.000) = 250.00x from this run's own costs"
            in cost_line(tiny, 1.0))
    # a step too small to print at any count of decimals tried: the line still prints, with its
    # prediction
    tinier = {**tiny, "c": 1e-9, "predicted": 1e9}
    assert cost_line(tinier, 1.0).endswith(" = 1000000000.00x from this run's own costs, 1.00x "
                                           "measured")


def test_a_method_with_no_draft_model_prints_no_draft_calls(monkeypatch):
    """Prompt lookup drafts from the prompt, with no draft model: its line gives its acceptance
    but no "0 draft calls" (a count of calls it cannot make); speculative sampling's gives both."""
    monkeypatch.setenv("PICOSPEC_OFFLINE", "1")
    args = ["--n_tokens", "12", "--runs", "1", "--temperature", "0"]
    lookup = text_of(["--method", "prompt_lookup", *args]).splitlines()
    line = next(line for line in lookup if "acceptance" in line)
    assert "draft call" not in line and line.endswith("%"), line
    speculative = text_of(["--method", "speculative", *args]).splitlines()
    line = next(line for line in speculative if "acceptance" in line)
    assert re.search(r"\(\d\.\d\d tokens per target call\), \d+ draft calls, acceptance", line)


def test_one_round_has_no_speedup_range(monkeypatch):
    """--runs 1: the --json object's speedup_range is null (a range of one ratio is no spread
    measured) and the text says "1 round"; --runs 2: the least and the most of the two ratios."""
    monkeypatch.setenv("PICOSPEC_OFFLINE", "1")
    args = ["--n_tokens", "4", "--temperature", "0", "--json"]
    one = json.loads(text_of([*args, "--runs", "1"]))
    assert one["rounds"] == 1 and one["speedup_range"] is None and one["speedup"] > 0
    assert "(1 round); texts" in text_of(["--n_tokens", "4", "--temperature", "0", "--runs", "1"])
    two = json.loads(text_of([*args, "--runs", "2"]))
    ratios = [b / m for b, m in zip(two["runs"][0]["times_s"], two["runs"][1]["times_s"])]
    assert two["speedup_range"] == [pytest.approx(min(ratios)), pytest.approx(max(ratios))]


def test_autoregressive_alone_is_one_decoder_with_no_speedup(monkeypatch):
    """--method autoregressive: one decoder (the baseline is the method), --runs 2 rounds of it,
    one group, no texts compared, no speedup (nor its range) and no cost model; a
    row's tokens per target call are its tokens over its calls."""
    monkeypatch.setenv("PICOSPEC_OFFLINE", "1")
    out = json.loads(text_of(["--method", "autoregressive", "--n_tokens", "3", "--runs", "2",
                              "--json"]))
    assert [run["method"] for run in out["runs"]] == ["autoregressive"]
    assert out["rounds"] == 2 and out["groups"] == [1] and out["same_output"] is None
    assert out["speedup"] is None and out["cost_model"] is None
    assert out["speedup_range"] is None  # null, as for one round: no ratio measured at all
    run = out["runs"][0]
    assert run["tokens_per_target_call_by_row"] == [len(run["output_ids"][0]) / run["target_calls"]]
    assert run["row_target_calls"] == run["target_calls"]  # one row: each call its own


def test_a_runs_line_of_several_rounds(monkeypatch):
    """--runs 2: each decoder's line gives the median of 2 runs (not "1 run"), its time in
    milliseconds (3 decimals of a second) and its speed in tenths of a token a second."""
    monkeypatch.setenv("PICOSPEC_OFFLINE", "1")
    lines = [line for line in text_of(["--n_tokens", "3", "--runs", "2"]).splitlines()
             if " tokens/s), " in line]
    assert len(lines) == 2, lines
    for line in lines:
        assert re.match(r"3 tokens in \d+\.\d{3} s \(median of 2 runs, \d+\.\d tokens/s\), ",
                        line), line
    why = next(line for line in text_of(["--n_tokens", "3", "--runs", "2"]).splitlines()
               if line.startswith("why: "))
    assert re.match(r"why: \d+\.\d\d tokens per target call; ", why), why
    assert re.search(r" = \d+\.\d\dx from this run's own costs, \d+\.\d\dx measured$", why), why


def test_the_speedup_line_of_several_rounds_then_why_and_the_limit(monkeypatch):
    """--runs 2 at temperature 0: the speedup line gives the median of the 2 interleaved rounds with
    their range (least first) and says the texts are identical, as they must be; the why line and
    the "limit here" line follow it, in that order."""
    monkeypatch.setenv("PICOSPEC_OFFLINE", "1")
    lines = text_of(["--n_tokens", "3", "--runs", "2", "--temperature", "0"]).splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("speedup "))
    m = re.fullmatch(r"speedup (\d+\.\d\d)x over autoregressive \(median of 2 interleaved rounds' "
                     r"ratios, "
                     r"range (\d+\.\d\d)-(\d+\.\d\d)x\); texts identical \(temperature 0: "
                     r"they must be identical\)", lines[at])
    assert m and float(m[2]) <= float(m[1]) <= float(m[3]), lines[at]
    assert lines[at + 1].startswith("why: ") and lines[at + 2].startswith("limit here: "), lines


@pytest.mark.parametrize("temperature, note", [
    ("0", " (temperature 0: they must be identical)"), ("1", " (sampling: texts may differ)"),
    ("0.7", " (sampling: texts may differ)")])
def test_the_speedup_line_says_whether_the_texts_must_match(monkeypatch, temperature, note):
    monkeypatch.setenv("PICOSPEC_OFFLINE", "1")
    text = text_of(["--n_tokens", "3", "--runs", "1", "--temperature", temperature])
    line = next(line for line in text.splitlines() if line.startswith("speedup "))
    assert line.endswith(note), line


def test_colours_stop_after_each_coloured_token():
    """A token of no colour (the target's own, autoregressive) after a coloured one is shown
    plain: each coloured token ends with the reset code."""
    reset, pieces = "\033[0m", ["def", " f", "(", "x", ")", ":"]
    ids = [ENCODER.encode(p)[0] for p in pieces]
    assert [ENCODER.decode([t]) for t in ids] == pieces  # one token each
    origins = ["draft", "target", "bonus", "target", "resample", "target"]
    expected = "".join(COLORS[o] + p + reset if o in COLORS else p
                       for o, p in zip(origins, pieces))
    assert colored(ENCODER, ids, origins, True) == expected


def test_batch_text_names_two_groups_or_more(monkeypatch, tmp_path):
    """Rows of 1 MB under --batch_memory 1: a row a group; the text names the groups from 2 on,
    and says nothing of groups for one."""
    from picospec_app import plan

    monkeypatch.setenv("PICOSPEC_OFFLINE", "1")
    monkeypatch.setattr(plan, "batch_row_bytes", lambda loaded, n: 2**20)
    for n in (1, 2):
        (tmp_path / "p.txt").write_text("def f(x):\n" * n)
        text = text_of(["--method", "speculative", "--n_tokens", "2", "--runs", "1", "--batch",
                        str(tmp_path / "p.txt"), "--batch_memory", "1"])
        assert (" in 2 groups of up to 1 row in " in text) == (n == 2), text
        assert (" groups of " in text) == (n == 2), text


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("args, legend", [
    ([], True), (["--method", "autoregressive"], False), (["--batch", "p.txt"], False)])
def test_the_colour_legend_only_beside_coloured_tokens(monkeypatch, tmp_path, args, legend):
    """The legend names the colours of the method's tokens: printed under one prompt's coloured
    texts on a terminal; not for autoregressive decoding alone, nor --batch (no colours there),
    nor on a pipe."""
    from picospec_app.report import LEGEND

    monkeypatch.setenv("PICOSPEC_OFFLINE", "1")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.txt").write_text("def f(x):\n")
    argv = ["--n_tokens", "3", "--runs", "1", *args]
    out = Terminal()
    with redirect_stdout(out):
        command.main(argv)
    assert (LEGEND in out.getvalue()) == legend
    assert LEGEND not in text_of(argv)  # a pipe: no colours, no legend


def test_batch_tokens_per_target_call_counts_each_rows_calls(monkeypatch, tmp_path):
    """--batch --json, speculative sampling at temperature 0 on three prompts of different lengths,
    one of a single token: a run's tokens per target call is the rows' new tokens over the calls
    each row took part in (accepted >= 0 in the step records of an identical batched run), as a
    single prompt's is; autoregressive decoding's is 1 (it was the rows' tokens over the batched
    calls: 3 for three rows)."""
    from gpt2.engine import BatchGPT2
    from gpt2.load import load_model
    from picospec.batched.speculative import batch_speculative_sampling

    monkeypatch.setenv("PICOSPEC_OFFLINE", "1")
    lines, n = ["def add(a, b):", "x", "import numpy as np"], 12
    (tmp_path / "p.txt").write_text("\n".join(lines) + "\n")
    out = json.loads(text_of(["--batch", str(tmp_path / "p.txt"), "--n_tokens", str(n), "--K",
                              "4", "--temperature", "0", "--json"]))
    target, draft = load_model("tiny-target")[0], load_model("tiny-draft")[0]
    xs, stats = [ENCODER.encode(line) for line in lines], []
    assert len(xs[1]) == 1
    batch_speculative_sampling(xs, BatchGPT2(draft, 3), BatchGPT2(target, 3), n, 4,
                               np.random.default_rng(0), stats=stats, temperature=0)
    took_part = [sum(1 for s in stats if s["accepted"][b] >= 0) for b in range(3)]
    assert len(set(took_part)) > 1  # the rows finished at different steps
    base, mine = out["runs"]
    assert mine["target_calls"] == len(stats) < sum(took_part) == mine["row_target_calls"]
    assert mine["tokens_per_target_call"] == pytest.approx(3 * n / mine["row_target_calls"])
    assert mine["tokens_per_target_call_by_row"] == [pytest.approx(n / k) for k in took_part]
    assert base["target_calls"] == n and base["tokens_per_target_call"] == 1.0
    assert base["row_target_calls"] == 3 * n  # each of the 3 rows in each batched call
    assert base["tokens_per_target_call_by_row"] == [1.0] * 3


def documented_keys():
    """docs/architecture.md's --json table -> [(the keys a row names first, every key it names)]."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text()
    table = text.split("### The --json object", 1)[1].split("\n#", 1)[0]

    def names(cell):  # `E`, `tokens_per_s`; not `--batch`, `limit here:`, `a.b`
        return set(re.findall(r"`([A-Za-z_]\w*)`", cell))

    rows = [line.strip("|").split("|", 1) for line in table.splitlines()
            if line.startswith("| `")]
    return [(names(first), names(first) | names(rest)) for first, rest in rows]


def keys_within(value):
    """Every key of the dicts within value, at any depth."""
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in keys_within(v)}
    if isinstance(value, list):
        return {k for v in value for k in keys_within(v)}
    return set()


def test_the_json_object_holds_what_the_architecture_table_documents(monkeypatch, tmp_path):
    """The --json object of one prompt and of --batch, with two drafters (cascade): its keys are
    the table's first column, and every key within a row's value (a run's, the cost model's and
    its drafters', the threads') is named in that row, and each name there is a key (E_full, rest,
    rest_base and the drafters' per_target_call went undocumented)."""
    monkeypatch.setenv("PICOSPEC_OFFLINE", "1")
    (tmp_path / "p.txt").write_text("def f(x):\nimport os\n")
    args = ["--method", "cascade", "--n_tokens", "6", "--runs", "1", "--json"]
    outs = [json.loads(text_of([*args, *more])) for more in ([], ["--batch",
                                                                  str(tmp_path / "p.txt")])]
    rows = documented_keys()
    for out in outs:
        assert set(out) == {k for first, _ in rows for k in first}
    assert outs[0]["cost_model"]["drafts"].keys() == {"draft", "draft2"}
    for first, named in rows:
        within = {k for out in outs for key in first if key != "options"
                  for k in keys_within(out[key])}
        assert within <= named, (first, within - named)
        assert named <= first | within, (first, named - first - within)


def test_batch_text_of_several_rounds_gives_the_speedups_median_and_range(monkeypatch, tmp_path):
    """--batch --runs 2 on a stub clock read twice a run: batched autoregressive decoding takes 3
    s then 4 s, the method 1 s then 2 s. Both times printed are medians (3.5 s, 1.5 s), and the
    speedup printed, the median of the rounds' ratios (3 and 2: 2.50x), is said to be one, with
    its range, as the --json object has them: the times printed divide to 3.5 / 1.5 = 2.33x."""
    import types

    from picospec_app import run

    monkeypatch.setenv("PICOSPEC_OFFLINE", "1")
    ticks = iter([0.0, 3.0, 10.0, 11.0, 20.0, 22.0, 30.0, 34.0])  # the second round's method first
    monkeypatch.setattr(run, "time", types.SimpleNamespace(perf_counter=lambda: next(ticks)))
    (tmp_path / "p.txt").write_text("def add(a, b):\nimport os\n")
    text = text_of(["--batch", str(tmp_path / "p.txt"), "--batch_memory", "512", "--n_tokens",
                    "6", "--temperature", "0", "--runs", "2"])
    ratios = [3 / 1, 4 / 2]
    assert " in 1.500 s (median of 2 rounds), " in text, text
    assert "batched the same way: 3.500 s (median of 2 rounds), " in text, text
    assert (f"speedup {np.median(ratios):.2f}x over batched autoregressive (median of 2 "
            f"interleaved rounds' ratios, range {min(ratios):.2f}-{max(ratios):.2f}x); ") in text, \
        text


@pytest.mark.parametrize("args, env, why", [
    (["--threads", "2"], None, "2 threads (--threads 2)"),
    ([], "1", "1 thread (PICOSPEC_THREADS=1 from the environment)"),
    (["--threads", "2"], "1", "2 threads (--threads 2)"),  # the option wins, as the engine takes it
    ([], None, None)])
def test_the_blas_line_names_who_asked_for_the_threads(monkeypatch, args, env, why):
    """The BLAS line (and the --json object's threads.why) names the one request that applied:
    --threads N, else PICOSPEC_THREADS=N from the environment; with neither, the policy's reason,
    and no word of a request."""
    monkeypatch.setenv("PICOSPEC_OFFLINE", "1")
    if env is None:
        monkeypatch.delenv("PICOSPEC_THREADS", raising=False)
    else:
        monkeypatch.setenv("PICOSPEC_THREADS", env)
    out = json.loads(text_of(["--n_tokens", "1", "--runs", "1", "--json", *args]))
    said = re.search(r"; (\d+ threads? \((.*)\)); small-matrix path ", out["blas"])
    if why is None:
        # the policy's reason, then the wide count's where cores are free (it varies with load)
        why = out["threads"]["why"]
        assert why.startswith("small model (") and said[2].startswith(why), out["blas"]
        assert not re.search("request|--threads|PICOSPEC_THREADS", out["blas"]), out["blas"]
    else:
        assert said[1] == why and said[2] == out["threads"]["why"], out["blas"]


def test_the_text_ends_with_the_blas_line_for_one_prompt_and_for_a_batch(monkeypatch, tmp_path):
    """The text of a run, of one prompt and of --batch, ends with the BLAS line: the threads as
    asked (--threads 1), then the warning that timings vary."""
    monkeypatch.setenv("PICOSPEC_OFFLINE", "1")
    (tmp_path / "p.txt").write_text("def f(x):\n")
    args = ["--n_tokens", "2", "--runs", "1", "--threads", "1"]
    for more in ([], ["--batch", str(tmp_path / "p.txt")]):
        last = text_of([*args, *more]).splitlines()[-1]
        assert re.fullmatch(r"BLAS: .*; 1 thread \(--threads 1[^)]*\); small-matrix path .*; "
                            r"timings on a busy machine vary", last), last


def batch_text(groups, same_output):
    """show_batch's text of three prompts, speculative sampling against autoregressive decoding,
    in the row groups `groups`, with `same_output` per row."""
    import types

    from picospec_app.report import show_batch

    prompts = ["def f(x):", "x = 1", "import os"]
    runs = [{"method": m, "texts": ["a", "b", "c"], "tokens_per_target_call_by_row": [1.0] * 3,
             "time_s": t, "target_calls": calls}
            for m, t, calls in (("autoregressive", 2.0, 4), ("speculative", 1.0, 2))]
    out = {"method": "speculative", "runs": runs, "prompts": prompts, "groups": groups,
           "rounds": 1, "speedup": 2.0, "speedup_range": None, "same_output": same_output}
    plan = types.SimpleNamespace(names=[f"the prompt on line {i}" for i in (1, 2, 3)],
                                 n_tokens=4, sampling={"temperature": 1.0})
    text = io.StringIO()
    with redirect_stdout(text):
        show_batch(out, plan)
    return text.getvalue()


def test_batch_text_names_the_largest_group_when_rows_do_not_divide_evenly():
    """Three prompts in groups of 2 and 1: "in 2 groups of up to 2 rows", the first and largest
    group's size, not the last group's 1."""
    text = batch_text([2, 1], [True] * 3)
    assert "3 prompts x 4 tokens in 2 groups of up to 2 rows in 1.000 s, " in text, text


def test_batch_text_counts_only_the_identical_texts():
    """Rows 1 and 3 the same as autoregressive decoding's, row 2 different: "2/3 texts
    identical", not 3/3."""
    text = batch_text([3], [True, False, True])
    assert "; 2/3 texts identical (sampling: texts may differ)" in text, text


def test_an_acceptance_of_zero_is_printed():
    """A run whose every draft was rejected: its line ends ", acceptance 0%" (a rate of 0 is a
    figure, not a missing one); a run with no acceptance (None) prints none."""
    import types

    from picospec_app.report import show_prompt

    ids = ENCODER.encode(" y = 2")
    run = {"method": "speculative", "output_ids": [ids], "origins": [["resample"] * len(ids)],
           "rounds": 1, "time_s": 0.5, "tokens_per_s": 2 * len(ids), "target_calls": len(ids),
           "tokens_per_target_call": 1.0, "draft_calls": 2 * len(ids), "acceptance_rate": 0.0}
    plan = types.SimpleNamespace(color=False, sampling={"temperature": 1.0})
    for rate, end in ((0.0, f", {2 * len(ids)} draft calls, acceptance 0%"),
                      (None, f", {2 * len(ids)} draft calls")):
        text = io.StringIO()
        with redirect_stdout(text):
            show_prompt({"runs": [{**run, "acceptance_rate": rate}], "prompts": ["x ="]}, plan,
                        ENCODER)
        line = next(line for line in text.getvalue().splitlines() if " tokens/s), " in line)
        assert line.endswith(end), line
        assert text.getvalue().startswith("── speculative ")


@pytest.mark.parametrize("argv, same", [(["--n_tokens", "1"], True),
                                        (["--method", "rest", "--n_tokens", "1"], True),
                                        (["--n_tokens", "8"], False)])
def test_a_speedup_of_the_same_work_is_said_to_be_noise(argv, same):
    """One token: the method makes the one target call autoregressive decoding makes, and drafts
    nothing; the ratio of their times is then the clock's noise, and the text says so."""
    text = text_of([*argv, "--runs", "1"])
    assert ("the same work: 1 target call each and no draft, so the speedup is the clock's noise"
            in text) == same, text
