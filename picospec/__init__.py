"""picospec: speculative decoding methods, each a small file that reads beside its paper.

Models are functions: model(x: list[int], n: int = 1) -> probs [n, n_vocab] (see ARCHITECTURE.md).
"""
