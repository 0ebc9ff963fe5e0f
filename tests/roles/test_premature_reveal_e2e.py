"""A premature reveal slashed end to end (PROTOCOL §8.1): an honest solver is assigned a unit and
its forced-error secret for that attempt leaks (the test writes it into the whistleblower's
--leaked-secrets folder, standing for an off-chain leak channel) before the verdicts are fixed.
The whistleblower agent checks the secret against the solver's claim, reports it
(ForcedErrorJudge.reportPrematureReveal) once: the solver's collateral is slashed, half of it is
credited to the whistleblower and half goes to the jackpot, and the unit re-opens; the solver
claims attempt 1 (whose secret did not leak) and the job completes."""

from __future__ import annotations

import os

import pytest
import rolekit as rk
from eth_account import Account
from eth_utils import keccak

pytestmark = pytest.mark.timeout(360)
TOKEN = 10**18


def _secret(key_index: int, unit_id: int, attempt: int) -> bytes:
    """agents/roles/solver.py Solver.secret for dev account `key_index`."""
    key = bytes(Account.from_key(rk.dev_private_key(key_index)).key)
    return keccak(key + unit_id.to_bytes(32, "big") + attempt.to_bytes(32, "big"))


def test_leaked_secret_is_reported_and_slashed_and_the_job_still_completes(tmp_path):
    spec = rk.write_spec(tmp_path / "spec.json", steps=600, every=200)  # 3 segments
    leaks = tmp_path / "leaks"
    leaks.mkdir()
    (leaks / "junk.hex").write_text("not a secret")  # one warning, no crash
    submitter = rk.Party("submitter", "submitter", 1)
    solver = rk.Party("solver", "solver", 2, ["--stake", "300"])
    verifier = rk.Party("verifier", "verifier", 5, ["--stake", "700"])
    wb = rk.Party("whistleblower", "whistleblower", 7, ["--leaked-secrets", str(leaks)])
    parties = (solver, verifier, wb)
    with rk.chain() as (url, w3):
        addrs = rk.deploy(w3)
        rk.fund(w3, addrs["Token"], rk.dev_private_key(0), [submitter, *parties])
        manager = rk.contract(w3, "JobManager", addrs["JobManager"])
        registry = rk.contract(w3, "NodeRegistry", addrs["NodeRegistry"])
        # the waits for deadlines after everyone acted are skipped on chain (rk.Warp)
        warp = rk.Warp(url, addrs, claimants=1)
        with rk.agents(tmp_path, url, addrs["JobManager"]) as ag, warp:
            for p in parties:
                ag.start(p)
            names = tuple(p.name for p in parties)
            rk.wait_registered(registry, ag, parties)
            ag.start(
                submitter,
                *("--spec", str(spec), "--claim-window", "8", "--compute-time", "120"),
            )
            rk.wait_for(
                "the first assignment",
                lambda: bool(manager.events.UnitAssigned().get_logs(from_block=0)),
                120,
                ag,
                names,
            )
            (assigned,) = manager.events.UnitAssigned().get_logs(from_block=0)
            uid = assigned["args"]["unitId"]
            assert assigned["args"]["solver"] == solver.address
            # the leak: attempt 0's secret, written whole (a rename) so no half file is read
            staged = tmp_path / "leak.tmp"
            staged.write_text("0x" + _secret(solver.key_index, uid, 0).hex())
            os.replace(staged, leaks / f"{uid}.hex")
            rk.wait_for(
                "the premature reveal report",
                lambda: bool(manager.events.PrematureRevealReported().get_logs(from_block=0)),
                90,
                ag,
                names,
            )
            rk.wait_job_completed(ag, 200, names)
            rk.wait_for(
                "the whistleblower's withdrawal",
                lambda: bool(
                    manager.events.Withdrawn().get_logs(
                        argument_filters={"account": wb.address}, from_block=0
                    )
                ),
                30,
                ag,
                names,
            )
            wb_messages = ag.messages("whistleblower")

        # exactly one report, by the whistleblower, of the solver's attempt-0 claim
        (report,) = manager.events.PrematureRevealReported().get_logs(from_block=0)
        collateral = manager.functions.collateralOf(uid >> 32).call()
        assert collateral == 100 * TOKEN
        assert report["args"]["unitId"] == uid
        assert report["args"]["solver"] == solver.address
        assert report["args"]["reporter"] == wb.address
        assert report["args"]["slashed"] == collateral
        block = report["blockNumber"]

        def at(fn, b: int) -> int:
            return fn.call(block_identifier=b)

        # the solver's stake dropped by the collateral in the report's block and stayed there
        stake = registry.functions.getNode(solver.address)
        assert at(stake, block - 1)[8] - at(stake, block)[8] == collateral
        assert stake.call()[8] == 300 * TOKEN - collateral
        # half to the whistleblower's JobManager credit (withdrawn since), half to the jackpot
        credit = manager.functions.credits(wb.address)
        assert at(credit, block) - at(credit, block - 1) == collateral // 2
        jackpot = manager.functions.jackpot()
        assert at(jackpot, block) - at(jackpot, block - 1) == collateral - collateral // 2
        withdrawn = manager.events.Withdrawn().get_logs(
            argument_filters={"account": wb.address}, from_block=0
        )
        assert sum(e["args"]["amount"] for e in withdrawn) == collateral // 2
        # the unit re-opened as attempt 1 in the same block, the solver took it and finished it
        opened = manager.events.UnitOpened().get_logs(
            argument_filters={"unitId": uid}, from_block=block, to_block=block
        )
        assert [e["args"]["attempt"] for e in opened] == [1]
        (final,) = manager.events.UnitFinalized().get_logs(from_block=0)
        assert final["args"]["unitId"] == uid and final["args"]["solver"] == solver.address
        assert final["blockNumber"] > block
        assert manager.functions.getUnit(uid).call()[10] == 1  # attempt
        # one clear line for the report, one warning for the bad file
        reported = [m for m in wb_messages if m.startswith("PREMATURE REVEAL reported")]
        assert len(reported) == 1 and f"unit {uid} attempt 0" in reported[0]
        assert len([m for m in wb_messages if "junk.hex ignored" in m]) == 1
