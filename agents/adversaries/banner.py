"""What every test adversary does at start-up: say so, in one warning line (its `banner`)."""

from __future__ import annotations

import logging


class Announced:
    """Mixed into an adversary strategy ahead of the honest one it overrides."""

    banner: str

    def announce(self, log: logging.Logger) -> None:
        log.warning(self.banner)
