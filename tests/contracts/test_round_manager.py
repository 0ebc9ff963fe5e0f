"""RoundManager: decomposed R x S jobs over the JobManager, bonded aggregation and its fraud proof.

The unit states are real float32 tensors with real state roots (agents.training.merkle), so the
fraud proofs exercise TensorMerkle and RepOps.average exactly as an aggregator dispute would.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
import torch
from conftest import E18, J_COMPLETED, SEAL, SECRET_HASH, SOLVER, U_FINAL, advance, now, reverts
from web3.exceptions import ContractCustomError

from agents.adversaries.aggregator import corrupt
from agents.roles.aggregation import (
    data_roots,
    first_disputed_tensor,
    first_wrong_element,
    fraud_proof,
    layout_of,
    opening,
    reveal_answer,
    reveal_request,
    revealed_opening,
    wrong_element_in_chunk,
)
from agents.training import merkle
from agents.training.decompose import aggregate, aggregation_weights
from agents.training.float32 import bits
from agents.training.merkle import checkpoint_root, final_proof
from agents.training.state import state_root

R_TRAINING, R_COMMITTED, R_FINAL = 1, 2, 3
RJ_RUNNING, RJ_COMPLETED = 1, 2
WINDOW = 600
BOND = 50 * E18
BPS = 5_000
UNIT_REWARD = 20 * E18
AGG_REWARD = 5 * E18
N = 1438
S = 3
CONFIG_HASH = b"\x0c" * 32
ZERO_ADDRESS = "0x" + "00" * 20
REVEAL_BOND = BOND * 2_000 // 10_000


def make_state(seed: int) -> dict[str, torch.Tensor]:
    """A small state with a multi-leaf tensor (3 x 70: 4 leaves) and a one-leaf bias."""
    g = np.random.default_rng(seed)
    return {
        "w0": torch.from_numpy(g.standard_normal((3, 70)).astype(np.float32)),
        "b0": torch.from_numpy(g.standard_normal((1, 3)).astype(np.float32)),
    }


G0 = make_state(0)
LAYOUT = layout_of(G0)
WEIGHTS = aggregation_weights(N, S)


def params(now_ts: int, **overrides: Any) -> tuple:
    p: dict[str, Any] = {
        "specHash": b"\x05" * 32,
        "datasetRoot": b"\x02" * 32,
        "initialStateRoot": state_root(G0),
        "layoutHash": LAYOUT.hash(),
        "rounds": 2,
        "shards": S,
        "localSteps": 8,
        "checkpointInterval": 2,
        "numExamples": N,
        "required": (1, 8_192, 50),
        "unitReward": UNIT_REWARD,
        "verificationFee": 2 * E18,
        "aggregatorReward": AGG_REWARD,
        "computeTime": 3_600,
        "disputeConfigHash": CONFIG_HASH,
        # version 2: no aggregation graph, H = G (element fraud proofs)
        "aggregationConfigHash": b"\x00" * 32,
        "initialRoundRoot": b"\x00" * 32,
        "numStep": 0,
    }
    p.update(overrides)
    return tuple(p.values())


@pytest.fixture(scope="module")
def rm(staked, project):
    d = staked
    rmgr = d.deployer.deploy(project.RoundManager, d.manager, (WINDOW, BOND, BPS))
    for acct in [d.submitter, *d.solvers, *d.verifiers, d.whistleblower, d.other]:
        d.token.approve(rmgr, 2**256 - 1, sender=acct)
    d.rm = rmgr
    return d


def post(d, chain, **overrides: Any) -> int:
    tx = d.rm.postJob(params(now(chain), **overrides), sender=d.submitter)
    return tx.events.filter(d.rm.DecomposedJobPosted)[0].jobId


def heartbeat_all(d) -> None:
    for a in [*d.solvers, *d.verifiers]:
        d.registry.heartbeat(sender=a)


def units_of_round(r: int) -> list[dict[str, torch.Tensor]]:
    return [make_state(10 * (r + 1) + s) for s in range(S)]


def train_round(d, chain, job_id: int, r: int) -> list[dict[str, torch.Tensor]]:
    """Walks the round's S unit jobs (solver s on shard s) through claim, selection, commitment
    of the round's unit states and the verify window to Finalized."""
    heartbeat_all(d)
    units = units_of_round(r)
    ids = [d.manager.unitIdOf(d.rm.unitJobOf(job_id, r, s), 0) for s in range(S)]
    for s, unit_id in enumerate(ids):
        d.manager.claim(unit_id, SECRET_HASH, sender=d.solvers[s])
    advance(chain, 3_601)
    for unit_id in ids:
        d.manager.closeClaims(unit_id, sender=d.other)
    chain.mine(1)
    for s, unit_id in enumerate(ids):
        d.manager.selectAssignee(unit_id, sender=d.other)
        roots = [b"\x33" * 32] * 4 + [state_root(units[s])]  # the unit's final state last
        d.manager.commitCheckpoints(
            unit_id, checkpoint_root(roots), 5, roots[-1], final_proof(roots), "blob://u", SEAL,
            sender=d.solvers[s],
        )  # fmt: skip
    chain.mine(1)
    for unit_id in ids:
        d.manager.drawVerifiers(unit_id, sender=d.other)
    advance(chain, d.manager.config().verifyWindow + 2 * d.manager.config().revealWindow + 1)
    for unit_id in ids:
        d.manager.finalize(unit_id, sender=d.other)
        assert d.manager.getUnit(unit_id).status == U_FINAL
    heartbeat_all(d)
    return units


def commit(d, job_id: int, st: dict[str, torch.Tensor], aggregator) -> Any:
    return d.rm.commitAggregate(
        job_id, LAYOUT.as_tuple(), data_roots(st), "blob://agg", sender=aggregator
    )


