"""A version-3 job: its op trace, and its decomposition (R rounds x S shards, version 2's rules
on a general model): one round of one shard is the undecomposed job; shards draw only their own
examples or window starts; the aggregate is decompose.aggregate of the units; roots and the op
trace do not depend on kernels."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from agents.__main__ import main
from agents.cli.job import load_job
from agents.model.job import (
    RoundRun,
    UnitRun,
    blob_state_root,
    decode_state,
    encode_state,
    state_root,
)
from agents.training import decompose
from agents.training.registry import GraphError
from agents.training.run import RunConfig

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "examples" / "models"


def build(tmp: Path, name: str, *extra: str, model="digits_mlp.py", dataset="sklearn-digits/train"):
    out = tmp / f"{name}.json"
    argv = ["job", "build", "--model", f"{MODELS}/{model}:make_model", "--dataset", dataset,
            "--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9", "--batch", "8",
            "--checkpoint-every", "2", "--seed", "3", "--out", str(out), *extra]  # fmt: skip
    assert main(argv) == 0
    return out


def test_one_round_of_one_shard_is_the_plain_job(tmp_path, capsys):
    plain = build(tmp_path, "plain", "--steps", "4")
    one = build(tmp_path, "one", "--steps", "4", "--rounds", "1", "--shards", "1")
    capsys.readouterr()
    assert json.loads(one.read_text())["local_steps"] == 4
    job, st = load_job(str(plain), None)
    final = [r for _t, r, _s, _l in job.train(st)][-1]
    job1, st1 = load_job(str(one), None)
    events = list(job1.run_rounds(st1))
    assert isinstance(events[-1], RoundRun) and isinstance(events[0], UnitRun)
    assert events[0].roots[-1] == final
    # the aggregate of one shard is w_0 * S = fl(1 * S) = S: the same root
    assert events[-1].state_root == final


def test_shards_read_only_their_own_positions_and_the_aggregate_is_the_units(tmp_path, capsys):
    spec = build(tmp_path, "two", "--steps", "4", "--rounds", "2", "--shards", "3")
    capsys.readouterr()
    job, st = load_job(str(spec), None)
    for shard in range(3):
        for t in range(4):
            idx = decompose.unit_batch_indices(3, t, 8, job.positions(), 3, shard)
            assert (idx % 3 == shard).all()
            x, _ = job.batch(t, shard)
            want = job.data.x[torch.from_numpy(idx)].reshape(x.shape)
            assert torch.equal(x, want)
    events = list(job.run_rounds(st))
    units = [e for e in events if isinstance(e, UnitRun) and e.round == 0]
    first = next(e for e in events if isinstance(e, RoundRun))
    weights = decompose.aggregation_weights(job.positions(), 3)
    g = decompose.aggregate([u.final for u in units], weights)
    assert state_root(g) == first.state_root
    assert first.aggregation_root == decompose.aggregation_root(
        [u.roots[-1] for u in units], first.state_root
    )


def test_token_shards_take_window_starts_of_their_residue(tmp_path, capsys):
    spec = build(tmp_path, "lm", "--steps", "2", "--rounds", "1", "--shards", "2",
                 model="char_gpt.py", dataset="shakespeare-char/train")  # fmt: skip
    capsys.readouterr()
    job, _ = load_job(str(spec), None)
    T = job.bundle.item_shape[0]
    for shard in range(2):
        idx = decompose.unit_batch_indices(3, 1, 8, job.positions(), 2, shard)
        assert (idx % 2 == shard).all()
        x, y = job.batch(1, shard)
        assert torch.equal(x[0], job.data.tokens[idx[0] : idx[0] + T])
        assert torch.equal(y[0], job.data.tokens[idx[0] + 1 : idx[0] + T + 1])


def test_decomposed_roots_do_not_depend_on_the_kernels(tmp_path, capsys):
    spec = build(tmp_path, "k", "--steps", "4", "--rounds", "2", "--shards", "2")
    capsys.readouterr()
    roots = []
    for cfg in (RunConfig("native"), RunConfig("torch", threads=2)):
        job, st = load_job(str(spec), None, cfg)
        roots.append([e.state_root for e in job.run_rounds(st) if isinstance(e, RoundRun)])
    assert roots[0] == roots[1] and len(roots[0]) == 2
    assert np.unique([r.hex() for r in roots[0]]).size == 2


def test_train_prints_units_rounds_and_the_metric(tmp_path, capsys):
    spec = build(tmp_path, "cli", "--steps", "4", "--rounds", "2", "--shards", "2")
    capsys.readouterr()
    assert main(["train", "--spec", str(spec), "--json"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [("shard" in x, "aggregation_root" in x) for x in lines[:3]] == [
        (True, False), (True, False), (False, True)]  # fmt: skip
    assert "rounds_root" in lines[-1] and "test_accuracy" in lines[-1]
    assert main(["train", "--spec", str(spec), "--steps", "2"]) == 2


def test_bad_decompositions_are_refused(tmp_path, capsys):
    out = tmp_path / "x.json"
    argv = ["job", "build", "--model", f"{MODELS}/digits_mlp.py:make_model", "--dataset",
            "sklearn-digits/train", "--optimizer", "sgd", "--lr", "0.05", "--batch", "8",
            "--steps", "5", "--checkpoint-every", "1", "--rounds", "2",
            "--out", str(out)]  # fmt: skip
    assert main(argv) == 2
    assert "--rounds must divide --steps" in capsys.readouterr().err
    assert not out.exists()


def test_the_op_trace_commits_every_node_the_same_on_every_kernel(tmp_path, capsys):
    from agents.model.job import trace_root

    spec = build(tmp_path, "trace", "--steps", "2", model="digits_cnn.py")
    capsys.readouterr()
    roots = set()
    for cfg in (RunConfig("native"), RunConfig("torch", threads=2)):
        job, st = load_job(str(spec), None, cfg)
        nxt, trace = job.trace_step(st, 1)
        assert len(trace) == len(job.bundle.step.nodes)
        assert state_root(nxt) == state_root(job.step(st, 1)[0])
        assert any(t.dtype == torch.int32 and (t < 0).any() for t in trace)  # i32 words too
        roots.add(trace_root(trace))
    assert len(roots) == 1


def test_a_state_blob_is_addressed_in_place_as_its_decoded_state(tmp_path, capsys):
    """blob_state_root (what job build, the agents' stores and load_job address a state blob by)
    is state_root of the decoded state, bit for bit: odd values, every rank, short and long blobs
    refused."""
    spec = build(tmp_path, "blob", "--steps", "2")
    capsys.readouterr()
    job, st = load_job(str(spec), None)
    odd = torch.tensor([float("nan"), -0.0, float("inf"), 1e-45])
    st = {k: v.flatten().clone() for k, v in st.items()}
    first = next(iter(st))
    st[first][:4] = odd
    st = {k: v.reshape(s.shape) for (k, v), s in zip(st.items(), job.bundle.state, strict=True)}
    blob = encode_state(st)
    assert blob_state_root(job.bundle, blob) == state_root(decode_state(job.bundle, blob))
    assert blob_state_root(job.bundle, blob) == state_root(st)
    flipped = bytearray(blob)
    flipped[-1] ^= 1
    assert blob_state_root(job.bundle, bytes(flipped)) != state_root(st)
    for bad in (blob[:-4], blob + b"\0\0\0\0"):
        with pytest.raises(GraphError):
            blob_state_root(job.bundle, bad)
