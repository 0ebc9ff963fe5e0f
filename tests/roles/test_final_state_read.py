"""artifacts.read_final_state, the one read of a unit's trained model (the submitter role's and
`job fetch`'s): returned only when the manifest, the state and the committed final root agree."""

from __future__ import annotations

import json

import pytest
import torch
from rolekit import SPEC

from agents.core.blobs import open_blob_store
from agents.roles.artifacts import (
    BadBlob,
    Manifest,
    encode_state,
    make_locator,
    read_final_state,
    read_result,
    read_served_state,
)
from agents.training import spec as specs
from agents.training.state import init_state, state_root


def _published(tmp_path):
    """A spec of two checkpoint intervals and its three states, published as a solver does:
    (spec, locator, checkpoint root, states, the folder)."""
    obj = json.loads(SPEC.read_text()) | {"steps": 2, "checkpoint_every": 1}
    spec = specs.loads(json.dumps(obj).encode())
    store = open_blob_store(str(tmp_path))
    states = [init_state(spec.widths, seed) for seed in (1, 2, 3)]
    manifest = Manifest(
        "0x" + spec.spec_hash().hex(),
        ["0x" + state_root(st).hex() for st in states],
        [store.put(encode_state(st)) for st in states],
        [1.0, 0.5, 0.25],
    )
    locator = make_locator(str(tmp_path), store.put(manifest.to_bytes()))
    return spec, locator, manifest, states, store


def test_the_final_state_is_returned_when_every_root_agrees(tmp_path):
    spec, locator, manifest, states, _ = _published(tmp_path)
    final = state_root(states[-1])
    st, losses = read_final_state(spec, locator, manifest.checkpoint_root(), final, local_ok=True)
    assert all(torch.equal(st[k], states[-1][k]) for k in states[-1])
    assert losses == [1.0, 0.5, 0.25]


def test_a_final_root_other_than_the_committed_one_is_refused(tmp_path):
    spec, locator, manifest, states, _ = _published(tmp_path)
    committed = state_root(states[1])  # consistent data, but not what the chain holds
    with pytest.raises(BadBlob, match="is not the committed final state root"):
        read_final_state(spec, locator, manifest.checkpoint_root(), committed, local_ok=True)


def test_a_tampered_state_blob_or_another_manifest_is_refused(tmp_path):
    spec, locator, manifest, states, store = _published(tmp_path)
    final = state_root(states[-1])
    with pytest.raises(BadBlob, match="checkpoint root"):
        read_final_state(spec, locator, b"\x07" * 32, final, local_ok=True)
    path = store.backend.path(manifest.states[-1])
    data = bytearray(path.read_bytes())
    data[5] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(BadBlob):
        read_final_state(spec, locator, manifest.checkpoint_root(), final, local_ok=True)


def test_a_holders_served_state_is_read_when_the_solvers_copy_is_gone(tmp_path):
    """`read_result` (job fetch) and `read_served_state` (the submitter): the solver's manifest
    first; when its copy fails, the first holder's served state blob that has the committed
    final root (PROTOCOL §6.11: `<store>#<state blob address>`); BadBlob with the solver's
    failure when no copy checks."""
    spec, locator, manifest, states, store = _published(tmp_path)
    final = state_root(states[-1])
    gone = make_locator(str(tmp_path / "nothing-here"), manifest.states[0])
    holder = tmp_path / "holder"
    served = make_locator(str(holder), open_blob_store(str(holder)).put(encode_state(states[-1])))
    wrong = make_locator(str(holder), open_blob_store(str(holder)).put(encode_state(states[0])))
    st = read_served_state(spec, served, final, local_ok=True)
    assert all(torch.equal(st[k], states[-1][k]) for k in st)
    with pytest.raises(BadBlob, match="has state root"):
        read_served_state(spec, wrong, final, local_ok=True)
    # the solver's copy first (its losses come with it), else the holders in order
    assert read_result(spec, locator, manifest.checkpoint_root(), final, (wrong,), True)[1]
    st, losses = read_result(spec, gone, manifest.checkpoint_root(), final, (wrong, served), True)
    assert losses == [] and all(torch.equal(st[k], states[-1][k]) for k in st)
    with pytest.raises(BadBlob, match="manifest"):
        read_result(spec, gone, manifest.checkpoint_root(), final, (wrong,), True)
