"""The environment's on/off flags (picospec_cli.env_flag): the documented values, and any other
value refused with its fix."""

import pytest

from gpt2.load import ASSETS

FAST = 3.0  # seconds: a mistake in the options is refused before any model loads
TARGET = ASSETS / "tiny-target"


@pytest.mark.parametrize("value, expected", [
    ("1", True), ("true", True), ("YES", True), ("on", True), ("0", False), ("false", False),
    ("No", False), ("off", False), ("", "default"), (None, "default")])
def test_env_flags_take_their_documented_values(value, expected, monkeypatch):
    from picospec_cli import env_flag

    if value is None:
        monkeypatch.delenv("PICOSPEC_X", raising=False)
    else:
        monkeypatch.setenv("PICOSPEC_X", value)
    assert env_flag("PICOSPEC_X", "default") == expected


@pytest.mark.parametrize("value", ["maybe", "2", "offline", "y"])
def test_other_env_flag_values_are_refused(value, monkeypatch):
    from picospec_app.settings import read_settings
    from picospec_cli import env_flag

    monkeypatch.setenv("PICOSPEC_OFFLINE", value)
    with pytest.raises(ValueError, match=f"PICOSPEC_OFFLINE='{value}': set it to 1"):
        env_flag("PICOSPEC_OFFLINE")
    with pytest.raises(ValueError, match="PICOSPEC_OFFLINE"):
        read_settings()


def test_an_unset_flag_with_no_default_is_none():
    from picospec_cli import env_flag

    assert env_flag("PICOSPEC_X", environ={}) is None
