"""Every custom error and every external or public function of the protocol's contracts is named
by some test (issue #5: "unit tests for every external function, including each revert path
with its custom error"; the dispute and float32 issues ask the same of theirs).

A name in a test is not proof that the test checks it, but a name in no test is proof that
nothing does: this catches an error or entry point added without a test. Read from the sources,
so it needs no build. Test contracts (contracts/test, contracts/dispute/test) and the float32
harnesses are tools of the tests, not the protocol, and are left out, as are dependencies.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOT_PROTOCOL = ("contracts/test/", "contracts/dispute/test/", "contracts/harness/")

ERROR = re.compile(r"^\s*error\s+(\w+)\s*\(", re.M)
# a function header up to its body or its `;` (an interface's), with its visibility
FUNCTION = re.compile(r"\bfunction\s+(\w+)\s*\(([^)]*)\)([^{;]*)")


def protocol_sources() -> dict[str, str]:
    """The project's own Solidity sources (not a hidden folder: ape caches the OpenZeppelin
    dependency under contracts/.cache)."""
    out = {}
    for p in sorted((ROOT / "contracts").rglob("*.sol")):
        rel = p.relative_to(ROOT)
        if str(rel).startswith(NOT_PROTOCOL) or any(part.startswith(".") for part in rel.parts):
            continue
        out[str(rel)] = p.read_text()
    return out


def declared(sources: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(custom error -> first file declaring it, external/public function -> first file)."""
    errors: dict[str, str] = {}
    functions: dict[str, str] = {}
    for path, text in sources.items():
        for m in ERROR.finditer(text):
            errors.setdefault(m.group(1), path)
        for m in FUNCTION.finditer(text):
            if re.search(r"\b(external|public)\b", m.group(3)):
                functions.setdefault(m.group(1), path)
    return errors, functions


def unnamed(names: dict[str, str], corpus: str) -> list[str]:
    """The names no test mentions (as a whole identifier; `test_pickStep_...` mentions
    pickStep: underscores separate)."""
    return sorted(
        f"{name} ({path})"
        for name, path in names.items()
        if not re.search(rf"(?<![A-Za-z0-9]){re.escape(name)}(?![A-Za-z0-9])", corpus)
    )


def test_the_scan_finds_the_protocols_errors_and_entry_points():
    """The parser sees what the contracts declare (a scan that finds nothing passes anything)."""
    errors, functions = declared(protocol_sources())
    assert {"NotSubmitter", "ConfigAlreadyRegistered", "RevealPending"} <= errors.keys()
    assert {"postJob", "finalize", "pickStep", "revealForced", "withdraw"} <= functions.keys()
    assert "_register" not in functions  # private helpers are not entry points
    assert len(errors) > 100 and len(functions) > 100
    assert "AccessControlBadConfirmation" not in errors  # OpenZeppelin's, in ape's cache


def test_every_custom_error_and_entry_point_is_named_by_a_test():
    this = Path(__file__).resolve()  # its own examples name nothing
    corpus = "\n".join(
        p.read_text() for p in sorted((ROOT / "tests").rglob("*.py")) if p.resolve() != this
    )
    errors, functions = declared(protocol_sources())
    assert unnamed(errors, corpus) == [], "custom errors no test names"
    assert unnamed(functions, corpus) == [], "entry points no test names"


def test_an_unnamed_error_is_reported():
    sources = {"contracts/X.sol": "error Unheard(uint256 a);\nfunction ping() external {}\n"}
    errors, functions = declared(sources)
    assert unnamed(errors, "ping()") == ["Unheard (contracts/X.sol)"]
    assert unnamed(functions, "test_ping_works") == []
    assert unnamed(functions, "pinged") == ["ping (contracts/X.sol)"]
