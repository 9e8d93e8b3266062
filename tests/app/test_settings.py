"""The environment's settings (picospec_app/settings.py), read once at the app's edge: each
variable's values, a bad value named in one line, and each setting reaching the engines main.py
builds."""
import json
import re

import pytest

from picospec_app.settings import Settings, engine_choices, read_settings

from tests.support.clitools import run_here


def test_unset_is_the_default():
    assert read_settings({}) == Settings()


def test_each_variable_by_hand():
    s = read_settings({"PICOSPEC_THREADS": "3", "PICOSPEC_PANELS": "0", "PICOSPEC_STATIC": "yes",
                       "PICOSPEC_FUSED": "off", "PICOSPEC_OFFLINE": "1"})
    assert (s.threads, s.panels, s.static, s.fused, s.offline) == (3, False, True, False, True)
    assert read_settings({"PICOSPEC_PANELS": "1"}).panels is True
    assert [read_settings({"NO_COLOR": v}).color for v in ("1", "0", "")] == [False, False, True]
    assert [read_settings({"TERM": v}).color for v in ("dumb", "xterm")] == [False, True]
    assert engine_choices(s) == {"threads": 3, "panels": False, "static": True, "fused": False,
                                 "free": None}  # threads asked: the idle cores are not measured
    assert engine_choices(s, threads=5)["threads"] == 5  # --threads over the variable


def test_engine_choices_read_the_environment_and_measure_the_idle_cores(monkeypatch):
    """Called bare (as the benches do): the settings of os.environ, and the idle cores measured
    only where no count of threads was asked for, by the variable or by --threads."""
    import gpt2.fast.policy

    monkeypatch.setattr(gpt2.fast.policy, "free_cores", lambda: (7, 8, "stub"))
    monkeypatch.setenv("PICOSPEC_THREADS", "3")
    monkeypatch.setenv("PICOSPEC_STATIC", "1")
    bare = engine_choices()
    assert (bare["threads"], bare["static"], bare["free"]) == (3, True, None)
    monkeypatch.delenv("PICOSPEC_THREADS")
    assert engine_choices()["free"] == (7, 8, "stub")
    assert engine_choices(Settings())["free"] == (7, 8, "stub")
    assert engine_choices(Settings(), measure=False)["free"] is None
    assert engine_choices(Settings(), threads=2)["free"] is None


@pytest.mark.parametrize("name, value, message", [
    ("PICOSPEC_THREADS", "many", "set it to a whole number from 1 to 256"),
    ("PICOSPEC_THREADS", "0", "set it to a whole number from 1 to 256"),
    ("PICOSPEC_THREADS", "99999", "set it to a whole number from 1 to 256"),
    ("PICOSPEC_THREADS", "257", "set it to a whole number from 1 to 256"),
    ("PICOSPEC_THREADS", "\u00b2", "set it to a whole number from 1 to 256"),
    ("PICOSPEC_THREADS", "-1", "set it to a whole number from 1 to 256"),
    ("PICOSPEC_PANELS", "2", "set it to 1 (on) or 0 (off)"),
    ("PICOSPEC_STATIC", "maybe", "set it to 1 (on) or 0 (off)"),
    ("PICOSPEC_FUSED", "2", "set it to 1 (on) or 0 (off)"),
    ("PICOSPEC_QUICK", "maybe", "set it to 1 (on) or 0 (off)"),
])
def test_a_bad_value_is_named(name, value, message):
    with pytest.raises(ValueError, match=re.escape(f"{name}='{value}': {message}")):
        read_settings({name: value})


SETTINGS = ("PICOSPEC_THREADS", "PICOSPEC_PANELS", "PICOSPEC_STATIC", "PICOSPEC_FUSED",
            "PICOSPEC_OFFLINE", "PICOSPEC_CACHE", "PICOSPEC_QUICK")


@pytest.mark.parametrize("name", SETTINGS)
@pytest.mark.parametrize("blank", ["", " ", "\t"])
def test_a_blank_value_is_unset_for_every_setting(name, blank):
    assert read_settings({name: blank}) == Settings()


