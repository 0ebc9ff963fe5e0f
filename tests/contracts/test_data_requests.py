"""Data requests (PROTOCOL §6.11, issue #38): a drawn verifier or the submitter demands proof that
a checkpoint's state is held; anyone holding it answers, at a cost bounded whatever the state's
size — the state opened against the checkpoint root, its headers part by part, then DATA_SAMPLES
chunks drawn by the block after the request — or, unanswered, the solver loses as in a lost
dispute game and, for the final checkpoint, every drawn verifier that attested (attesting is
holding the result) loses its lock.

The unit's commitment is real: the checkpoint root over the state roots of five small states
(agents.training.merkle): checkpoint 2's holds a 65 x 70 weight (72 chunks), checkpoint 3's 300
tensors (two header parts: the multi-part opening), and the answers are built by
agents.dispute.availability, as the agents build them.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from ape.exceptions import ContractLogicError
from conftest import (
    E18,
    MGR_CFG,
    SECRET,
    U_DISPUTED,
    U_OPEN,
    U_VERIFYING,
    Protocol,
    advance,
    assign,
    attest,
    by_address,
    reverts,
    seal_attestation,
)
from eth_utils import keccak
from test_forced_errors import (
    as_tuple,
    ends,
    forced,  # noqa: F401 - the fixture
    forced_unit,
    judge_of,
    reveal,
    seed_jackpot,
)

from agents.dispute.availability import DATA_OPEN_PART, DATA_SAMPLES, StateOpening, sample_index
from agents.training.merkle import checkpoint_root, final_proof, state_root

ZERO = "0x" + "00" * 20
REWARD = 100 * E18
COLLATERAL = REWARD * MGR_CFG["collateralBps"] // 10_000
BPS = 10_000
# challengeBondOf: max(challengeBond, collateral · challengerRewardBps) = 50 tokens
BOND = max(MGR_CFG["challengeBond"], COLLATERAL * MGR_CFG["challengerRewardBps"] // BPS)
REVEAL_WINDOW = MGR_CFG["revealWindow"]
BATCH = 16  # samples per proveDataSamples call here
LOCATOR = "http://holder.example/blobs#0x" + "ab" * 32


def checkpoint_state(i: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(100 + i)
    if i == 3:  # 300 tensors: two header parts of at most DATA_OPEN_PART
        return {f"t{k}": torch.randn(1, 3 + k % 5, generator=g) for k in range(300)}
    rows = 65 if i == 2 else 3  # checkpoint 2: 65 x 70 = 4,550 elements = 72 chunks
    return {
        "w0": torch.randn(rows, 70, generator=g, dtype=torch.float32),
        "b0": torch.randn(1, 5, generator=g, dtype=torch.float32),
        "m.w0": torch.zeros(1, 3, dtype=torch.float32),
    }


STATES = [checkpoint_state(i) for i in range(5)]
ROOTS = [state_root(list(s.items())) for s in STATES]
CROOT = checkpoint_root(ROOTS)
CSEAL = keccak(CROOT + SECRET)
OPENINGS = {i: StateOpening(STATES[i]) for i in range(5)}


def committed(d: Protocol, chain, solver: Any = None) -> tuple[int, list[Any]]:
    """A Verifying unit whose commitment is CROOT (ROOTS at steps 0, 2, …, 8) by `solver`
    (default solvers[0]); returns it and its drawn verifiers (accounts)."""
    solver = solver or d.solvers[0]
    _, unit = assign(d, chain, solver)
    d.manager.commitCheckpoints(
        unit, CROOT, 5, ROOTS[4], final_proof(ROOTS), "blob://da", CSEAL, sender=solver
    )
    chain.mine(1)
    d.manager.drawVerifiers(unit, sender=d.other)
    drawn = [by_address(d.verifiers, v) for v in d.manager.getVerifiers(unit)]
    assert len(drawn) == 2
    return unit, drawn


def request(d: Protocol, unit: int, checkpoint: int, who: Any) -> Any:
    return d.manager.requestData(unit, checkpoint, sender=who)


def open_all(d: Protocol, unit: int, checkpoint: int, sender: Any) -> list[Any]:
    """Opens the state at `checkpoint` and every header part; returns the receipts."""
    o = OPENINGS[checkpoint]
    s = o.open_state(ROOTS, checkpoint)
    txs = [d.manager.openDataState(unit, s.tensor_count, s.state_tree, s.checkpoint_proof,
                                   sender=sender)]  # fmt: skip
    txs += [d.manager.openDataHeaders(unit, *p.args(), sender=sender) for p in o.header_parts()]
    return txs


def seed_of(d: Protocol, chain, unit: int) -> bytes:
    """The hash of the request's seed block (mined by now)."""
    block = d.manager.dataRequestOf(unit).seedBlock
    return bytes(chain.provider.web3.eth.get_block(block)["hash"])


