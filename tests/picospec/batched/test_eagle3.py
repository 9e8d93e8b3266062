"""Batched EAGLE-3: batch_eagle3_decoding (picospec/batched/eagle3.py) on the batched head gives
each row what eagle3_decoding gives its prompt alone with its own generator: on the built-in target
and its shipped EAGLE-3 head at temperature 0 and 1, and on a micro GPT-2 of three tokens whose
random head drafts over two of them (48 rows, nodes accepted and rejected, at temperature 1 and 0.7
with top-k 2), where the first drafted path taken unverified in the batched run is caught. So each
row has the law that tests/picospec/test_eagle3.py checks (tests/support/batchrows.py)."""
import numpy as np
import pytest

from gpt2.eagle import BatchEagleHead
from gpt2.eagle3 import Eagle3Head, init_eagle3
from gpt2.engine import BatchGPT2
from picospec.batched.eagle3 import batch_eagle3_decoding
from picospec.eagle3 import eagle3_decoding

from tests.support.batchrows import (HP, built_in, check_records, check_rows_alone,
                                     dynamic_tree_rows, generators, heads, micro)
from tests.support.broken_verifiers import unverified

N = 20


@pytest.mark.parametrize("options", [{"temperature": 0}, {"temperature": 1.0}], ids=["T0", "T1"])
def test_built_in_rows_equal_each_row_alone(monkeypatch, options):
    target, xs = built_in()
    head = heads("eagle3")
    out = batch_eagle3_decoding(xs, BatchGPT2(target, len(xs)), BatchEagleHead(head, len(xs)), N,
                                np.random.default_rng(9), generators=generators(len(xs)),
                                **options)

    def alone(b, steps):
        target.reset(), head.reset()
        return eagle3_decoding(xs[b], target, head, N, np.random.default_rng(b), stats=steps,
                               **options)

    records = check_rows_alone(out, alone, monkeypatch)
    assert sum(s["accepted"] for steps in records for s in steps) > 0


def micro_head():
    """A random EAGLE-3 head on the micro target over tokens [2, 0] (token 1 never drafted)."""
    target = micro()
    rng = np.random.default_rng(6)
    params, config = init_eagle3(HP["n_embd"], HP["n_head"], np.array([2, 0]), (0, 1, 1),
                                 target.params["wte"], target.params["ln_f"], rng)
    for group in ("fc", "fuse"):
        params[group]["w"] += rng.standard_normal(params[group]["w"].shape).astype(np.float32)
    return target, Eagle3Head(params, config, target.params["wte"], 32)


def micro_rows(monkeypatch, broken=None, **options):
    """Batched EAGLE-3 on ROWS (a broken verify_tree planted in the batched run only), each row
    against eagle3_decoding alone -> the batch's step records."""
    target, head = micro_head()
    return dynamic_tree_rows(monkeypatch, target, head, batch_eagle3_decoding, eagle3_decoding,
                             broken, **options)


@pytest.mark.parametrize("options", [{}, dict(temperature=0.7, top_k=2)])
def test_micro_rows_equal_each_row_alone(monkeypatch, options):
    check_records(micro_rows(monkeypatch, **options)[1:])


def test_a_row_verified_wrongly_is_caught(monkeypatch):
    with pytest.raises(AssertionError, match="differs from its single run"):
        micro_rows(monkeypatch, broken=unverified)
