"""The app: load.py loads what a method needs, run.py times it against autoregressive decoding,
command.py is the `picospec` command. Layers: docs/architecture.md.
"""
