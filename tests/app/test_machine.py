"""The report's BLAS line (picospec_app/machine.py) on machines the suite does not run on: a kernel
family other than the one OPENBLAS_CORETYPE names, no BLAS library that threadpoolctl can set, a
library that runs fewer threads than the wide count."""
import pytest

from gpt2.fast import policy
from picospec_app import machine
from tests.support.cgroups import CappedBlas

pytest.importorskip("threadpoolctl")


@pytest.mark.parametrize("core, arch, said", [
    # OpenBLAS takes the name in any case
    ("Haswell", "Haswell", "Haswell kernels (OPENBLAS_CORETYPE=Haswell) on "),
    ("skylakex", "SkylakeX", "SkylakeX kernels (OPENBLAS_CORETYPE=skylakex) on "),
    # a name OpenBLAS does not know, or a space in it: it detects the CPU's own family
    ("Foo", "SkylakeX", "SkylakeX kernels (OPENBLAS_CORETYPE='Foo' asked for others) on "),
    (" Haswell", "SkylakeX",
     "SkylakeX kernels (OPENBLAS_CORETYPE=' Haswell' asked for others) on "),
    # a family the CPU cannot run (no AVX-512): OpenBLAS falls back to one it can
    ("SkylakeX", "Haswell", "Haswell kernels (OPENBLAS_CORETYPE='SkylakeX' asked for others) on "),
    ("", "Haswell", "Haswell kernels on ")])
def test_the_blas_line_says_whether_openblas_took_the_coretype(monkeypatch, core, arch, said):
    """OPENBLAS_CORETYPE is a request: the kernels OpenBLAS reports running are named as its
    choice only where they are the family it names."""
    monkeypatch.setattr(machine, "blas_kernels", lambda: ("openblas", arch))
    report = machine.thread_policy(5_850_000, 1)
    line = machine.blas_line(report, environ={"OPENBLAS_CORETYPE": core})
    assert line.startswith(f"BLAS: openblas, {said}")


@pytest.mark.parametrize("requested, free", [(None, (4, 4, "4.0 idle now")), (2, None)])
def test_no_blas_found_the_line_says_the_count_is_not_applied(monkeypatch, requested, free):
    """NumPy on a BLAS threadpoolctl cannot see (Apple's Accelerate): the engine sets no count, and
    the line does not claim the library runs the chosen one."""
    monkeypatch.setattr(policy, "blas_libraries", lambda: ())
    monkeypatch.setattr(machine, "blas_kernels", lambda: (None, None))
    monkeypatch.setattr(machine, "free_cores", lambda: free)
    report = machine.thread_policy(124_000_000, requested)
    assert report["blas"] is None
    n = report["threads"]
    assert (f"; {n} thread{'s' if n != 1 else ''} ({report['why']}; not applied: threadpoolctl "
            f"finds no BLAS library to set); ") in machine.blas_line(report)


def test_a_found_library_gets_no_such_words():
    """Where threadpoolctl finds NumPy's BLAS (the suite's machines), the line has no such words."""
    if machine.blas_kernels()[0] is None:
        pytest.skip("no BLAS library found here")
    assert "not applied" not in machine.blas_line(machine.thread_policy(5_850_000, 1))


@pytest.mark.parametrize("most, capped", [(4, "; the library runs 4, its most"), (64, "")])
def test_the_wide_count_says_the_threads_the_library_ran(monkeypatch, most, capped):
    """A small model on a machine with more free cores than the library runs (a 128-core server,
    OpenBLAS built for 64): its wide forwards run the library's most, and the line says so; the
    JSON's wide "blas" is that count."""
    library = CappedBlas(most)
    monkeypatch.setattr(policy, "blas_libraries", lambda: (library,))
    monkeypatch.setattr(machine, "free_cores", lambda: (8, 8, "8.0 idle now"))
    report = machine.thread_policy(5_850_000)
    assert (report["threads"], report["blas"]) == (1, 1)
    assert (report["wide"]["threads"], report["wide"]["blas"]) == (8, min(8, most))
    assert (f"; 1 thread (small model (5.85M parameters), 8 for forwards of 33+ token rows (8 of 8 "
            f"cores free (8.0 idle now){capped})); small-matrix path ") in machine.blas_line(report)
    assert library.n == 1  # the report restores the library's count


