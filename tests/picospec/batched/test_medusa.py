"""Batched Medusa (picospec/batched/medusa.py batch_medusa_decoding on gpt2/engine.py's batched
trees), row by row against medusa_decoding (tests/support/batchrows.py): each row of one batch, with
its own generator, is token for token what the single form gives its prompt alone, so it has the law
that tests/picospec/test_medusa.py checks for the lossless posterior. On a micro GPT-2 of three
tokens with two random heads (48 rows, the seed's tree, nodes accepted and rejected, at temperature
1 and at 0.7 with top-k 2), where the longest-match flaw planted in the batched run is caught, and
on the built-in target and its shipped heads, greedy and, with its own generator, sampled (also at
0.7 with top-k 20 and top-p 0.8)."""
import functools

import numpy as np
import pytest

import picospec.medusa as medusa
from gpt2.engine import BatchGPT2
from picospec.batched.medusa import batch_medusa_decoding
from picospec.medusa import medusa_decoding

from tests.support.batchrows import check_paths, check_rows_alone, generators, heads, model
from tests.support.broken_verifiers import longest_match
from tests.support.micro import model_and_heads
from tests.support.trees import SEED_CHOICES

ROWS, N = [[0, 1], [2], [1, 0, 2]] * 16, 4


@functools.cache
def small():
    return model_and_heads(n_vocab=3, n_heads=2, seed=5, scale=0.8)


def micro_rows(monkeypatch, broken=None, **options):
    """Batched lossless Medusa on ROWS (a broken verify_tree planted in the batched run only), each
    row against the single form alone -> the batch's step records."""
    (target, fn), stats = small(), []
    kwargs = dict(medusa_choices=SEED_CHOICES, topk=3, posterior="lossless", **options)
    with monkeypatch.context() as patch:
        if broken:
            patch.setattr(medusa, "verify_tree", broken)
        out = batch_medusa_decoding(ROWS, BatchGPT2(target, len(ROWS), tree_slots=16), fn, N,
                                    np.random.default_rng(99), stats=stats,
                                    generators=generators(len(ROWS)), **kwargs)

    def alone(b, steps):
        target.reset()
        return medusa_decoding(ROWS[b], target, fn, N, np.random.default_rng(b), stats=steps,
                               **kwargs)

    check_paths(check_rows_alone(out, alone, monkeypatch))
    return stats


@pytest.mark.parametrize("options", [{}, dict(temperature=0.7, top_k=2)])
def test_micro_rows_equal_each_row_alone(monkeypatch, options):
    stats = micro_rows(monkeypatch, **options)
    assert any(len({a for a in s["accepted"] if a >= 0}) > 1 for s in stats)  # the rows went ragged


def test_batched_longest_match_flaw_is_caught(monkeypatch):
    """The longest-match flaw (tests/picospec/test_tree.py), in the batched run."""
    with pytest.raises(AssertionError, match="differs from its single run"):
        micro_rows(monkeypatch, longest_match)


@pytest.fixture(scope="module")
def shipped():
    target, encoder = model("tiny-target")
    prompts = [encoder.encode(p)
               for p in ("def add(a, b):\n", "import os\n\n", "class Node:\n    def", "for i in",
                                           "    return [x for x in")]
    return target, heads("medusa"), prompts


@pytest.mark.parametrize("posterior,options",
                         [("greedy", {"temperature": 0}), ("typical", {"temperature": 0.8}),
                                               ("lossless", {"temperature": 1.0}),
                                               ("lossless", {"temperature": 0.7, "top_k": 20,
                                                             "top_p": 0.8})])
def test_batched_rows_equal_each_row_alone(shipped, posterior, options):
    """The built-in target and its shipped heads: each row of one batch, with its own generator, is
    token for token what medusa_decoding gives its prompt alone with that generator (rows finish at
    different steps)."""
    target, heads, prompts = shipped
    stats = []
    out = batch_medusa_decoding(prompts, BatchGPT2(target, len(prompts)), heads["fn"], 30,
                                np.random.default_rng(9),
                                heads["sparse"], posterior=posterior, stats=stats,
                                generators={b: np.random.default_rng(b)
                                            for b in range(len(prompts))}, **options)
    for b, prompt in enumerate(prompts):
        target.reset()
        alone = medusa_decoding(prompt, target, heads["fn"], 30, np.random.default_rng(b),
                                heads["sparse"], posterior=posterior, **options)
        assert out[b] == alone
    assert any(len({a for a in s["accepted"] if a >= 0}) > 1 for s in stats)  # the rows went ragged
    assert [sum(len(s["tokens"][b]) for s in stats)
            for b in range(len(prompts))] == [30] * len(prompts)
    assert any(-1 in s["accepted"] for s in stats)  # and some finished before others
    # a row's record: the nodes it accepted, then the next root; a finished row: nothing
    for s in stats[1:]:
        assert all(a == len(t) - 1 if a >= 0 else t == [] for a,
                   t in zip(s["accepted"], s["tokens"]))


@pytest.mark.parametrize("method",
                         ["medusa", "prompt_lookup", "lookahead", "greedy", "autoregressive",
                          "specinfer",
                                    "sequoia", "blockwise", "eagle"])
def test_main_batch_runs_batched_rows(shipped, tmp_path, method):
    """`python main.py --method M --batch FILE` runs the row's batched form through the method
    table, and batched autoregressive decoding beside it; at temperature 0 each text is the
    single-sequence method's (here: greedy decoding's), and the two runs' texts are reported
    identical."""
    import json

    from tests.support.clitools import run_here
    from picospec.autoregressive import autoregressive_sampling

    target = shipped[0]
    encoder = model("tiny-target")[1]
    lines = ["def add(a, b):", "import os", "class Node:"]
    (tmp_path / "prompts.txt").write_text("\n".join(lines) + "\n")
    r = run_here(["main.py", "--method", method, "--batch", "prompts.txt", "--n_tokens", "12",
                  "--temperature", "0",
                 "--json"], tmp_path)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    base, mine = result["runs"][0], result["runs"][-1]
    for line, text in zip(lines, mine["texts"]):
        x = encoder.encode(line)
        target.reset()
        greedy = autoregressive_sampling(x, target, 12, np.random.default_rng(0), temperature=0)
        assert text == encoder.decode(greedy[len(x):])
    assert len(mine["texts"]) == len(mine["tokens_per_target_call_by_row"]) == 3
    assert base["texts"] == mine["texts"]  # one decoder alone: nothing compared
    assert result["same_output"] == (None if method == "autoregressive" else [True] * 3)
    assert base["target_calls"] == 12
    assert result["speedup"] is None if method == "autoregressive" else result["speedup"] > 0