def rm_balance_accounted(d, job_ids: list[int] | None = None) -> None:
    """Money conservation: every token the RoundManager holds is escrow, an aggregator bond of a
    committed round, a pending reveal request's bond, an answered one's held with its aggregate,
    credit or jackpot (over every job, so what earlier tests left behind counts too; `job_ids`
    only names the jobs of the test)."""
    accounts = [d.submitter, *d.solvers, *d.verifiers, d.whistleblower, d.other]
    held = sum(d.rm.credits(a) for a in accounts) + d.rm.jackpot() + d.rm.heldBondsTotal()
    for j in range(1, d.rm.jobCount() + 1):
        job = d.rm.getJob(j)
        held += job.escrow
        r = job.currentRound
        if job.status == RJ_RUNNING and d.rm.getRound(j, r).status == R_COMMITTED:
            held += BOND
        if d.rm.revealRequestOf(j, r).requester != ZERO_ADDRESS:
            held += d.rm.revealBond()
    assert d.token.balanceOf(d.rm) == held, job_ids


# -- posting ------------------------------------------------------------------------------------


def test_post_escrows_and_posts_round_zero_units(rm, chain):
    d = rm
    before_sub, before_mgr = d.token.balanceOf(d.submitter), d.token.balanceOf(d.manager)
    # the round manager is a contract: its unit jobs get kept records (PROTOCOL §6.10)
    kept_before = d.manager.recordCounts()[1]
    first = d.manager.KEPT_RECORDS() + kept_before + 1
    tx = d.rm.postJob(params(now(chain)), sender=d.submitter)
    job_id = tx.events.filter(d.rm.DecomposedJobPosted)[0].jobId
    escrow = 2 * (S * UNIT_REWARD + AGG_REWARD)
    assert d.token.balanceOf(d.submitter) == before_sub - escrow
    assert d.token.balanceOf(d.manager) == before_mgr + S * UNIT_REWARD
    job = d.rm.getJob(job_id)
    assert job.status == RJ_RUNNING and job.currentRound == 0
    assert job.escrow == escrow - S * UNIT_REWARD
    assert d.rm.globalRoot(job_id, 0) == state_root(G0)
    posted = tx.events.filter(d.rm.UnitJobPosted)
    assert [e.shard for e in posted] == [0, 1, 2]
    for s in range(S):
        unit_job = d.rm.unitJobOf(job_id, 0, s)
        assert unit_job == first + s
        assert tuple(d.rm.unitOf(unit_job)) == (job_id, 0, s)
        mj = d.manager.getJob(unit_job)
        assert mj.submitter == d.rm.address
        assert mj.specHash == d.rm.unitSpecHash(b"\x05" * 32, 0, s)
        assert mj.initialStateRoot == state_root(G0)
        assert mj.steps == 8 and mj.checkpointInterval == 2
        # registered with the job manager's arbiter: the job's config, unit (0, s)'s placement
        assert d.arbiter.configOf(unit_job) == CONFIG_HASH
        assert tuple(d.arbiter.placementOf(unit_job)) == (0, S, s)
    registered = tx.events.filter(d.arbiter.UnitConfigRegistered)
    assert [(e.jobId, e.shard, e.submitter) for e in registered] == [
        (first + s, s, d.rm.address) for s in range(S)
    ]
    assert d.rm.getRound(job_id, 0).status == R_TRAINING
    assert tuple(d.rm.unitOf(12345)) == (0, 0, 0)
    rm_balance_accounted(d, [job_id])


def test_a_round_unit_cannot_commit_another_result_than_its_lists_last(rm, chain):
    """Issue #38 for decomposed jobs: a round unit's final root is its aggregation's input, and
    it is bound at commit like any unit's: a list every verifier would agree with cannot carry
    an earlier checkpoint's root as its result (`FinalRootNotLast`)."""
    d = rm
    job_id = post(d, chain)
    heartbeat_all(d)
    unit_id = d.manager.unitIdOf(d.rm.unitJobOf(job_id, 0, 0), 0)
    d.manager.claim(unit_id, SECRET_HASH, sender=d.solvers[0])
    advance(chain, 3_601)
    d.manager.closeClaims(unit_id, sender=d.other)
    chain.mine(1)
    d.manager.selectAssignee(unit_id, sender=d.other)
    roots = [state_root(G0), b"\x33" * 32, b"\x34" * 32, b"\x35" * 32, state_root(make_state(7))]
    stale = merkle.list_proof(merkle.CHECKPOINT_DOMAIN, roots, 1).siblings
    with reverts(d.manager, "FinalRootNotLast", unitId=unit_id, finalStateRoot=roots[1]):
        d.manager.commitCheckpoints(unit_id, checkpoint_root(roots), 5, roots[1], stale,
                                    "blob://u", SEAL, sender=d.solvers[0])  # fmt: skip
    d.manager.commitCheckpoints(unit_id, checkpoint_root(roots), 5, roots[-1], final_proof(roots),
                                "blob://u", SEAL, sender=d.solvers[0])  # fmt: skip
    assert d.manager.getUnit(unit_id).finalStateRoot == roots[-1]


@pytest.mark.parametrize(
    "field,value,error,inputs",
    [
        ("specHash", b"\x00" * 32, "ZeroCommitment", {}),
        ("datasetRoot", b"\x00" * 32, "ZeroCommitment", {}),
        ("initialStateRoot", b"\x00" * 32, "ZeroCommitment", {}),
        ("layoutHash", b"\x00" * 32, "ZeroCommitment", {}),
        ("rounds", 0, "ZeroRounds", {}),
        ("shards", 0, "InvalidShards", {"shards": 0, "max": 64}),
        ("shards", 65, "InvalidShards", {"shards": 65, "max": 64}),
        ("localSteps", 0, "InvalidLocalSteps", {"localSteps": 0}),
        ("checkpointInterval", 0, "InvalidLocalSteps", {"checkpointInterval": 0}),
        ("checkpointInterval", 3, "InvalidLocalSteps", {"localSteps": 8, "checkpointInterval": 3}),
        ("computeTime", 0, "ZeroComputeTime", {}),
        ("disputeConfigHash", b"\x00" * 32, "ZeroCommitment", {}),
        # R * k_local must fit the game's uint64 step offset
        ("localSteps", 2**63, "InvalidLocalSteps", {"localSteps": 2**63}),
    ],
)
def test_post_reverts(rm, chain, field, value, error, inputs):
    with reverts(rm.rm, error, **inputs):
        rm.rm.postJob(params(now(chain), **{field: value}), sender=rm.submitter)


