"""Batched Medusa (picospec/medusa.py batch_medusa_decoding on gpt2/engine.py's batched trees): the lossless
posterior keeps each row's exact law (and the longest-match flaw is rejected by the same check on the same engines);
each row equals the single-sequence method on its prompt alone, greedy and, with its own generator, sampled."""
import numpy as np
import pytest

import picospec.medusa as medusa
from checker import SAMPLES, check_law, exact_law
from gpt2.engine import BatchGPT2
from picospec.medusa import batch_medusa_decoding, medusa_decoding
from test_medusa import model_and_heads
from test_tree import SEED_CHOICES, longest_match

PROMPTS, N, COPIES = [[0, 1], [2], [1, 0, 2]], 3, 500


@pytest.fixture(scope="module")
def small():
    return model_and_heads(n_vocab=3, n_heads=2, seed=5, scale=0.8)


def sampled_rows(model, heads, n, **options):  # -> per prompt, n sampled continuations, COPIES rows of each per batch
    batch = BatchGPT2(model, len(PROMPTS) * COPIES, tree_slots=16)
    rng, samples = np.random.default_rng(0), [[] for _ in PROMPTS]
    for _ in range(n // COPIES):
        batch.reset()
        out = batch_medusa_decoding(PROMPTS * COPIES, batch, heads, N, rng, SEED_CHOICES, topk=3,
                                    posterior="lossless", **options)
        for i, row in enumerate(out):
            prompt = PROMPTS[i % len(PROMPTS)]
            assert row[:len(prompt)] == prompt
            samples[i % len(PROMPTS)].append(tuple(row[len(prompt):]))
    return samples


@pytest.mark.parametrize("options", [{}, dict(temperature=0.7, top_k=2)])
def test_batched_lossless_keeps_each_rows_law(small, options):
    """15,000 runs per prompt, three prompts of different lengths in every batch (ragged rows, ragged acceptance)."""
    model, heads = small
    for prompt, rows in zip(PROMPTS, sampled_rows(model, heads, SAMPLES // 2, **options)):
        check_law(rows, exact_law(model, prompt, N, **options))


def test_batched_longest_match_flaw_is_rejected(small, monkeypatch):
    """The longest-match flaw (tests/test_tree.py) on the same batched engines fails the same check."""
    model, heads = small
    monkeypatch.setattr(medusa, "verify_tree", longest_match)
    samples = sampled_rows(model, heads, 6 * COPIES)  # 3,000 runs of the first prompt: it draws sequences of law 0
    with pytest.raises(AssertionError, match="empirical law differs"):
        check_law(samples[0], exact_law(model, PROMPTS[0], N))


@pytest.fixture(scope="module")
def shipped():
    from picospec_app.load import load_heads
    from gpt2.load import load_model

    target, encoder = load_model("tiny-target")
    prompts = [encoder.encode(p) for p in ("def add(a, b):\n", "import os\n\n", "class Node:\n    def", "for i in",
                                           "    return [x for x in")]
    return target, load_heads("tiny-target", "medusa", None, target), prompts


@pytest.mark.parametrize("posterior,options", [("greedy", {"temperature": 0}), ("typical", {"temperature": 0.8}),
                                               ("lossless", {"temperature": 1.0}),
                                               ("lossless", {"temperature": 0.7, "top_k": 20})])
def test_batched_rows_equal_each_row_alone(shipped, posterior, options):
    """The built-in target and its shipped heads: each row of one batch, with its own generator, is token for token
    what medusa_decoding gives its prompt alone with that generator (rows finish at different steps)."""
    target, heads, prompts = shipped
    stats = []
    out = batch_medusa_decoding(prompts, BatchGPT2(target, len(prompts)), heads["fn"], 30, np.random.default_rng(9),
                                heads["sparse"], posterior=posterior, stats=stats,
                                generators={b: np.random.default_rng(b) for b in range(len(prompts))}, **options)
    for b, prompt in enumerate(prompts):
        target.reset()
        alone = medusa_decoding(prompt, target, heads["fn"], 30, np.random.default_rng(b), heads["sparse"],
                                posterior=posterior, **options)
        assert out[b] == alone
    assert any(len({a for a in s["accepted"] if a >= 0}) > 1 for s in stats)  # the rows went ragged
    assert [sum(len(s["tokens"][b]) for s in stats) for b in range(len(prompts))] == [30] * len(prompts)
    assert any(-1 in s["accepted"] for s in stats)  # and some finished before others
    for s in stats[1:]:  # a row's record: the nodes it accepted, then the next root; a finished row: nothing
        assert all(a == len(t) - 1 if a >= 0 else t == [] for a, t in zip(s["accepted"], s["tokens"]))


@pytest.mark.parametrize("method", ["medusa", "prompt_lookup", "lookahead", "greedy", "autoregressive", "specinfer",
                                    "sequoia", "blockwise", "eagle"])
def test_main_batch_runs_batched_rows(shipped, tmp_path, method):
    """`python main.py --method M --batch FILE` runs the row's batched form through the method table, and batched
    autoregressive decoding beside it; at temperature 0 each text is the single-sequence method's (here: greedy
    decoding's), and the two runs' texts are reported identical."""
    import json

    from clitools import run_here
    from gpt2.load import load_model
    from picospec.autoregressive import autoregressive_sampling

    target = shipped[0]
    encoder = load_model("tiny-target")[1]
    lines = ["def add(a, b):", "import os", "class Node:"]
    (tmp_path / "prompts.txt").write_text("\n".join(lines) + "\n")
    r = run_here(["main.py", "--method", method, "--batch", "prompts.txt", "--n_tokens", "12", "--temperature", "0",
                 "--json"], tmp_path)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    for line, text in zip(lines, result["texts"]):
        x = encoder.encode(line)
        target.reset()
        greedy = autoregressive_sampling(x, target, 12, np.random.default_rng(0), temperature=0)
        assert text == encoder.decode(greedy[len(x):])
    assert len(result["texts"]) == len(result["tokens_per_target_call"]) == 3
    assert result["autoregressive"]["texts"] == result["texts"] and result["same_output"] == [True] * 3
    assert result["autoregressive"]["target_calls"] == 12 and result["speedup"] > 0
