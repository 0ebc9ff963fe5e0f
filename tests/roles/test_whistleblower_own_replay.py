"""The whistleblower checks an attestation from its own replay from step 0 when the solver's
data stays away (PROPERTIES H8): a solver that withholds its checkpoints does not shield the
verifiers that attested its unit, also after the unit is final, while the court can still
take the attestation. Built on the fakes of test_verifier_resilience."""

# ruff: noqa: F811  (the tests take the imported `job` fixture as a parameter)

from __future__ import annotations

import asyncio
import logging

from rolefakes import FakeContract
from test_verifier_resilience import (  # noqa: F401  (job is a fixture)
    GAME,
    OTHER,
    SEGMENT,
    UNIT,
    _false_attestation,
    answering,
    faulty,
    job,
    recheck_now,
    solver_data,
    unit_view,
    whistleblower,
)

from agents.roles.actions import Challenge, CourtChallenge, Recheck
from agents.roles.logic import (
    AttestationFacts,
    Now,
    SettledJobs,
    UnitStatus,
    whistleblower_acts,
)
from agents.roles.whistleblower import CLOSED, FULL_REPLAY_AFTER_TRIES
from agents.training import merkle
from agents.training.state import state_root


def _recheck_until_settled(w, key: str) -> list[str]:
    """Re-check until the record leaves "unavailable" or the replay fallback was tried; the
    states the record went through."""
    states = []
    for _ in range(FULL_REPLAY_AFTER_TRIES):
        recheck_now(w, key)
        states.append(w.agent.store.get_record("attestation", key).state)
    return states


def test_withheld_data_a_false_attestation_is_found_from_my_own_replay_and_taken_to_court(
    tmp_path, job
):
    with solver_data(tmp_path, job) as data:
        w, key = _false_attestation(tmp_path, job, data)
        data.take_down()  # the solver never serves its checkpoints
        states = _recheck_until_settled(w, key)
        assert states == ["unavailable"] * (FULL_REPLAY_AFTER_TRIES - 1) + ["false"]
        rec = w.agent.store.get_record("attestation", key)
        assert rec.data["from_own_replay"] and not rec.data["commitment_wrong"]
        assert rec.data["mine"] == [
            "0x" + data.roots[2].hex(),
            "0x" + data.roots[SEGMENT + 1].hex(),
        ]
        # the case goes to court with my roots: the start root is proven against the
        # published commitment
        asyncio.run(w.court_challenge(CourtChallenge(f"court:{key}", key), key, dict(rec.data)))
        name, (unit_id, who, index, _ends, start, proof) = w.sent[0][1]
        assert (name, unit_id, who, index) == ("challengeAttestation", UNIT, OTHER, 1)
        assert start == data.roots[SEGMENT]
        opened = merkle.ListProof(SEGMENT, start, list(proof))
        n = len(data.roots)
        assert merkle.verify_list_proof(merkle.CHECKPOINT_DOMAIN, data.checkpoint_root, n, opened)
        # and the court game is played from the start state I kept
        case = rec.data | {"court_game": GAME, "court_segment": SEGMENT}
        asyncio.run(w.play_court(key, case))
    assert state_root(w.court_comps[GAME].state(SEGMENT * job.k)) == data.roots[SEGMENT]


def test_withheld_data_a_true_attestation_is_confirmed_from_my_own_replay(tmp_path, job):
    with solver_data(tmp_path, job) as data:
        w, key = _false_attestation(tmp_path, job, data)
        rec = w.agent.store.get_record("attestation", key)
        true_ends = ["0x" + data.roots[2].hex(), "0x" + data.roots[SEGMENT + 1].hex()]
        w.agent.store.put_record("attestation", key, "new", rec.data | {"end_roots": true_ends})
        data.take_down()
        assert _recheck_until_settled(w, key)[-1] == "true"


def test_my_replay_is_not_the_commitment_the_attestation_stays_unavailable(tmp_path, job, caplog):
    """A solver whose commitment is wrong (here a wrong batch example in SEGMENT) and whose data
    is gone: my replay's roots cannot prove the published entries, so the fetch is retried and
    the reason said once."""
    with solver_data(tmp_path, job, faulty(job)) as data:
        w, key = _false_attestation(tmp_path, job, data)
        data.take_down()
        caplog.set_level(logging.WARNING, logger=w.log.name)
        states = _recheck_until_settled(w, key) + _recheck_until_settled(w, key)
    assert set(states) == {"unavailable"}
    said = [r for r in caplog.records if "not the published commitment" in r.getMessage()]
    assert len(said) == 1


