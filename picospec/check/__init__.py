"""The exact-law checker: does a sampler reproduce the target's exact law? Anyone's sampler, on toy models.

    python -m picospec.check picospec.verify:verify_chain --contract chain    # a table; exit 1 when a case fails
    python -m picospec.check --power                                          # the checker's measured power

Modules: exact_law (toys, exact laws, the G-test and its power), cases (the battery), drivers (a sampler of each
contract run step by step), controls (broken samplers every run must catch), battery (check_sampler), __main__
(the command). NumPy only. Contracts and verdicts: docs/checker.md.
"""
