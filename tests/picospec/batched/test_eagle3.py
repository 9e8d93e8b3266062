"""Batched EAGLE-3: batch_eagle3_decoding (picospec/batched/eagle3.py) on the batched head gives
each row what eagle3_decoding gives its prompt alone with its own generator: on the built-in target
and its shipped EAGLE-3 head at temperature 0 and 1, and on a micro GPT-2 of three tokens whose
random head drafts over two of them (48 rows, nodes accepted and rejected, at temperature 1 and 0.7
with top-k 2), where the first drafted path taken unverified in the batched run is caught. So each
row has the law that tests/picospec/test_eagle3.py checks (tests/support/batchrows.py)."""
import numpy as np
import pytest

import picospec.eagle2 as eagle2
from gpt2.eagle import BatchEagleHead
from gpt2.eagle3 import Eagle3Head, init_eagle3
from gpt2.engine import BatchGPT2
from picospec.batched.eagle3 import batch_eagle3_decoding
from picospec.eagle3 import eagle3_decoding

from tests.support.batchrows import (HP, N as MICRO_N, ROWS, built_in, check_paths, check_records,
                                     check_rows_alone, generators, heads, micro)
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
    (target, head), stats = micro_head(), []
    kwargs = dict(depth=2, tree_top_k=2, total_tokens=3, **options)
    with monkeypatch.context() as patch:
        if broken:
            patch.setattr(eagle2, "verify_tree", broken)
        out = batch_eagle3_decoding(ROWS, BatchGPT2(target, len(ROWS), tree_slots=8),
                                    BatchEagleHead(head, len(ROWS)), MICRO_N,
                                    np.random.default_rng(99), stats=stats,
                                    generators=generators(len(ROWS)), **kwargs)

    def alone(b, steps):
        target.reset(), head.reset()
        return eagle3_decoding(ROWS[b], target, head, MICRO_N, np.random.default_rng(b),
                               stats=steps, **kwargs)

    check_paths(check_rows_alone(out, alone, monkeypatch))
    return stats


@pytest.mark.parametrize("options", [{}, dict(temperature=0.7, top_k=2)])
def test_micro_rows_equal_each_row_alone(monkeypatch, options):
    check_records(micro_rows(monkeypatch, **options)[1:])


def test_a_row_verified_wrongly_is_caught(monkeypatch):
    with pytest.raises(AssertionError, match="differs from its single run"):
        micro_rows(monkeypatch, broken=unverified)
