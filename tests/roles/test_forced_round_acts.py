"""Acts that end (issue #45): after a forced round's reveal, neither the whistleblower nor a drawn
verifier whose challenge did not land plans the same act round after round, and a challenge
that cannot succeed (my replay's root is the chain's) is recorded and never planned again.

Before the fix the whistleblower's challenge branch for a checked attestation had no
`forced_revealed` guard, the verifier's dissent ignored the reveal, and nothing recorded the
refused challenge: both planned `Challenge` every round until the unit's window closed (a day
of ERROR lines at the default verify window)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

from rolefakes import FakeContract, answering
from test_verifier_resilience import ME, UNIT, verifier, whistleblower

from agents.roles.actions import ChainAction, Challenge, Planned
from agents.roles.logic import (
    AttestationFacts,
    AttestationVerdict,
    Drawn,
    Now,
    UnitStatus,
    UnitView,
    Verdict,
    VerifierFacts,
    VerifierStatus,
    verifier_acts,
    whistleblower_acts,
)

DEADLINE = 10_000
SOLVER = "0x" + "5a" * 20
OTHER_VERIFIER = "0x" + "cd" * 20
TRUE_ROOT = b"\x0c" * 32  # the solver's revealed C, on chain since the reveal
NO_DISPUTE = (0, "0x" + "00" * 20, 0)


def revealed_unit(**kw) -> UnitView:
    """A forced round after its reveal: Verifying again, C on chain, the window still open."""
    fields = dict(
        unit_id=UNIT,
        job_id=UNIT >> 32,
        status=UnitStatus.VERIFYING,
        deadline=DEADLINE,
        seed_block=5,
        attempt=0,
        assignee=SOLVER,
        checkpoint_root=TRUE_ROOT,
        final_root=b"\x02" * 32,
        locator="http://solver#0x" + "ab" * 32,
        verify_seed=3,
        forced_revealed=True,
        published_root=b"\x0b" * 32,
        drawn=(Drawn(ME, VerifierStatus.ATTESTED), Drawn(OTHER_VERIFIER, VerifierStatus.ATTESTED)),
        claimants=(SOLVER,),
        dispute=NO_DISPUTE,
    )
    fields.update(kw)
    return UnitView(**fields)


def intents(acts) -> list[str]:
    """The sends among `acts` (planned or complete), by intent."""
    return [a.intent for a in acts if isinstance(a, Planned | ChainAction)]


def test_after_a_forced_reveal_no_send_is_planned_round_after_round():
    """Ten rounds of the window after the reveal: the whistleblower, whose check found the
    published commitment wrong (a forced round's is, by design), and the drawn verifier whose
    replay disagreed with it and whose challenge did not land (another verifier's did), plan
    each send at most once."""
    u = revealed_unit()
    wb = AttestationFacts(AttestationVerdict.TRUE, commitment_wrong=True, reported=False)
    late = VerifierFacts(ME, VerifierStatus.ATTESTED, Verdict.DISAGREE, 0, False, reveal_window=600)
    planned: list[str] = []
    for t in range(10):
        now = Now(100 + t, DEADLINE - 5_000 + 2 * t)
        planned += intents(whistleblower_acts(u, now, f"{UNIT}:{ME}:7", wb))
        planned += intents(verifier_acts(u, now, late))
    assert len(planned) == len(set(planned)), f"planned again every round: {planned}"
    # nor does either challenge the revealed C over a check of the published root
    assert not [i for i in planned if i.startswith("challenge:")]


def test_a_verifier_judged_wrong_still_contests_the_revealed_root_once():
    """The guard keeps the one challenge that is meant for after a reveal: a verifier whose
    replayed attestation the reveal judged WRONG contests C (once)."""
    u = revealed_unit()
    slashed = VerifierFacts(ME, VerifierStatus.SLASHED, Verdict.DISAGREE, 0, False, replayed=True)
    acts = verifier_acts(u, Now(100, DEADLINE - 5_000), slashed)
    assert [type(a) for a in acts] == [Challenge] and acts[0].revealed
    assert verifier_acts(u, Now(101, DEADLINE - 4_999), replace(slashed, contested=True)) == []


def _verifier_whose_root_is_the_chains(tmp_path):
    v = verifier(tmp_path, manager=FakeContract(verifierStatus=lambda u, a: (1, bytes(32))))
    v._reveal_window = 600
    v.game_context = answering(lambda job_id: object())
    v.challenges = []

    async def open_challenge(act, unit, ctx) -> bool:
        v.challenges.append(act.intent)
        return False  # my full replay's root is the unit's: the manager would refuse it

    v.open_challenge = open_challenge
    return v


def test_a_challenge_that_cannot_succeed_is_recorded_and_not_planned_again(tmp_path, caplog):
    """A drawn verifier's replay disagreed with the solver's data, yet its full replay gives the
    committed root (the data failed its checks, not the roots): the challenge is refused
    once, recorded under its intent (a restart reads it too), said once without an ERROR, and
    the next rounds plan no challenge."""
    v = _verifier_whose_root_is_the_chains(tmp_path)
    u = revealed_unit(forced_revealed=False, drawn=(Drawn(ME, VerifierStatus.PENDING),))
    record = {"segments": [1], "end_roots": ["0x" + "11" * 32], "wrong": [1]}
    v.agent.store.put_record("verdict", f"{UNIT}:0", Verdict.DISAGREE, record)
    caplog.set_level(logging.INFO, logger=v.log.name)
    now = Now(100, DEADLINE - 5_000)
    for _ in range(5):
        facts = asyncio.run(v.facts(u, now))
        for act in verifier_acts(u, now, facts):
            if isinstance(act, Challenge):
                asyncio.run(v.handle(act, u, now))
        now = Now(now.block + 1, now.timestamp + 2)
    assert v.challenges == [f"challenge:{UNIT}:0"]
    assert v.dropped(f"challenge:{UNIT}:0")
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    said = [r.getMessage() for r in caplog.records if "roots are right" in r.getMessage()]
    assert len(said) == 1


def test_the_whistleblower_records_its_refused_challenge_too(tmp_path):
    w = whistleblower(tmp_path)
    w.context = answering(lambda job_id: object())

    async def open_challenge(act, unit, ctx) -> bool:
        return False

    w.open_challenge = open_challenge
    u = revealed_unit(forced_revealed=False)
    key = f"{UNIT}:{ME}:7"
    w.agent.store.put_record("attestation", key, "true", {"unit": UNIT, "commitment_wrong": True})
    facts = AttestationFacts(AttestationVerdict.TRUE, commitment_wrong=True, reported=False)
    (act,) = whistleblower_acts(u, Now(100, DEADLINE - 5_000), key, facts)
    asyncio.run(w.handle(act, u, key))
    assert w.dropped(act.intent)
    dropped = replace(facts, challenge_dropped=True)
    assert whistleblower_acts(u, Now(101, DEADLINE - 4_998), key, dropped) == []
