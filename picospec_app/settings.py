"""The environment's settings, read once here (nothing under gpt2/ or picospec/ reads os.environ):

    PICOSPEC_THREADS   BLAS threads for the forwards (1..256; unset: the thread policy)
    PICOSPEC_PANELS    1 or 0: weight panels on or off on the CPU (unset: the policy)
    PICOSPEC_STATIC    1: the static-shape step (gpt2/fast/static.py)
    PICOSPEC_FUSED     0: no fused CUDA kernels on a GPU
    PICOSPEC_OFFLINE   1: never touch the network (as --offline)
    PICOSPEC_CACHE     where the REST datastore is built (~/.cache/picospec)
"""
import os
from dataclasses import dataclass

from picospec_cli import env_flag


@dataclass(frozen=True)
class Settings:
    threads: int | None = None
    panels: bool | None = None
    static: bool = False
    fused: bool = True
    offline: bool = False
    cache: str | None = None


def env_threads(environ):
    value = environ.get("PICOSPEC_THREADS", "")
    if not value:
        return None
    if not value.isdigit() or not 1 <= int(value) <= 256:
        raise ValueError(f"PICOSPEC_THREADS={value!r}: set it to a whole number from 1 to 256 "
                         f"(as --threads), or unset it for the policy")
    return int(value)


def env_panels(environ):
    value = environ.get("PICOSPEC_PANELS", "")
    if value not in ("", "0", "1"):
        raise ValueError(f"PICOSPEC_PANELS={value!r}: set it to 1 (weight panels on) or 0 (off), "
                         f"or unset it for the policy")
    return None if value == "" else value == "1"


def read_settings(environ=None):
    """PICOSPEC_* variables of `environ` (default os.environ) -> Settings; ValueError if bad."""
    environ = os.environ if environ is None else environ
    return Settings(threads=env_threads(environ), panels=env_panels(environ),
                    static=env_flag("PICOSPEC_STATIC", False, environ),
                    fused=env_flag("PICOSPEC_FUSED", True, environ),
                    offline=env_flag("PICOSPEC_OFFLINE", False, environ),
                    cache=environ.get("PICOSPEC_CACHE") or None)


def engine_choices(settings=None, threads=None, measure=True):
    """The keywords of gpt2.load.load_model from the settings, --threads and the cores idle now
    (measured unless measure=False)."""
    from gpt2.fast.policy import free_cores

    settings = read_settings() if settings is None else settings
    threads = threads if threads is not None else settings.threads
    return {"threads": threads, "panels": settings.panels, "static": settings.static,
            "fused": settings.fused, "free": free_cores() if measure and threads is None else None}