def prove(d: Protocol, chain, unit: int, checkpoint: int, sender: Any, first: int = 0,
          count: int = DATA_SAMPLES, locator: str = LOCATOR) -> list[Any]:  # fmt: skip
    """Proves samples `first`, … (`count` of them) in calls of BATCH; returns the receipts."""
    o, seed = OPENINGS[checkpoint], seed_of(d, chain, unit)
    txs = []
    for j in range(first, first + count, BATCH):
        batch = o.samples(seed, j, min(BATCH, first + count - j))
        txs.append(d.manager.proveDataSamples(unit, [s.args() for s in batch], locator,
                                              sender=sender))  # fmt: skip
    return txs


def answer(d: Protocol, chain, unit: int, checkpoint: int, sender: Any) -> list[Any]:
    return open_all(d, unit, checkpoint, sender) + prove(d, chain, unit, checkpoint, sender)


# ------------------------------------------------------------------ answered


def test_requestData_verifier_answeredBySamples_forfeitsItsBond(staked, chain):
    """A drawn verifier's request pulls the challenge bond and disputes the unit, drawing its
    samples by the next block; anyone holding the state opens it, its headers and the 64 samples
    (the chunks Python's draw names: 72 + 1 + 1 chunks here), the last call answers it with its
    locator: the unit is Verifying again with its deadline at least disputeGrace away and the
    bond forfeited as a failed challenge's."""
    d = staked
    unit, drawn = committed(d, chain)
    v = drawn[0]
    deadline = d.manager.getUnit(unit).deadline
    balance, held = d.token.balanceOf(v), d.token.balanceOf(d.manager)
    assert d.manager.challengeBondOf(unit) == BOND

    tx = request(d, unit, 2, v)
    ev = tx.events.filter(d.manager.DataRequested)[0]
    answer_by = tx.timestamp + REVEAL_WINDOW
    assert (ev.unitId, ev.requester, ev.checkpoint, ev.bond) == (unit, v.address, 2, BOND)
    assert ev.answerDeadline == answer_by and ev.seedBlock == tx.block_number + 1
    assert tx.return_value == BOND
    assert d.token.balanceOf(v) == balance - BOND
    assert d.token.balanceOf(d.manager) == held + BOND
    assert d.manager.getUnit(unit).status == U_DISPUTED
    q = d.manager.dataRequestOf(unit)
    assert (q.requester, q.checkpoint, q.answerDeadline, q.bond) == (v.address, 2, answer_by, BOND)
    assert (q.stateRoot, q.tensorCount, q.opened, q.samples) == (b"\x00" * 32, 0, 0, 0)

    o = OPENINGS[2]
    txs = open_all(d, unit, 2, d.other)
    opened = txs[0].events.filter(d.manager.DataStateOpened)[0]
    assert (opened.stateRoot, opened.tensorCount) == (ROOTS[2], 3)
    headers = txs[1].events.filter(d.manager.DataHeadersOpened)[0]
    assert (headers.firstTensor, headers.count, headers.totalLeaves) == (0, 3, 74)
    q = d.manager.dataRequestOf(unit)
    assert (q.stateRoot, q.tensorCount, q.opened, q.totalLeaves) == (ROOTS[2], 3, 3, 74)
    txs = prove(d, chain, unit, 2, d.solvers[0], 0, BATCH)
    proved = txs[0].events.filter(d.manager.DataSamplesProved)[0]
    assert (proved.prover, proved.first, proved.count) == (d.solvers[0].address, 0, BATCH)
    assert d.manager.dataRequestOf(unit).samples == BATCH
    assert d.manager.getUnit(unit).status == U_DISPUTED
    # the samples are the chunks the seed draws, uniformly over the 74 (the contract checked each)
    seed = seed_of(d, chain, unit)
    drawn_chunks = [sample_index(seed, j, 74) for j in range(DATA_SAMPLES)]
    assert [o.sample(seed, j).start + 0 for j in range(3)] == [
        o.starts[o.chunk_at(c)[0]] for c in drawn_chunks[:3]
    ]
    txs = prove(d, chain, unit, 2, d.other, BATCH, DATA_SAMPLES - BATCH)
    answered = txs[-1].events.filter(d.manager.DataRequestAnswered)[0]
    new_deadline = max(deadline, txs[-1].timestamp + MGR_CFG["disputeGrace"])
    assert (answered.unitId, answered.requester, answered.checkpoint) == (unit, v.address, 2)
    assert (answered.answerer, answered.locator) == (d.other.address, LOCATOR)
    assert answered.deadline == new_deadline
    u = d.manager.getUnit(unit)
    assert u.status == U_VERIFYING and u.deadline == new_deadline
    assert d.manager.dataRequestOf(unit).requester == ZERO
    # a frivolous demand against available data loses its bond, as a failed challenge
    to_solver = BOND * MGR_CFG["challengerRewardBps"] // BPS
    assert d.manager.credits(d.solvers[0]) == to_solver
    assert d.manager.jackpot() == BOND - to_solver
    assert d.manager.credits(v) == 0
    assert d.token.balanceOf(d.manager) == held + BOND
    # once per requester per attempt
    with reverts(d.manager, "DataAlreadyRequested", unitId=unit, attempt=0, requester=v.address):
        request(d, unit, 3, v)
    # the other drawn verifier may still ask, here for the 300-tensor state (two header parts),
    # and the unit still finalizes in the end
    request(d, unit, 3, drawn[1])
    txs = open_all(d, unit, 3, d.other)
    parts = [t.events.filter(d.manager.DataHeadersOpened)[0] for t in txs[1:]]
    assert [(p.firstTensor, p.count) for p in parts] == [(0, DATA_OPEN_PART), (256, 44)]
    assert parts[-1].totalLeaves == OPENINGS[3].total_leaves == 300
    prove(d, chain, unit, 3, d.other)
    assert d.manager.getUnit(unit).status == U_VERIFYING
    attest(d, chain, unit, [(w, [ROOTS[1], ROOTS[1]]) for w in drawn])
    advance(chain, d.manager.getUnit(unit).deadline - chain.pending_timestamp + 1)
    d.manager.finalize(unit, sender=d.solvers[0])


