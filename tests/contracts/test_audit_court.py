"""Regressions of the audit of the court and the round manager (AUDIT-rounds findings 2, 3, 4, 7).

2. The court's game takes configs from the court only (`managerRegistersOnly`): a submitter
   cannot register another config there after its verifiers attested.
3. An entry whose attestation stood in a case (a sybil whistleblower of the verifier losing on
   purpose) may be taken to court again; one open case per entry; a slashed entry is done.
4. A fraud proven in a leaf revealed to a requester pays that requester (reward and request
   bond), whoever proves it.
7. Court challenges are accepted until the court's window after the unit's challenge deadline
   (or after the last case in which the entry stood).
"""

from __future__ import annotations

import pytest
from conftest import (
    CAP,
    COURT_BOND,
    COURT_PENALTY,
    COURT_REWARD_BPS,
    COURT_WINDOW,
    E18,
    MGR_CFG,
    REG_CFG,
    SECRET,
    WHISTLEBLOWER,
    Protocol,
    advance,
    assign,
    attest,
    by_address,
    deploy_protocol,
    reverts,
    stake_nodes,
)
from eth_utils import keccak
from test_court import STATES, attested_unit
from test_round_manager import (  # noqa: F401  (rm is a fixture)
    BOND,
    BPS,
    LAYOUT,
    REVEAL_BOND,
    committed_wrong,
    data_roots,
    first_disputed_tensor,
    opening,
    reveal_answer,
    reveal_request,
    revealed_opening,
    rm,
    rm_balance_accounted,
    wrong_element_in_chunk,
)

from agents.core.deploy import MANAGER_FIELDS, REGISTRY_FIELDS
from agents.dispute.encoding import DisputeConfig
from agents.training.merkle import CHECKPOINT_DOMAIN, checkpoint_root, final_proof, list_proof

# ------------------------------------------------------------------ 2. the court game's config

BUDGET = 3_600
# the job's (true) DisputeConfig: one state tensor, produced by node 2
NAMES, PRODUCERS = [b"\x0b" * 32], [2]
CONFIG = DisputeConfig(b"\x0a" * 32, 3, 4, 100, 7, tuple(NAMES), tuple(PRODUCERS))
CFG, CFG_HASH = CONFIG.as_tuple(), CONFIG.hash()
STATES9 = [bytes([0x90 + i]) * 32 for i in range(9)]  # T = 8, k = 1: nine checkpoints


@pytest.fixture(scope="module")
def real_court(project, accounts) -> Protocol:
    """deploy_protocol(court=True), but the court plays the real DisputeGame, deployed as
    deploy_all deploys it (`managerRegistersOnly`)."""
    cfg = {**MGR_CFG, "lazySlashFactor": 1}
    deployer = accounts[0]
    token = deployer.deploy(project.TestToken)
    registry = deployer.deploy(
        project.NodeRegistry, token, tuple(REG_CFG[k] for k in REGISTRY_FIELDS)
    )
    manager = deployer.deploy(project.JobManager, registry, tuple(cfg[k] for k in MANAGER_FIELDS))
    manager.setExtension(deployer.deploy(project.JobManagerExtension, manager), sender=deployer)
    arbiter = deployer.deploy(project.MockArbiter)
    court = deployer.deploy(
        project.AttestationCourt, manager, registry, COURT_BOND, COURT_PENALTY, COURT_REWARD_BPS,
        COURT_WINDOW,
    )  # fmt: skip
    prover = deployer.deploy(project.OneStepProver)
    game = deployer.deploy(project.DisputeGame, court, prover, BUDGET, True)
    court.setGame(game, sender=deployer)
    registry.setSlashers([manager, court], sender=deployer)
    arbiter.wire(manager, sender=deployer)
    manager.setArbiter(arbiter, sender=deployer)
    for acct in accounts[1:10]:
        token.mint(acct, 10_000 * E18, sender=deployer)
        for spender in (registry, manager, court):
            token.approve(spender, 2**256 - 1, sender=acct)
    d = Protocol(
        token=token, registry=registry, manager=manager, arbiter=arbiter, deployer=deployer,
        submitter=accounts[1], solvers=[accounts[2], accounts[3], accounts[4]],
        verifiers=[accounts[5], accounts[6], accounts[7]], whistleblower=accounts[8],
        other=accounts[9], court=court, court_game=game,
    )  # fmt: skip
    stake_nodes(d)
    return d