def test_post_reverts_with_more_shards_than_examples(rm, chain):
    with reverts(rm.rm, "InvalidShards", shards=3, max=2):
        rm.rm.postJob(params(now(chain), numExamples=2), sender=rm.submitter)


def test_post_bubbles_the_job_managers_fee_check(rm, chain):
    with reverts(rm.manager, "RewardBelowFees"):
        rm.rm.postJob(params(now(chain), unitReward=2 * E18), sender=rm.submitter)


def test_register_unit_config_with_another_game(rm, chain, project):
    """Anyone may have a unit's config registered with another game that reads submitters from
    the job manager (the attestation court's); the placement is the unit's."""
    d = rm
    job_id = post(d, chain)
    court_game = d.deployer.deploy(project.MockArbiter)
    unit_job = d.rm.unitJobOf(job_id, 0, 2)
    d.rm.registerUnitConfig(unit_job, court_game, sender=d.other)
    assert court_game.configOf(unit_job) == CONFIG_HASH
    assert tuple(court_game.placementOf(unit_job)) == (0, S, 2)
    for not_a_unit in [0, 10**9]:
        with reverts(d.rm, "NotAUnitJob", unitJobId=not_a_unit):
            d.rm.registerUnitConfig(not_a_unit, court_game, sender=d.other)


def test_post_reverts_without_an_arbiter(rm, chain, project):
    d = rm
    bare = d.deployer.deploy(project.JobManager, d.registry, tuple(d.manager.config()))
    rmgr = d.deployer.deploy(project.RoundManager, bare, (WINDOW, BOND, BPS))
    d.token.approve(rmgr, 2**256 - 1, sender=d.submitter)
    with reverts(rmgr, "ArbiterNotSet"):
        rmgr.postJob(params(now(chain)), sender=d.submitter)


def test_constructor_rejects_bad_config(rm, project):
    d = rm
    for cfg in [(0, BOND, BPS), (WINDOW, BOND, 10_001)]:
        with reverts(d.rm, "InvalidConfig"):
            d.deployer.deploy(project.RoundManager, d.manager, cfg)


# -- the honest path ----------------------------------------------------------------------------


def test_honest_two_round_job_completes_and_cannot_be_challenged(rm, chain):
    d = rm
    sub_before = d.token.balanceOf(d.submitter)
    job_id = post(d, chain)
    agg = d.solvers[0]
    g = G0
    for r in range(2):
        units = train_round(d, chain, job_id, r)
        honest = aggregate(units, WEIGHTS)
        tx = commit(d, job_id, honest, agg)
        ev = tx.events.filter(d.rm.AggregateCommitted)[0]
        assert ev.aggregateRoot == state_root(honest) and ev.round == r
        assert ev.blobLocator == "blob://agg"
        rnd = d.rm.getRound(job_id, r)
        assert rnd.status == R_COMMITTED and rnd.aggregator == agg.address
        # every element a challenger might pick recomputes to the committed value
        for tensor, element in [(0, 0), (0, 137), (0, 209), (1, 2)]:
            with reverts(d.rm, "AggregateCorrect", tensor=tensor, element=element):
                d.rm.proveAggregationFraud(
                    job_id, *fraud_proof(units, honest, LAYOUT, tensor, element), sender=d.other
                )
        with reverts(d.rm, "ChallengeWindowOpen", jobId=job_id, round=r):
            d.rm.finalizeRound(job_id, sender=d.other)
        advance(chain, WINDOW + 1)
        with reverts(d.rm, "ChallengeWindowClosed", jobId=job_id, round=r):
            d.rm.proveAggregationFraud(
                job_id, *fraud_proof(units, honest, LAYOUT, 0, 0), sender=d.other
            )
        tx = d.rm.finalizeRound(job_id, sender=d.other)
        assert tx.events.filter(d.rm.RoundFinalized)[0].globalRoot == state_root(honest)
        assert d.rm.globalRoot(job_id, r + 1) == state_root(honest)
        g = honest
        if r == 0:
            nxt = d.rm.unitJobOf(job_id, 1, 0)
            assert d.manager.getJob(nxt).initialStateRoot == state_root(g)
            for s in range(S):  # round 1 starts at global step 1 * k_local = 8
                unit_job = d.rm.unitJobOf(job_id, 1, s)
                assert tuple(d.arbiter.placementOf(unit_job)) == (8, S, s)
            assert d.rm.getJob(job_id).currentRound == 1
    job = d.rm.getJob(job_id)
    assert job.status == RJ_COMPLETED and job.escrow == 0
    assert d.rm.globalRoot(job_id, 2) == state_root(g)
    assert d.rm.credits(agg) == 2 * (BOND + AGG_REWARD)
    for r in range(2):
        for s in range(S):
            assert d.manager.getJob(d.rm.unitJobOf(job_id, r, s)).status == J_COMPLETED
    assert d.token.balanceOf(d.submitter) == sub_before - 2 * (S * UNIT_REWARD + AGG_REWARD)
    rm_balance_accounted(d, [job_id])
    before = d.token.balanceOf(agg)
    d.rm.withdraw(sender=agg)
    assert d.token.balanceOf(agg) == before + 2 * (BOND + AGG_REWARD)
    assert d.token.balanceOf(d.rm) == d.rm.jackpot()
    with reverts(d.rm, "JobNotRunning", jobId=job_id):
        commit(d, job_id, g, agg)
    with reverts(d.rm, "JobNotRunning", jobId=job_id):
        d.rm.finalizeRound(job_id, sender=d.other)


