"""Sentences the notebooks print from their measured figures, and the check that reads them back.

A verdict line names its figures, so `check` can recompute what they imply: a sentence that
contradicts the numbers printed in it fails."""
import re

NOISE = 0.05  # measured and predicted within 5% of each other: "matches"


def versus(measured, predicted):
    """Measured against predicted speedup -> one sentence with both figures (as printed)."""
    measured, predicted = round(measured, 2), round(predicted, 2)
    if abs(measured - predicted) <= NOISE * predicted:
        word = "matches"
    else:
        word = "beats" if measured > predicted else "falls short of"
    return f"verdict: measured {measured:.2f}x {word} the cost model's {predicted:.2f}x"


def gains(predicted):
    """The cost model's speedup -> one sentence: whether it predicts a gain (as printed)."""
    predicted = round(predicted, 2)
    word = "a gain" if predicted > 1 else "no gain"
    return f"verdict: the cost model's {predicted:.2f}x predicts {word}"


def iid(measured, predicted):
    """Measured tokens per target call against the i.i.d. prediction -> one sentence with both
    figures (as printed): above it, a kept draft made the next one likelier than alpha."""
    measured, predicted = round(measured, 2), round(predicted, 2)
    if abs(measured - predicted) <= NOISE * predicted:
        word = "matches"
    else:
        word = "is above" if measured > predicted else "is below"
    return (f"verdict: measured {measured:.2f} tokens per call {word} the i.i.d. "
            f"prediction's {predicted:.2f}")


VERSUS = re.compile(r"verdict: measured ([\d.]+)x (matches|beats|falls short of) "
                    r"the cost model's ([\d.]+)x")
GAINS = re.compile(r"verdict: the cost model's ([\d.]+)x predicts (a gain|no gain)")
IID = re.compile(r"verdict: measured ([\d.]+) tokens per call (matches|is above|is below) "
                 r"the i\.i\.d\. prediction's ([\d.]+)")


def check(line):
    """A printed verdict line -> True when its words are the ones its figures imply."""
    if m := VERSUS.search(line):
        return versus(float(m[1]), float(m[3])) in line
    if m := GAINS.search(line):
        return gains(float(m[1])) in line
    if m := IID.search(line):
        return iid(float(m[1]), float(m[3])) in line
    raise ValueError(f"not a verdict line: {line!r}")
