"""picospec's front door: `python main.py --method speculative --K 4` (the same as the installed
`picospec` command). The command itself lives in the app layer, picospec_app/command.py;
docs/architecture.md draws the layers.
"""
from picospec_app import cli

if __name__ == "__main__":
    cli()
