"""JobLens (contracts/market/JobLens.sol): one call returns what the JobManager's getters return
of a unit — `unitSnapshot` and `unitSnapshots` checked field by field against getUnit, getJob,
getDispute, dataRequestOf, heldUntil, getClaimants, getVerifiers and verifierStatus, in the
unit's states a role reads (Open with claimants, Verifying with drawn verifiers that sealed and
attested, Disputed, unknown); its page bound and its constructor check.

Read through agents.core.bindings.bind (the roles' bindings), so the names the roles read are
the ones checked here.
"""

from __future__ import annotations

import pytest
from conftest import (
    ROOT,
    SECRET_HASH,
    V_ATTESTED,
    V_PENDING,
    V_SEALED,
    VERIFIER,
    advance,
    attest,
    by_address,
    post,
    reverts,
    seal_attestation,
    verifying,
)

from agents.core.bindings import bind

ZERO = "0x" + "00" * 20


@pytest.fixture
def lens(staked, project):
    return staked.deployer.deploy(project.JobLens, staked.manager)


def bound(chain, staked, lens):
    w3 = chain.provider.web3
    return bind(w3, "JobManager", staked.manager.address), bind(w3, "JobLens", lens.address)


def why_drawn(d, unit_id: int, drawn: list[str]) -> dict:
    """What the draw saw, for a draw short of verifiersPerUnit: the pool before the seed block
    and each verifier's eligibility now (a CI run once drew one of three verifiers twice in this
    module and never alone)."""
    seed_block = d.manager.getUnit(unit_id).seedBlock
    return {
        "drawn": drawn,
        "seedBlock": seed_block,
        "poolSizeBefore": d.registry.poolSizeBefore(VERIFIER, seed_block),
        "pool": [d.registry.poolAt(VERIFIER, i) for i in range(d.registry.poolSize(VERIFIER))],
        "online": {v.address: d.registry.isOnline(v) for v in d.verifiers},
        "free": {v.address: d.registry.freeStake(v) for v in d.verifiers},
    }


def direct(manager, unit_id: int) -> dict:
    """What the getters return of the unit, one call each (one per drawn verifier)."""
    f = manager.functions
    claimants = f.getClaimants(unit_id).call()
    drawn = f.getVerifiers(unit_id).call()
    return {
        "unitId": unit_id,
        "unit": f.getUnit(unit_id).call(),
        "job": f.getJob(f.jobIdOf(unit_id).call()).call(),
        "dispute": f.getDispute(unit_id).call(),
        "dataRequest": f.dataRequestOf(unit_id).call(),
        "heldUntil": f.heldUntil(unit_id).call(),
        "claimants": claimants.solvers,
        "weights": claimants.weights,
        "verifiers": [(v, *f.verifierStatus(unit_id, v).call()) for v in drawn],
    }


def as_read(snapshot) -> dict:
    out = snapshot._asdict()
    out["verifiers"] = [tuple(v) for v in out["verifiers"]]
    return out


def test_unitSnapshot_ofAVerifyingUnit_isTheGetters_withEveryDrawnVerifier(staked, chain, lens):
    d = staked
    _, unit_id = verifying(d, chain)
    manager, view = bound(chain, d, lens)
    drawn = manager.functions.getVerifiers(unit_id).call()
    assert len(drawn) == 2, why_drawn(d, unit_id, drawn)  # verifiersPerUnit of the deployment
    seal_attestation(d, unit_id, by_address(d.verifiers, drawn[0]), [ROOT])
    snap = view.functions.unitSnapshot(unit_id).call()
    assert as_read(snap) == direct(manager, unit_id)
    assert [v.status for v in snap.verifiers] == [V_SEALED, V_PENDING]
    assert [v.verifier for v in snap.verifiers] == drawn
    assert snap.claimants == [d.solvers[0].address] and snap.unit.checkpointRoot == ROOT


def test_unitSnapshot_afterAttestations_carriesTheirHashes(staked, chain, lens):
    d = staked
    _, unit_id = verifying(d, chain)
    manager, view = bound(chain, d, lens)
    drawn = manager.functions.getVerifiers(unit_id).call()
    # one end root per sampled segment
    ends = {v: [ROOT] * len(manager.functions.sampledSegments(unit_id, v).call()) for v in drawn}
    attest(d, chain, unit_id, [(by_address(d.verifiers, v), ends[v]) for v in drawn])
    snap = view.functions.unitSnapshot(unit_id).call()
    assert as_read(snap) == direct(manager, unit_id)
    assert all(v.status == V_ATTESTED and any(v.attestationHash) for v in snap.verifiers)


def test_unitSnapshot_ofADisputedUnit_carriesItsDispute(staked, chain, lens):
    d = staked
    _, unit_id = verifying(d, chain)
    d.manager.challenge(unit_id, b"\x55" * 32, sender=d.whistleblower)
    manager, view = bound(chain, d, lens)
    snap = view.functions.unitSnapshot(unit_id).call()
    assert as_read(snap) == direct(manager, unit_id)
    assert snap.dispute.challenger == d.whistleblower.address and snap.dispute.bond > 0


def test_unitSnapshots_ofAPage_isEachUnitsSnapshot_inOrder(staked, chain, lens):
    d = staked
    _, open_unit = post(d, chain)
    d.manager.claim(open_unit, SECRET_HASH, sender=d.solvers[1])
    d.manager.claim(open_unit, SECRET_HASH, sender=d.solvers[2])
    _, verifying_unit = verifying(d, chain)
    unknown = 999 << 32
    manager, view = bound(chain, d, lens)
    ids = [verifying_unit, unknown, open_unit]
    page = view.functions.unitSnapshots(ids).call()
    assert [as_read(s) for s in page] == [direct(manager, uid) for uid in ids]
    assert page[1].unit.status == 0 and page[1].verifiers == [] and page[1].job.submitter == ZERO
    assert page[2].claimants == [d.solvers[1].address, d.solvers[2].address]
    assert view.functions.unitSnapshots([]).call() == []


def test_unitSnapshots_aboveMAX_PAGE_reverts(staked, chain, lens):
    max_page = lens.MAX_PAGE()
    assert max_page == 64
    assert len(lens.unitSnapshots([1 << 32] * max_page)) == max_page
    with reverts(lens, "PageTooLarge", count=max_page + 1, maxCount=max_page):
        lens.unitSnapshots([1 << 32] * (max_page + 1))


def test_constructor_zeroManager_reverts(staked, project):
    with reverts(project.JobLens, "ZeroManager"):
        staked.deployer.deploy(project.JobLens, ZERO)


def test_constructor_setsTheManager(staked, lens):
    assert lens.manager() == staked.manager.address


def test_a_snapshot_is_read_at_one_block(staked, chain, lens):
    """A snapshot read at a past block is the unit as it was then (before a verifier's seal)."""
    d = staked
    _, unit_id = verifying(d, chain)
    manager, view = bound(chain, d, lens)
    before = chain.blocks.head.number
    drawn = manager.functions.getVerifiers(unit_id).call()
    assert len(drawn) == 2, why_drawn(d, unit_id, drawn)
    seal_attestation(d, unit_id, by_address(d.verifiers, drawn[1]), [ROOT])
    then = view.functions.unitSnapshot(unit_id).call(block_identifier=before)
    assert [v.status for v in then.verifiers] == [V_PENDING, V_PENDING]
    advance(chain, 1)
    now_ = view.functions.unitSnapshot(unit_id).call()
    assert [v.status for v in now_.verifiers] == [V_PENDING, V_SEALED]
