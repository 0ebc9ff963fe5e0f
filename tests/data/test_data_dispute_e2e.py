"""A job on a packed dataset through the agents on Anvil, with a dispute that ends in the
one-step proof of the batch gather — a data element opened against the dataset root
(PROTOCOL §4.4, §7.5).

The sklearn digits are packed from `.npy` (the built-in split, so the root is
`sklearn-digits/train`'s) and published to a store; every role reads `manifest:0x…` through
VTP_DATASET_STORES, whose first store holds a corrupted and a missing chunk (a role that used
either would refuse the job: its dataset root would differ from the chain's). The cheating
solver flips one element of the gather's output (node 0: the batch rows read from X) at step
217; the verifier challenges, the game bisects to node 0 and the element is proven on chain; the
cheater is slashed, an honest solver redoes the unit and the job completes."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "roles"))

import rolekit as rk  # noqa: E402

from agents.__main__ import main  # noqa: E402
from agents.core.blobs import LocalDirBackend  # noqa: E402
from agents.data import packed  # noqa: E402

pytestmark = [pytest.mark.timeout(480), pytest.mark.chain]
CHEAT = "element:step=217,node=0,element=5,mask=0x40000000"


def _pack_digits(tmp: Path) -> tuple[packed.Manifest, Path, Path]:
    from sklearn.datasets import load_digits

    raw = load_digits()
    np.save(tmp / "x.npy", (raw.data.astype(np.float32) / np.float32(16.0)).astype(np.float32))
    np.save(tmp / "y.npy", raw.target)
    good = tmp / "datastore"
    assert main(["dataset", "pack", "--features", str(tmp / "x.npy"), "--labels",
                 str(tmp / "y.npy"), "--validation", "0.2", "--chunk-bytes", "8192",
                 "--out", str(tmp / "ds"), "--blob-url", str(good)]) == 0  # fmt: skip
    m = packed.manifest_from_bytes((tmp / "ds" / "manifest.json").read_bytes())
    bad = tmp / "badstore"
    shutil.copytree(good, bad)
    store = LocalDirBackend(bad)
    x, y = m.splits[0].tensors
    store.path(x.chunks[1].address).write_bytes(b"\0" * 8192)
    store.path(y.chunks[0].address).unlink()
    return m, bad, good


def test_a_packed_dataset_job_with_a_data_element_dispute_completes(tmp_path, monkeypatch):
    m, bad, good = _pack_digits(tmp_path)
    builtin = json.loads(rk.SPEC.read_text())
    assert m.root == builtin["dataset"]["root"]
    spec = tmp_path / "spec.json"
    obj = builtin | {"dataset": {"name": m.name(), "root": m.root}}
    spec.write_text(json.dumps(obj | {"steps": 400, "checkpoint_every": 200}))
    monkeypatch.setenv("VTP_DATASET_STORES", f"{bad},{good}")
    with rk.cheat_caught_and_redone(tmp_path, spec, CHEAT, {"verifyWindow": 120}) as run:
        (resolved,) = run.manager.events.DisputeResolved().get_logs(from_block=0)
        assert resolved["args"]["challengerWon"] is True
        picked = [e["args"]["node"] for e in run.game.events.NodePicked().get_logs(from_block=0)]
        assert picked == [0]  # the gather: its one-step proof opens X against the dataset root
        assert run.game.events.ElementProved().get_logs(from_block=0)
        slashed = run.registry.events.NodeSlashed().get_logs(from_block=0)
        assert [e["args"]["node"] for e in slashed] == [run.cheater.address]
        (final,) = run.manager.events.UnitFinalized().get_logs(from_block=0)
        assert final["args"]["solver"] == run.honest.address