def test_my_replay_is_not_the_commitment_the_unit_is_challenged_while_it_may_be(tmp_path, job):
    """The same withheld wrong commitment: besides chasing the data for the attestation, I
    challenge the unit with my replay's root while its window is open (PROPERTIES H8; the known
    gap it narrows: before, only the drawn verifiers' own replays could dispute it)."""
    with solver_data(tmp_path, job, faulty(job)) as data:
        w, key = _false_attestation(tmp_path, job, data)
        data.take_down()
        _recheck_until_settled(w, key)
        rec = w.agent.store.get_record("attestation", key)
        assert rec.state == "unavailable" and rec.data["commitment_wrong"]
        facts = AttestationFacts(
            "unavailable", True, False, True, tries=rec.data["tries"], last_try=10**9
        )
        live = unit_view(data)
        acts = whistleblower_acts(live, Now(10, live.deadline - 60), key, facts)
        assert acts == [Challenge(f"challenge:{UNIT}:0", UNIT, 0)]
        closed = whistleblower_acts(live, Now(10, live.deadline), key, facts)
        assert closed == []  # the window is over: nothing to dispute the unit with
        revealed = unit_view(data)
        object.__setattr__(revealed, "forced_revealed", True)
        assert whistleblower_acts(revealed, Now(10, live.deadline - 60), key, facts) == []

        chain = FakeContract(
            challengeBondOf=lambda u: 10,
            challenge=lambda u, counter: (u, counter),
            getDispute=lambda u: (GAME, 0, 10),
        )
        for name in ("challengeBondOf", "challenge", "getDispute"):
            setattr(w.manager.functions, name, getattr(chain.functions, name))
        asyncio.run(w.handle(acts[0], live, key))
    honest = merkle.checkpoint_root(w.challenger_comp(job.context()).checkpoint_roots())
    assert honest != data.checkpoint_root
    assert w.sent[-1][1] == (UNIT, honest)  # challenged with my replay's root


def test_an_unavailable_attestation_of_a_final_unit_is_rechecked_while_the_court_takes_it():
    key = f"{UNIT}:{OTHER}:9"
    final = unit_view(None, UnitStatus.FINALIZED)

    def acts(court_open: bool) -> list:
        facts = AttestationFacts(
            "unavailable", False, False, True, tries=3, last_try=1_000, court_open=court_open
        )
        return whistleblower_acts(final, Now(10, 10_000), key, facts)

    assert acts(False) == []  # as before: a final unit's data is not chased without a court
    assert acts(True) == [Recheck(key)]


def test_court_open_reads_the_court_window_and_the_attested_attempt(tmp_path, job):
    with solver_data(tmp_path, job) as data:
        w, key = _false_attestation(tmp_path, job, data)
    w.court.functions.window = FakeContract(window=lambda: 100).functions.window
    final = unit_view(data, UnitStatus.FINALIZED)
    rec = w.agent.store.get_record("attestation", key).data

    def court_open(u, now: Now) -> bool:
        return asyncio.run(w.court_open(u, rec, now))

    assert court_open(final, Now(1, final.deadline + 100))
    assert not court_open(final, Now(1, final.deadline + 101))
    assert not court_open(unit_view(data, UnitStatus.VERIFYING), Now(1, 0))
    later = unit_view(data, UnitStatus.FINALIZED)
    object.__setattr__(later, "attempt", 1)  # a re-opened unit's later attempt
    assert not court_open(later, Now(1, final.deadline))