def test_requestData_submitter_finalCheckpointOnly_zeroBond(staked, chain):
    d = staked
    unit, _ = committed(d, chain)
    with reverts(
        d.manager, "SubmitterFinalCheckpointOnly", unitId=unit, checkpoint=3, finalCheckpoint=4
    ):
        request(d, unit, 3, d.submitter)
    with reverts(d.manager, "CheckpointOutOfRange", unitId=unit, checkpoint=5, numCheckpoints=5):
        request(d, unit, 5, d.submitter)
    balance, jackpot = d.token.balanceOf(d.submitter), d.manager.jackpot()
    tx = request(d, unit, 4, d.submitter)
    assert tx.return_value == 0
    assert tx.events.filter(d.manager.DataRequested)[0].bond == 0
    assert d.token.balanceOf(d.submitter) == balance
    txs = answer(d, chain, unit, 4, d.solvers[0])
    assert txs[-1].events.filter(d.manager.DataRequestAnswered)[0].requester == d.submitter
    # the zero bond moves nothing
    assert d.manager.credits(d.solvers[0]) == 0 and d.manager.jackpot() == jackpot
    assert d.manager.getUnit(unit).status == U_VERIFYING
    with reverts(d.manager, "DataAlreadyRequested", requester=d.submitter.address):
        request(d, unit, 4, d.submitter)


def test_requestData_notDrawnNorSubmitter_reverts(staked, chain):
    d = staked
    unit, drawn = committed(d, chain)
    undrawn = [v for v in d.verifiers if v not in drawn][0]
    for who in (d.other, undrawn, d.solvers[0], d.whistleblower):
        with reverts(d.manager, "NotDataRequester", unitId=unit, caller=who.address):
            request(d, unit, 1, who)


