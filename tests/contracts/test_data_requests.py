"""Data requests (PROTOCOL §6.11, issue #23 part 2): a drawn verifier or the submitter demands a
checkpoint's whole state on chain; it is posted in bounded pieces before a deadline, or the
solver loses as in a lost dispute game.

The unit's commitment is real: the checkpoint root over the state roots of five small states
(agents.training.merkle), checkpoint 2's holding a 65 x 70 weight (72 chunks: two posts), and
the answers are built by agents.dispute.availability, as the agents build them.
"""

from __future__ import annotations

from typing import Any

import torch
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

from agents.dispute.availability import MAX_DATA_CHUNKS, decode_answer, encode_answer
from agents.training.merkle import checkpoint_root, state_root

ZERO = "0x" + "00" * 20
REWARD = 100 * E18
COLLATERAL = REWARD * MGR_CFG["collateralBps"] // 10_000
BPS = 10_000
# challengeBondOf: max(challengeBond, collateral · challengerRewardBps) = 50 tokens
BOND = max(MGR_CFG["challengeBond"], COLLATERAL * MGR_CFG["challengerRewardBps"] // BPS)
REVEAL_WINDOW = MGR_CFG["revealWindow"]


def checkpoint_state(i: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(100 + i)
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
NAMES = list(STATES[0])


def committed(d: Protocol, chain, solver: Any = None) -> tuple[int, list[Any]]:
    """A Verifying unit whose commitment is CROOT (ROOTS at steps 0, 2, …, 8) by `solver`
    (default solvers[0]); returns it and its drawn verifiers (accounts)."""
    solver = solver or d.solvers[0]
    _, unit = assign(d, chain, solver)
    d.manager.commitCheckpoints(unit, CROOT, 5, ROOTS[4], "blob://da", CSEAL, sender=solver)
    chain.mine(1)
    d.manager.drawVerifiers(unit, sender=d.other)
    drawn = [by_address(d.verifiers, v) for v in d.manager.getVerifiers(unit)]
    assert len(drawn) == 2
    return unit, drawn


def answer(d: Protocol, unit: int, checkpoint: int, sender: Any) -> list[Any]:
    """Opens and posts the whole state at `checkpoint`; returns the receipts."""
    a = encode_answer(STATES[checkpoint], ROOTS, checkpoint)
    txs = [d.manager.openDataState(*a.open_state.args(unit), sender=sender)]
    txs += [d.manager.postData(*p.args(unit), sender=sender) for p in a.posts]
    return txs


def request(d: Protocol, unit: int, checkpoint: int, who: Any) -> Any:
    return d.manager.requestData(unit, checkpoint, sender=who)


# ------------------------------------------------------------------ answered


def test_requestData_verifier_answeredInSeveralPosts_forfeitsItsBond(staked, chain):
    """A drawn verifier's request pulls the challenge bond and disputes the unit; anyone posts the
    state (72 + 1 + 1 chunks: three tensors, four posts); the last post answers it: the unit is
    Verifying again with its deadline at least disputeGrace away, the bond forfeited as a failed
    challenge's, and the posted chunks rebuild the state."""
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
    assert ev.answerDeadline == answer_by
    assert tx.return_value == BOND
    assert d.token.balanceOf(v) == balance - BOND
    assert d.token.balanceOf(d.manager) == held + BOND
    assert d.manager.getUnit(unit).status == U_DISPUTED
    q = d.manager.dataRequestOf(unit)
    assert (q.requester, q.checkpoint, q.answerDeadline, q.bond) == (v.address, 2, answer_by, BOND)
    assert (q.stateRoot, q.tensorCount, q.nextTensor, q.nextChunk) == (b"\x00" * 32, 0, 0, 0)

    a = encode_answer(STATES[2], ROOTS, 2)
    tx = d.manager.openDataState(*a.open_state.args(unit), sender=d.other)
    opened = tx.events.filter(d.manager.DataStateOpened)[0]
    assert (opened.stateRoot, opened.tensorCount) == (ROOTS[2], 3)
    posted = []
    for i, p in enumerate(a.posts):
        tx = d.manager.postData(*p.args(unit), sender=d.solvers[0])
        posted += tx.events.filter(d.manager.DataPosted)
        if i == 0:  # 64 of w0's 72 chunks
            q = d.manager.dataRequestOf(unit)
            assert (q.stateRoot, q.tensorCount, q.nextTensor, q.nextChunk) == (ROOTS[2], 3, 0, 64)
            assert d.manager.getUnit(unit).status == U_DISPUTED
    assert [(e.tensor, e.firstChunk, len(e.chunks) // 256) for e in posted] == [
        (0, 0, MAX_DATA_CHUNKS),
        (0, 64, 8),
        (1, 0, 1),
        (2, 0, 1),
    ]
    answered = tx.events.filter(d.manager.DataRequestAnswered)[0]
    new_deadline = max(deadline, tx.timestamp + MGR_CFG["disputeGrace"])
    assert (answered.unitId, answered.requester, answered.checkpoint) == (unit, v.address, 2)
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
    # the agents read the state from the logs
    args = [{k: getattr(e, k) for k in ("tensor", "nameHash", "dtype", "rows", "cols",
                                        "firstChunk", "chunks")} for e in posted]  # fmt: skip
    rebuilt = decode_answer(args, NAMES, ROOTS[2])
    assert all(torch.equal(rebuilt[n], STATES[2][n]) for n in NAMES)
    # once per requester per attempt
    with reverts(d.manager, "DataAlreadyRequested", unitId=unit, attempt=0, requester=v.address):
        request(d, unit, 3, v)
    # the other drawn verifier may still ask, and the unit still finalizes in the end
    request(d, unit, 0, drawn[1])
    answer(d, unit, 0, d.other)
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
    txs = answer(d, unit, 4, d.solvers[0])
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
    txs = answer(d, unit, 4, d.solvers[0])
    new_deadline = txs[-1].events.filter(d.manager.DataRequestAnswered)[0].deadline
    assert new_deadline == txs[-1].timestamp + MGR_CFG["disputeGrace"] > deadline
    advance(chain, new_deadline - chain.pending_timestamp + 1)
    d.manager.finalize(unit, sender=d.solvers[0])


# ------------------------------------------------------------------ unanswered


def test_expireDataRequest_unanswered_solverSlashed_requesterPaid_unitReopens(staked, chain):
    """Late path: the state opened, one post in time, the next one after the deadline refused;
    then the request expires exactly as a lost game: collateral slashed, the requester credited
    its bond and the challenger's share, the rest to the jackpot, the verifiers' locks released,
    the unit re-opened."""
    d = staked
    unit, drawn = committed(d, chain)
    v = drawn[1]
    tx = request(d, unit, 2, v)
    answer_by = tx.events.filter(d.manager.DataRequested)[0].answerDeadline
    a = encode_answer(STATES[2], ROOTS, 2)
    d.manager.openDataState(*a.open_state.args(unit), sender=d.solvers[0])
    d.manager.postData(*a.posts[0].args(unit), sender=d.solvers[0])
    with reverts(d.manager, "DataAnswerWindowOpen", unitId=unit, answerDeadline=answer_by):
        d.manager.expireDataRequest(unit, sender=d.other)
    advance(chain, answer_by - chain.pending_timestamp + 1)
    with reverts(d.manager, "DataAnswerWindowClosed", unitId=unit, answerDeadline=answer_by):
        d.manager.postData(*a.posts[1].args(unit), sender=d.solvers[0])
    held = d.token.balanceOf(d.manager)
    locked = [d.registry.getNode(w).locked for w in drawn]
    assert all(x > 0 for x in locked)

    tx = d.manager.expireDataRequest(unit, sender=d.other)

    ev = tx.events.filter(d.manager.DataRequestExpired)[0]
    assert (ev.unitId, ev.requester, ev.checkpoint) == (unit, v.address, 2)
    assert tx.events.filter(d.manager.DisputeResolved) == []
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


# ------------------------------------------------------------------ bad answers


def test_openDataState_badOpenings_revert(staked, chain):
    d = staked
    unit, drawn = committed(d, chain)
    a = encode_answer(STATES[1], ROOTS, 1)
    with reverts(d.manager, "WrongUnitStatus", expected=U_DISPUTED, actual=U_VERIFYING):
        d.manager.openDataState(*a.open_state.args(unit), sender=d.other)
    request(d, unit, 3, drawn[0])
    # checkpoint 1's state is not checkpoint 3's
    with reverts(d.manager, "BadDataStateProof", unitId=unit, checkpoint=3, stateRoot=ROOTS[1]):
        d.manager.openDataState(*a.open_state.args(unit), sender=d.other)
    with reverts(d.manager, "EmptyDataState", unitId=unit):
        d.manager.openDataState(unit, 0, a.open_state.state_tree, [], sender=d.other)
    a3 = encode_answer(STATES[3], ROOTS, 3)
    with reverts(d.manager, "DataStateNotOpened", unitId=unit):
        d.manager.postData(*a3.posts[0].args(unit), sender=d.other)
    d.manager.openDataState(*a3.open_state.args(unit), sender=d.other)
    with reverts(d.manager, "DataStateAlreadyOpened", unitId=unit, stateRoot=ROOTS[3]):
        d.manager.openDataState(*a3.open_state.args(unit), sender=d.other)
    # a Disputed unit without a request: a game's dispute
    unit2, _ = committed(d, chain)
    d.manager.challenge(unit2, b"\x55" * 32, sender=d.whistleblower)
    for call in (
        lambda: d.manager.openDataState(*a3.open_state.args(unit2), sender=d.other),
        lambda: d.manager.postData(*a3.posts[0].args(unit2), sender=d.other),
        lambda: d.manager.expireDataRequest(unit2, sender=d.other),
    ):
        with reverts(d.manager, "NoDataRequest", unitId=unit2):
            call()


def test_postData_badPosts_revert(staked, chain):
    d = staked
    unit, drawn = committed(d, chain)
    request(d, unit, 2, drawn[0])
    a = encode_answer(STATES[2], ROOTS, 2)
    d.manager.openDataState(*a.open_state.args(unit), sender=d.other)
    first = a.posts[0]  # w0's chunks 0..63
    header_keys = ["nameHash", "dtype", "rows", "cols", "dataRoot"]
    keys = ["entryProof", "firstChunk", "chunks", "rangeProof"]

    def post(**changes: Any) -> Any:
        # unitId, TensorHeader(nameHash, dtype, rows, cols, dataRoot), entryProof, firstChunk,
        # chunks, rangeProof
        _, header, *rest = first.args(unit)
        header, rest = list(header), list(rest)
        for k, val in changes.items():
            if k in header_keys:
                header[header_keys.index(k)] = val
            else:
                rest[keys.index(k)] = val
        return d.manager.postData(unit, tuple(header), *rest, sender=d.other)

    with reverts(d.manager, "WrongFirstChunk", unitId=unit, given=64, expected=0):
        post(firstChunk=64)
    with reverts(d.manager, "DataNotWholeChunks", unitId=unit, length=0):
        post(chunks=b"")
    with reverts(d.manager, "DataNotWholeChunks", unitId=unit, length=300):
        post(chunks=first.chunks[:300])
    more = encode_answer(STATES[2], ROOTS, 2, max_chunks=64).posts[1].chunks
    with reverts(d.manager, "TooManyDataChunks", unitId=unit, given=65, max=MAX_DATA_CHUNKS):
        post(chunks=first.chunks + more[:256])
    # wrong entry proofs: another name, another shape, a bad sibling
    for change in (
        {"nameHash": keccak(b"w1")},
        {"rows": 64},
        {"entryProof": [b"\x01" * 32] + first.entry_proof[1:]},
    ):
        with reverts(d.manager, "BadDataEntryProof", unitId=unit, tensor=0, stateRoot=ROOTS[2]):
            post(**change)
    # tensor 1 (b0) is not next
    with reverts(d.manager, "BadDataEntryProof", unitId=unit, tensor=0):
        d.manager.postData(*a.posts[2].args(unit), sender=d.other)
    # wrong range proofs: a tampered chunk, a bad sibling, a missing sibling
    tampered = bytearray(first.chunks)
    tampered[5] ^= 1
    for change in (
        {"chunks": bytes(tampered)},
        {"rangeProof": [b"\x02" * 32] + first.range_proof[1:]},
        {"rangeProof": first.range_proof[:-1]},
    ):
        with reverts(d.manager, "BadDataRangeProof", unitId=unit, tensor=0, firstChunk=0):
            post(**change)
    d.manager.postData(*a.posts[0].args(unit), sender=d.other)
    # chunks 64..71 of 72, then past the end
    second = a.posts[1]
    with reverts(d.manager, "DataPastTensorEnd", unitId=unit, tensor=0, end=73, leafCount=72):
        d.manager.postData(*second.args(unit)[:4], second.chunks + b"\x00" * 256,
                           second.range_proof, sender=d.other)  # fmt: skip
    # a post repeated: the cursor moved on
    with reverts(d.manager, "WrongFirstChunk", unitId=unit, given=0, expected=64):
        d.manager.postData(*a.posts[0].args(unit), sender=d.other)


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
    """Receipts' gasUsed (PROTOCOL §6.7's table): requestData, openDataState, a 64-chunk and a
    1-chunk postData (the last one answers), expireDataRequest."""
    d = staked
    unit, drawn = committed(d, chain)
    gas = {"requestData (verifier, bond pulled)": request(d, unit, 2, drawn[0]).gas_used}
    txs = answer(d, unit, 2, d.solvers[0])
    gas["openDataState (3 tensors)"] = txs[0].gas_used
    gas["postData, 64 chunks"] = txs[1].gas_used
    gas["postData, 8 chunks"] = txs[2].gas_used
    gas["postData, 1 chunk"] = txs[3].gas_used
    gas["postData, 1 chunk, answers"] = txs[4].gas_used
    unit2, drawn2 = committed(d, chain)
    tx = request(d, unit2, 4, d.submitter)
    gas["requestData (submitter)"] = tx.gas_used
    advance(chain, REVEAL_WINDOW + 1)
    gas["expireDataRequest"] = d.manager.expireDataRequest(unit2, sender=d.other).gas_used
    with capsys.disabled():
        print()
        for k, val in gas.items():
            print(f"  {k}: {val:,}")
    # a post's gas is bounded whatever the tensor: 64 chunks (16 KiB) stay far below a block
    assert gas["postData, 64 chunks"] < 750_000
    assert gas["postData, 1 chunk"] < 100_000
