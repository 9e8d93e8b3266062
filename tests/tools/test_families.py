"""tools/families.py: each kernel family runs in its own process and gets its own section."""
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from tools import families
from tools.page import without


def test_without_drops_the_options_and_their_values():
    argv = ["--shapes", "tiny", "--out", "a.md", "--families=Haswell", "--quiet", "0", "--x"]
    assert without(argv, ("--out", "--families", "--quiet")) == ["--shapes", "tiny", "--x"]


def test_each_family_runs_in_its_own_process_on_one_page(tmp_path, monkeypatch, capfd):
    """bench.ops on the tiny shape, once per family: each section's BLAS row names the kernels its
    child process really loaded, and the page names them all in its header; "wrote" names that
    page alone, not a child's part of it."""
    out = tmp_path / "ops.md"
    monkeypatch.setattr(sys, "argv", ["bench.ops", "--shapes", "tiny", "--repeats", "1"])
    here = families.families_here()
    families.by_family("bench.ops", here, 0, str(out))
    page = out.read_text(encoding="utf-8")
    assert f"| BLAS | a section per kernel family: {', '.join(f'{f} kernels' for f in here)} |" \
        in page
    for family, section in list(zip(here, page.split("\n## ")[1:])):
        assert section.startswith(f"{family} kernels")
        assert f"kernel family {family}, OPENBLAS_CORETYPE={family}" in section
        assert f"The library reports {family} kernels." in section
    assert not list(tmp_path.glob("*.tmp"))  # the children's pages are gone
    said = [line for line in "".join(capfd.readouterr()).splitlines() if line.startswith("wrote")]
    assert said == [f"wrote {out}"], said