# -- the cheating aggregator ------------------------------------------------------------------


def test_cheating_aggregate_is_caught_slashed_and_reaggregated(rm, chain):
    d = rm
    job_id = post(d, chain, rounds=1)
    units = train_round(d, chain, job_id, 0)
    honest = aggregate(units, WEIGHTS)
    cheat = corrupt(honest, 0, 131)
    where = first_wrong_element(units, WEIGHTS, cheat)
    assert where == (0, 131)
    cheater, challenger, second = d.solvers[1], d.whistleblower, d.solvers[2]
    bond_before = d.token.balanceOf(cheater)
    commit(d, job_id, cheat, cheater)
    assert d.token.balanceOf(cheater) == bond_before - BOND
    # an element the cheater did not touch is still right
    with reverts(d.rm, "AggregateCorrect", tensor=0, element=130):
        d.rm.proveAggregationFraud(
            job_id, *fraud_proof(units, cheat, LAYOUT, 0, 130), sender=challenger
        )
    tx = d.rm.proveAggregationFraud(
        job_id, *fraud_proof(units, cheat, LAYOUT, *where), sender=challenger
    )
    ev = tx.events.filter(d.rm.AggregationFraudProven)[0]
    assert ev.aggregator == cheater.address and ev.challenger == challenger.address
    assert (ev.tensor, ev.element) == where
    assert ev.claimed == bits(cheat["w0"].reshape(-1)[131].numpy())
    assert ev.computed == bits(honest["w0"].reshape(-1)[131].numpy())
    assert d.rm.credits(challenger) == BOND * BPS // 10_000
    assert d.rm.jackpot() >= BOND - BOND * BPS // 10_000
    rnd = d.rm.getRound(job_id, 0)
    assert rnd.status == R_TRAINING and rnd.attempt == 1 and rnd.aggregateRoot == b"\x00" * 32
    # the cheater may not aggregate this round again; another solver re-aggregates correctly
    with reverts(d.rm, "AggregatorBarred", jobId=job_id, round=0, aggregator=cheater.address):
        commit(d, job_id, honest, cheater)
    commit(d, job_id, honest, second)
    with reverts(d.rm, "AggregateCorrect", tensor=0, element=131):
        d.rm.proveAggregationFraud(
            job_id, *fraud_proof(units, honest, LAYOUT, 0, 131), sender=challenger
        )
    advance(chain, WINDOW + 1)
    d.rm.finalizeRound(job_id, sender=d.other)
    assert d.rm.globalRoot(job_id, 1) == state_root(honest)
    assert d.rm.getJob(job_id).status == RJ_COMPLETED
    assert d.rm.credits(second) == BOND + AGG_REWARD
    assert d.rm.credits(cheater) == 0
    rm_balance_accounted(d, [job_id])


# -- revert paths -------------------------------------------------------------------------------


def test_commit_aggregate_reverts(rm, chain):
    d = rm
    with reverts(d.rm, "UnknownJob", jobId=777):
        commit(d, 777, G0, d.solvers[0])
    job_id = post(d, chain, rounds=1)
    first_unit = d.rm.unitJobOf(job_id, 0, 0)
    with reverts(d.rm, "UnitNotFinalized", jobId=job_id, round=0, shard=0, unitJobId=first_unit):
        commit(d, job_id, G0, d.solvers[0])
    units = train_round(d, chain, job_id, 0)
    honest = aggregate(units, WEIGHTS)
    with reverts(d.rm, "NotAggregator", caller=d.verifiers[0].address, role=2):
        commit(d, job_id, honest, d.verifiers[0])
    with reverts(d.rm, "NotAggregator", caller=d.other.address, role=0):
        commit(d, job_id, honest, d.other)
    bad = (LAYOUT.names, LAYOUT.rows, [70, 4])
    with reverts(d.rm, "LayoutMismatch", expected=LAYOUT.hash()):
        d.rm.commitAggregate(job_id, bad, data_roots(honest), "b", sender=d.solvers[0])
    with reverts(d.rm, "EmptyBlobLocator"):
        d.rm.commitAggregate(job_id, LAYOUT.as_tuple(), data_roots(honest), "", sender=d.solvers[0])
    with reverts(d.rm, "LengthMismatch", expected=2, actual=3):
        d.rm.commitAggregate(
            job_id,
            LAYOUT.as_tuple(),
            [*data_roots(honest), b"\x01" * 32],
            "b",
            sender=d.solvers[0],
        )
    with reverts(d.rm, "WrongRoundStatus", expected=R_COMMITTED, actual=R_TRAINING):
        d.rm.finalizeRound(job_id, sender=d.other)
    with reverts(d.rm, "WrongRoundStatus", expected=R_COMMITTED, actual=R_TRAINING):
        d.rm.proveAggregationFraud(
            job_id, *fraud_proof(units, honest, LAYOUT, 0, 0), sender=d.other
        )
    commit(d, job_id, honest, d.solvers[0])
    with reverts(d.rm, "WrongRoundStatus", expected=R_TRAINING, actual=R_COMMITTED):
        commit(d, job_id, honest, d.solvers[1])


