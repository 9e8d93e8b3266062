"""picospec's greedy decoding, assisted generation and prompt lookup are token-identical to Hugging
Face transformers' on the built-in checkpoints (bench/peers.py's identity column, checked on one
short run)."""
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")


def test_peer_benchmark_tokens_identical(capsys):
    from bench.peers import main

    main(n_prompts=2, prompt_tokens=32, n_tokens=12)
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")
            and "of" in line]
    assert len(rows) == 2 * 4  # printed as measured, then again in the final table
    assert all(line.rstrip(" |").endswith("2 of 2") for line in rows), rows