def test_a_family_the_cpu_cannot_run_is_skipped_and_said(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(families, "cpu_flags", lambda: {"pni", "ssse3", "sse4_2", "avx", "avx2"})
    monkeypatch.setattr(sys, "argv", ["bench.ops", "--shapes", "tiny", "--repeats", "1"])
    families.by_family("bench.ops", ["SkylakeX"], 0, str(tmp_path / "ops.md"))
    assert "SkylakeX: this CPU cannot run these kernels (no AVX-512); skipped" in \
        capsys.readouterr().out
    assert not (tmp_path / "ops.md").exists()


@pytest.mark.parametrize("flags, here", [
    ({"pni", "avx", "avx2"}, ["Haswell"]), ({"avx2", "avx512f"}, ["Haswell", "SkylakeX"]),
    (None, ["Haswell"]), (set(), [])])
def test_a_page_measures_haswell_and_skylakex_where_the_cpu_runs_them(monkeypatch, flags, here):
    """The default families follow the CPU's flags; where none can be read, Haswell is assumed."""
    monkeypatch.setattr(families, "cpu_flags", lambda: flags)
    assert families.families_here() == here


@pytest.mark.parametrize("family, flag", [("Prescott", "pni"), ("Core2", "ssse3"),
                                          ("Nehalem", "sse4_2"), ("Sandybridge", "avx"),
                                          ("Zen", "avx2")])
def test_an_older_family_runs_where_its_flag_is_and_only_there(monkeypatch, family, flag):
    monkeypatch.setattr(families, "cpu_flags", lambda: {flag})
    assert families.runs(family)
    monkeypatch.setattr(families, "cpu_flags", lambda: {"fpu"})
    assert not families.runs(family)


def test_cpu_flags_are_the_words_after_the_colon_of_the_flags_line():
    flags = families.cpu_flags()
    if not flags:
        pytest.skip("no flags line in /proc/cpuinfo here")
    line = next(line for line in open("/proc/cpuinfo") if line.startswith("flags"))
    assert flags == set(line.split(":", 1)[1].split()) and "flags" not in flags


def test_a_failing_family_stops_with_its_exit_status(tmp_path, monkeypatch, capfd):
    """A command line the family's process refuses, before printing anything, is its one line
    alone: no family header before it."""
    monkeypatch.setattr(sys, "argv", ["bench.ops", "--shapes", "nonsense"])
    with pytest.raises(SystemExit) as stop:
        families.by_family("bench.ops", ["Haswell"], 0, str(tmp_path / "ops.md"))
    assert stop.value.code == 2
    assert not list(tmp_path.iterdir())
    out, err = capfd.readouterr()
    assert out == "" and err.startswith("error: unknown --shapes") and err.count("\n") == 1, \
        (out, err)


def test_a_family_that_runs_is_headed_before_its_first_line(tmp_path, monkeypatch, capfd):
    monkeypatch.setattr(sys, "argv", ["bench.ops", "--shapes", "tiny", "--repeats", "1"])
    families.by_family("bench.ops", ["Haswell"], 0, None)
    out = capfd.readouterr().out
    assert out.startswith("\n── Haswell kernels (OPENBLAS_CORETYPE=Haswell; 1-minute load "), out
    assert out.count("── Haswell kernels") == 1


def test_a_family_that_fails_after_writing_its_page_leaves_nothing(tmp_path, monkeypatch):
    """tests.suite.timing writes its page, then exits 1 when a test failed: the page is removed."""
    child = tmp_path / "child.py"
    child.write_text("import sys\nopen(sys.argv[sys.argv.index('--out') + 1], 'w').write('x')\n"
                     "sys.exit(1)\n")
    monkeypatch.setattr(families, "run_child", lambda args, env, header: __import__(
        "subprocess").run([sys.executable, str(child), *args[3:]], env=env).returncode)
    monkeypatch.setattr(sys, "argv", ["bench.ops"])
    with pytest.raises(SystemExit) as stop:
        families.by_family("bench.ops", ["Haswell"], 0, str(tmp_path / "ops.md"))
    assert stop.value.code == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["child.py"]


def test_a_page_waits_for_a_quiet_machine_and_says_so(monkeypatch, capsys):
    loads = iter([1.3, 1.3, 0.9, 0.49, 0.49, 0.49])
    monkeypatch.setattr(families.os, "getloadavg", lambda: (next(loads), 0.0, 0.0))
    monkeypatch.setattr(families.time, "sleep", lambda s: None)
    assert families.wait_quiet(0.5) == 0.49
    assert "waiting for a quiet machine: 1-minute load 1.30" in capsys.readouterr().out


def test_no_page_no_wait(monkeypatch):
    """Without --out nothing waits for a quiet machine, whatever --quiet says."""
    monkeypatch.setattr(families, "wait_quiet", lambda *a: pytest.fail("waited with no page"))
    monkeypatch.setattr(families, "run_child", lambda args, env, header: 0)
    monkeypatch.setattr(sys, "argv", ["bench.ops"])
    families.by_family("bench.ops", families.families_here(), 0.5, None)


class Gone:
    """A stream whose reader has gone (a pipe to `head` closed after its lines)."""

    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self):
        raise BrokenPipeError(32, "Broken pipe")


def test_the_relay_outlives_a_closed_reader():
    """The relay thread drops the rest once nobody reads, and drains the child (no traceback, no
    child blocked on a full pipe)."""
    import os

    r, w = os.pipe()
    os.write(w, b"x" * 10_000)
    os.close(w)
    with os.fdopen(r, "rb") as stream:
        families.relay(stream, Gone())
        assert stream.read() == b""


def test_a_file_of_the_users_beside_the_page_stays(tmp_path, monkeypatch):
    """A file of the user's named like a family's page (OUT.Haswell.tmp) is neither overwritten nor
    removed: each child's page gets a name no file had."""
    out, mine = tmp_path / "ops.md", tmp_path / "ops.md.Haswell.tmp"
    mine.write_text("my notes\n")
    monkeypatch.setattr(sys, "argv", ["bench.ops", "--shapes", "tiny", "--repeats", "1"])
    families.by_family("bench.ops", ["Haswell"], 0, str(out))
    assert mine.read_text() == "my notes\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ops.md", "ops.md.Haswell.tmp"]
    assert "## Haswell kernels" in out.read_text(encoding="utf-8")


