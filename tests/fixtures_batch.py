"""Fixtures of the batched forms' tests (tests/test_batch*.py import them).

one_blas_thread: the BLAS runs on one thread while a test of a batched form runs. Their matrices are
small (micro models, tiny-target's 256 wide rows): a second BLAS thread gains them nothing, and
beside another busy process or a second pytest worker on two cores its spin-waiting cost several
times the test's own work (tiny-target EAGLE rows, measured: 0.9 CPU seconds on one thread, 10.6 on
two beside other processes). The count is restored afterwards.
"""
import pytest
from threadpoolctl import threadpool_limits


@pytest.fixture(autouse=True, scope="module")
def one_blas_thread():
    with threadpool_limits(limits=1, user_api="blas"):
        yield
