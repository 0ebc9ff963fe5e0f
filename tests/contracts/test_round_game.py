"""RoundManager, version 3 (PROTOCOL §5.2, §6.9): a decomposed job whose aggregation is a
committed graph over the round state H_r (the step state G_r, then the outer optimizer's
buffers), with its aggregates disputed in the aggregation game, not by element proofs.

The units' final states are real float32 tensors with real state roots, and H_{r+1} is the real
Nesterov aggregation graph (agents/model/aggregate.py) on them, so the roots the chain derives
(U_r, G_{r+1} from H_{r+1}'s data roots) are checked against the agents' own. The game here is
MockSegmentGame, managed by the round manager and resolved by the test: the round manager's
side (bonds, Disputed, re-opening, barring, the extended window). The real game over the same
claim (from H_r with U_r, one step, to H_{r+1}) is tests/dispute/test_aggregation_game.py.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from conftest import SECRET_HASH, advance, now, reverts
from eth_account import Account
from test_round_manager import (
    AGG_REWARD,
    BOND,
    BPS,
    G0,
    R_COMMITTED,
    R_FINAL,
    R_TRAINING,
    RJ_COMPLETED,
    WEIGHTS,
    WINDOW,
    S,
    params,
    train_round,
)

from agents.adversaries.faults import aggregation_cheats
from agents.adversaries.liars import LyingChallenger
from agents.dispute.aggregation import AggregationComputation, aggregation_job_graph, units_root
from agents.dispute.player import Challenger, Defender
from agents.model.aggregate import Aggregation, Outer, aggregation_graph
from agents.roles.aggregation import data_roots, layout_of
from agents.training.ir import Value
from agents.training.state import state_root

R_DISPUTED = 4
AGG_CONFIG = b"\x0a" * 32
ZERO = b"\x00" * 32
ZERO_ADDRESS = "0x" + "00" * 20
SHARE = BOND * BPS // 10_000

AGG = Aggregation.of(
    aggregation_graph(
        [Value(n, tuple(t.shape), "f32") for n, t in G0.items()],
        list(G0),
        WEIGHTS,
        Outer.nesterov(0.7, 0.9),
    )  # fmt: skip
)
H0 = AGG.initial(G0)
H_LAYOUT = layout_of(H0)
NUM_STEP = len(AGG.step_names)


def v3_params(now_ts: int, **overrides: Any) -> tuple:
    fields = {
        "layoutHash": H_LAYOUT.hash(),
        "aggregationConfigHash": AGG_CONFIG,
        "initialRoundRoot": state_root(H0),
        "numStep": NUM_STEP,
    }
    fields.update(overrides)
    return params(now_ts, **fields)


@pytest.fixture(scope="module")
def v3(staked, project):
    d = staked
    d.rm = d.deployer.deploy(project.RoundManager, d.manager, (WINDOW, BOND, BPS))
    d.agg_game = d.deployer.deploy(project.MockSegmentGame)
    d.agg_game.wire(d.rm, sender=d.deployer)
    d.rm.setGame(d.agg_game, sender=d.deployer)
    d.manager.setRoundManager(d.rm, sender=d.deployer)  # the placement rule (PROTOCOL §6.9)
    for acct in [d.submitter, *d.solvers, *d.verifiers, d.whistleblower, d.other]:
        d.token.approve(d.rm, 2**256 - 1, sender=acct)
    return d


@pytest.fixture
def fresh(v3, chain):
    snap = chain.snapshot()
    yield v3
    chain.restore(snap)


def post(d, chain, **overrides: Any) -> int:
    tx = d.rm.postJob(v3_params(now(chain), **overrides), sender=d.submitter)
    return tx.events.filter(d.rm.DecomposedJobPosted)[0].jobId


def honest_next(h: dict[str, torch.Tensor], units: list) -> dict[str, torch.Tensor]:
    return AGG.run(h, units)[0]


def step_part(h: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return AGG.unit_start(h)


def commit(d, job_id: int, h: dict[str, torch.Tensor], aggregator) -> Any:
    return d.rm.commitAggregate(job_id, H_LAYOUT.as_tuple(), data_roots(h), "blob://h",
                                sender=aggregator)  # fmt: skip


def _challenge(rm, job_id: int, challenger) -> int:
    """Challenges the round's aggregate; the game's id (from AggregateChallenged)."""
    tx = rm.challengeAggregate(job_id, sender=challenger)
    return tx.events.filter(rm.AggregateChallenged)[0].gameId


def balance_accounted(d) -> None:
    """Every token the round manager holds is escrow, a committed (or disputed) aggregate's
    bond, a challenger's bond in an open game, credit or jackpot."""
    accounts = [d.submitter, *d.solvers, *d.verifiers, d.whistleblower, d.other]
    held = sum(d.rm.credits(a) for a in accounts) + d.rm.jackpot() + d.rm.heldBondsTotal()
    for j in range(1, d.rm.jobCount() + 1):
        job = d.rm.getJob(j)
        held += job.escrow
        status = d.rm.getRound(j, job.currentRound).status
        if job.status != RJ_COMPLETED and status in (R_COMMITTED, R_DISPUTED):
            held += BOND * (2 if status == R_DISPUTED else 1)
    assert d.token.balanceOf(d.rm) == held