@pytest.mark.parametrize("name, field", [("PICOSPEC_PANELS", "panels"),
                                         ("PICOSPEC_STATIC", "static"),
                                         ("PICOSPEC_FUSED", "fused"),
                                         ("PICOSPEC_OFFLINE", "offline")])
@pytest.mark.parametrize("word, on", [("1", True), ("yes", True), ("On", True), ("true", True),
                                      ("0", False), ("no", False), ("OFF", False)])
def test_every_on_off_setting_takes_the_same_words(name, field, word, on):
    assert getattr(read_settings({name: word}), field) is on


@pytest.mark.parametrize("value, threads", [("1", 1), ("256", 256), (" 8 ", 8)])
def test_threads_from_1_to_256(value, threads):
    """The bounds of --threads, both included."""
    assert read_settings({"PICOSPEC_THREADS": value}).threads == threads


def test_the_cache_is_an_absolute_folder(tmp_path, monkeypatch):
    """A value that cannot be a cache folder (relative: built under the current folder) is refused
    before anything is built; ~ is the home folder."""
    assert read_settings({"PICOSPEC_CACHE": str(tmp_path)}).cache == str(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert read_settings({"PICOSPEC_CACHE": "~/c"}).cache == str(tmp_path / "c")
    for value in ("yes", "-1", "cache", "./x"):
        with pytest.raises(ValueError, match=re.escape(f"PICOSPEC_CACHE={value!r}: set it to an "
                                                       "absolute folder path")):
            read_settings({"PICOSPEC_CACHE": value})


def test_a_cache_under_no_ones_home_is_named(tmp_path):
    """~name of a user this machine does not have: one line, in main.py too (no traceback)."""
    value = "~no-such-user-here/cache"
    with pytest.raises(ValueError, match=re.escape(f"PICOSPEC_CACHE={value!r}: ~no-such-user-here "
                                                   f"names no home folder here; set it to an ")):
        read_settings({"PICOSPEC_CACHE": value})
    r = run_here(["main.py", "--method", "autoregressive", "--n_tokens", "2"], tmp_path,
                 env={"PICOSPEC_CACHE": value})
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "PICOSPEC_CACHE=" in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("name, fix", [("PICOSPEC_HUB_URL", "set HF_ENDPOINT to the hub's address"),
                                       ("PICOSPEC_THREAD", "did you mean PICOSPEC_THREADS?"),
                                       ("PICOSPEC_OFLINE", "did you mean PICOSPEC_OFFLINE?"),
                                       # short: compared after PICOSPEC_, every letter
                                       ("PICOSPEC_STAX", "did you mean PICOSPEC_STATIC?"),
                                       ("PICOSPEC_ZZZZZZZ", "the settings are PICOSPEC_THREADS")])
def test_a_setting_no_one_reads_is_named(name, fix):
    """A misspelt or dropped setting would be ignored in silence: it is refused with its fix."""
    with pytest.raises(ValueError, match=re.escape(f"{name} is not a picospec setting: {fix}")):
        read_settings({name: "1"})


@pytest.mark.parametrize("env, expected", [({"PICOSPEC_PANELS": "1"}, ("form", True)),
                                           ({"PICOSPEC_PANELS": "0"}, ("cpu", False))])
def test_main_builds_its_engines_with_the_settings(env, expected, tmp_path):
    """Panels on: in the form this BLAS's kernels favour (the child loads the same library)."""
    from gpt2.fast.policy import panel_form

    r = run_here(["main.py", "--method", "speculative", "--n_tokens", "4", "--temperature", "0",
                  "--runs", "1", "--json"], tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    threads = json.loads(r.stdout)["threads"]
    kind = panel_form() if expected[0] == "form" else expected[0]
    assert (threads["ops"], threads["panels"]["on"]) == (kind, expected[1])


def test_main_says_a_bad_setting_in_one_line(tmp_path):
    r = run_here(["main.py", "--method", "autoregressive", "--n_tokens", "2"], tmp_path,
                 env={"PICOSPEC_THREADS": "lots"})
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "PICOSPEC_THREADS='lots'" in r.stderr and len(r.stderr.strip().splitlines()) == 1
