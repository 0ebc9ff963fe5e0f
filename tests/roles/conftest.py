"""Role tests: agents as OS processes against a private Anvil each (web3.py, no ape), so they
pass whichever provider the suite runs with."""

from __future__ import annotations
