"""The Python enums (agents/core/enums.py) against the compiler's (build/abi/enums.json, from the
AST by tools/export_abi.py): the same enums, members, names and numbers, so that neither side
can add, rename or reorder a member without a test failing."""

from __future__ import annotations

import json
import re
from enum import IntEnum
from pathlib import Path

import pytest

from agents.core import enums
from tools.export_abi import enums_of_asts

ENUMS_JSON = Path(__file__).resolve().parents[2] / "build" / "abi" / "enums.json"


def python_name(member: str) -> str:
    """Solidity's CamelCase member as the Python enum's UPPER_SNAKE name."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", member).upper()


def differences(py: type[IntEnum], compiled: dict[str, int]) -> list[str]:
    """What differs between a Python enum and a compiled one; empty when they agree."""
    ours = {m.name: m.value for m in py}
    theirs = {python_name(name): number for name, number in compiled.items()}
    return [
        f"{name}: python {ours.get(name)}, solidity {theirs.get(name)}"
        for name in sorted(ours.keys() | theirs.keys(), key=lambda n: ours.get(n, theirs.get(n)))
        if ours.get(name) != theirs.get(name)
    ]


def compiled() -> dict[str, dict[str, int]]:
    if not ENUMS_JSON.exists():
        pytest.fail(f"{ENUMS_JSON} is missing: run `make compile`")
    return json.loads(ENUMS_JSON.read_text())


def test_every_compiled_enum_has_one_python_enum_and_no_other():
    assert sorted(compiled()) == sorted(enums.SOLIDITY)


@pytest.mark.parametrize("qualified", sorted(enums.SOLIDITY))
def test_python_enum_matches_the_compiled_one(qualified: str):
    solidity = compiled().get(qualified)
    assert solidity is not None, f"{qualified} is not in {ENUMS_JSON}"
    assert differences(enums.SOLIDITY[qualified], solidity) == []


def test_differences_catch_an_added_a_renamed_and_a_moved_member():
    class Colour(IntEnum):
        NONE = 0
        DEEP_RED = 1
        GREEN = 2

    assert differences(Colour, {"None": 0, "DeepRed": 1, "Green": 2}) == []
    assert differences(Colour, {"None": 0, "DeepRed": 1, "Green": 2, "Blue": 3}) == [
        "BLUE: python None, solidity 3"
    ]
    assert differences(Colour, {"None": 0, "Red": 1, "Green": 2}) != []
    assert differences(Colour, {"None": 0, "Green": 1, "DeepRed": 2}) != []


def test_enums_of_asts_numbers_members_by_position_and_qualifies_by_contract():
    def enum(name: str, *members: str) -> dict:
        return {
            "nodeType": "EnumDefinition",
            "name": name,
            "members": [{"nodeType": "EnumValue", "name": m} for m in members],
        }

    asts = {
        "b.sol": {"nodeType": "SourceUnit", "nodes": [enum("Side", "None", "Left", "Right")]},
        "a.sol": {
            "nodeType": "SourceUnit",
            "nodes": [
                {"nodeType": "ContractDefinition", "name": "IThing", "nodes": [enum("S", "X")]}
            ],
        },
    }
    assert enums_of_asts(asts) == {
        "IThing.S": {"X": 0},
        "Side": {"None": 0, "Left": 1, "Right": 2},
    }
    with pytest.raises(ValueError, match="declared twice"):
        enums_of_asts({**asts, "c.sol": asts["b.sol"]})
