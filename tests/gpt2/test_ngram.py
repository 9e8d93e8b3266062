"""The n-gram draft: hand-checked probabilities, proper distributions, the model contract,
save/load."""
import numpy as np

from gpt2.ngram import NGram
from gpt2.train.ngram import count_ngrams


def test_worked_example_by_hand():
    m = count_ngrams([0, 1, 0, 1, 0, 2], 3, order=2, min_count=1)
    np.testing.assert_allclose(m.unigram, [4 / 9, 3 / 9, 2 / 9], rtol=1e-6)
    # after 0: c(0,1) = 2, c(0,2) = 1, c(0) = 3, u(0) = 2
    expect = [(0 + 2 * 4 / 9) / 5, (2 + 2 * 3 / 9) / 5, (1 + 2 * 2 / 9) / 5]
    np.testing.assert_allclose(m([0])[0], expect, rtol=1e-6)
    # 2 was never followed by anything: back off
    np.testing.assert_allclose(m([2])[0], m.unigram, rtol=1e-6)


def test_unseen_context_backs_off_to_lower_order():
    m = count_ngrams([0, 1, 2, 0, 1, 2, 3], 5, order=3, min_count=1)
    np.testing.assert_allclose(m([4, 1])[0], m([1])[0])  # (4, 1) never seen: the bigram law of 1
    assert m([0, 1])[0].argmax() == 2


def test_distributions_are_proper_and_contract_shapes():
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 50, 5000)
    m = count_ngrams(tokens, 50, order=4, min_count=2)
    x = [int(t) for t in tokens[:30]]
    probs = m(x, 7)
    assert probs.shape == (7, 50) and probs.dtype == np.float32
    np.testing.assert_allclose(probs.sum(-1), 1, atol=1e-5)
    assert np.all(probs > 0)
    np.testing.assert_array_equal(probs, np.stack([m(x[:len(x) - 7 + i + 1])[0] for i in range(7)]))


def test_save_load_round_trip(tmp_path):
    m = count_ngrams(np.random.default_rng(1).integers(0, 30, 3000), 30, order=3)
    m.save(tmp_path / "ng.safetensors")
    back = NGram.load(tmp_path / "ng.safetensors")
    assert back.order == 3 and back.n_vocab == 30
    np.testing.assert_array_equal(back([1, 2, 3], 3), m([1, 2, 3], 3))


def test_pruning_drops_singletons_of_the_highest_order_only():
    tokens = [0, 1, 2, 0, 1, 2, 0, 1, 3]
    m = count_ngrams(tokens, 4, order=3, min_count=2)
    assert 3 not in set(m.tables[1]["next"].tolist())  # (0, 1) -> 3 seen once: pruned at order 3
    assert 3 in set(m.tables[0]["next"].tolist())  # 1 -> 3 kept at order 2
