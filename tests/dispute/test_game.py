"""Deterministic dispute-game tests: every node's one-step proof, the digits example job, the
encodings against the contract, clocks at their exact deadline, who may call what.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dispute_fixtures import (
    advance,
    ape_artifacts,
    deploy_game,
    make_job,
    open_game,
    open_segment_game,
)
from web3 import Web3
from web3.exceptions import ContractCustomError, ContractLogicError

from agents.adversaries.faults import Fault, FaultyComputation, faulty_party
from agents.adversaries.liars import LyingChallenger
from agents.data.builtin import load_dataset
from agents.dispute.client import MoveRejected, run_game
from agents.dispute.encoding import step_list_root
from agents.dispute.player import Challenger, Defender, Phase
from agents.dispute.trace import Computation
from agents.training.spec import parse_spec

ROOT = Path(__file__).resolve().parents[2]
JOB = make_job((70, 6, 3), batch=4, n=24, seed=5, steps=2, interval=1)  # w0 has 7 leaves
# Every node's element proved in one move (proveElement), K = 70 included: the bisection of long
# reductions has its own tests (test_reduction_game.py).
DIRECT = 1 << 32


@pytest.mark.parametrize("node", range(len(JOB.jg.nodes)), ids=lambda i: JOB.jg.graph.nodes[i].name)
def test_fault_in_every_node_is_caught_by_its_one_step_proof(dep, chain, snapshot, node):
    g = JOB.jg.graph
    numel = JOB.jg.nodes[node].numel
    honest = JOB.honest(2, 1)
    liar = faulty_party(
        JOB, 2, 1, Fault("element", step=1, node=node, element=numel - 1, mask=0x40000000)
    )
    if g.nodes[node].name in ("loss.logsum", "loss.nll", "loss.mean"):
        # The loss feeds no later node: S_2 is right, the claim is true, nothing to dispute.
        assert liar.checkpoint_commit() == honest.checkpoint_commit()
        return
    gid = open_game(dep, JOB, liar, honest)
    rec = run_game(
        gid,
        (Defender(liar, JOB.jg), dep.defender),
        (Challenger(honest, JOB.jg, direct_terms=DIRECT), dep.challenger),
        advance(chain),
    )
    assert rec.challenger_won and not rec.by_timeout, rec
    assert dep.game.functions.progressOf(gid).call()[7] == node  # the disputed node
    proved = dep.game.events.ElementProved().get_logs(
        from_block=0, argument_filters={"gameId": gid}
    )
    assert proved[0]["args"]["element"] == numel - 1
    assert proved[0]["args"]["claimed"] != proved[0]["args"]["correct"]
    assert dep.manager.functions.challengerWon(gid).call()


@pytest.mark.parametrize("node", range(len(JOB.jg.nodes)), ids=lambda i: JOB.jg.graph.nodes[i].name)
def test_true_element_of_every_node_stands_its_one_step_proof(dep, chain, snapshot, node):
    honest = JOB.honest(2, 1)
    # The last element: the largest row and column, so an index mix-up in a reference shows.
    last = JOB.jg.nodes[node].numel - 1
    # Step 1 (segment 1), where biases and momenta are no longer all zero.
    liar = LyingChallenger(
        honest, JOB.jg, seed=node, segment=1, node=node, element=last, direct_terms=DIRECT
    )
    gid = open_game(dep, JOB, honest, honest)
    rec = run_game(
        gid, (Defender(honest, JOB.jg), dep.defender), (liar, dep.challenger), advance(chain)
    )
    assert not rec.challenger_won and not rec.by_timeout, rec
    assert dep.game.functions.progressOf(gid).call()[7] == node
    proved = dep.game.events.ElementProved().get_logs(
        from_block=0, argument_filters={"gameId": gid}
    )
    assert proved[0]["args"]["element"] == last
    assert proved[0]["args"]["claimed"] == proved[0]["args"]["correct"]


def test_digits_example_dispute(dep, chain, snapshot):
    spec = parse_spec(json.loads((ROOT / "examples" / "digits-mlp.json").read_text()))
    data = load_dataset(spec.dataset_name)
    job = make_job(
        spec.widths, spec.batch, data.n, spec.seed, spec.steps, spec.checkpoint_every, data=data
    )
    honest = job.honest(spec.steps, spec.checkpoint_every)
    # Element 5 of the first layer's matmul at step 217 is positive: its relu passes it on.
    fault = Fault(
        "element", step=217, node=job.jg.graph.index_of("fwd0.mm"), element=5, mask=0x40000000
    )
    liar = faulty_party(job, spec.steps, spec.checkpoint_every, fault)
    assert liar.checkpoint_commit() != honest.checkpoint_commit()
    gid = open_game(dep, job, liar, honest)
    rec = run_game(
        gid,
        (Defender(liar, job.jg), dep.defender),
        (Challenger(honest, job.jg), dep.challenger),
        advance(chain),
    )
    assert rec.challenger_won and not rec.by_timeout
    p = dep.game.functions.progressOf(gid).call()
    assert (p[5], p[6], p[7]) == (5, 17, job.jg.graph.index_of("fwd0.mm"))  # segment, step, node
    assert len(rec.moves) == 10


@pytest.mark.parametrize("verifier_honest", [True, False], ids=["honest", "lying"])
def test_attestation_game(dep, chain, snapshot, verifier_honest):
    """A verifier attests segment [4, 8) of a job; a whistleblower disputes it."""
    job = make_job((6, 5, 3), batch=3, n=16, seed=9, steps=12, interval=4)
    t0, k = 4, 4
    start = job.honest(12, 4).state(t0)
    honest = Computation(job.engine, k, k, t0=t0, start=start)
    upd = job.jg.graph.index_of("upd.w0")  # a state tensor of S_7: always reaches the claim
    fault = Fault("element", step=6, node=upd, mask=0x40000000)
    verifier = (
        Computation(job.engine, k, k, t0=t0, start=start)
        if verifier_honest
        else FaultyComputation(job.engine, k, k, t0=t0, start=start, fault=fault)
    )
    gid = open_segment_game(dep, job, verifier)
    claim = dep.game.functions.claimOf(gid).call()
    assert (claim[8], claim[9], claim[10]) == (t0, k, k)
    if verifier_honest:
        blower = LyingChallenger(honest, job.jg, seed=3)
    else:
        blower = Challenger(honest, job.jg)
    rec = run_game(
        gid, (Defender(verifier, job.jg), dep.defender), (blower, dep.challenger), advance(chain)
    )
    assert rec.challenger_won == (not verifier_honest) and not rec.by_timeout, rec
    assert rec.phases[0] == Phase.OPEN_SEGMENT  # one segment: no checkpoint level
    if not verifier_honest:
        p = dep.game.functions.progressOf(gid).call()
        assert (p[6], p[7]) == (2, upd)  # step t0 + 2, the faulty node


def test_step_list_root_matches_contract(dep):
    roots = [bytes([i]) * 32 for i in range(6)]
    onchain = dep.game.functions.stepListRoot(roots[0], roots[1:-1], roots[-1]).call()
    assert onchain == step_list_root(roots)


ALREADY = "ConfigAlreadyRegistered(uint256,bytes32)"


def selector(signature: str) -> str:
    """The 4-byte selector of a custom error, as hex in a rejected move's message."""
    return "0x" + Web3.keccak(text=signature)[:4].hex()


