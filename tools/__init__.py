"""The tools around the benchmarks: results pages and their protocol (tools.page), a benchmark run
once per OpenBLAS kernel family (tools.families), the README's demo as a user runs it (tools.demo)
and the generated tables of README.md and docs/ (tools.readme)."""
