"""Dispute games over one unit of a decomposed job (spec version 2, PROTOCOL §4, §6.9, §7.2).

A unit's claim counts its steps from the unit's first step; the placement registered with its
config (t0 = r·k_local, shard s of S) gives the one-step proof the global step and shard s's
batch schedule. The unit here is (r, s) = (2, 2) of a 3 × 3 job with k_local = 2: its batches
are drawn at global steps 4, 5 from the examples i with i mod 3 = 2. The nodes that read the
batch (`x = gather_rows`, `y = gather_labels`) are where a wrong offset or shard would show:
an honest defender must win there, and loses when the same unit is registered without its
placement.
"""

from __future__ import annotations

import dataclasses

import pytest
from dispute_fixtures import Job, advance, make_job, open_game
from web3 import Web3

from agents.adversaries.faults import Fault, FaultyComputation
from agents.adversaries.liars import LyingChallenger
from agents.dispute.client import MoveRejected, run_game
from agents.dispute.player import Challenger, Defender
from agents.dispute.trace import Computation
from agents.training.decompose import RoundUnitEngine

BASE = make_job((6, 5, 3), batch=4, n=23, seed=7, steps=2, interval=1)
SPEC = dataclasses.replace(BASE.spec, version=2, rounds=3, shards=3, local_steps=2, steps=6)
ROUND, SHARD = 2, 2
T0 = ROUND * SPEC.k_local
PLACEMENT = (T0, SPEC.shards, SHARD)
# G_2: any state the unit starts from; two version-1 steps make the biases and momenta nonzero.
G_R = BASE.honest(2, 1).state(2)
UNIT = Job(SPEC, BASE.data, RoundUnitEngine(SPEC, BASE.data, SHARD, T0, G_R), BASE.jg)


def selector(signature: str) -> str:
    """The 4-byte selector of a custom error, as hex in a rejected move's message."""
    return "0x" + Web3.keccak(text=signature)[:4].hex()


def unit_claim(fault: Fault | None = None) -> Computation:
    if fault is None:
        return Computation(UNIT.engine, SPEC.k_local, 1, start=G_R)
    return FaultyComputation(UNIT.engine, SPEC.k_local, 1, start=G_R, fault=fault)


def test_unit_batches_are_the_shards_at_global_steps():
    """The unit engine's local step t draws shard s's batch of global step t0 + t."""
    for t in range(SPEC.k_local):
        idx = UNIT.engine.batch(t).reshape(-1).tolist()
        assert all(i % SPEC.shards == SHARD for i in idx)
        other = RoundUnitEngine(SPEC, BASE.data, SHARD, 0, G_R).batch(T0 + t).reshape(-1)
        assert idx == other.tolist()


# x: the last element (batch row B-1, last feature); y: every batch row (3 classes, so one label
# can coincide under a wrong schedule, all four together do not).
CASES = [(0, UNIT.jg.nodes[0].numel - 1)] + [(1, b) for b in range(SPEC.batch)]


@pytest.mark.parametrize(
    "node,element",
    CASES,
)
def test_true_batch_element_of_a_unit_stands_its_one_step_proof(
    dep, chain, snapshot, node, element
):
    honest = unit_claim()
    liar = LyingChallenger(honest, UNIT.jg, seed=node, segment=1, node=node, element=element)
    gid = open_game(dep, UNIT, honest, honest, PLACEMENT)
    rec = run_game(
        gid, (Defender(honest, UNIT.jg), dep.defender), (liar, dep.challenger), advance(chain)
    )
    assert not rec.challenger_won and not rec.by_timeout, rec
    p = dep.game.functions.progressOf(gid).call()
    assert (p[5], p[6], p[7]) == (1, 0, node)  # segment 1 = local step 1 = global step t0 + 1
    proved = dep.game.events.ElementProved().get_logs(
        from_block=0, argument_filters={"gameId": gid}
    )
    assert proved[0]["args"]["claimed"] == proved[0]["args"]["correct"]
    traced = dep.game.events.TracePosted().get_logs(from_block=0, argument_filters={"gameId": gid})
    assert traced[0]["args"]["globalStep"] == T0 + 1