def test_a_court_game_takes_configs_from_its_manager_only(w3, project, snapshot):
    # the attestation court's game (managerRegistersOnly): the court copies the config of the job
    # manager's game (AttestationCourt._adoptConfig); its submitter cannot register one after
    # the verifiers attested (AUDIT-rounds finding 2)
    dep = deploy_game(w3, ape_artifacts(project), manager_registers_only=True)
    assert dep.game.functions.managerRegistersOnly().call()
    submitter = dep.deployer_game()
    dep.deployer.transact("setSubmitter", 79, submitter.address)
    with pytest.raises(MoveRejected, match=selector("NotManager(address)")):
        submitter.transact("registerConfig", 79, b"\x05" * 32)
    with pytest.raises(MoveRejected, match=selector("NotManager(address)")):
        submitter.transact("registerUnitConfig", 79, b"\x05" * 32, (0, 1, 0))
    dep.deployer.transact("registerConfig", 79, b"\x04" * 32)  # the manager (the court)
    assert dep.game.functions.configOf(79).call() == b"\x04" * 32
    with pytest.raises(MoveRejected, match=selector(ALREADY)):  # once
        dep.deployer.transact("registerConfig", 79, b"\x05" * 32)
    assert dep.game.functions.configOf(79).call() == b"\x04" * 32


def test_the_job_managers_game_takes_configs_from_the_submitter_only(dep, snapshot):
    assert not dep.game.functions.managerRegistersOnly().call()
    submitter = dep.deployer_game()
    dep.deployer.transact("setSubmitter", 80, submitter.address)
    with pytest.raises(MoveRejected, match=selector("NotSubmitter(address,address)")):
        dep.deployer.transact("registerConfig", 80, b"\x04" * 32)  # not even its manager