# -- posting and wiring ---------------------------------------------------------------------


def test_post_keeps_h0_and_starts_the_units_from_g0(fresh, chain):
    d = fresh
    job_id = post(d, chain)
    assert d.rm.globalRoot(job_id, 0) == state_root(H0)
    assert d.rm.unitStartRoot(job_id, 0) == state_root(G0) != state_root(H0)
    for s in range(S):
        assert d.manager.getJob(d.rm.unitJobOf(job_id, 0, s)).initialStateRoot == state_root(G0)
    # the job's aggregation config is registered with the aggregation game, by the round manager
    assert d.agg_game.configOf(job_id) == AGG_CONFIG
    assert d.rm.aggregationUnitId(job_id, 1) == (job_id << 32) | 1


@pytest.mark.parametrize(
    "overrides",
    [
        {"initialRoundRoot": ZERO},  # version 3 without H_0
        {"numStep": 0},  # version 3 without the step state's size
        {"aggregationConfigHash": ZERO},  # version 2 with H_0 and numStep
        {"aggregationConfigHash": ZERO, "initialRoundRoot": ZERO},  # version 2 with numStep
    ],
)
def test_post_refuses_mixed_version_fields(fresh, chain, overrides):
    d = fresh
    p = dict(zip(["aggregationConfigHash", "initialRoundRoot", "numStep"],
                 v3_params(now(chain), **overrides)[-3:], strict=True))  # fmt: skip
    with reverts(d.rm, "InvalidAggregation", **p):
        d.rm.postJob(v3_params(now(chain), **overrides), sender=d.submitter)


def test_wiring_the_game(v3, chain, project):
    d = v3
    bare = d.deployer.deploy(project.RoundManager, d.manager, (WINDOW, BOND, BPS))
    d.token.approve(bare, 2**256 - 1, sender=d.submitter)
    # a version-3 job needs the game: refused before it is wired (a version-2 job is not)
    with reverts(bare, "InvalidAggregation", numStep=NUM_STEP):
        bare.postJob(v3_params(now(chain)), sender=d.submitter)
    other_game = d.deployer.deploy(project.MockSegmentGame)
    other_game.wire(d.rm, sender=d.deployer)
    with reverts(bare, "GameOfAnotherManager", game=other_game.address, manager=d.rm.address):
        bare.setGame(other_game, sender=d.deployer)
    mine = d.deployer.deploy(project.MockSegmentGame)
    mine.wire(bare, sender=d.deployer)
    with reverts(bare, "NotDeployer", caller=d.other.address):
        bare.setGame(mine, sender=d.other)
    tx = bare.setGame(mine, sender=d.deployer)
    assert tx.events.filter(bare.GameSet)[0].game == mine.address
    assert bare.game() == mine.address
    with reverts(bare, "GameAlreadySet", game=mine.address):
        bare.setGame(mine, sender=d.deployer)