def test_requestData_wrongStatusOrLate_reverts(staked, chain):
    d = staked
    _, unit = assign(d, chain, d.solvers[1])
    with reverts(d.manager, "WrongUnitStatus", expected=U_VERIFYING):
        request(d, unit, 4, d.submitter)
    unit, drawn = committed(d, chain)
    request(d, unit, 1, drawn[0])
    # one dispute at a time: a second request, or a challenge, needs a Verifying unit
    with reverts(d.manager, "WrongUnitStatus", expected=U_VERIFYING, actual=U_DISPUTED):
        request(d, unit, 4, d.submitter)
    with reverts(d.manager, "WrongUnitStatus", expected=U_VERIFYING, actual=U_DISPUTED):
        d.manager.challenge(unit, b"\x55" * 32, sender=d.whistleblower)
    unit2, drawn2 = committed(d, chain)
    deadline = d.manager.getUnit(unit2).deadline
    advance(chain, deadline - chain.pending_timestamp + 1)
    with reverts(d.manager, "ChallengeWindowClosed", unitId=unit2, deadline=deadline):
        request(d, unit2, 1, drawn2[0])


def test_finalize_whileDataRequestOpen_impossible(staked, chain):
    """An open request keeps the unit Disputed: it cannot finalize, even past its challenge
    deadline, and settleDispute finds no held game result."""
    d = staked
    unit, drawn = committed(d, chain)
    attest(d, chain, unit, [(v, [ROOTS[1], ROOTS[1]]) for v in drawn])
    deadline = d.manager.getUnit(unit).deadline
    advance(chain, deadline - chain.pending_timestamp - 30)
    request(d, unit, 4, d.submitter)
    advance(chain, 120)
    with reverts(d.manager, "WrongUnitStatus", expected=U_VERIFYING, actual=U_DISPUTED):
        d.manager.finalize(unit, sender=d.solvers[0])
    with reverts(d.manager, "NoHeldResult", unitId=unit, gameId=0):
        d.manager.settleDispute(unit, sender=d.other)
    # answered, it finalizes after the grace
    txs = answer(d, chain, unit, 4, d.solvers[0])
    new_deadline = txs[-1].events.filter(d.manager.DataRequestAnswered)[0].deadline
    assert new_deadline == txs[-1].timestamp + MGR_CFG["disputeGrace"] > deadline
    advance(chain, new_deadline - chain.pending_timestamp + 1)
    d.manager.finalize(unit, sender=d.solvers[0])


# ------------------------------------------------------------------ unanswered


def test_expireDataRequest_unanswered_solverSlashed_requesterPaid_unitReopens(staked, chain):
    """Late path: the state and its headers opened and some samples proved in time, the rest
    after the deadline refused; then the request (for a checkpoint short of the final one)
    expires exactly as a lost game: collateral slashed, the requester credited its bond and the
    challenger's share, the rest to the jackpot, the verifiers' locks released, the unit
    re-opened."""
    d = staked
    unit, drawn = committed(d, chain)
    v = drawn[1]
    tx = request(d, unit, 2, v)
    answer_by = tx.events.filter(d.manager.DataRequested)[0].answerDeadline
    open_all(d, unit, 2, d.solvers[0])
    prove(d, chain, unit, 2, d.solvers[0], 0, BATCH)
    with reverts(d.manager, "DataAnswerWindowOpen", unitId=unit, answerDeadline=answer_by):
        d.manager.expireDataRequest(unit, sender=d.other)
    advance(chain, answer_by - chain.pending_timestamp + 1)
    with reverts(d.manager, "DataAnswerWindowClosed", unitId=unit, answerDeadline=answer_by):
        prove(d, chain, unit, 2, d.solvers[0], BATCH, BATCH)
    held = d.token.balanceOf(d.manager)
    locked = [d.registry.getNode(w).locked for w in drawn]
    assert all(x > 0 for x in locked)

    tx = d.manager.expireDataRequest(unit, sender=d.other)

    ev = tx.events.filter(d.manager.DataRequestExpired)[0]
    assert (ev.unitId, ev.requester, ev.checkpoint) == (unit, v.address, 2)
    assert tx.events.filter(d.manager.DisputeResolved) == []
    assert tx.events.filter(d.manager.VerifierPenalised) == []
    reward = COLLATERAL * MGR_CFG["challengerRewardBps"] // BPS
    assert d.manager.credits(v) == BOND + reward
    assert d.manager.jackpot() == COLLATERAL - reward
    # the bond stays held as a credit; the collateral arrives from the registry
    assert d.token.balanceOf(d.manager) == held + COLLATERAL
    node = d.registry.getNode(d.solvers[0])
    assert node.stake == 200 * E18 - COLLATERAL and node.locked == 0 and node.failed == 1
    for w in drawn:
        assert d.registry.getNode(w).locked == 0
    u = d.manager.getUnit(unit)
    assert u.status == U_OPEN and u.attempt == 1
    assert d.manager.dataRequestOf(unit).requester == ZERO
    assert d.manager.getJob(d.manager.jobIdOf(unit)).escrow == REWARD
    with reverts(d.manager, "WrongUnitStatus", expected=U_DISPUTED, actual=U_OPEN):
        d.manager.expireDataRequest(unit, sender=d.other)


