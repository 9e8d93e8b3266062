"""A draft and a target of different vocabularies, refused at the edge: every row of the method
table that drafts with a model (both drafters of a cascade, each draft of SpecInfer), in its single
and its batched form, raises the one line before it calls any model. A model that does not say its
n_vocab is not refused (the check reads nothing else)."""
import numpy as np
import pytest

from picospec.methods import METHODS, call
from picospec.sampling import check_vocab

LINE = r"draft and target disagree on the vocabulary \(4 vs 3 tokens\): speculative decoding needs"


class Uncalled:
    """A model of V tokens that fails the test if called: the refusal must come first."""

    def __init__(self, V):
        self.n_vocab = V

    def __call__(self, *args, **kwargs):
        pytest.fail("a model was called before the vocabularies were checked")

    logits = tree = __call__


# (row, the drafter of another vocabulary, the options that make the row use it)
DRAFTERS = [(m, role, {"merge": True} if m.name == "specinfer" and role == "draft2" else {})
            for m in METHODS for role in ("draft", "draft2") if role in m.needs]


@pytest.mark.parametrize("batch", [False, True], ids=["single", "batched"])
@pytest.mark.parametrize("method, role, options", DRAFTERS,
                         ids=[f"{m.name}-{role}" for m, role, _ in DRAFTERS])
def test_a_draft_of_another_vocabulary_is_refused_before_any_call(method, role, options, batch):
    loaded = {"target": Uncalled(3), "draft": Uncalled(3), "draft2": Uncalled(3),
              "acceptance": {"greedy": [0.6, 0.2], "sampled": [0.5, 0.2]}}
    loaded[role] = Uncalled(4)
    x = [[1, 2], [0]] if batch else [1, 2]
    with pytest.raises(ValueError, match=LINE):
        call(method, x, 3, np.random.default_rng(0), loaded, {"temperature": 0}, options,
             batch=batch)


def test_only_models_that_say_their_vocabulary_are_compared():
    check_vocab(lambda x, n=1: None, Uncalled(3))  # a plain function says nothing: no refusal
    check_vocab(Uncalled(3), Uncalled(3))
    with pytest.raises(ValueError, match=LINE):
        check_vocab(Uncalled(4), Uncalled(3))