def test_submitter_cannot_register_a_court_config_after_its_verifiers_attested(real_court, chain):
    d = real_court
    job_id, unit = assign(d, chain, checkpointInterval=1)
    d.arbiter.registerConfig(job_id, CFG_HASH, sender=d.submitter)  # what verifiers check
    root = checkpoint_root(STATES9)
    d.manager.commitCheckpoints(
        unit,
        root,
        9,
        STATES9[-1],
        final_proof(STATES9),
        "blob://unit",
        keccak(root + SECRET),
        sender=d.solvers[0],
    )
    chain.mine(1)
    d.manager.drawVerifiers(unit, sender=d.other)
    drawn = [by_address(d.verifiers, a) for a in d.manager.getVerifiers(unit)]
    pairs = [(v, [STATES9[s + 1] for s in d.manager.sampledSegments(unit, v)]) for v in drawn]
    attest(d, chain, unit, pairs)

    # the submitter can no longer pick the court game's config (nor anyone but the court)
    for who in (d.submitter, d.whistleblower):
        with reverts(d.court_game, "NotManager", caller=who.address):
            d.court_game.registerConfig(job_id, b"\xba" * 32, sender=who)
        with reverts(d.court_game, "NotManager", caller=who.address):
            d.court_game.registerUnitConfig(job_id, b"\xba" * 32, (0, 1, 0), sender=who)
    assert d.court_game.configOf(job_id) == b"\x00" * 32

    v, ends_ = pairs[0]
    seg = d.manager.sampledSegments(unit, v)[0]
    proof = list_proof(CHECKPOINT_DOMAIN, STATES9, seg).siblings
    ev = d.court.challengeAttestation(
        unit, v, 0, ends_, STATES9[seg], proof, sender=d.whistleblower
    ).events.filter(d.court.AttestationChallenged)[0]
    # the court copied the config the verifiers checked: the job's real config is accepted (the
    # made-up trace then fails its root check, past the config check)
    assert d.court_game.configOf(job_id) == CFG_HASH
    d.court_game.openSegment(ev.gameId, [], sender=v)
    with reverts(d.court_game, "RootMismatch"):
        d.court_game.postTrace(ev.gameId, [b"\x01" * 32] * 3, NAMES, PRODUCERS, CFG, sender=v)


# ------------------------------------------------------------------ 3 and 7: re-challenges, window


@pytest.fixture(scope="module")
def court_world(project, accounts) -> Protocol:
    d = deploy_protocol(project, accounts, {**MGR_CFG, "lazySlashFactor": 1}, court=True)
    stake_nodes(d)
    for v in d.verifiers:
        d.registry.addStake(200 * E18, sender=v)
    # a second, honest whistleblower
    d.registry.register(WHISTLEBLOWER, CAP, 20 * E18, sender=d.other)
    return d


def _challenge(d: Protocol, unit: int, verifier, ends: list[bytes], sender):
    seg = d.manager.sampledSegments(unit, verifier)[0]
    proof = list_proof(CHECKPOINT_DOMAIN, STATES, seg).siblings
    tx = d.court.challengeAttestation(unit, verifier, 0, ends, STATES[seg], proof, sender=sender)
    return tx.events.filter(d.court.AttestationChallenged)[0]


def test_false_attestation_is_challenged_again_after_a_sybil_loses_on_purpose(court_world, chain):
    d = court_world
    _, unit, [(liar, lie), _] = attested_unit(d, chain)
    assert lie[0] not in STATES  # the attested end roots are false
    sybil, honest_wb = d.whistleblower, d.other  # the sybil is the liar's own whistleblower key
    liar_stake = d.registry.getNode(liar).stake

    ev = _challenge(d, unit, liar, lie, sybil)
    # one open case per entry at a time
    with reverts(d.court, "AlreadyChallenged", unitId=unit, verifier=liar.address, index=0):
        _challenge(d, unit, liar, lie, honest_wb)
    credits = d.court.credits(liar)
    d.court_game.resolve(ev.gameId, False, sender=d.other)  # the sybil lost on time
    # the verifier's share of the failed bond; the rest is the jackpot's, so each losing case
    # costs the sybil that share of its bond (PROTOCOL §6.8)
    assert d.court.credits(liar) == credits + ev.bond * COURT_REWARD_BPS // 10_000

    # the attestation stood in that case only: the honest whistleblower takes it to court
    ev = _challenge(d, unit, liar, lie, honest_wb)
    d.court_game.resolve(ev.gameId, True, sender=d.other)
    assert d.registry.getNode(liar).stake == liar_stake - ev.penalty
    assert d.court.credits(honest_wb) == ev.bond + ev.penalty * COURT_REWARD_BPS // 10_000
    # a slashed entry is done
    with reverts(d.court, "AlreadyChallenged", unitId=unit, verifier=liar.address, index=0):
        _challenge(d, unit, liar, lie, sybil)