def test_court_open_is_read_only_when_a_recheck_of_a_final_unit_is_due(tmp_path, job):
    """The court's reach needs an archive read of the unit as attested: asked only for an
    unavailable attestation of a unit that is no longer live, when its next re-check is due."""
    with solver_data(tmp_path, job) as data:
        w, key = _false_attestation(tmp_path, job, data)
    asked: list[int] = []
    w.court_open = answering(lambda u, d, now: asked.append(now.timestamp) or True)
    final = unit_view(data, UnitStatus.FINALIZED)
    rec = {"tries": 3, "last_try": 1_000}  # next re-check due at 1_040 (10 s doubled twice)

    def for_recheck(u, state: str, now: Now) -> bool:
        return asyncio.run(w.court_open_for_recheck(u, state, rec, now))

    assert not for_recheck(final, "unavailable", Now(1, 1_039))
    assert for_recheck(final, "unavailable", Now(1, 1_040))
    assert not for_recheck(final, "false", Now(1, 1_040))
    live = unit_view(data, UnitStatus.VERIFYING)
    assert not for_recheck(live, "unavailable", Now(1, 1_040))
    assert asked == [1_040]


def test_a_record_nothing_more_can_come_of_is_closed_and_no_longer_read(tmp_path):
    """A confirmed attestation of a unit settled for good is closed (kept, with its verdict):
    later rounds neither list it nor read its unit. Before the settlement is deep enough, or
    while the court may still take an unavailable one, it stays open."""
    reads: list[int] = []

    def get_unit(unit_id: int) -> tuple:
        reads.append(unit_id)
        t = [0] * 15  # IJobManager.Unit has 15 fields
        t[0], t[4] = int(UnitStatus.FINALIZED), 1_000
        return tuple(t)

    w = whistleblower(tmp_path, manager=FakeContract(getUnit=get_unit),
                      court=FakeContract(window=lambda: 100))  # fmt: skip
    w.settled = SettledJobs()
    w.commitment = answering(lambda unit_id, block="latest": ("", b""))  # no locator needed
    store = w.agent.store
    base = {"unit": UNIT, "verifier": OTHER, "segments": [1], "end_roots": []}
    store.put_record("attestation", "a", "true", base | {"block": 9})
    b = base | {"block": 10, "tries": 5, "last_try": 1_090}  # next re-check not due yet
    store.put_record("attestation", "b", "unavailable", b)

    asyncio.run(w.follow(store.get_record("attestation", "a"), Now(1, 2_000)))
    assert store.get_record("attestation", "a").state == "true"  # not settled deep enough yet
    w.settled.add(UNIT >> 32)
    for rec in w.attestations():
        asyncio.run(w.follow(rec, Now(1, 1_100)))
    assert store.get_record("attestation", "a").state == CLOSED
    assert store.get_record("attestation", "a").data["verdict"] == "true"
    assert [r.record_id for r in w.attestations()] == ["b"]  # the court may still take it
    reads.clear()
    for rec in w.attestations():
        asyncio.run(w.follow(rec, Now(1, 1_101)))
    assert w.attestations() == [] and len(reads) == 1
    assert store.get_record("attestation", "b").data["verdict"] == "unavailable"


def test_a_wrong_commitment_of_an_earlier_attempt_does_not_judge_the_current_one(tmp_path, job):
    """An attestation of attempt 0 sampled the cheated segment (its commitment was wrong); the
    unit was disputed, re-opened and is now Verifying attempt 1 with another commitment. My
    record of that attestation says nothing about attempt 1: it must not challenge the unit
    (before, it did so every round, and the replay of attempt 1's data, finding its roots right,
    logged "the data failed its checks but the roots are right; not challenging")."""
    with solver_data(tmp_path, job, faulty(job)) as data:
        w, key = _false_attestation(tmp_path, job, data)
        recheck_now(w, key)
    rec = w.agent.store.get_record("attestation", key)
    assert rec.data["commitment_wrong"] and rec.data["attempt"] == 0
    decided: list[type] = []

    async def handle(act, u, key) -> None:
        decided.append(type(act))

    w.handle = handle
    w.court_window = answering(lambda: 100)

    def follow(attempt: int) -> list[str]:
        live = unit_view(data, UnitStatus.VERIFYING)
        object.__setattr__(live, "attempt", attempt)
        w.unit = answering(lambda unit_id: live)
        decided.clear()
        asyncio.run(w.follow(rec, Now(10, live.deadline - 60)))
        return decided

    assert Challenge in follow(0)  # the attempt attested: its wrong commitment is challenged
    assert Challenge not in follow(1)  # a later attempt is not judged by that record