def test_ctrl_c_during_a_family_leaves_no_page(tmp_path, monkeypatch):
    """Ctrl-C while a family's child runs (after it wrote its page): no page is left beside OUT."""
    def interrupted(args, env, header):
        Path(args[args.index("--out") + 1]).write_text("a page\n")
        raise KeyboardInterrupt

    monkeypatch.setattr(families, "run_child", interrupted)
    monkeypatch.setattr(sys, "argv", ["bench.ops"])
    with pytest.raises(KeyboardInterrupt):
        families.by_family("bench.ops", ["Haswell"], 0, str(tmp_path / "ops.md"))
    assert list(tmp_path.iterdir()) == []


def test_an_interrupted_family_ends_its_process(tmp_path, monkeypatch):
    """SIGTERM reaches this process alone (Ctrl-C reaches the whole group): the family's process is
    ended with it, never left to write its page after this one cleaned up."""
    child, pid = tmp_path / "child.py", tmp_path / "pid"
    child.write_text("import os, sys, time\nopen(sys.argv[1], 'w').write(str(os.getpid()))\n"
                     "time.sleep(30)\nopen(sys.argv[1] + '.page', 'w').write('late')\n")

    def interrupted(self, *args, **kwargs):  # the wait for the child's output, interrupted
        while not (pid.exists() and pid.read_text()):
            time.sleep(0.05)
        raise KeyboardInterrupt

    monkeypatch.setattr(threading.Thread, "join", interrupted)
    with pytest.raises(KeyboardInterrupt):
        families.run_child([sys.executable, str(child), str(pid)], dict(os.environ))
    monkeypatch.undo()
    with pytest.raises(ProcessLookupError):  # ended, and reaped
        os.kill(int(pid.read_text()), 0)
    assert not (tmp_path / "pid.page").exists()  # ended, not waited for to its end


BENCH = '''import os
import signal
import time

from tools.families import command


def main():
    ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    print(f"measuring in {os.getpid()}, Ctrl-C ignored: {ignored}", flush=True)
    while True:
        time.sleep(0.1)


if __name__ == "__main__":
    command(main, [])
'''


def test_ctrl_c_in_a_terminal_is_one_line_and_ends_the_familys_process(tmp_path):
    """Ctrl-C reaches the whole process group, a family's process too: that process ignores it
    (its parent ends it, and a SIGTERM inside its own Ctrl-C handling printed a traceback), the run
    says "interrupted" once (the family's words about being ended are not relayed), exits 130, and
    the family's process is ended and reaped. The signal is sent once that process says it
    measures."""
    import signal
    import subprocess

    from tests.support.clitools import ROOT, sigint_as_in_a_terminal

    (tmp_path / "slow_bench.py").write_text(BENCH)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
           "PYTHONUNBUFFERED": "1"}
    p = subprocess.Popen([sys.executable, "-m", "slow_bench", "--families", "Haswell"],
                         cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True, preexec_fn=sigint_as_in_a_terminal)
    seen = ""
    try:
        while "measuring in " not in seen:
            seen += p.stdout.readline() or pytest.fail(f"exited early: {seen}{p.stderr.read()}")
        child = int(seen.split("measuring in ")[1].split(",")[0])
        assert "Ctrl-C ignored: True" in seen, seen
        os.killpg(p.pid, signal.SIGINT)  # as a terminal's Ctrl-C: to every process of the group
        out, err = p.communicate(timeout=60)
    finally:  # a run that failed to end leaves no process behind
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == 130, seen + out + err
    assert [line for line in err.splitlines() if line.strip()] == ["interrupted"], err
    with pytest.raises(ProcessLookupError):  # ended, and reaped
        os.kill(child, 0)


def test_a_cpu_with_avx2_runs_every_older_family():
    """The flags are spelled as /proc/cpuinfo spells them: a CPU with AVX2 has SSE3 ("pni"), SSSE3,
    SSE4.2 and AVX, so it runs the Prescott, Core2, Nehalem and Sandybridge kernels."""
    flags = families.cpu_flags()
    if not flags or "avx2" not in flags:
        pytest.skip("not an x86-64 CPU with AVX2")
    assert all(families.runs(f) for f in ("Prescott", "Core2", "Nehalem", "Sandybridge", "Zen"))
