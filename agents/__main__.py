"""`python -m agents <command>`: the command line, agents/cli (`vtp` is the same)."""

from agents.cli.main import entry, main  # noqa: F401 - main: what tests call in-process

if __name__ == "__main__":
    entry()