@pytest.mark.parametrize("cpuinfo, processor, arch, cpus, said", [
    # x86 Linux: the model name, whole (a colon in it too), and the usable CPUs
    ("processor\t: 0\nmodel name\t: Foo CPU: rev 2 @ 2.0GHz\n", "x86_64", "x86_64", 2,
     "Foo CPU: rev 2 @ 2.0GHz, 2 CPUs"),
    # ARM Linux writes no model name: the platform's words
    ("processor\t: 0\nBogoMIPS\t: 50.00\n", "", "aarch64", 1, "aarch64, 1 CPU"),
    ("processor\t: 0\nBogoMIPS\t: 50.00\n", "arm", "aarch64", 3, "arm, 3 CPUs"),
    # no /proc/cpuinfo (macOS, Windows) and no name from the platform
    (None, "", "", 2, "unknown CPU, 2 CPUs")])
def test_the_machine_is_named_by_its_cpu_and_usable_cpus(monkeypatch, cpuinfo, processor, arch,
                                                         cpus, said):
    import io
    import platform

    def read(path):
        if cpuinfo is None:
            raise FileNotFoundError(path)
        return io.StringIO(cpuinfo)

    monkeypatch.setattr(machine, "open", read, raising=False)
    monkeypatch.setattr(platform, "processor", lambda: processor)
    monkeypatch.setattr(platform, "machine", lambda: arch)
    monkeypatch.setattr(machine, "usable_cpus", lambda: (set(range(8)), cpus))
    assert machine.machine() == said


@pytest.mark.parametrize("model", [object(), type("Model", (), {"plan": object()})()])
def test_a_model_of_no_blas_products_says_one_thread(model):
    """A draft of no weights (ngram), or an engine whose plan sets no threads: one thread, said
    once, no wide count, no panels."""
    report = machine.policy(model)
    assert report["threads"] == 1 and report["blas"] is None and report["ops"] is None
    assert report["wide"]["threads"] == 1 and report["wide"]["blas"] is None  # no library ran
    line = machine.blas_line(report)
    assert "; 1 thread (no BLAS products); small-matrix path off (no weights)" in line, line


@pytest.mark.parametrize("arch, form", [("SkylakeX", "direct SGEMM"), ("Haswell", "one by one")])
def test_a_benchmark_header_gives_the_panels_on_the_cpu_only(monkeypatch, arch, form):
    """thread_policy (an engine not built yet): on the CPU with OpenBLAS the panels are on, in the
    form of each kernel family; on the GPU they are off, whatever the BLAS."""
    monkeypatch.setattr(policy, "blas_kernels", lambda: ("openblas", arch))
    panels = machine.thread_policy(5_850_000, 1)["panels"]
    assert machine.thread_policy(5_850_000, 1)["ops"] is None  # no engine built: no operations
    assert panels["on"] and form in panels["why"]
    assert machine.thread_policy(5_850_000, 1, device="gpu")["panels"] == {
        "on": False, "why": "the model runs on the GPU"}


@pytest.mark.parametrize("static", [False, True])
def test_the_static_shape_step_is_said_where_it_runs(monkeypatch, static):
    """PICOSPEC_STATIC=on builds the static-shape step on the CPU too: the --json object's threads
    say so, and so does the BLAS line (nothing where it is off)."""
    from gpt2.load import load_model
    from picospec_app.settings import Settings, engine_choices

    monkeypatch.setenv("PICOSPEC_OFFLINE", "1")
    model, _ = load_model("tiny-target", **engine_choices(Settings(static=static), threads=1))
    report = machine.policy(model)
    assert report["static"] is static
    said = "; the static-shape step (PICOSPEC_STATIC)"
    assert (said in machine.blas_line(report)) is static