def test_expireDataRequest_finalCheckpoint_attestorsLoseTheirLocks(staked, chain):
    """The submitter's request for the result, unanswered: the solver is slashed and every drawn
    verifier that attested — it held the result, by attesting, and did not answer — loses its
    lock to the jackpot (`VerifierPenalised`); one that only sealed is released. The escrow
    stays for the re-run."""
    d = staked
    unit, drawn = committed(d, chain)
    attested, sealed = drawn
    seal_attestation(d, unit, sealed, [ROOTS[1], ROOTS[1]])
    attest(d, chain, unit, [(attested, [ROOTS[1], ROOTS[1]])])
    lock = d.registry.getNode(attested).locked
    assert lock > 0 and d.registry.getNode(sealed).locked == lock
    stakes = {w.address: d.registry.getNode(w).stake for w in drawn}
    tx = request(d, unit, 4, d.submitter)
    answer_by = tx.events.filter(d.manager.DataRequested)[0].answerDeadline
    advance(chain, answer_by - chain.pending_timestamp + 1)
    jackpot, held = d.manager.jackpot(), d.token.balanceOf(d.manager)

    tx = d.manager.expireDataRequest(unit, sender=d.other)

    penalised = tx.events.filter(d.manager.VerifierPenalised)
    assert [(e.verifier, e.amount) for e in penalised] == [(attested.address, lock)]
    assert d.manager.credits(d.submitter) == COLLATERAL * MGR_CFG["challengerRewardBps"] // BPS
    reward = COLLATERAL * MGR_CFG["challengerRewardBps"] // BPS
    assert d.manager.jackpot() == jackpot + COLLATERAL - reward + lock
    assert d.token.balanceOf(d.manager) == held + COLLATERAL + lock
    a, s = d.registry.getNode(attested), d.registry.getNode(sealed)
    assert a.stake == stakes[attested.address] - lock and a.locked == 0 and a.failed == 1
    assert s.stake == stakes[sealed.address] and s.locked == 0
    u = d.manager.getUnit(unit)
    assert u.status == U_OPEN and u.attempt == 1
    assert d.manager.getJob(d.manager.jobIdOf(unit)).escrow == REWARD


# ------------------------------------------------------------------ bad answers


def test_openDataState_badOpenings_revert(staked, chain):
    d = staked
    unit, drawn = committed(d, chain)
    s1 = OPENINGS[1].open_state(ROOTS, 1)
    args1 = (s1.tensor_count, s1.state_tree, s1.checkpoint_proof)
    with reverts(d.manager, "WrongUnitStatus", expected=U_DISPUTED, actual=U_VERIFYING):
        d.manager.openDataState(unit, *args1, sender=d.other)
    request(d, unit, 3, drawn[0])
    # checkpoint 1's state is not checkpoint 3's
    with reverts(d.manager, "BadDataStateProof", unitId=unit, checkpoint=3, stateRoot=ROOTS[1]):
        d.manager.openDataState(unit, *args1, sender=d.other)
    with reverts(d.manager, "EmptyDataState", unitId=unit):
        d.manager.openDataState(unit, 0, s1.state_tree, [], sender=d.other)
    o3 = OPENINGS[3]
    parts = o3.header_parts()
    with reverts(d.manager, "DataStateNotOpened", unitId=unit):
        d.manager.openDataHeaders(unit, *parts[0].args(), sender=d.other)
    s3 = o3.open_state(ROOTS, 3)
    d.manager.openDataState(unit, s3.tensor_count, s3.state_tree, s3.checkpoint_proof,
                           sender=d.other)  # fmt: skip
    with reverts(d.manager, "DataStateAlreadyOpened", unitId=unit, stateRoot=ROOTS[3]):
        d.manager.openDataState(unit, s3.tensor_count, s3.state_tree, s3.checkpoint_proof,
                               sender=d.other)  # fmt: skip
    # a Disputed unit without a request: a game's dispute
    unit2, _ = committed(d, chain)
    d.manager.challenge(unit2, b"\x55" * 32, sender=d.whistleblower)
    for call in (
        lambda: d.manager.openDataState(unit2, *args1, sender=d.other),
        lambda: d.manager.openDataHeaders(unit2, *parts[0].args(), sender=d.other),
        lambda: d.manager.proveDataSamples(unit2, [], LOCATOR, sender=d.other),
        lambda: d.manager.expireDataRequest(unit2, sender=d.other),
    ):
        with reverts(d.manager, "NoDataRequest", unitId=unit2):
            call()