def test_the_same_unit_without_its_placement_is_judged_on_another_batch(dep, chain, snapshot):
    """Registered as a version-1 job (no placement), the chain reads batch row b of local step 1
    as the version-1 idx(seed, 1, b) over the whole dataset, not shard 2's example at global
    step 5: the one-step proof needs an example row the unit's batch does not contain, so the
    proof built from the unit's own batch is refused (`ElementNotOpened`). The placement is what
    makes the one-step proof replay a unit's batch."""
    honest = unit_claim()
    last = UNIT.jg.nodes[0].numel - 1
    liar = LyingChallenger(honest, UNIT.jg, seed=0, segment=1, node=0, element=last)
    gid = open_game(dep, UNIT, honest, honest)
    rec = run_game(
        gid, (Defender(honest, UNIT.jg), dep.defender), (liar, dep.challenger), advance(chain)
    )
    assert [r for r in rec.rejected if r.startswith("proveElement")], rec
    assert all(selector("ElementNotOpened(uint256,uint256)") in r for r in rec.rejected), rec


@pytest.mark.parametrize(
    "fault",
    [
        Fault("batch", step=1, element=3),
        Fault("element", step=0, node=BASE.jg.graph.index_of("upd.w0"), mask=0x40000000),
    ],
    ids=["batch", "element"],
)
def test_a_cheating_units_fault_is_caught(dep, chain, snapshot, fault):
    honest, liar = unit_claim(), unit_claim(fault)
    assert liar.checkpoint_commit() != honest.checkpoint_commit()
    gid = open_game(dep, UNIT, liar, honest, PLACEMENT)
    rec = run_game(
        gid,
        (Defender(liar, UNIT.jg), dep.defender),
        (Challenger(honest, UNIT.jg), dep.challenger),
        advance(chain),
    )
    assert rec.challenger_won and not rec.by_timeout, rec
    p = dep.game.functions.progressOf(gid).call()
    assert p[5] == fault.step  # the faulty local step (one step per segment)


def test_unit_config_registration_rules(dep, snapshot):
    submitter = dep.deployer_game()
    dep.deployer.transact("setSubmitter", 91, submitter.address)
    cfg = UNIT.jg.config.hash()
    with pytest.raises(MoveRejected):  # not the submitter
        dep.defender.transact("registerUnitConfig", 91, cfg, PLACEMENT)
    for bad in [(T0, 0, 0), (T0, 3, 3), (T0, 3, 7)]:  # no shard; shard not below S
        with pytest.raises(MoveRejected, match=selector("InvalidPlacement(uint32,uint32)")):
            submitter.transact("registerUnitConfig", 91, cfg, bad)
    submitter.transact("registerUnitConfig", 91, cfg, PLACEMENT)
    assert dep.game.functions.configOf(91).call() == cfg
    assert tuple(dep.game.functions.placementOf(91).call()) == PLACEMENT
    logs = dep.game.events.UnitConfigRegistered().get_logs(
        from_block=0, argument_filters={"jobId": 91}
    )
    args = logs[-1]["args"]
    assert (args["stepOffset"], args["shards"], args["shard"]) == PLACEMENT
    already = selector("ConfigAlreadyRegistered(uint256,bytes32)")
    with pytest.raises(MoveRejected, match=already):  # once, whichever way it was registered
        submitter.transact("registerConfig", 91, cfg)
    with pytest.raises(MoveRejected, match=already):
        submitter.transact("registerUnitConfig", 91, cfg, PLACEMENT)
    # a version-1 job has the zero placement: offset 0, read as one shard
    dep.deployer.transact("setSubmitter", 92, submitter.address)
    submitter.transact("registerConfig", 92, cfg)
    assert tuple(dep.game.functions.placementOf(92).call()) == (0, 0, 0)