def test_only_the_submitter_registers_a_config_once(dep, snapshot):
    submitter = dep.deployer_game()
    dep.deployer.transact("setSubmitter", 77, submitter.address)
    with pytest.raises(MoveRejected):  # not the submitter
        dep.defender.transact("registerConfig", 77, b"\x02" * 32)
    submitter.transact("registerConfig", 77, b"\x02" * 32)
    assert dep.game.functions.configOf(77).call() == b"\x02" * 32
    with pytest.raises(MoveRejected, match=selector(ALREADY)):  # once
        submitter.transact("registerConfig", 77, b"\x03" * 32)
    assert dep.game.functions.configOf(77).call() == b"\x02" * 32
    # A unit of a job without a config cannot be disputed (the manager's challenge reverts).
    request = (78 << 32, dep.defender.address, dep.challenger.address) + (b"\x00" * 32,) * 3
    request += (1, 1, b"\x00" * 32, 2, b"\x00" * 32, b"\x00" * 32, b"\x00" * 32)
    with pytest.raises(MoveRejected):
        dep.deployer.transact("open", request)


def test_only_the_manager_opens_games(dep, snapshot):
    request = (1, dep.defender.address, dep.challenger.address) + (b"\x00" * 32,) * 3
    request += (1, 1, b"\x00" * 32, 2, b"\x00" * 32, b"\x00" * 32, b"\x00" * 32)
    with pytest.raises(MoveRejected):
        dep.defender.transact("openGame", request)


def test_turns_clocks_and_deadlines(dep, chain, snapshot):
    job = make_job((4, 3, 2), batch=2, n=8, seed=3, steps=4, interval=2)
    honest = job.honest(4, 2)
    liar = faulty_party(job, 4, 2, Fault("element", step=2, node=2, element=0, mask=0x40000000))
    gid = open_game(dep, job, liar, honest)
    defender, challenger = Defender(liar, job.jg), Challenger(honest, job.jg)
    v = dep.defender.view(gid)
    assert v.phase == Phase.POST_CHECKPOINTS
    # The challenger cannot move in the defender's turn, nor claim a timeout before it.
    with pytest.raises(MoveRejected):
        dep.challenger.play(defender.next_move(v), gid)
    with pytest.raises(MoveRejected):
        dep.challenger.claim_timeout(gid)
    dep.defender.play(defender.next_move(v), gid)
    # Challenger's turn: its deadline is its whole budget from the defender's move.
    v = dep.defender.view(gid)
    assert v.phase == Phase.PICK_SEGMENT
    moved_at = dep.w3.eth.get_block("latest")["timestamp"]
    deadline = dep.challenger.deadline(gid)
    assert deadline == moved_at + dep.game.functions.clockBudget().call()
    # Up to the deadline the move is allowed; the clock then stops with what is left.
    chain.mine(1, timestamp=deadline - 1)
    rc = dep.challenger.play(challenger.next_move(v), gid)
    ts = dep.w3.eth.get_block(rc["blockNumber"])["timestamp"]
    assert ts <= deadline
    clock = dep.game.functions.progressOf(gid).call()[4]
    assert clock >> 64 == deadline - ts and clock & (2**64 - 1) == 0  # left, stopped
    # The defender's clock runs again; past its deadline only claimTimeout is left.
    d_deadline = dep.defender.deadline(gid)
    chain.mine(1, timestamp=d_deadline + 1)
    v = dep.defender.view(gid)
    with pytest.raises(MoveRejected):
        dep.defender.play(defender.next_move(v), gid)
    dep.challenger.claim_timeout(gid)
    p = dep.game.functions.progressOf(gid).call()
    assert p[0] == Phase.RESOLVED and p[1] == 2
    assert dep.manager.functions.resolved(gid).call()
    with pytest.raises(MoveRejected):
        dep.challenger.claim_timeout(gid)  # a game resolves once


def test_views_and_errors_carry_values(dep, snapshot):
    with pytest.raises(Exception) as err:
        dep.game.functions.pickSegment(999, 0, (b"\x00" * 32, []), (b"\x00" * 32, [])).call(
            {"from": dep.challenger.address}
        )
    assert type(err.value) in (ContractCustomError, ContractLogicError) or (
        type(err.value).__name__ == "TransactionFailed"
    )
    assert dep.game.functions.turn(999).call() == [0, 0]
