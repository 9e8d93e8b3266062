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
    assert engine_choices(s) == {"threads": 3, "panels": False, "static": True, "fused": False,
                                 "free": None}  # threads asked: the idle cores are not measured
    assert engine_choices(s, threads=5)["threads"] == 5  # --threads over the variable


@pytest.mark.parametrize("name, value, message", [
    ("PICOSPEC_THREADS", "many", "set it to a whole number from 1 to 256"),
    ("PICOSPEC_THREADS", "0", "set it to a whole number from 1 to 256"),
    ("PICOSPEC_THREADS", "99999", "set it to a whole number from 1 to 256"),
    ("PICOSPEC_PANELS", "yes", "set it to 1 (weight panels on) or 0 (off)"),
    ("PICOSPEC_STATIC", "maybe", "set it to 1 (on) or 0 (off)"),
    ("PICOSPEC_FUSED", "2", "set it to 1 (on) or 0 (off)"),
])
def test_a_bad_value_is_named(name, value, message):
    with pytest.raises(ValueError, match=re.escape(f"{name}='{value}': {message}")):
        read_settings({name: value})


@pytest.mark.parametrize("env, expected", [({"PICOSPEC_PANELS": "1"}, ("panels", True)),
                                           ({"PICOSPEC_PANELS": "0"}, ("cpu", False))])
def test_main_builds_its_engines_with_the_settings(env, expected, tmp_path):
    r = run_here(["main.py", "--method", "speculative", "--n_tokens", "4", "--temperature", "0",
                  "--runs", "1", "--json"], tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    threads = json.loads(r.stdout)["threads"]
    assert (threads["ops"], threads["panels"]["on"]) == expected


def test_main_says_a_bad_setting_in_one_line(tmp_path):
    r = run_here(["main.py", "--method", "autoregressive", "--n_tokens", "2"], tmp_path,
                 env={"PICOSPEC_THREADS": "lots"})
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "PICOSPEC_THREADS='lots'" in r.stderr and len(r.stderr.strip().splitlines()) == 1