# -- an honest round ------------------------------------------------------------------------


def test_an_honest_round_commits_h_derives_g_and_units_and_finalizes(fresh, chain):
    d = fresh
    job_id = post(d, chain)
    units = train_round(d, chain, job_id, 0)
    h1 = honest_next(H0, units)
    commit(d, job_id, h1, d.solvers[0])
    rnd = d.rm.getRound(job_id, 0)
    assert rnd.status == R_COMMITTED and rnd.aggregateRoot == state_root(h1)
    # U_r and G_{r+1} are derived on chain from the units' final roots and H_{r+1}'s data roots
    assert rnd.unitsRoot == units_root([state_root(u) for u in units])
    assert rnd.nextUnitRoot == state_root(step_part(h1))
    balance_accounted(d)
    # element proofs and reveal requests are version 2's: a Nesterov aggregate is no average
    blank = (ZERO, [], b"", [])
    with reverts(d.rm, "AggregatedByGraph", jobId=job_id):
        d.rm.proveAggregationFraud(job_id, H_LAYOUT.as_tuple(), 0, 0, [blank] * S, blank,
                                   sender=d.other)  # fmt: skip
    with reverts(d.rm, "AggregatedByGraph", jobId=job_id):
        d.rm.requestAggregateReveal(job_id, H_LAYOUT.as_tuple(), 0, ZERO, [], [], sender=d.other)
    advance(chain, WINDOW + 1)
    d.rm.finalizeRound(job_id, sender=d.other)
    assert d.rm.getRound(job_id, 0).status == R_FINAL
    assert d.rm.globalRoot(job_id, 1) == state_root(h1)
    assert d.rm.unitStartRoot(job_id, 1) == state_root(step_part(h1))
    for s in range(S):
        unit_job = d.manager.getJob(d.rm.unitJobOf(job_id, 1, s))
        assert unit_job.initialStateRoot == state_root(step_part(h1))
    assert d.rm.credits(d.solvers[0]) == BOND + AGG_REWARD
    balance_accounted(d)


# -- disputed aggregates --------------------------------------------------------------------


def _committed_wrong(d, chain):
    """A job whose round 0 has a wrong H_1 (one element of an outer buffer) from solver 0."""
    job_id = post(d, chain)
    units = train_round(d, chain, job_id, 0)
    h1 = honest_next(H0, units)
    bad = {k: v.clone() for k, v in h1.items()}
    bad["outer.w0"][1, 5] += 1.0
    commit(d, job_id, bad, d.solvers[0])
    return job_id, units, h1, bad


def test_challenge_opens_the_one_step_claim_and_holds_the_round(fresh, chain):
    d = fresh
    job_id, units, h1, bad = _committed_wrong(d, chain)
    before = d.token.balanceOf(d.solvers[1])
    tx = d.rm.challengeAggregate(job_id, sender=d.solvers[1])
    ev = tx.events.filter(d.rm.AggregateChallenged)[0]
    assert (ev.jobId, ev.round, ev.challenger) == (job_id, 0, d.solvers[1].address)
    opened = tx.events.filter(d.agg_game.GameOpened)[0]
    assert opened.gameId == ev.gameId
    assert opened.unitId == d.rm.aggregationUnitId(job_id, 0)
    assert (opened.defender, opened.challenger) == (d.solvers[0].address, d.solvers[1].address)
    assert d.token.balanceOf(d.solvers[1]) == before - BOND
    rnd = d.rm.getRound(job_id, 0)
    assert (rnd.status, rnd.challenger) == (R_DISPUTED, d.solvers[1].address)
    balance_accounted(d)
    # one game at a time, and no finalization while it runs (even past the window)
    with reverts(d.rm, "WrongRoundStatus", expected=R_COMMITTED, actual=R_DISPUTED):
        d.rm.challengeAggregate(job_id, sender=d.solvers[2])
    advance(chain, WINDOW + 1)
    with reverts(d.rm, "WrongRoundStatus", expected=R_COMMITTED, actual=R_DISPUTED):
        d.rm.finalizeRound(job_id, sender=d.other)
    # only the game reports results
    with reverts(d.rm, "NotArbiter", caller=d.other.address):
        d.rm.onDisputeResolved(ev.gameId, opened.unitId, True, sender=d.other)


