"""A solver behind a blob server that accepts connections and never answers (PROPERTIES H14),
end to end with the agents on Anvil and the demo's deadlines (verify window 45 s, two verifiers,
the attestation court).

Before agents read peers' data off their round loop, each read held the verifier's loop for its
30 s timeout, the replay from step 0 waited half the window after the first miss, and the
window closed on a silent verifier: the cheat was paid 88 tokens, the honest verifier slashed
as silent and the lazy one paid the whole fee. Now the read fails on its budget (a quarter of
the window left), the honest verifier replays the job itself at once, and:

* a cheat behind the silent server is challenged and slashed, the honest retrain completes
  the job, the honest verifier loses nothing, and the lazy verifier is caught in the court;
* an honest solver behind it is paid: its roots are the honest verifier's own replay, which
  attests from it; the lazy verifier is caught by the whistleblower's own replay; and the
  submitter, which cannot read the final checkpoint either, requests it (a data request,
  PROTOCOL §6.11): the solver proves it holds it before the unit may be finalized, the honest
  verifier (which holds the result from its own replay) says where it serves it, and the
  submitter gets its trained model there, and its accuracy.

The answer is bounded whatever the state (open, headers, 64 samples: six transactions), so these
runs keep the demo's 15 s answer window (`revealWindow`).
"""

from __future__ import annotations

import pytest
import rolekit as rk

from scripts.demo import CHEAT, CLOCK_BUDGET, COURT_CLOCK_BUDGET, MANAGER_CONFIG
from tools.faultproxy import SilentServer

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]
COMPLETED = 2


def _parties(silent_url: str, cheat: bool) -> dict[str, rk.Party]:
    behind = ["--public-blob-url", silent_url]
    solver = ["--stake", "100", *behind] + (["--cheat", CHEAT] if cheat else [])
    out = {
        "submitter": rk.Party("submitter", "submitter", 1),
        "solver": rk.Party("solver-silent", "solver", 2, solver),
        "verifier": rk.Party("verifier", "verifier", 5, ["--stake", "100", "--replay-all"]),
        "lazy": rk.Party("verifier-lazy", "verifier", 6, ["--stake", "100", "--lazy"]),
        "whistleblower": rk.Party("whistleblower", "whistleblower", 7, ["--stake", "20"]),
    }
    if cheat:
        out["honest"] = rk.Party("solver-a", "solver", 3, ["--stake", "200"])
    return out


def _field(contract, event: str, name: str | None = None) -> list:
    """Every `event` the contract emitted: its argument `name`, or all its arguments."""
    logs = getattr(contract.events, event)().get_logs(from_block=0)
    return [e["args"][name] if name else e["args"] for e in logs]


