"""The suite's own tools: mutants it must catch (tests.suite.mutants), the power of its sampled law
tests (tests.suite.power) and where its time goes (tests.suite.timing)."""
