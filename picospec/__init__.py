"""picospec: speculative decoding methods, each a small file that reads beside its paper.

Models are functions: model(x: list[int], n: int = 1) -> probs [n, n_vocab] (see docs/architecture.md).
picospec.check tests any sampler, picospec's or yours, against the target's exact law: python -m picospec.check --help.
"""
