"""Shared test set-up: a deterministic hypothesis profile, so CI never flakes on a new random example, and one BLAS
thread per pytest-xdist worker (`-n 2` on two cores: two workers, each with two BLAS threads, would fight)."""
import os
import sys
from pathlib import Path

from hypothesis import HealthCheck, settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # import gpt2/ and picospec/ from the checkout

settings.register_profile("ci", derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_configure(config):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import threadpoolctl

        threadpoolctl.threadpool_limits(1, user_api="blas")
