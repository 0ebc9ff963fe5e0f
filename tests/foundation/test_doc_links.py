"""The README and docs/ link only what a checkout holds: every relative link in README.md and
docs/*.md names a file or folder inside the checkout, and no path in them climbs out of it (the
README once sent readers to `../shared/DESIGN.md`, which only the authors' machines have)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CODE_PATH = re.compile(r"`(\.\./[^`\s]+)`")  # a path written out, outside a link


def relative_targets(text: str) -> list[str]:
    targets = [t for t in LINK.findall(text) if not re.match(r"[a-z][a-z0-9+.-]*:|#", t)]
    return targets + CODE_PATH.findall(text)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves_inside_the_checkout(doc: Path) -> None:
    bad = []
    for target in relative_targets(doc.read_text()):
        path = (doc.parent / target.split("#")[0]).resolve()
        if not path.is_relative_to(REPO) or not path.exists():
            bad.append(target)
    assert not bad, f"{doc.name} links outside the checkout or to nothing: {bad}"


def test_the_link_reader_sees_links_and_written_out_paths() -> None:
    text = "[spec](docs/PROTOCOL.md#3) [web](https://x.org) [top](#a) and `../shared/DESIGN.md`"
    assert relative_targets(text) == ["docs/PROTOCOL.md#3", "../shared/DESIGN.md"]