def test_openDataHeaders_badParts_revert(staked, chain):
    """Every part is checked on its own against the opened state tree, so no caller can spoil
    the opening for the holder: out of order, of the wrong length, or with a header changed."""
    d = staked
    unit, drawn = committed(d, chain)
    request(d, unit, 3, drawn[0])
    o = OPENINGS[3]
    s = o.open_state(ROOTS, 3)
    d.manager.openDataState(unit, s.tensor_count, s.state_tree, s.checkpoint_proof,
                           sender=d.other)  # fmt: skip
    first, second = o.header_parts()
    with reverts(d.manager, "DataHeadersNotOpened", unitId=unit, opened=0, tensorCount=300):
        d.manager.proveDataSamples(unit, [], LOCATOR, sender=d.other)
    with reverts(d.manager, "WrongFirstTensor", unitId=unit, given=256, expected=0):
        d.manager.openDataHeaders(unit, *second.args(), sender=d.other)
    _, headers, proof = first.args()
    with reverts(d.manager, "WrongDataPartLength", unitId=unit, given=255, expected=256):
        d.manager.openDataHeaders(unit, 0, headers[:255], proof, sender=d.other)
    changed = list(headers)
    changed[7] = (keccak(b"other"), *changed[7][1:])  # another name
    swapped = list(headers)
    swapped[3], swapped[4] = swapped[4], swapped[3]  # two tensors out of state order
    for bad_headers, bad_proof in ((changed, proof), (swapped, proof), (headers, [b"\x01" * 32])):
        with reverts(d.manager, "BadDataHeaders", unitId=unit, firstTensor=0):
            d.manager.openDataHeaders(unit, 0, bad_headers, bad_proof, sender=d.other)
    d.manager.openDataHeaders(unit, *first.args(), sender=d.other)
    _, headers2, proof2 = second.args()
    with reverts(d.manager, "WrongDataPartLength", unitId=unit, given=45, expected=44):
        d.manager.openDataHeaders(unit, 256, [*headers2, headers2[0]], proof2, sender=d.other)
    d.manager.openDataHeaders(unit, *second.args(), sender=d.other)
    assert d.manager.dataRequestOf(unit).opened == 300


