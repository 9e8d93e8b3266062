"""The suite, as packages that mirror the tree: tests/picospec/test_eagle.py tests picospec/eagle.py
and imports as tests.picospec.test_eagle, beside tests.gpt2.test_eagle; what several test modules
share lives in tests/support/ (tests.support.*), and no test module imports another."""
