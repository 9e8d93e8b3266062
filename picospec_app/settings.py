"""The environment's settings, read once here (nothing under gpt2/ or picospec/ reads os.environ):

    PICOSPEC_THREADS   BLAS threads for the forwards (1..256; unset: the thread policy)
    PICOSPEC_PANELS    on or off: weight panels on the CPU (unset: the policy)
    PICOSPEC_STATIC    on: the static-shape step (gpt2/fast/static.py)
    PICOSPEC_FUSED     off: no fused CUDA kernels on a GPU
    PICOSPEC_OFFLINE   on: never touch the network (as --offline)
    PICOSPEC_CACHE     an absolute folder (~ allowed) where the REST datastore is built
                       (unset: ~/.cache/picospec)
    PICOSPEC_QUICK     on: the notebooks' quick mode (read by the notebooks themselves)
    NO_COLOR           any value but the empty one: no ANSI colors on a terminal (no-color.org);
                       TERM=dumb too (a terminal that shows escape codes as text)

One rule for every PICOSPEC_* setting: a value that is empty or only spaces counts as unset; on/off
settings take 1, true, yes, on / 0, false, no, off; any other PICOSPEC_* name is refused, naming the
known ones.
"""
import os
import re
from dataclasses import dataclass
from pathlib import Path

from picospec_cli import env_flag

KNOWN = ("PICOSPEC_THREADS", "PICOSPEC_PANELS", "PICOSPEC_STATIC", "PICOSPEC_FUSED",
         "PICOSPEC_OFFLINE", "PICOSPEC_CACHE", "PICOSPEC_QUICK")
# settings that are gone, and what does their work now
GONE = {"PICOSPEC_HUB_URL": "set HF_ENDPOINT to the hub's address instead"}


@dataclass(frozen=True)
class Settings:
    threads: int | None = None
    panels: bool | None = None
    static: bool = False
    fused: bool = True
    offline: bool = False
    cache: str | None = None
    color: bool = True  # NO_COLOR unset or empty, and TERM not dumb
    quick: bool = False  # the notebooks read it; checked here like the others


def env_value(name, environ):  # the value, or None where unset, empty or only spaces
    return environ.get(name, "").strip() or None


def env_threads(environ):
    value = env_value("PICOSPEC_THREADS", environ)
    if value is None:
        return None
    if not re.fullmatch(r"[0-9]+", value) or not 1 <= int(value) <= 256:
        raise ValueError(f"PICOSPEC_THREADS={environ['PICOSPEC_THREADS']!r}: set it to a whole "
                         f"number from 1 to 256 (as --threads), or unset it for the policy")
    return int(value)


def env_cache(environ):
    value = env_value("PICOSPEC_CACHE", environ)
    if value is None:
        return None
    raw = environ["PICOSPEC_CACHE"]
    try:
        folder = Path(value).expanduser()
    except RuntimeError:  # ~name of no user here (pathlib: "Could not determine home directory")
        user = value.split("/")[0]
        raise ValueError(f"PICOSPEC_CACHE={raw!r}: {user} names no home folder here; set it to "
                         f"an absolute folder path, or unset it for ~/.cache/picospec") from None
    if not folder.is_absolute():
        raise ValueError(f"PICOSPEC_CACHE={raw!r}: set it to an absolute folder path (~ allowed), "
                         f"or unset it for ~/.cache/picospec")
    return str(folder)  # whether it can be made is asked where it is needed (picospec_app.load)


def unknown_names(environ):
    """PICOSPEC_* names no setting reads -> ValueError naming the first and what to do."""
    import difflib

    unknown = sorted(n for n in environ if n.startswith("PICOSPEC_") and n not in KNOWN)
    if not unknown:
        return
    name = unknown[0]
    near = difflib.get_close_matches(name[9:], [k[9:] for k in KNOWN], n=1)  # after PICOSPEC_
    fix = GONE.get(name) or (f"did you mean PICOSPEC_{near[0]}?" if near else
                             f"the settings are {', '.join(KNOWN)}")
    raise ValueError(f"{name} is not a picospec setting: {fix} (or unset {name})")


def read_settings(environ=None):
    """PICOSPEC_* variables of `environ` (default os.environ) -> Settings; ValueError if bad."""
    environ = os.environ if environ is None else environ
    unknown_names(environ)
    return Settings(threads=env_threads(environ),
                    panels=env_flag("PICOSPEC_PANELS", None, environ),
                    static=env_flag("PICOSPEC_STATIC", False, environ),
                    fused=env_flag("PICOSPEC_FUSED", True, environ),
                    offline=env_flag("PICOSPEC_OFFLINE", False, environ),
                    cache=env_cache(environ),
                    quick=env_flag("PICOSPEC_QUICK", False, environ),
                    color=not environ.get("NO_COLOR") and environ.get("TERM") != "dumb")


def engine_choices(settings=None, threads=None, measure=True):
    """The keywords of gpt2.load.load_model from the settings, --threads and the cores idle now
    (measured unless measure=False)."""
    from gpt2.fast.policy import free_cores

    settings = read_settings() if settings is None else settings
    threads = threads if threads is not None else settings.threads
    return {"threads": threads, "panels": settings.panels, "static": settings.static,
            "fused": settings.fused, "free": free_cores() if measure and threads is None else None}
