"""`python -m agents <command>`: the command line, agents/cli (`vtp` is the same)."""

import sys

from agents.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