def test_court_refuses_a_challenge_after_its_window(court_world, chain):
    d = court_world
    _, unit, [(v, ends), (w, ends_w)] = attested_unit(d, chain)
    deadline = d.manager.getUnit(unit).deadline
    # a third party finalizes after the reveal's slot (PROTOCOL §6.7: 2 · revealWindow)
    advance(chain, MGR_CFG["verifyWindow"] + 2 * MGR_CFG["revealWindow"] + 1)
    d.manager.finalize(unit, sender=d.other)
    # within the window after the unit's challenge deadline, entry 0 of w goes to court and
    # stands; v's entry is left alone
    ev = _challenge(d, unit, w, ends_w, d.whistleblower)
    chain.pending_timestamp = deadline + COURT_WINDOW - 10
    d.court_game.resolve(ev.gameId, False, sender=d.other)
    stood_at = chain.blocks[-1].timestamp

    chain.pending_timestamp = deadline + COURT_WINDOW + 1
    closed = deadline + COURT_WINDOW
    with reverts(d.court, "CourtWindowClosed", unitId=unit, verifier=v.address, closedAt=closed):
        _challenge(d, unit, v, ends, d.whistleblower)
    # an entry that stood in a case stays open for a window after that case
    ev = _challenge(d, unit, w, ends_w, d.other)
    d.court_game.resolve(ev.gameId, False, sender=d.other)
    stood_again = chain.blocks[-1].timestamp
    assert stood_again > stood_at
    chain.pending_timestamp = stood_again + COURT_WINDOW + 1
    closed = stood_again + COURT_WINDOW
    with reverts(d.court, "CourtWindowClosed", verifier=w.address, closedAt=closed):
        _challenge(d, unit, w, ends_w, d.whistleblower)


# ------------------------------------------------------------------ 4. the revealed leaf's payee


def test_cheater_proving_its_own_fraud_in_the_revealed_leaf_pays_the_requester(rm, chain):  # noqa: F811
    d = rm
    job_id, units, honest, bad = committed_wrong(d, chain)
    cheater, requester = d.solvers[0], d.other
    roots = data_roots(bad)
    tensor = first_disputed_tensor(roots, honest)
    args = reveal_request(LAYOUT, roots, honest, tensor)
    req_tokens, req_credit = d.token.balanceOf(requester), d.rm.credits(requester)
    cheat_credit = d.rm.credits(cheater)

    d.rm.requestAggregateReveal(job_id, *args, sender=requester)
    tx = d.rm.revealAggregateLeaf(job_id, *reveal_answer(bad, tensor, args[4]), sender=cheater)
    ev = tx.events.filter(d.rm.AggregateLeafRevealed)[0]
    leaves, chunk = [bytes(x) for x in ev.leaves], bytes(ev.chunk)
    element = wrong_element_in_chunk(honest, tensor, ev.leaf, chunk)
    # the cheater proves its own fraud in the revealed leaf, before the requester can
    d.rm.proveAggregationFraud(
        job_id, LAYOUT.as_tuple(), tensor, element,
        [opening(u, tensor, element) for u in units],
        revealed_opening(LAYOUT, roots, tensor, leaves, ev.leaf, chunk),
        sender=cheater,
    )  # fmt: skip
    rm_balance_accounted(d, [job_id])
    reward = BOND * BPS // 10_000
    assert d.rm.credits(cheater) == cheat_credit  # nothing for proving its own fraud
    # the requester: the challenger's share, and its request bond back once it reclaims it
    assert d.rm.credits(requester) == req_credit + reward
    assert d.token.balanceOf(requester) == req_tokens - REVEAL_BOND
    d.rm.reclaimRevealBond(job_id, 0, 0, sender=requester)
    assert d.rm.credits(requester) == req_credit + reward + REVEAL_BOND
    rm_balance_accounted(d, [job_id])