def test_a_won_challenge_bars_the_aggregator_and_reopens_the_round(fresh, chain):
    d = fresh
    job_id, units, h1, bad = _committed_wrong(d, chain)
    gid = _challenge(d.rm, job_id, d.solvers[1])
    jackpot = d.rm.jackpot()
    tx = d.agg_game.resolve(gid, True, sender=d.other)
    ev = tx.events.filter(d.rm.AggregateDisputeResolved)[0]
    assert (ev.jobId, ev.round, ev.gameId, ev.challengerWon) == (job_id, 0, gid, True)
    rnd = d.rm.getRound(job_id, 0)
    assert (rnd.status, rnd.attempt, rnd.aggregateRoot) == (R_TRAINING, 1, ZERO)
    assert rnd.challenger == ZERO_ADDRESS
    # the challenger: its bond back and its share of the aggregator's; the rest to the jackpot
    assert d.rm.credits(d.solvers[1]) == BOND + SHARE
    assert d.rm.jackpot() == jackpot + BOND - SHARE
    balance_accounted(d)
    with reverts(d.rm, "AggregatorBarred", aggregator=d.solvers[0].address):
        commit(d, job_id, h1, d.solvers[0])
    commit(d, job_id, h1, d.solvers[2])
    advance(chain, WINDOW + 1)
    d.rm.finalizeRound(job_id, sender=d.other)
    assert d.rm.unitStartRoot(job_id, 1) == state_root(step_part(h1))
    assert d.rm.credits(d.solvers[2]) == BOND + AGG_REWARD
    balance_accounted(d)


def test_a_lost_challenge_pays_the_aggregator_and_extends_the_window(fresh, chain):
    d = fresh
    job_id = post(d, chain)
    units = train_round(d, chain, job_id, 0)
    h1 = honest_next(H0, units)
    commit(d, job_id, h1, d.solvers[0])
    advance(chain, WINDOW - 10)
    gid = _challenge(d.rm, job_id, d.solvers[1])
    jackpot = d.rm.jackpot()
    tx = d.agg_game.resolve(gid, False, sender=d.other)
    ev = tx.events.filter(d.rm.AggregateDisputeResolved)[0]
    rnd = d.rm.getRound(job_id, 0)
    # the window ends no earlier than one window after the result: another challenger has time
    assert rnd.status == R_COMMITTED and rnd.deadline == ev.deadline
    assert ev.deadline == chain.blocks.head.timestamp + WINDOW
    assert d.rm.credits(d.solvers[0]) == SHARE
    assert d.rm.jackpot() == jackpot + BOND - SHARE
    balance_accounted(d)
    with reverts(d.rm, "ChallengeWindowOpen", deadline=ev.deadline):
        d.rm.finalizeRound(job_id, sender=d.other)
    advance(chain, WINDOW + 1)
    d.rm.finalizeRound(job_id, sender=d.other)
    assert d.rm.credits(d.solvers[0]) == SHARE + BOND + AGG_REWARD
    assert d.rm.globalRoot(job_id, 1) == state_root(h1)
    balance_accounted(d)


