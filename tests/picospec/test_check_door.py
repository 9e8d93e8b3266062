"""python -m picospec.check at its edges: Ctrl-C, a sampler's missing package, --samples beyond
memory. Each is one line, before any case where it can be."""
import os
import signal
import subprocess
import sys
import time


from gpt2.load import ASSETS

from tests.support.clitools import (ROOT, assert_refused, run_cli, run_here,
                                    sigint_as_in_a_terminal)
FAST = 3.0  # seconds: a mistake in the options is refused before any model loads
TARGET = ASSETS / "tiny-target"


def test_check_prints_one_line_on_ctrl_c(tmp_path):
    """python -m picospec.check, interrupted while a sampler runs: exit 130 and one line."""
    (tmp_path / "slow.py").write_text("import time\nprint('ready', flush=True)\n\n\n"
                                      "def sampler(*args, **kwargs):\n    time.sleep(60)\n")
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}",
           "HOME": str(tmp_path)}
    command = [sys.executable, "-m", "picospec.check", "slow:sampler", "--samples", "100"]
    p = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, preexec_fn=sigint_as_in_a_terminal)
    deadline = time.time() + 60  # what the module prints at import goes to stderr
    while "ready" not in p.stderr.readline() and time.time() < deadline:
        assert p.poll() is None, p.stdout.read()
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130 and "Traceback" not in err
    assert err.strip().splitlines() == ["interrupted"]


def test_the_checker_names_a_package_a_found_module_imports_but_lacks(tmp_path):
    """The sampler's file is found; what is missing is a package it imports: the line says so, for
    FILE.py:FUNCTION and MODULE:FUNCTION alike, and no longer suggests moving to another folder."""
    (tmp_path / "mod.py").write_text("import notapkg_picospec\n\n\ndef f(*args):\n    pass\n")
    env = {"PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"}
    for spec in ("mod.py:f", "mod:f"):
        r = run_cli(["-m", "picospec.check", spec], tmp_path, env=env)
        assert r.returncode == 2
        assert_refused(r, rf"^error: {spec.split(':')[0]} is found, but it imports "
                          r"notapkg_picospec, which is not installed here")
        assert "run from the folder" not in r.stderr


def test_the_checker_refuses_samples_beyond_memory_before_any_case(tmp_path):
    """--samples 2000000000 was a MemoryError inside every case and a "fail" verdict (exit 1): a
    usage error now, before any case runs."""
    r = run_here(["-m", "picospec.check", "picospec.verify:verify_chain", "--samples",
                  "2000000000"], tmp_path)
    assert r.returncode == 2 and r.stdout == ""
    assert_refused(r, r"^error: --samples 2,000,000,000: a case holds its sequences at once, about "
                      r"[\d,]+ GB .* more than the [\d.]+ GB of memory free here: give --samples "
                      r"[\d,]+ or fewer", max_seconds=FAST)


def test_each_sampler_s_table_is_out_before_the_next_sampler_runs(tmp_path):
    """Standard output piped (block-buffered) and standard error into the same pipe: the first
    sampler's table comes before anything the second sampler prints, not held back to the end."""
    (tmp_path / "loud.py").write_text("from picospec.verify import verify_chain\n\n\n"
                                      "def loud(*args):\n    print('called')\n"
                                      "    return verify_chain(*args)\n")
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}",
           "HOME": str(tmp_path)}
    command = [sys.executable, "-m", "picospec.check", "picospec.verify:verify_chain", "loud:loud",
               "--cases", "1", "--samples", "100"]
    r = subprocess.run(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=120)
    assert r.returncode == 0, r.stdout
    first = r.stdout.index("picospec.verify:verify_chain: contract chain")
    assert first < r.stdout.index("called\n") < r.stdout.index("loud:loud: contract chain")
