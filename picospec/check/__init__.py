"""The exact-law checker, NumPy only: `python -m picospec.check --help`, or battery.check_sampler.
docs/checker.md.
"""