def test_proveDataSamples_badSamples_revert(staked, chain):
    d = staked
    unit, drawn = committed(d, chain)
    request(d, unit, 2, drawn[0])
    open_all(d, unit, 2, d.other)
    o, seed = OPENINGS[2], seed_of(d, chain, unit)
    good = [s.args() for s in o.samples(seed, 0, BATCH)]

    def send(samples: list, locator: str = LOCATOR) -> Any:
        return d.manager.proveDataSamples(unit, samples, locator, sender=d.other)

    with reverts(d.manager, "EmptyBlobLocator"):
        send(good, "")
    with reverts(d.manager, "WrongDataSampleCount", unitId=unit, given=0, left=DATA_SAMPLES):
        send([])
    too_many = [s.args() for s in o.samples(seed, 0, DATA_SAMPLES + 1)]
    with reverts(d.manager, "WrongDataSampleCount", unitId=unit, given=65, left=DATA_SAMPLES):
        send(too_many)

    def changed(j: int, **fields: Any) -> list:
        keys = ["tensor", "start", "leaves", "dataRoot", "layoutProof", "chunk", "chunkProof"]
        sample = list(good[j])
        for k, v in fields.items():
            sample[keys.index(k)] = v
        return [*good[:j], tuple(sample), *good[j + 1 :]]

    s0 = o.sample(seed, 0)
    for bad in (
        changed(0, start=s0.start + 1),
        changed(0, dataRoot=b"\x03" * 32),
        changed(0, leaves=s0.leaves + 1),
        changed(0, layoutProof=[b"\x04" * 32, *s0.layout_proof[1:]]),
    ):
        with reverts(d.manager, "BadDataLayoutProof", unitId=unit, sample=0, tensor=s0.tensor):
            send(bad)
    # a valid layout entry and chunk of another tensor than the drawn chunk's
    other = next(t for t in range(3) if t != s0.tensor)
    donor = o.sample_at(other, 0)
    index = sample_index(seed, 0, o.total_leaves)
    with reverts(d.manager, "DataSampleNotInTensor", unitId=unit, sample=0, index=index,
                 tensor=other):  # fmt: skip
        send([donor.args(), *good[1:]])
    tampered = bytearray(s0.chunk)
    tampered[9] ^= 1
    leaf = index - s0.start
    for bad in (
        changed(0, chunk=bytes(tampered)),
        changed(0, chunk=s0.chunk[:128]),
        changed(0, chunkProof=[*s0.chunk_proof, b"\x05" * 32]),  # one sibling too many
    ):
        with reverts(d.manager, "BadDataChunkProof", unitId=unit, sample=0, tensor=s0.tensor,
                     leaf=leaf):  # fmt: skip
            send(bad)
    send(good)
    # the same samples again are checked as samples 16…: they are not those
    with pytest.raises(ContractLogicError, match="sample=16"):
        send(good)
    assert d.manager.dataRequestOf(unit).samples == BATCH


def test_proveDataSamples_seedBlockTooOld_isRearmed(staked, chain):
    """Past 256 blocks the request's seed block hash is gone: the first samples call re-arms the
    seed to the next block and proves nothing; the samples the new seed draws answer."""
    d = staked
    unit, drawn = committed(d, chain)
    request(d, unit, 2, drawn[0])
    open_all(d, unit, 2, d.other)
    chain.mine(300)
    o = OPENINGS[2]
    stale = bytes(32)  # blockhash of a block 256+ back: zero, as the chain reads it
    tx = d.manager.proveDataSamples(unit, [s.args() for s in o.samples(stale, 0, 1)], LOCATOR,
                                    sender=d.other)  # fmt: skip
    rearmed = tx.events.filter(d.manager.DataSeedRearmed)[0]
    assert rearmed.seedBlock == tx.block_number + 1
    assert tx.events.filter(d.manager.DataSamplesProved) == []
    q = d.manager.dataRequestOf(unit)
    assert (q.seedBlock, q.samples) == (tx.block_number + 1, 0)
    # the next transaction runs in the new seed block itself: its hash is not known yet
    with reverts(d.manager, "DataSeedNotYetAvailable", unitId=unit, seedBlock=q.seedBlock):
        d.manager.proveDataSamples(unit, [s.args() for s in o.samples(stale, 0, 1)], LOCATOR,
                                   sender=d.other)  # fmt: skip
    chain.mine(1)  # the new seed block
    txs = prove(d, chain, unit, 2, d.other)
    assert txs[-1].events.filter(d.manager.DataRequestAnswered)


# ------------------------------------------------------------------ offers


def test_offerData_holdersOnly(staked, chain):
    """The assignee and the drawn verifiers say where they serve the unit's data (an event
    only); nobody else, and not before the unit is Verifying."""
    d = staked
    _, unit0 = assign(d, chain, d.solvers[1])
    with reverts(d.manager, "WrongUnitStatus", unitId=unit0, expected=U_VERIFYING):
        d.manager.offerData(unit0, LOCATOR, sender=d.solvers[1])
    unit, drawn = committed(d, chain)
    for who in (d.solvers[0], *drawn):
        tx = d.manager.offerData(unit, LOCATOR, sender=who)
        ev = tx.events.filter(d.manager.DataOffered)[0]
        assert (ev.unitId, ev.holder, ev.attempt, ev.locator) == (unit, who.address, 0, LOCATOR)
    undrawn = [v for v in d.verifiers if v not in drawn][0]
    for who in (d.other, d.submitter, undrawn):
        with reverts(d.manager, "NotDataHolder", unitId=unit, caller=who.address):
            d.manager.offerData(unit, LOCATOR, sender=who)
    with reverts(d.manager, "EmptyBlobLocator"):
        d.manager.offerData(unit, "", sender=drawn[0])
    request(d, unit, 4, d.submitter)  # Disputed by a request: offers are what it waits for
    d.manager.offerData(unit, LOCATOR, sender=drawn[1])