def test_challenge_refusals(fresh, chain):
    d = fresh
    job_id = post(d, chain)
    with reverts(d.rm, "WrongRoundStatus", expected=R_COMMITTED, actual=R_TRAINING):
        d.rm.challengeAggregate(job_id, sender=d.solvers[1])
    units = train_round(d, chain, job_id, 0)
    h1 = honest_next(H0, units)
    commit(d, job_id, h1, d.solvers[0])
    with reverts(d.rm, "OwnAggregate", caller=d.solvers[0].address):
        d.rm.challengeAggregate(job_id, sender=d.solvers[0])
    with reverts(d.rm, "NotRegistered", caller=d.other.address):
        d.rm.challengeAggregate(job_id, sender=d.other)
    advance(chain, WINDOW + 1)
    deadline = d.rm.getRound(job_id, 0).deadline
    with reverts(d.rm, "ChallengeWindowClosed", deadline=deadline):
        d.rm.challengeAggregate(job_id, sender=d.solvers[1])
    # a version-2 job has no aggregation game
    v2 = d.rm.postJob(params(now(chain)), sender=d.submitter).events.filter(
        d.rm.DecomposedJobPosted)[0].jobId  # fmt: skip
    with reverts(d.rm, "NoAggregationGame", jobId=v2):
        d.rm.challengeAggregate(v2, sender=d.solvers[1])


def test_a_step_state_larger_than_the_layout_cannot_be_committed(fresh, chain):
    """numStep is checked against the layout where the layout is first given: at commit."""
    d = fresh
    job_id = post(d, chain, numStep=len(H0) + 1)
    units = train_round(d, chain, job_id, 0)
    with reverts(d.rm, "InvalidStepCount", numStep=len(H0) + 1, numState=len(H0)):
        commit(d, job_id, honest_next(H0, units), d.solvers[0])


# -- placement: a round's units go to distinct solvers -----------------------------------------


def _unit(d, job_id: int, r: int, s: int) -> int:
    return d.manager.unitIdOf(d.rm.unitJobOf(job_id, r, s), 0)


def test_a_solver_claims_one_shard_of_a_round_in_its_first_window(fresh, chain):
    d = fresh
    job_id = post(d, chain)
    for a in [*d.solvers, *d.verifiers]:
        d.registry.heartbeat(sender=a)
    first = d.manager.getUnit(_unit(d, job_id, 0, 0)).deadline
    d.manager.claim(_unit(d, job_id, 0, 0), SECRET_HASH, sender=d.solvers[0])
    assert d.manager.roundShardOf(job_id, 0, d.solvers[0]) == 1
    with reverts(d.manager, "ShardHeld", roundJob=job_id, round=0, shard=0,
                 solver=d.solvers[0].address, until=first):  # fmt: skip
        d.manager.claim(_unit(d, job_id, 0, 1), SECRET_HASH, sender=d.solvers[0])
    d.manager.claim(_unit(d, job_id, 0, 1), SECRET_HASH, sender=d.solvers[1])
    # another decomposed job's round is another round
    other = post(d, chain)
    d.manager.claim(_unit(d, other, 0, 1), SECRET_HASH, sender=d.solvers[0])
    # the fallback: after the round's first window, a unit nobody else took (its window
    # extended) may go to a solver that holds another shard of the round
    advance(chain, first - chain.blocks.head.timestamp + 1)
    last = _unit(d, job_id, 0, 2)
    d.manager.closeClaims(last, sender=d.other)  # no claimant: the window is extended
    d.registry.heartbeat(sender=d.solvers[0])
    d.manager.claim(last, SECRET_HASH, sender=d.solvers[0])
    assert d.manager.roundShardOf(job_id, 0, d.solvers[0]) == 1  # its first shard stays recorded


def test_wiring_the_round_manager_into_the_job_manager(v3, project):
    d = v3
    assert d.manager.roundManager() == d.rm.address
    with reverts(d.manager, "RoundManagerAlreadySet", roundManager=d.rm.address):
        d.manager.setRoundManager(d.rm, sender=d.deployer)
    bare = d.deployer.deploy(project.JobManager, d.registry, tuple(d.manager.config()))
    with reverts(bare, "NotDeployer", caller=d.other.address):
        bare.setRoundManager(d.rm, sender=d.other)
    with reverts(bare, "ZeroAddress"):
        bare.setRoundManager("0x" + "00" * 20, sender=d.deployer)
    with reverts(bare, "RoundManagerOfAnotherManager", roundManager=d.rm.address,
                 manager=d.manager.address):  # fmt: skip
        bare.setRoundManager(d.rm, sender=d.deployer)
    tx = bare.setRoundManager(
        d.deployer.deploy(project.RoundManager, bare, (WINDOW, BOND, BPS)), sender=d.deployer
    )
    assert len(tx.events.filter(bare.RoundManagerSet)) == 1


