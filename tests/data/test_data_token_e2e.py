"""A version-3 job on a packed token stream through the agents on Anvil (issue #26): the char
GPT of examples/models/char_gpt.py (batch 2, AdamW, 4 steps, checkpoints every 2) trains on
the `shakespeare-char` corpus packed with `dataset pack --tokens … --vocab 84 --validation 0.1`
(the built-in cut, so its root is `shakespeare-char/train`'s) and named `manifest:0x…`.

Every role reads the stream through VTP_DATASET_STORES, whose first store holds a corrupted
copy of the chunk the disputed window reads (a role that used it would replay other roots). A
cheating solver flips one element of the embedding lookup of step 1 — the first node that reads
the token window (PROTOCOL §4.3, input kind WINDOW_X) — and recomputes everything after it; the
verifier replays, challenges, and the game ends in that node's one-step proof, which opens the
window's token against the dataset root (§4.4, §7.11). The cheater is slashed, an honest solver
redoes the unit, and the job completes with the checkpoint roots the job on the built-in name
gives."""

from __future__ import annotations

import dataclasses
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "roles"))

import rolekit as rk  # noqa: E402

from agents.__main__ import main  # noqa: E402
from agents.core.blobs import LocalDirBackend, open_blob_store  # noqa: E402
from agents.data import packed, tokens  # noqa: E402
from agents.model.bundle import bundle_from_bytes  # noqa: E402
from agents.roles.runtime import model_runtime_from_files  # noqa: E402
from agents.training import spec as specs  # noqa: E402
from agents.training.schedule import batch_indices  # noqa: E402

pytestmark = [pytest.mark.timeout(900), pytest.mark.chain]
MODEL = REPO / "examples" / "models" / "char_gpt.py"
STEP = 1  # the faulty step: segment 0 (checkpoints at 0, 2, 4)
MASK = 0x00400000  # the top mantissa bit: a finite value, wrong
CONTEXT, DIM = 32, 64  # the char GPT's block size and width
ROW, POSITION = 0, 5  # the flipped embedding row: batch row 0, window position 5


def _pack_corpus(tmp: Path) -> tuple[packed.Manifest, Path, Path]:
    """(manifest, the store it was published to, the manifest file) of the whole corpus."""
    train, val = tokens.load_tokens(tokens.TRAIN), tokens.load_tokens(tokens.VAL)
    np.save(tmp / "tokens.npy", np.concatenate([train.tokens.numpy(), val.tokens.numpy()]))
    good = tmp / "datastore"
    assert main(["dataset", "pack", "--tokens", str(tmp / "tokens.npy"), "--vocab",
                 str(len(train.vocab)), "--validation", "0.1", "--out", str(tmp / "ds"),
                 "--blob-url", str(good)]) == 0  # fmt: skip
    manifest_file = tmp / "ds" / "manifest.json"
    m = packed.manifest_from_bytes(manifest_file.read_bytes())
    assert m.root == "0x" + train.root().hex()  # the built-in name's root
    return m, good, manifest_file


def _gpt_spec(tmp: Path, dataset: str) -> Path:
    spec = tmp / "gpt.json"
    argv = ["job", "build", "--model", f"{MODEL}:make_model", "--dataset", dataset,
            "--optimizer", "adamw", "--lr", "0.003", "--batch", "2", "--steps", "4",
            "--checkpoint-every", "2", "--seed", "5", "--out", str(spec)]  # fmt: skip
    assert main(argv) == 0
    return spec


def test_a_packed_token_stream_job_with_a_token_window_dispute_completes(tmp_path, monkeypatch):
    m, good, manifest_file = _pack_corpus(tmp_path)
    spec_file = _gpt_spec(tmp_path, str(manifest_file))
    spec = specs.load(spec_file)
    assert spec.dataset_name == m.name()
    store = open_blob_store(str(spec_file.with_suffix(".blobs")))
    step = bundle_from_bytes(store.get(spec.graph)).step
    x_input = step.inputs.index(next(v for v in step.inputs if v.name == "x"))
    # the embedding lookup: the first node that reads the token window
    node = min(i for i, n in enumerate(step.nodes) if x_input in n.inputs)
    assert step.nodes[node].op == "index_rows" and step.nodes[node].shape == (2, CONTEXT, DIM)
    element = (ROW * CONTEXT + POSITION) * DIM + 3

    # the first store's copy of the chunk holding that token is corrupt
    offset = int(batch_indices(spec.seed, STEP, spec.batch, m.splits[0].n - CONTEXT)[ROW])
    t = m.splits[0].tensor("tokens")
    chunk = t.chunks[(offset + POSITION) // (t.chunk_leaves * 64)]
    bad = tmp_path / "badstore"
    shutil.copytree(good, bad)
    LocalDirBackend(bad).path(chunk.address).write_bytes(b"\0" * 64)
    monkeypatch.setenv("VTP_DATASET_STORES", f"{bad},{good}")

    cheat = f"element:step={STEP},node={node},element={element},mask={MASK:#x}"
    config = {"verifyWindow": 300}
    with rk.cheat_caught_and_redone(tmp_path, spec_file, cheat, config, clock_budget=600) as run:
        (resolved,) = run.manager.events.DisputeResolved().get_logs(from_block=0)
        assert resolved["args"]["challengerWon"] is True
        (picked_step,) = run.game.events.StepPicked().get_logs(from_block=0)
        assert picked_step["args"]["step"] == STEP
        picked = [e["args"]["node"] for e in run.game.events.NodePicked().get_logs(from_block=0)]
        assert picked == [node]  # its one-step proof opens the window's token (WINDOW_X)
        proved = run.game.events.ElementProved().get_logs(from_block=0)
        assert [e["args"]["element"] for e in proved] == [element]
        slashed = run.registry.events.NodeSlashed().get_logs(from_block=0)
        assert [e["args"]["node"] for e in slashed] == [run.cheater.address]
        (final,) = run.manager.events.UnitFinalized().get_logs(from_block=0)
        assert final["args"]["solver"] == run.honest.address
        committed = bytes(run.manager.functions.getUnit(1 << 32).call()[12])

    # the same job on the built-in name: the same data, so the same checkpoint roots
    builtin = dataclasses.replace(spec, dataset_name=tokens.TRAIN)
    rt = model_runtime_from_files(builtin, [store])
    assert rt.computation(spec.steps, spec.checkpoint_every).checkpoint_commit() == committed
