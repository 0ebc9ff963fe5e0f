"""Task decomposition (spec v2): shards and per-unit batches, the aggregation operator (fast ==
scalar reference, bit for bit), S = R = 1 == the version-1 job, bit-exact across processes and
threads, and the 2 x 3 digits job learns as well as the single solver with the same T."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from training_support import any_f32, assert_bits_equal, canon, examples

from agents.__main__ import main
from agents.data import builtin as data
from agents.training import decompose as D
from agents.training import float32 as F
from agents.training import merkle, native, schedule
from agents.training import spec as S
from agents.training.engine import Engine, EngineConfig
from agents.training.keccak import keccak256
from agents.training.state import state_root

ROOT = Path(__file__).resolve().parents[2]
SINGLE = ROOT / "examples" / "digits-mlp.json"  # the single solver with the same T = 400
EXAMPLE = ROOT / "examples" / "digits-2x3.json"


def v2(base: dict, rounds: int, shards: int, **kw) -> dict:
    obj = {**base, "version": 2, "rounds": rounds, "shards": shards, **kw}
    obj.setdefault("local_steps", obj["steps"] // rounds)
    return obj


@cache
def digits_2x3() -> tuple[list, float]:
    """(every event of run_job, test accuracy of G_R) for the shipped example, in this process."""
    sp = S.load(EXAMPLE)
    ds = data.load_dataset(sp.dataset_name)
    events = list(D.run_job(sp, ds))
    acc = Engine(S.load(SINGLE), ds).accuracy(events[-1].state, data.test_split_for(ds.name))
    return events, acc


# -- spec version 2 ----------------------------------------------------------------------------


def test_v2_spec_round_trip_and_v1_unchanged():
    sp = S.load(EXAMPLE)
    assert (sp.version, sp.rounds, sp.shards, sp.k_local, sp.steps) == (2, 2, 3, 200, 400)
    assert S.loads(sp.canonical_bytes()) == sp
    assert json.loads(sp.canonical_bytes()) == json.loads(EXAMPLE.read_text())
    one = S.load(SINGLE)
    assert (one.version, one.rounds, one.shards, one.k_local) == (1, 1, 1, 400)
    assert b"shards" not in one.canonical_bytes() and one.spec_hash() != sp.spec_hash()


BAD_V2 = [
    ({"rounds": 0}, "rounds"),
    ({"shards": 0}, "shards"),
    ({"shards": 1 << 25}, "shards"),
    ({"local_steps": 0}, "local_steps"),
    ({"local_steps": 150}, "steps"),  # 2 x 150 != 400
    ({"checkpoint_every": 30}, "checkpoint_every"),  # does not divide k_local = 200
    ({"checkpoint_every": 400}, "checkpoint_every"),  # > k_local
    ({"rounds": KeyError}, "rounds"),
    ({"rounds": KeyError, "shards": KeyError, "local_steps": KeyError}, "version"),
    ({"version": 4}, "version"),
    ({"aggregator": 1}, "aggregator"),
]


@pytest.mark.parametrize(("change", "field"), BAD_V2, ids=[b[1] for b in BAD_V2])
def test_invalid_v2_specs_name_the_field(change, field):
    obj = json.loads(EXAMPLE.read_text())
    for k, v in change.items():
        if v is KeyError:
            del obj[k]
        else:
            obj[k] = v
    with pytest.raises(S.JobSpecError) as e:
        S.parse_spec(obj)
    assert e.value.field == field and f"'{field}'" in str(e.value)


def test_more_shards_than_examples_is_refused():
    name = "synthetic/n=5,f=3,c=2,seed=1"
    ds = data.load_dataset(name)
    obj = v2(json.loads(SINGLE.read_text()), 1, 6, steps=2, checkpoint_every=1)
    obj |= {"model": {"arch": "mlp", "widths": [3, 2]}}
    obj["dataset"] = {"name": name, "root": "0x" + ds.root().hex()}
    with pytest.raises(S.JobSpecError) as e:
        list(D.run_job(S.parse_spec(obj), ds))
    assert e.value.field == "shards"
    with pytest.raises(ValueError, match="UnitEngine"):  # the v1 engine never guesses a batch
        Engine(S.parse_spec({**obj, "shards": 5}), ds).batch(0)


# -- shards and the per-unit batch schedule ----------------------------------------------------


@pytest.mark.parametrize(("n", "shards"), [(1438, 3), (10, 1), (10, 10), (7, 3)])
def test_shards_partition_the_examples(n, shards):
    parts = [D.shard_indices(n, shards, s) for s in range(shards)]
    assert sorted(np.concatenate(parts).tolist()) == list(range(n))
    for s, p in enumerate(parts):
        assert len(p) == D.shard_size(n, shards, s) >= 1 and (p % shards == s).all()
        idx = D.unit_batch_indices(5, 17, 64, n, shards, s)
        assert np.isin(idx, p).all()


def test_unit_batch_is_keccak_of_the_slot_and_one_shard_is_version_1():
    seed, g, n, shards, s = 123, 9, 1438, 3, 2
    got = D.unit_batch_indices(seed, g, 8, n, shards, s)
    for j in (0, 5, 7):
        h = keccak256(b"".join(int(x).to_bytes(32, "big") for x in (seed, g, j * shards + s)))
        assert got[j] == shards * (int.from_bytes(h, "big") % D.shard_size(n, shards, s)) + s
    for t in (0, 1, 399):
        assert (
            D.unit_batch_indices(1, t, 32, n, 1, 0) == schedule.batch_indices(1, t, 32, n)
        ).all()


def test_weights():
    w = D.aggregation_weights(1438, 3)
    assert [F.bits(x) for x in w] == [
        F.bits(np.float32(480 / 1438)),
        *[F.bits(np.float32(479 / 1438))] * 2,
    ]
    assert D.aggregation_weights(1438, 1) == [np.float32(1.0)]


# -- S = R = 1 is the version-1 job ------------------------------------------------------------


def test_one_round_one_shard_equals_version_1():
    base = json.loads(SINGLE.read_text()) | {"steps": 60, "checkpoint_every": 20}
    one = S.parse_spec(base)
    ds = data.load_dataset(one.dataset_name)
    eng = Engine(one, ds)
    v1 = list(eng.train())
    unit, rnd = list(D.run_job(S.parse_spec(v2(base, 1, 1)), ds))
    assert unit.roots == [r for _, r, _ in v1]
    assert unit.checkpoint_root == merkle.checkpoint_root([r for _, r, _ in v1])
    assert rnd.state_root == v1[-1][1]  # average with w = 1: the same bits (no -0 in the state)
    # S = 1 over R = 3 rounds: each unit's steps are version 1's steps T = 20r ... 20r + 19
    units = [e for e in D.run_job(S.parse_spec(v2(base, 3, 1)), ds) if isinstance(e, D.UnitResult)]
    assert [u.final_root for u in units] == [r for t, r, _ in v1[1:]]


# -- aggregation: fast == scalar reference -----------------------------------------------------

# values where the order of a 3+ term sum shows: big and tiny magnitudes, cancellations
tricky = st.sampled_from([1.0, -1.0, 2.0**-24, 3 * 2.0**-25, 2.0**-23, 1e30, -1e30, 3.0, 0.1])


def f32_in(lo: int, hi: int, signed: bool = True):
    """binary32 values with bit patterns uniform in [lo, hi] (full random mantissas: their sums
    and products round, so a changed evaluation order changes bits), optionally either sign."""
    sign = st.sampled_from([0, 0x80000000]) if signed else st.just(0)
    return st.builds(lambda b, sg: float(F.f32(b | sg)), st.integers(lo, hi), sign)


# "moderate" cases: every value and weight has a random mantissa around 1 (order-dependent
# rounding in most elements); "special" cases: any binary32 (+-0, subnormals, +-inf, NaN, every
# magnitude) mixed with the tricky values
MODERATE = (f32_in(0x3E000000, 0x40800000), f32_in(0x3D800000, 0x3F800000, signed=False))
SPECIAL = (
    st.one_of(any_f32, tricky),
    st.one_of(any_f32, st.sampled_from([1.0, 1 / 3, 0.0, -0.0])),
)


@st.composite
def unit_states(draw):
    """S unit final states (two tensors each) and S weights."""
    values, weights = draw(st.sampled_from([MODERATE, SPECIAL]))
    shards = draw(st.integers(1, 5))
    shapes = {"w0": (draw(st.integers(1, 3)), draw(st.integers(1, 6))), "b0": (1, 3)}

    def tensor(shape):
        vals = draw(st.lists(values, min_size=shape[0] * shape[1], max_size=shape[0] * shape[1]))
        return torch.tensor(vals, dtype=torch.float32).reshape(shape)

    states = [{k: tensor(s) for k, s in shapes.items()} for _ in range(shards)]
    ws = [np.float32(draw(weights)) for _ in range(shards)]
    return states, ws


@pytest.mark.fuzz
@examples(300)
@given(unit_states())
def test_fast_aggregation_equals_scalar_reference(case):
    states, ws = case
    fast = D.aggregate(states, ws)
    ref = D.aggregate_reference(states, ws)
    assert list(fast) == list(ref)
    for name in fast:
        assert_bits_equal(fast[name], ref[name])
        n = fast[name].numel()
        for e in {0, n - 1}:
            tr = D.aggregation_trace(states, ws, fast, name, e)
            assert tr.recompute() == tr.output == int(canon(ref[name]).reshape(-1)[e])


def test_real_round_aggregate_and_trace():
    events, _ = digits_2x3()
    rnd = events[3]
    assert isinstance(rnd, D.RoundResult) and [u.shard for u in rnd.units] == [0, 1, 2]
    ref = D.aggregate_reference([u.final for u in rnd.units], rnd.weights)
    for name, t in rnd.state.items():
        assert_bits_equal(t, ref[name])
    assert rnd.state_root == state_root(rnd.state)
    assert rnd.aggregation_root == merkle.root_list(
        D.AGGREGATION_DOMAIN, [u.final_root for u in rnd.units] + [rnd.state_root]
    )
    tr = D.aggregation_trace([u.final for u in rnd.units], rnd.weights, rnd.state, 2, 7)
    assert tr.tensor == "w1" and tr.recompute() == tr.output
    assert tr.inputs == [F.bits(u.final["w1"].reshape(-1)[7].numpy()) for u in rnd.units]
    # round 1 starts from G_1 on every shard
    assert all(u.roots[0] == rnd.state_root for u in events[4:7])


# -- reproducibility and learning --------------------------------------------------------------


def _roots(out: str) -> list[dict]:
    lines = [json.loads(x) for x in out.splitlines()]
    for d in lines:
        d.pop("seconds", None)
    return lines


def test_bit_exact_across_processes_and_threads(tmp_path):
    """Separate processes with 1 and 2 threads (and the portable torch kernels, chunked) print
    the same per-unit and per-round roots. The synthetic job (64 x 600, batch 64) is big enough
    that the C matmul really splits across threads; the digits example runs too."""
    ds = data.load_dataset("synthetic/n=300,f=64,c=10,seed=3")
    base = json.loads(SINGLE.read_text()) | {"model": {"arch": "mlp", "widths": [64, 600, 10]}}
    base |= {"dataset": {"name": ds.name, "root": "0x" + ds.root().hex()}, "batch": 64}
    big = tmp_path / "big.json"
    big.write_text(json.dumps(v2(base, 2, 3, steps=4, checkpoint_every=1)))
    runs = [(big, ["--threads", "1"]), (big, ["--threads", "2"])]
    runs += [(big, ["--kernels", "torch"]), (EXAMPLE, ["--threads", "2"])]
    if not native.available():
        runs = runs[2:]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "agents", "train", "--spec", str(f), "--json", *v],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for f, v in runs
    ]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        outs.append(_roots(out))
    for o in outs[1:-1]:
        assert o == outs[0]
    assert len(outs[0]) == 2 * (3 + 1) + 1 and outs[0][0]["shard"] == 0
    # the digits example in a second process with 2 threads == this process with 1 thread
    events, acc = digits_2x3()
    digits = outs[-1]
    units = [d for d in digits if "shard" in d]
    rounds = [d for d in digits if "aggregation_root" in d]
    want_units = [e for e in events if isinstance(e, D.UnitResult)]
    assert [(d["round"], d["shard"]) for d in units] == [(u.round, u.shard) for u in want_units]
    assert [d["checkpoint_root"] for d in units] == [
        "0x" + u.checkpoint_root.hex() for u in want_units
    ]
    assert [d["final_root"] for d in units] == ["0x" + u.final_root.hex() for u in want_units]
    want_rounds = [e for e in events if isinstance(e, D.RoundResult)]
    assert [d["state_root"] for d in rounds] == ["0x" + r.state_root.hex() for r in want_rounds]
    assert [d["aggregation_root"] for d in rounds] == [
        "0x" + r.aggregation_root.hex() for r in want_rounds
    ]
    g_roots = [want_units[0].roots[0]] + [r.state_root for r in want_rounds]
    assert digits[-1]["rounds_root"] == "0x" + D.rounds_root(g_roots).hex()
    assert digits[-1]["test_accuracy"] == round(acc, 6)


def test_2x3_digits_learns_as_well_as_the_single_solver():
    """Local SGD over 2 rounds x 3 shards (k_local = 200) vs one solver, same T = 400 and the same
    lr, momentum, batch and seed (examples/digits-mlp.json): within 2 points, both >= 90%."""
    one = S.load(SINGLE)
    ds = data.load_dataset(one.dataset_name)
    eng = Engine(one, ds, EngineConfig())
    *_, (_, _, final) = eng.train()
    single = eng.accuracy(final, data.test_split_for(ds.name))
    _, decomposed = digits_2x3()
    assert S.load(EXAMPLE).steps == one.steps
    assert single >= 0.90 and decomposed >= 0.90, (single, decomposed)
    assert abs(decomposed - single) <= 0.02, (single, decomposed)


def test_cli_v2_rejects_steps_and_every(capsys):
    assert main(["train", "--spec", str(EXAMPLE), "--steps", "10"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "version-1" in err
