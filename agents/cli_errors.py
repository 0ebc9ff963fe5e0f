"""The CLI's user-error type, in its own module.

`python -m agents` runs `agents/__main__.py` as the module `__main__`; a class defined there and
imported by subcommands as `agents.__main__.UserError` would be a second, different class that
the dispatcher does not catch. Defining it here gives every importer the same class.
"""


class UserError(Exception):
    """A mistake in the command line or its inputs: reported in one line, exit code 2."""