# -- the real aggregation game, opened and resolved through the round manager --------------------


@pytest.fixture(scope="module")
def real(staked, project):
    """A round manager wired to a real DisputeGame (its manager) over the OneStepProver."""
    d = staked
    rm = d.deployer.deploy(project.RoundManager, d.manager, (WINDOW, BOND, BPS))
    prover = d.deployer.deploy(project.OneStepProver)
    game = d.deployer.deploy(project.DisputeGame, rm, prover, 3_600, True)
    rm.setGame(game, sender=d.deployer)
    for acct in [d.submitter, *d.solvers]:
        d.token.approve(rm, 2**256 - 1, sender=acct)
    return d, rm, game


def _play(d, chain, rm, game, defender, challenger):
    """Posts a one-round job, trains its units, has solver 0 commit `defender`'s H_1 and solver 1
    challenge it; the two play the real game to the end with their accounts' computations."""
    from agents.core.enums import Side
    from agents.dispute.client import GameClient, run_game
    from agents.dispute.harness import key

    d.rm = rm
    # the job's aggregation config: the real game checks every descriptor against it
    job_id = post(
        d, chain, rounds=1, aggregationConfigHash=aggregation_job_graph(AGG).config.hash()
    )
    units = train_round(d, chain, job_id, 0)
    honest, jg, acct = defender(units)
    commit(d, job_id, acct.output(), d.solvers[0])
    gid = _challenge(rm, job_id, d.solvers[1])
    w3 = chain.provider.web3
    abi = game.contract_type.model_dump(mode="json", by_alias=True)["abi"]
    c = w3.eth.contract(address=game.address, abi=abi)
    keys = {Account.from_key(key(i)).address: key(i) for i in range(10)}

    def client(who):
        return GameClient(w3, c, keys[who.address])

    rec = run_game(gid, (Defender(acct, jg), client(d.solvers[0])),
                   (challenger(honest, jg), client(d.solvers[1])),
                   lambda s: advance(chain, s))  # fmt: skip
    return job_id, rec, Side


def _accounts(units, cheat_seed=None):
    jg = aggregation_job_graph(AGG)
    honest = AggregationComputation(AGG, jg, H0, units)
    if cheat_seed is None:
        return honest, jg, honest
    ((_, _, cheat),) = aggregation_cheats(honest, 1, seed=cheat_seed, outputs_only=True)
    return honest, jg, cheat


def test_a_cheating_aggregator_loses_the_real_game_and_the_round_reopens(real, chain):
    d, rm, game = real
    job_id, rec, Side = _play(d, chain, rm, game, lambda u: _accounts(u, cheat_seed=3), Challenger)
    assert rec.winner == Side.CHALLENGER and not rec.by_timeout, rec
    rnd = rm.getRound(job_id, 0)
    assert (rnd.status, rnd.attempt) == (R_TRAINING, 1)
    assert rm.credits(d.solvers[1]) >= BOND + SHARE


def test_an_honest_aggregator_beats_a_lying_challenger_in_the_real_game(real, chain):
    d, rm, game = real

    def liar(honest, jg):
        return LyingChallenger(honest, jg, seed=1, forge=False)

    job_id, rec, Side = _play(d, chain, rm, game, _accounts, liar)
    assert rec.winner == Side.DEFENDER, rec
    rnd = rm.getRound(job_id, 0)
    assert (rnd.status, rnd.attempt, rnd.challenger) == (R_COMMITTED, 0, ZERO_ADDRESS)
    assert rm.credits(d.solvers[0]) == SHARE  # the challenger's bond, split in its favour
