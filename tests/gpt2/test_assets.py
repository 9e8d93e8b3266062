"""The shipped built-in models: they load, give finite distributions, match the sha256 in their
card, share a vocabulary."""
import hashlib
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gpt2.load import ASSETS, load_model

from tests.support.tracked import project_files

ROOT = ASSETS.parents[1]

CARD = (ASSETS / "README.md").read_text()


def card_hashes():
    return dict(re.findall(r"^\| (\S+) \| \d+ \| ([0-9a-f]{64}) \|$", CARD, flags=re.M))


def test_card_lists_every_file_with_its_sha256():
    hashes = card_hashes()
    files = {str(p.relative_to(ASSETS)) for p in project_files(ROOT, "*", "gpt2/assets")
             if p.name != "README.md"}
    assert set(hashes) == files
    for name, digest in hashes.items():
        assert hashlib.sha256((ASSETS / name).read_bytes()).hexdigest() == digest, name


def test_assets_fit_the_size_budget():
    # gpt2/train/card.py BUDGET
    assert sum(p.stat().st_size for p in project_files(ROOT, "*", "gpt2/assets")) <= 32e6


@pytest.mark.parametrize("name", ["tiny-target", "tiny-draft", "ngram"])
def test_models_load_and_give_distributions(name):
    model, encoder = load_model(name)
    x = encoder.encode("def add(a, b):\n    return a + b\n")
    probs = model(x, 4)
    assert probs.shape == (4, 4097) and np.all(np.isfinite(probs)) and np.all(probs >= 0)
    np.testing.assert_allclose(probs.sum(-1), 1, atol=1e-4)


def test_pair_shares_one_vocabulary():
    target, te = load_model("tiny-target")
    draft, de = load_model("tiny-draft")
    assert target.n_vocab == draft.n_vocab == load_model("ngram")[0].n_vocab == te.n_vocab
    assert te.encoder == de.encoder


_, ENCODER = load_model("tiny-target")


@settings(max_examples=200)
@given(st.text())
def test_tokenizer_round_trips(text):
    assert ENCODER.decode(ENCODER.encode(text)) == text


def test_target_is_better_than_draft_on_validation():
    losses = dict(re.findall(r"^\| (tiny-\w+) \|.*\| ([\d.]+) \| [\d.]+ min \|", CARD, flags=re.M))
    assert float(losses["tiny-target"]) < float(losses["tiny-draft"])
