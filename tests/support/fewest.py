"""The fewest sequences a test grades a law-graded exercise at."""
import functools

from picospec.exercises import grading


@functools.cache
def fewest(module, counts=(25, 50, 100)):
    """The fewest sequences of `counts` at which the exercise's battery catches its own broken
    samplers (verify_chain: 25; verify_without_replacement: 50; draft_law: 100), None for an
    exercise graded by cases. A mistake rejected there, where its test expects, stands (else it is
    graded again at more); a right answer passes a case with probability 1 - alpha at any number
    of sequences."""
    if not hasattr(module, "CONTRACT"):
        return None
    battery = getattr(module, "BATTERY", None)
    return next((n for n in counts if all(case for _, case in grading.controls(
        module.CONTRACT, n, 0, battery))), counts[-1])