def test_fraud_proof_reverts_on_bad_arguments(rm, chain):
    d = rm
    job_id = post(d, chain, rounds=1)
    units = train_round(d, chain, job_id, 0)
    cheat = corrupt(aggregate(units, WEIGHTS), 1, 0)
    commit(d, job_id, cheat, d.solvers[0])
    lay, tensor, element, u_open, a_open = fraud_proof(units, cheat, LAYOUT, 1, 0)
    with reverts(d.rm, "UnknownJob", jobId=999):
        d.rm.proveAggregationFraud(999, lay, tensor, element, u_open, a_open, sender=d.other)
    with reverts(d.rm, "LayoutMismatch"):
        d.rm.proveAggregationFraud(
            job_id, (lay[0], lay[1], [70, 9]), tensor, element, u_open, a_open, sender=d.other
        )
    with reverts(d.rm, "TensorOutOfRange", tensor=2, numState=2):
        d.rm.proveAggregationFraud(job_id, lay, 2, element, u_open, a_open, sender=d.other)
    with reverts(d.rm, "LengthMismatch", expected=3, actual=2):
        d.rm.proveAggregationFraud(job_id, lay, tensor, element, u_open[:2], a_open, sender=d.other)
    # unit 1's opening taken from the wrong state; the aggregate's opening from the honest one
    # (each opening is checked by the round manager's AggregationReference.openElement)
    wrong_unit = [u_open[0], opening(units[2], 1, 0), u_open[2]]
    with reverts(d.rm, "InvalidOpening", shard=1):
        d.rm.proveAggregationFraud(job_id, lay, tensor, element, wrong_unit, a_open, sender=d.other)
    honest_open = opening(aggregate(units, WEIGHTS), 1, 0)
    with reverts(d.rm, "InvalidOpening", shard=S):
        d.rm.proveAggregationFraud(
            job_id, lay, tensor, element, u_open, honest_open, sender=d.other
        )
    # an element opened from another leaf does not verify as this element
    shifted = [opening(u, 0, 70) for u in units]
    with reverts(d.rm, "InvalidOpening", shard=0):
        d.rm.proveAggregationFraud(
            job_id, lay, 0, 5, shifted, opening(cheat, 0, 70), sender=d.other
        )
    with reverts(d.rm, "NothingToWithdraw", account=d.other.address):
        d.rm.withdraw(sender=d.other)
    # the real proof still works after the failed ones
    d.rm.proveAggregationFraud(job_id, lay, tensor, element, u_open, a_open, sender=d.other)
    assert d.rm.getRound(job_id, 0).status == R_TRAINING


def test_views(rm):
    d = rm
    assert d.rm.jobManager() == d.manager.address
    assert d.rm.token() == d.token.address
    assert tuple(d.rm.config()) == (WINDOW, BOND, BPS)
    r, s = (1).to_bytes(32, "big"), (2).to_bytes(32, "big")
    want = merkle.keccak256(merkle.keccak256(b"vtp.unit.v1") + b"\x05" * 32 + r + s)
    assert d.rm.unitSpecHash(b"\x05" * 32, 1, 2) == want
    assert d.registry.roleOf(d.solvers[0]) == SOLVER


def test_deploy_all_deploys_a_round_manager_over_the_job_manager(chain, project, tmp_path):
    from test_invariants import ARTIFACTS, _export_artifacts, _keys

    from agents.core.deploy import DEFAULT_ROUND_CONFIG, deploy_all

    _export_artifacts(project, tmp_path, (*ARTIFACTS, "RoundManager"))
    w3 = chain.provider.web3
    out = deploy_all(
        w3,
        _keys()[0],
        tmp_path,
        {"mock_arbiter": True, "round_manager": True, "round_config": {"aggregatorBond": 7}},
    )
    abi = json.loads((tmp_path / "RoundManager.json").read_text())["abi"]
    rmc = w3.eth.contract(address=out["RoundManager"], abi=abi)
    assert rmc.functions.jobManager().call() == out["JobManager"]
    assert rmc.functions.token().call() == out["Token"]
    window, bond, bps = rmc.functions.config().call()
    assert (window, bond, bps) == (DEFAULT_ROUND_CONFIG["aggregationWindow"], 7, 5_000)


# -- withheld aggregates: reveal requests -------------------------------------------------------


def committed_wrong(d, chain, bad_of=lambda honest: corrupt(honest, 0, 137)):
    """A one-round job whose aggregator (solver 0) committed a wrong aggregate and serves no
    blob: the challenger knows only the data roots (commitAggregate's calldata)."""
    job_id = post(d, chain, rounds=1)
    units = train_round(d, chain, job_id, 0)
    honest = aggregate(units, WEIGHTS)
    bad = bad_of(honest)
    commit(d, job_id, bad, d.solvers[0])
    return job_id, units, honest, bad


