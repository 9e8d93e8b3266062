"""picospec's greedy decoding, assisted generation and prompt lookup are token-identical to Hugging
Face transformers' on the built-in checkpoints (bench/peers.py's identity column, checked on one
short run); a command line it cannot run is refused before torch loads."""
import sys

import pytest


def test_peer_benchmark_tokens_identical(capsys):
    pytest.importorskip("torch")  # here, not at collection: each test worker collects every module
    pytest.importorskip("transformers")
    from bench.peers import main

    main(n_prompts=2, prompt_tokens=32, n_tokens=12)
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")
            and "of" in line]
    assert len(rows) == 2 * 4  # printed as measured, then again in the final table
    assert all(line.rstrip(" |").endswith("2 of 2") for line in rows), rows


def test_an_ngram_draft_is_refused_before_torch_loads(monkeypatch):
    """--draft ngram is the command line's mistake, named as such on a machine without torch too
    (and at once where torch takes seconds to import)."""
    from bench.peers import main

    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    with pytest.raises(ValueError, match="^--draft ngram: transformers runs the same checkpoints"):
        main(draft="ngram")


@pytest.mark.parametrize("side", ["target", "draft"])
def test_a_checkpoint_that_is_not_there_is_refused_before_torch_loads(monkeypatch, tmp_path, side):
    """A target or draft folder that does not exist is named before torch is imported."""
    from bench.peers import main

    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    with pytest.raises(ValueError, match=f"^local folder {tmp_path / 'none'} does not exist"):
        main(**{side: str(tmp_path / "none")})
