"""Benchmarks, each answering a question about speed and writing a results page (docs/results/):
python -m bench.NAME, with NAME a file of this folder."""