def _run(tmp_path, cheat: bool) -> dict:
    """Run the job with its solver behind a silent server; what the chain says afterwards."""
    with SilentServer() as silent, rk.chain() as (url, w3):
        parties = _parties(silent.url, cheat)
        addrs = rk.deploy(
            w3,
            MANAGER_CONFIG,
            clock_budget=CLOCK_BUDGET,
            court_clock_budget=COURT_CLOCK_BUDGET,
        )
        rk.fund(w3, addrs["Token"], rk.dev_private_key(0), list(parties.values()))
        manager = rk.contract(w3, "JobManager", addrs["JobManager"])
        registry = rk.contract(w3, "NodeRegistry", addrs["NodeRegistry"])
        court = rk.contract(w3, "AttestationCourt", addrs["AttestationCourt"])
        first = ("solver", "verifier", "lazy", "whistleblower")
        with rk.agents(tmp_path, url, addrs["JobManager"]) as ag:
            for name in first:
                ag.start(parties[name], "--court", addrs["AttestationCourt"])
            rk.wait_registered(registry, ag, [parties[n] for n in first])
            ag.start(
                parties["submitter"],
                *("--spec", str(rk.SPEC), "--claim-window", "14", "--compute-time", "120"),
                "--mine-when-idle",
            )
            names = tuple(parties[n].name for n in first)
            if cheat:
                # the cheat alone claims the first attempt; the honest solver joins once assigned
                rk.wait_for(
                    "the first assignment",
                    lambda: (
                        manager.functions.jobCount().call() >= 1
                        and manager.functions.getUnit(1 << 32).call()[0] >= 3
                    ),
                    90,
                    ag,
                    names,
                )
                ag.start(parties["honest"], "--court", addrs["AttestationCourt"])
                names += (parties["honest"].name,)
            posted = manager.events.JobPosted()
            rk.wait_for("the job posted", lambda: posted.get_logs(from_block=0), 90, ag, names)
            job = int(posted.get_logs(from_block=0)[0]["args"]["jobId"])
            rk.wait_for(
                "the job completed on chain",
                lambda: manager.functions.getJob(job).call()[4] == COMPLETED,
                400,
                ag,
                names,
            )

            def court_ruled() -> bool:
                opened = court.events.AttestationChallenged().get_logs(from_block=0)
                ruled = court.events.AttestationRuled().get_logs(from_block=0)
                return len(opened) >= 1 and len(ruled) == len(opened)

            rk.wait_for("the lazy attestation's court case", court_ruled, 150, ag, names)
            rk.wait_for(
                "the submitter's trained model",
                lambda: "test accuracy" in ag.log(parties["submitter"].name),
                60,
                ag,
                names,
            )
            logs = {name: ag.log(p.name) for name, p in parties.items()}
        # everything the tests check, read while the chain still runs
        return {
            "parties": parties,
            "silent": silent.accepted,
            "job_status": manager.functions.getJob(job).call()[4],
            "opened": _field(manager, "ChallengeOpened", "challenger"),
            "resolved": _field(manager, "DisputeResolved", "challengerWon"),
            "finalized": _field(manager, "UnitFinalized", "solver"),
            "attested": set(_field(manager, "Attested", "verifier")),
            "slashed": _field(registry, "NodeSlashed", "node"),
            "penalised": _field(manager, "VerifierPenalised", "verifier"),
            "court_losers": [
                r["verifier"] for r in _field(court, "AttestationRuled") if r["falseAttestation"]
            ],
            "data_requested": [
                (r["requester"], r["checkpoint"]) for r in _field(manager, "DataRequested")
            ],
            "data_answered": _field(manager, "DataRequestAnswered", "requester"),
            "data_expired": _field(manager, "DataRequestExpired"),
            "offered": _field(manager, "DataOffered", "holder"),
            "logs": logs,
        }


def test_a_cheat_behind_a_silent_blob_server_is_slashed_and_no_honest_party_loses(tmp_path):
    r = _run(tmp_path, cheat=True)
    p = r["parties"]
    assert r["silent"] >= 1  # the honest verifier did try the cheat's server
    # the honest verifier challenged the cheat from its own replay and won the game
    assert r["opened"] == [p["verifier"].address]
    assert r["resolved"] == [True]
    assert p["solver"].address in r["slashed"]
    # never paid: the job finalized on the honest retrain
    assert r["finalized"] == [p["honest"].address]
    assert r["job_status"] == COMPLETED
    # the honest verifier was never penalised or slashed; the lazy one lost its court case
    assert p["verifier"].address not in r["penalised"] + r["slashed"]
    assert p["lazy"].address in r["court_losers"]
    assert "checkpoints unusable" in r["logs"]["verifier"]
    assert "Traceback" not in r["logs"]["verifier"]
    # a data request the submitter may have made of the cheat's attempt was answered (with the
    # cheat's own states, which its commitment binds): the game, not the data, caught it
    assert r["data_expired"] == []


def test_an_honest_solver_behind_a_silent_blob_server_is_paid_and_no_honest_party_loses(
    tmp_path,
):
    r = _run(tmp_path, cheat=False)
    p = r["parties"]
    assert r["silent"] >= 1
    assert r["opened"] == []
    assert r["finalized"] == [p["solver"].address]  # paid for its right work
    assert p["verifier"].address in r["attested"]  # from its own replay: the data never came
    honest = [p["solver"].address, p["verifier"].address]
    assert not set(honest) & set(r["penalised"] + r["slashed"])
    assert p["lazy"].address in r["court_losers"]
    assert "own replay matches the commitment" in r["logs"]["verifier"]
    # the submitter could not read the final checkpoint, requested it, and got it from a holder
    submitter = p["submitter"].address
    assert r["data_requested"] == [(submitter, 10)]  # the last of the 11 checkpoints
    assert r["data_answered"] == [submitter] and r["data_expired"] == []
    assert p["verifier"].address in r["offered"]
    assert "final state received from a holder" in r["logs"]["submitter"]
    assert "Traceback" not in r["logs"]["submitter"] + r["logs"]["solver"]
