"""The CLI's user-error type, in its own module: every command raises it for a mistake in its
command line or inputs, and the dispatcher (main.py) reports it in one line, exit code 2."""


class UserError(Exception):
    """A mistake in the command line or its inputs: reported in one line, exit code 2."""
