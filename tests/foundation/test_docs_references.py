"""The docs name the tests that show each property (PROPERTIES' table, PROTOCOL's regressions):
every `tests/<path>.py` they name exists, and so does every test function named after it
(`tests/x.py::test_a`, and the `::test_b` that follow it in the same list; `::test_c_*` names
every test starting so, at least one). A renamed test otherwise leaves a claim in the docs that
nothing shows any more."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = sorted((REPO / "docs").glob("*.md")) + [REPO / "README.md"]

# a test file, then the names after it: `tests/a/b.py::test_x, ::test_y and ::test_z`
REFERENCE = re.compile(r"(tests/[\w/]+\.py)((?:(?:, | and |; )?::\w+\*?)*)")


def references(text: str) -> list[tuple[str, str | None]]:
    """(file, test name or None) for every test the text names."""
    out: list[tuple[str, str | None]] = []
    for m in REFERENCE.finditer(text):
        names = re.findall(r"::(\w+\*?)", m.group(2))
        out += [(m.group(1), name) for name in names] or [(m.group(1), None)]
    return out


def pattern(name: str) -> str:
    """A test function or class named `name` (`name*`: any whose name starts so)."""
    stem = re.escape(name.rstrip("*"))
    end = r"\w*" if name.endswith("*") else r"\b"
    return rf"^(?:async )?def {stem}{end}|^class {stem}{end}"


def test_references_are_parsed_with_the_names_that_follow_a_file():
    text = "x tests/a/b.py::test_one, ::test_two and ::test_3_*; tests/c.py (a comment)"
    assert references(text) == [
        ("tests/a/b.py", "test_one"),
        ("tests/a/b.py", "test_two"),
        ("tests/a/b.py", "test_3_*"),
        ("tests/c.py", None),
    ]


def test_every_test_the_docs_name_exists():
    missing = []
    for doc in DOCS:
        for path, name in references(doc.read_text()):
            source = REPO / path
            if not source.is_file():
                missing.append(f"{doc.name}: {path}")
            elif name and not re.search(pattern(name), source.read_text(), re.M):
                missing.append(f"{doc.name}: {path}::{name}")
    assert missing == []
