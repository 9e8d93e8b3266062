"""Scripted costs: a stub clock that moves only when a model is called, by that call's cost."""


class Clock:
    """A stub clock: it moves only when a model is called, by that call's cost."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class Costly:
    """A model whose call over n positions takes first + more * (n - 1) seconds on the clock."""

    def __init__(self, model, clock, first, more=0.0):
        self.model, self.clock, self.first, self.more = model, clock, first, more
        self.n_vocab = model.n_vocab

    def __call__(self, x, n=1):
        self.clock.now += self.first + self.more * (n - 1)
        return self.model(x, n)
