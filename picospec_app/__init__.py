"""The app: the wiring between the algorithms (picospec) and the model (gpt2). load.py loads what a
method of the table needs, run.py runs it timed against autoregressive decoding and reads the runs,
command.py is the `picospec` command (`python main.py`). The layers and their directions:
docs/architecture.md.
"""
