"""Job spec: canonical bytes, hash, and a clear error naming the field for every invalid spec."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from training_support import examples

from agents.training import spec as S
from agents.training.keccak import keccak256

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "digits-mlp.json"


def good() -> dict:
    return json.loads(EXAMPLE.read_text())


def test_canonical_bytes_and_hash():
    sp = S.load(EXAMPLE)
    canon = sp.canonical_bytes()
    assert b" " not in canon and b"\n" not in canon
    assert canon.startswith(b'{"batch":32,"checkpoint_every":40,"dataset":{"name"')
    assert json.loads(canon) == good()
    assert sp.spec_hash() == keccak256(canon)
    # round trip, and key order / whitespace of the input do not matter
    shuffled = json.dumps(dict(reversed(list(good().items()))), indent=3)
    assert S.loads(shuffled).canonical_bytes() == canon
    assert S.loads(canon) == sp
    assert sp.lr == pytest.approx(0.05) and sp.momentum == pytest.approx(0.9)


def _with(path: str, value):
    obj = good()
    keys = path.split(".")
    cur = obj
    for k in keys[:-1]:
        cur = cur[k]
    if value is KeyError:
        del cur[keys[-1]]
    else:
        cur[keys[-1]] = value
    return obj


BAD = [
    ("version", 2, "version"),
    ("version", "1", "version"),
    ("batch", 0, "batch"),
    ("batch", 1 << 20, "batch"),
    ("batch", 32.0, "batch"),
    ("batch", True, "batch"),
    ("batch", KeyError, "batch"),
    ("steps", 0, "steps"),
    ("steps", -5, "steps"),
    ("checkpoint_every", 7, "checkpoint_every"),  # does not divide 400
    ("checkpoint_every", 0, "checkpoint_every"),
    ("checkpoint_every", 800, "checkpoint_every"),
    ("seed", -1, "seed"),
    ("seed", 2**256, "seed"),
    ("lr", 0.05, "lr"),
    ("lr", "0x3D4CCCCD", "lr"),
    ("lr", "0x7f800000", "lr"),  # inf
    ("lr", "0x00000000", "lr"),
    ("lr", "0xbd4ccccd", "lr"),  # negative
    ("momentum", "0x3f800000", "momentum"),  # 1.0
    ("momentum", "0x7fc00000", "momentum"),  # NaN
    ("model.arch", "cnn", "model.arch"),
    ("model.widths", [64], "model.widths"),
    ("model.widths", [64, 0, 10], "model.widths[1]"),
    ("model.widths", [64, 70000, 10], "model.widths[1]"),
    ("model.widths", [64, 16384, 16384, 10], "model.widths"),  # too many parameters
    ("model.widths", "64,10", "model.widths"),
    ("model.widths", [64] * 20, "model.widths"),
    ("model.extra", 1, "model.extra"),
    ("dataset.root", "0x1234", "dataset.root"),
    ("dataset.name", "", "dataset.name"),
    ("dataset", "digits", "dataset"),
    ("dataset.name", KeyError, "dataset.name"),
    ("shards", 4, "shards"),  # decomposition fields are not version 1
]


@pytest.mark.parametrize(("path", "value", "field"), BAD, ids=[f"{b[0]}={b[1]!r}" for b in BAD])
def test_invalid_specs_name_the_field(path, value, field):
    with pytest.raises(S.JobSpecError) as e:
        S.parse_spec(_with(path, value))
    assert e.value.field == field
    assert f"'{field}'" in str(e.value)


def test_not_json_or_not_object():
    with pytest.raises(S.JobSpecError, match="not valid JSON"):
        S.loads("{nope")
    with pytest.raises(S.JobSpecError):
        S.loads("[1, 2]")
    with pytest.raises(S.JobSpecError, match="cannot read"):
        S.load("/nonexistent/spec.json")


@pytest.mark.fuzz
@examples(50)
@given(
    st.dictionaries(
        st.sampled_from(sorted(good())), st.one_of(st.integers(), st.text(max_size=5), st.none())
    )
)
def test_random_garbage_never_crashes_otherwise(obj):
    with contextlib.suppress(S.JobSpecError):
        S.parse_spec(obj)
