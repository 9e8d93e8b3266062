"""Benchmarks: the engine (bench.engine), the method harness (bench.harness), tree methods
(bench.trees)."""
