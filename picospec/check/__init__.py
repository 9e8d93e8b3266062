"""The exact-law checker: does a sampler reproduce the target's exact law? `python -m picospec.check
--help`. Modules: exact_law, cases, drivers, controls, battery (check_sampler), __main__. NumPy
only; docs/checker.md.
"""
