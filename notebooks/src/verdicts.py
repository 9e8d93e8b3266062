"""Sentences the notebooks print from their measured figures, and the check that reads them back.

A verdict line names its figures, so `check` can recompute what they imply: a sentence that
contradicts the numbers printed in it fails."""
import re

NOISE = 0.05  # measured and predicted within 5% of each other: "agrees with", "matches"


def versus(measured, accounted):
    """The measured speedup against the one the same run's costs give -> one sentence with both
    figures (as printed). The costs are the run's own, so the two agree but for the medians: a gap
    says the rounds' costs moved from round to round."""
    measured, accounted = round(measured, 2), round(accounted, 2)
    if abs(measured - accounted) <= NOISE * accounted:
        word = "agrees with"
    else:
        word = "is above" if measured > accounted else "is below"
    return (f"verdict: measured {measured:.2f}x {word} the {accounted:.2f}x this run's own costs "
            f"give")


def gains(accounted):
    """The cost model's speedup from a run's costs -> one sentence: a gain or none (as
    printed)."""
    accounted = round(accounted, 2)
    word = "a gain" if accounted > 1 else "no gain"
    return f"verdict: the costs' {accounted:.2f}x is {word}"


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


def band(measured, low, high):
    """Measured tokens per call against the i.i.d. predictions of alpha - 2 and alpha + 2
    standard errors -> one sentence with the three figures (as printed): inside the band, the gap
    from the prediction is no more than alpha's own error allows."""
    measured, low, high = round(measured, 2), round(low, 2), round(high, 2)
    if measured > high:
        word = "is above"
    elif measured < low:
        word = "is below"
    else:
        word = "is inside"
    return f"verdict: measured {measured:.2f} {word} the band {low:.2f}-{high:.2f} of alpha's error"


VERSUS = re.compile(r"verdict: measured ([\d.]+)x (agrees with|is above|is below) "
                    r"the ([\d.]+)x this run's own costs give")
GAINS = re.compile(r"verdict: the costs' ([\d.]+)x is (a gain|no gain)")
IID = re.compile(r"verdict: measured ([\d.]+) tokens per call (matches|is above|is below) "
                 r"the i\.i\.d\. prediction's ([\d.]+)")
BAND = re.compile(r"verdict: measured ([\d.]+) (is above|is below|is inside) the band "
                  r"([\d.]+)-([\d.]+) of alpha's error")


def check(line):
    """A printed line -> True when each verdict in it says what its figures imply (a line may
    carry several: each is checked)."""
    sentences = ["verdict:" + part for part in line.split("verdict:")[1:]]
    if not sentences:
        raise ValueError(f"not a verdict line: {line!r}")
    return all(check_one(sentence) for sentence in sentences)


def check_one(sentence):
    """One verdict sentence -> True when its words are the ones its figures imply."""
    if m := VERSUS.match(sentence):
        return versus(float(m[1]), float(m[3])) in sentence
    if m := GAINS.match(sentence):
        return gains(float(m[1])) in sentence
    if m := IID.match(sentence):
        return iid(float(m[1]), float(m[3])) in sentence
    if m := BAND.match(sentence):
        return band(float(m[1]), float(m[3]), float(m[4])) in sentence
    raise ValueError(f"not a verdict sentence: {sentence!r}")
