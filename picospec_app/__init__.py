"""The app: load.py loads what a method needs, run.py times it against autoregressive decoding,
command.py is the `picospec` command. Layers: docs/architecture.md.
"""


def cli(argv=None):
    """`python main.py` and the installed `picospec` command: command.main under the door's guard,
    imported inside it, so Ctrl-C while NumPy and the engine load exits 130 as it does later."""
    from picospec_cli import guarded

    def command():
        from picospec_app.command import main

        return main(argv)

    return guarded(command)