def test_withheld_wrong_aggregate_is_revealed_and_proven_wrong(rm, chain):
    d = rm
    job_id, units, honest, bad = committed_wrong(d, chain)
    agg, challenger = d.solvers[0], d.other
    roots = data_roots(bad)
    tensor = first_disputed_tensor(roots, honest)
    assert tensor == 0
    args = reveal_request(LAYOUT, roots, honest, tensor)
    assert d.rm.revealBond() == REVEAL_BOND
    before = d.token.balanceOf(challenger)
    tx = d.rm.requestAggregateReveal(job_id, *args, sender=challenger)
    ev = tx.events.filter(d.rm.AggregateRevealRequested)[0]
    assert (ev.requester, ev.tensor, ev.dataRoot) == (challenger.address, 0, roots[0])
    assert [bytes(x) for x in ev.leaves] == args[4]
    assert d.token.balanceOf(challenger) == before - REVEAL_BOND
    req = d.rm.revealRequestOf(job_id, 0)
    assert req.requester == challenger.address and req.deadline == ev.deadline
    rm_balance_accounted(d, [job_id])
    with reverts(d.rm, "RevealPending", jobId=job_id, round=0):
        d.rm.requestAggregateReveal(job_id, *args, sender=d.verifiers[0])
    # the aggregator reveals: its leaves of w0 and the chunk of the first leaf that differs
    jackpot = d.rm.jackpot()
    tx = d.rm.revealAggregateLeaf(job_id, *reveal_answer(bad, tensor, args[4]), sender=agg)
    ev = tx.events.filter(d.rm.AggregateLeafRevealed)[0]
    assert (ev.tensor, ev.leaf) == (0, 137 // 64)
    # the window runs from the reveal's block (chain.pending_timestamp follows the wall clock)
    assert ev.deadline == d.rm.getRound(job_id, 0).deadline >= tx.timestamp + WINDOW
    # an answered request's bond is held with the aggregate, until it stands or falls
    assert d.rm.jackpot() == jackpot
    assert d.rm.heldBonds(job_id, 0, 0) == d.rm.heldBondOf(job_id, 0, 0, challenger) == REVEAL_BOND
    held = tx.events.filter(d.rm.RevealBondHeld)[0]
    assert (held.requester, held.attempt, held.amount) == (challenger.address, 0, REVEAL_BOND)
    with reverts(d.rm, "AggregateNotOverturned", jobId=job_id, round=0, attempt=0):
        d.rm.reclaimRevealBond(job_id, 0, 0, sender=challenger)
    assert d.rm.revealRequestOf(job_id, 0).requester == ZERO_ADDRESS
    # from the reveal alone the challenger proves element 137 wrong
    leaves, chunk = [bytes(x) for x in ev.leaves], bytes(ev.chunk)
    element = wrong_element_in_chunk(honest, tensor, ev.leaf, chunk)
    assert element == 137
    aggregate_open = revealed_opening(LAYOUT, roots, tensor, leaves, ev.leaf, chunk)
    unit_opens = [opening(u, tensor, element) for u in units]
    tx = d.rm.proveAggregationFraud(
        job_id, LAYOUT.as_tuple(), tensor, element, unit_opens, aggregate_open, sender=challenger
    )
    assert tx.events.filter(d.rm.AggregationFraudProven)[0].element == 137
    assert d.rm.getRound(job_id, 0).status == R_TRAINING
    # the requester of the leaf: the challenger's share, and its held request bond to take back
    assert d.rm.credits(challenger) == BOND * BPS // 10_000
    rm_balance_accounted(d, [job_id])
    tx = d.rm.reclaimRevealBond(job_id, 0, 0, sender=challenger)
    back = tx.events.filter(d.rm.RevealBondReturned)[0]
    assert (back.requester, back.round, back.attempt, back.amount) == (
        challenger.address,
        0,
        0,
        REVEAL_BOND,
    )
    assert d.rm.credits(challenger) == BOND * BPS // 10_000 + REVEAL_BOND
    assert d.rm.heldBonds(job_id, 0, 0) == 0 and d.rm.heldBondsTotal() == 0
    with reverts(d.rm, "NoBondHeld", jobId=job_id, round=0, attempt=0, requester=challenger):
        d.rm.reclaimRevealBond(job_id, 0, 0, sender=challenger)
    rm_balance_accounted(d, [job_id])


def test_unanswered_reveal_request_slashes_the_aggregator(rm, chain):
    d = rm
    job_id, units, honest, bad = committed_wrong(d, chain)
    agg, challenger = d.solvers[0], d.other
    roots = data_roots(bad)
    args = reveal_request(LAYOUT, roots, honest, 0)
    d.rm.requestAggregateReveal(job_id, *args, sender=challenger)
    deadline = d.rm.revealRequestOf(job_id, 0).deadline
    with reverts(d.rm, "RevealWindowOpen", jobId=job_id, round=0, deadline=deadline):
        d.rm.claimAggregateWithheld(job_id, sender=d.verifiers[0])
    advance(chain, WINDOW + 1)
    with reverts(d.rm, "RevealPending", jobId=job_id, round=0, deadline=deadline):
        d.rm.finalizeRound(job_id, sender=d.other)
    with reverts(d.rm, "RevealTooLate", jobId=job_id, round=0, deadline=deadline):
        d.rm.revealAggregateLeaf(job_id, *reveal_answer(bad, 0, args[4]), sender=agg)
    jackpot = d.rm.jackpot()
    tx = d.rm.claimAggregateWithheld(job_id, sender=d.verifiers[0])  # anyone may claim it
    ev = tx.events.filter(d.rm.AggregateWithheld)[0]
    assert (ev.aggregator, ev.requester) == (agg.address, challenger.address)
    reward = BOND * BPS // 10_000
    assert d.rm.credits(challenger) == REVEAL_BOND + reward
    assert d.rm.jackpot() == jackpot + BOND - reward
    assert d.rm.getRound(job_id, 0).status == R_TRAINING
    with reverts(d.rm, "AggregatorBarred", jobId=job_id, round=0, aggregator=agg.address):
        commit(d, job_id, honest, agg)
    commit(d, job_id, honest, d.solvers[1])  # re-aggregated
    rm_balance_accounted(d, [job_id])
    # the slashed bond's remainder goes on to the job manager's jackpot, the one that pays
    # forced-error catchers
    held, manager_jackpot = d.rm.jackpot(), d.manager.jackpot()
    assert held > 0
    tx = d.rm.flushJackpot(sender=d.other)
    assert tx.events.filter(d.rm.JackpotFlushed)[0].amount == held
    assert d.rm.jackpot() == 0 and d.manager.jackpot() == manager_jackpot + held
    rm_balance_accounted(d, [job_id])
    with reverts(d.rm, "NothingToFlush"):
        d.rm.flushJackpot(sender=d.other)


def test_malformed_padding_is_proven_by_the_reveal(rm, chain):
    """b0 (1 x 3) committed with a nonzero word past its third element: every element is
    right, so only the reveal of its one leaf can show the malformed tensor."""
    d = rm
    job_id = post(d, chain, rounds=1)
    units = train_round(d, chain, job_id, 0)
    honest = aggregate(units, WEIGHTS)
    chunk = bytearray(merkle.element_proof(honest["b0"], 0).chunk)
    chunk[4 * 5 : 4 * 6] = (0x3F800000).to_bytes(4, "big")  # word 5 = 1.0f, past the end
    roots = data_roots(honest)
    roots[1] = merkle.keccak256(bytes(chunk))  # one leaf: the data root is its hash
    d.rm.commitAggregate(job_id, LAYOUT.as_tuple(), roots, "blob://agg", sender=d.solvers[0])
    assert first_disputed_tensor(roots, honest) == 1
    args = reveal_request(LAYOUT, roots, honest, 1)
    before = d.rm.credits(d.other)
    d.rm.requestAggregateReveal(job_id, *args, sender=d.other)
    tx = d.rm.revealAggregateLeaf(
        job_id, LAYOUT.as_tuple(), [roots[1]], args[4], bytes(chunk), sender=d.solvers[0]
    )
    ev = tx.events.filter(d.rm.AggregationFraudProven)[0]
    assert (ev.tensor, ev.element, ev.claimed, ev.computed) == (1, 5, 0x3F800000, 0)
    assert d.rm.getRound(job_id, 0).status == R_TRAINING
    assert d.rm.credits(d.other) == before + REVEAL_BOND + BOND * BPS // 10_000
    rm_balance_accounted(d, [job_id])


def test_frivolous_reveal_request_forfeits_its_bond(rm, chain):
    d = rm
    job_id = post(d, chain, rounds=1)
    units = train_round(d, chain, job_id, 0)
    honest = aggregate(units, WEIGHTS)
    agg = d.solvers[0]
    commit(d, job_id, honest, agg)
    roots = data_roots(honest)
    args = reveal_request(LAYOUT, roots, honest, 0)
    with reverts(d.rm, "TensorNotDisputed", tensor=0, dataRoot=roots[0]):
        d.rm.requestAggregateReveal(job_id, *args, sender=d.other)
    fake = list(args[4])
    fake[1] = b"\x66" * 32  # a requester that claims leaf 1 differs
    d.rm.requestAggregateReveal(job_id, *args[:4], fake, sender=d.other)
    before, jackpot = d.rm.credits(agg), d.rm.jackpot()
    tx = d.rm.revealAggregateLeaf(job_id, *reveal_answer(honest, 0, fake), sender=agg)
    ev = tx.events.filter(d.rm.AggregateLeafRevealed)[0]
    assert ev.leaf == 1 and d.rm.heldBondOf(job_id, 0, 0, d.other) == REVEAL_BOND
    assert wrong_element_in_chunk(honest, 0, ev.leaf, bytes(ev.chunk)) is None
    with reverts(d.rm, "AggregateCorrect"):
        d.rm.proveAggregationFraud(
            job_id, *fraud_proof(units, honest, LAYOUT, 0, 64), sender=d.other
        )
    with reverts(d.rm, "ChallengeWindowOpen"):  # the reveal extended the window
        d.rm.finalizeRound(job_id, sender=d.other)
    advance(chain, WINDOW + 1)
    d.rm.finalizeRound(job_id, sender=d.other)
    assert d.rm.credits(agg) == before + BOND + AGG_REWARD
    # the aggregate stood: the request's held bond is forfeited to the jackpot
    assert d.rm.jackpot() == jackpot + REVEAL_BOND and d.rm.heldBonds(job_id, 0, 0) == 0
    with reverts(d.rm, "AggregateNotOverturned", jobId=job_id, round=0, attempt=0):
        d.rm.reclaimRevealBond(job_id, 0, 0, sender=d.other)
    rm_balance_accounted(d, [job_id])


def test_requester_front_run_by_a_proof_of_another_wrong_element_gets_its_bond_back(rm, chain):
    """A cheating aggregator that knows a second wrong element of its own aggregate, outside the
    leaf it revealed, proves that one first: it takes the challenger's share of its own bond,
    but the requester no longer loses its request bond (it was held with the aggregate, which
    is overturned). Before, the requester netted minus its bond (PROPERTIES, known gaps)."""
    d = rm
    job_id = post(d, chain, rounds=1)
    units = train_round(d, chain, job_id, 0)
    honest = aggregate(units, WEIGHTS)
    # wrong at element 137 (leaf 2) and at element 5 (leaf 0, the first leaf a reveal shows)
    far = corrupt(corrupt(honest, 0, 137), 0, 5)
    cheater, requester = d.solvers[0], d.other
    commit(d, job_id, far, cheater)
    roots = data_roots(far)
    tensor = first_disputed_tensor(roots, honest)
    args = reveal_request(LAYOUT, roots, honest, tensor)
    tokens = d.token.balanceOf(requester)
    d.rm.requestAggregateReveal(job_id, *args, sender=requester)
    tx = d.rm.revealAggregateLeaf(job_id, *reveal_answer(far, tensor, args[4]), sender=cheater)
    revealed = tx.events.filter(d.rm.AggregateLeafRevealed)[0].leaf
    assert revealed == 0 != 137 // 64
    # the cheater proves the element outside the revealed leaf, ahead of the requester
    d.rm.proveAggregationFraud(
        job_id, *fraud_proof(units, far, LAYOUT, tensor, 137), sender=cheater
    )
    assert d.rm.getRound(job_id, 0).attempt == 1
    d.rm.reclaimRevealBond(job_id, 0, 0, sender=requester)
    d.rm.withdraw(sender=requester)
    assert d.token.balanceOf(requester) == tokens  # the bond is back: nothing lost
    rm_balance_accounted(d, [job_id])


def test_reveal_reverts(rm, chain):
    d = rm
    job_id, units, honest, bad = committed_wrong(d, chain)
    roots = data_roots(bad)
    lay, tensor, root, proof, leaves = reveal_request(LAYOUT, roots, honest, 0)
    with reverts(d.rm, "NoRevealPending", jobId=job_id, round=0):
        d.rm.revealAggregateLeaf(job_id, *reveal_answer(bad, 0, leaves), sender=d.other)
    with reverts(d.rm, "NoRevealPending", jobId=job_id, round=0):
        d.rm.claimAggregateWithheld(job_id, sender=d.other)
    with reverts(d.rm, "InvalidTensorProof", tensor=0):
        d.rm.requestAggregateReveal(job_id, lay, 0, b"\x01" * 32, proof, leaves, sender=d.other)
    with reverts(d.rm, "InvalidTensorProof", tensor=1):
        d.rm.requestAggregateReveal(job_id, lay, 1, root, proof, leaves, sender=d.other)
    with reverts(d.rm, "LengthMismatch", expected=len(leaves), actual=len(leaves) - 1):
        d.rm.requestAggregateReveal(job_id, lay, 0, root, proof, leaves[:-1], sender=d.other)
    with reverts(d.rm, "TensorOutOfRange", tensor=2, numState=2):
        d.rm.requestAggregateReveal(job_id, lay, 2, root, proof, leaves, sender=d.other)
    with reverts(d.rm, "LayoutMismatch"):
        bad_layout = (lay[0], lay[1], [lay[2][0], lay[2][1] + 1])
        d.rm.requestAggregateReveal(job_id, bad_layout, 0, root, proof, leaves, sender=d.other)
    d.rm.requestAggregateReveal(job_id, lay, 0, root, proof, leaves, sender=d.other)
    answer = reveal_answer(bad, 0, leaves)
    wrong_requested = list(leaves)
    wrong_requested[0] = b"\x01" * 32
    with reverts(d.rm, "RootMismatch"):  # not the requester's leaves
        d.rm.revealAggregateLeaf(
            job_id, answer[0], answer[1], wrong_requested, answer[3], sender=d.other
        )
    with reverts(d.rm, "RootMismatch"):  # leaves that do not give the committed data root
        d.rm.revealAggregateLeaf(job_id, answer[0], leaves, leaves, answer[3], sender=d.other)
    with reverts(d.rm, "RootMismatch"):  # a chunk that is not the differing leaf
        d.rm.revealAggregateLeaf(job_id, *answer[:3], bytes(256), sender=d.other)
    with reverts(d.rm, "LengthMismatch"):
        d.rm.revealAggregateLeaf(
            job_id, answer[0], answer[1][:-1], leaves, answer[3], sender=d.other
        )
    d.rm.revealAggregateLeaf(job_id, *answer, sender=d.other)  # anyone holding the data
    advance(chain, WINDOW + 1)
    with reverts(d.rm, "ChallengeWindowClosed", jobId=job_id, round=0):
        d.rm.requestAggregateReveal(job_id, lay, 0, root, proof, leaves, sender=d.other)
    rm_balance_accounted(d, [job_id])


def test_units_register_with_the_real_game_and_the_courts(chain, project, tmp_path):
    """With the real DisputeGame as the arbiter, posting a round registers each unit's config
    and placement there; the attestation court's game takes configs from the court only (which
    copies them at the first challenge), so the RoundManager cannot register there."""
    from eth_account import Account
    from test_invariants import ARTIFACTS, _export_artifacts, _keys

    from agents.core.deploy import deploy_all

    extra = ("RoundManager", "DisputeGame", "OneStepProver")
    _export_artifacts(project, tmp_path, (*ARTIFACTS, *extra))
    w3 = chain.provider.web3
    keys = _keys()
    wiring = {"dispute_game": True, "attestation_court": True, "round_manager": True}
    out = deploy_all(w3, keys[0], tmp_path, wiring)

    def contract(name: str, address: str):
        abi = json.loads((tmp_path / f"{name}.json").read_text())["abi"]
        return w3.eth.contract(address=address, abi=abi)

    def send(key: str, fn) -> dict:
        acct = Account.from_key(key)
        tx = fn.build_transaction(
            {"from": acct.address, "nonce": w3.eth.get_transaction_count(acct.address)}
        )
        raw = Account.sign_transaction(tx, key).raw_transaction
        return w3.eth.wait_for_transaction_receipt(w3.eth.send_raw_transaction(raw))

    token, rmc = contract("TestToken", out["Token"]), contract("RoundManager", out["RoundManager"])
    game, court_game = contract("DisputeGame", out["DisputeGame"]), out["CourtGame"]
    court_game = contract("DisputeGame", court_game)
    submitter = Account.from_key(keys[1]).address
    send(keys[0], token.functions.mint(submitter, 1_000 * E18))
    send(keys[1], token.functions.approve(rmc.address, 2**256 - 1))
    assert send(keys[1], rmc.functions.postJob(params(now(chain))))["status"] == 1
    job_id = rmc.functions.jobCount().call()
    for s in range(S):
        unit_job = rmc.functions.unitJobOf(job_id, 0, s).call()
        assert game.functions.configOf(unit_job).call() == CONFIG_HASH
        assert tuple(game.functions.placementOf(unit_job).call()) == (0, S, s)
        assert court_game.functions.configOf(unit_job).call() == b"\x00" * 32
    unit_job = rmc.functions.unitJobOf(job_id, 0, 1).call()
    with pytest.raises(ContractCustomError) as err:
        rmc.functions.registerUnitConfig(unit_job, court_game.address).call(
            {"from": Account.from_key(keys[9]).address}
        )
    selector = w3.keccak(text="NotManager(address)")[:4].hex()
    assert selector in str(err.value.data)
    assert court_game.functions.configOf(unit_job).call() == b"\x00" * 32
    # the round manager is wired into the job manager (placement) and has its aggregation game,
    # a DisputeGame it manages
    assert contract("JobManager", out["JobManager"]).functions.roundManager().call() == rmc.address
    assert rmc.functions.game().call() == out["RoundGame"]
    assert contract("DisputeGame", out["RoundGame"]).functions.manager().call() == rmc.address
