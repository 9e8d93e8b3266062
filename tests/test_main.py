"""main.py as a user runs it: the built-in pair offline, JSON for scripts, and one-line errors for bad input."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run(*args):
    return subprocess.run([sys.executable, "main.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={"PICOSPEC_OFFLINE": "1", "PATH": "/usr/bin:/bin"})


@pytest.mark.parametrize("method", ["speculative", "greedy", "prompt_lookup"])
def test_json_output_and_temperature_zero_equality(method):
    r = run("--method", method, "--K", "3", "--n_tokens", "24", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [run["method"] for run in out["runs"]] == ["autoregressive", method]
    assert out["same_output"] is True  # temperature 0: lossless means identical
    for run_ in out["runs"]:
        assert len(run_["output_ids"]) == 24 and run_["target_calls"] >= 1
        assert {"tokens_per_target_call", "acceptance_rate", "time_s", "text"} <= set(run_)
    assert out["runs"][1]["tokens_per_target_call"] >= 1


def test_ngram_draft_and_sampling():
    r = run("--draft", "ngram", "--temperature", "0.8", "--top_p", "0.95", "--n_tokens", "16", "--json")
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["runs"][1]["output_ids"]) == 16


def test_plain_output():
    r = run("--method", "speculative", "--n_tokens", "12")
    assert r.returncode == 0, r.stderr
    assert "speedup" in r.stdout and "tokens per target call" in r.stdout


def test_batch_file(tmp_path):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("def add(a, b):\\n\nimport os\n")
    r = run("--batch", str(prompts), "--n_tokens", "10", "--json")
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["texts"]) == 2


@pytest.mark.parametrize("args, message", [
    (["--prompt", ""], "prompt is empty"),
    (["--n_tokens", "0"], "--n_tokens must be a positive integer"),
    (["--n_tokens", "1000"], "exceeds the model's context window of 256"),
    (["--temperature", "-1"], "--temperature must be >= 0"),
    (["--K", "0"], "--K must be a positive integer"),
    (["--top_p", "1.5"], "--top_p must be in"),
    (["--target", "gpt-17"], "unknown model 'gpt-17'.*gpt2-xl"),
    (["--method", "magic"], "unknown --method 'magic'"),
    (["--target", "gpt2"], "offline: .* is not in the cache"),
    (["--batch", "/nonexistent/prompts.txt"], "cannot read it"),
])
def test_bad_input_is_one_line_without_traceback(args, message):
    r = run(*args)
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    import re
    assert re.search(message, r.stderr), r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