# ------------------------------------------------------------------ forced reveal


def test_applyForcedReveal_voidsAnOpenDataRequest(forced, chain, project):  # noqa: F811
    """A forced-error reveal while a data request is open voids it, as it voids a game's dispute:
    the requester gets its bond back (money conserved), the unit is Verifying with the true root,
    and the requester may ask again (against the true root)."""
    d = forced
    seed_jackpot(d, chain)
    unit, drawn = forced_unit(d, chain)
    v = drawn[0]
    held, jackpot = d.token.balanceOf(d.manager), d.manager.jackpot()
    credit = d.manager.credits(v)
    bond = request(d, unit, 1, v).return_value
    assert bond == d.manager.challengeBondOf(unit) > 0
    # sealing and opening go on while Disputed
    attest(d, chain, unit, [(w, ends(d, unit, w)) for w in drawn])
    tx = judge_of(project, d).revealForced(
        unit, as_tuple(reveal(endRoots=[ends(d, unit, w) for w in drawn])), sender=d.solvers[0]
    )
    voided = tx.events.filter(d.manager.DataRequestVoided)
    assert [(e.unitId, e.requester, e.checkpoint) for e in voided] == [(unit, v.address, 1)]
    assert tx.events.filter(d.manager.DisputeVoided) == []
    assert d.manager.credits(v) == credit + bond
    assert d.manager.jackpot() == jackpot
    assert d.token.balanceOf(d.manager) == held + bond
    assert d.manager.dataRequestOf(unit).requester == ZERO
    u = d.manager.getUnit(unit)
    assert u.status == U_VERIFYING and u.forcedRevealed
    request(d, unit, 1, v)
    assert d.manager.dataRequestOf(unit).requester == v.address


def test_sealAttestation_whileDataRequestOpen_allowed(staked, chain):
    d = staked
    unit, drawn = committed(d, chain)
    request(d, unit, 0, drawn[0])
    seal_attestation(d, unit, drawn[1], [ROOTS[1], ROOTS[1]])


# ------------------------------------------------------------------ gas


def test_dataRequests_gas(staked, chain, capsys):
    """Receipts' gasUsed (PROTOCOL §6.7's table): a request, the opening, a header part, a batch of
    16 samples (the last one answers), and an expiry; every call bounded whatever the state's
    size (bench/availability_bench.py measures states up to 124M parameters)."""
    d = staked
    unit, drawn = committed(d, chain)
    gas = {"requestData (verifier, bond pulled)": request(d, unit, 3, drawn[0]).gas_used}
    txs = answer(d, chain, unit, 3, d.solvers[0])
    gas["openDataState (300 tensors)"] = txs[0].gas_used
    gas["openDataHeaders (256 headers)"] = txs[1].gas_used
    gas["openDataHeaders (44 headers, the layout closed)"] = txs[2].gas_used
    gas["proveDataSamples (16 samples)"] = txs[3].gas_used
    gas["proveDataSamples (16 samples, answers)"] = txs[-1].gas_used
    unit2, _ = committed(d, chain)
    tx = request(d, unit2, 4, d.submitter)
    gas["requestData (submitter)"] = tx.gas_used
    advance(chain, REVEAL_WINDOW + 1)
    gas["expireDataRequest"] = d.manager.expireDataRequest(unit2, sender=d.other).gas_used
    with capsys.disabled():
        print()
        for k, val in gas.items():
            print(f"  {k}: {val:,}")
    assert len(txs) == 2 + 1 + DATA_SAMPLES // BATCH
    assert gas["openDataHeaders (256 headers)"] < 2_000_000
    assert gas["proveDataSamples (16 samples)"] < 1_000_000
