"""Data availability that scales with the model (issue #38, PROTOCOL §6.11), end to end with the
agents on Anvil and the demo's windows (revealWindow 15 s): the char GPT at 1.02M parameters
(`make_model_1m`, AdamW: a state of 3.05M numbers, 48k chunks; posting it on chain would take
~240 transactions), its solver behind a blob server that accepts connections and never answers.

* An honest solver there is not slashed, and the submitter gets the parameters: the verifier
  cannot read the checkpoints, replays the job itself and so holds the result (attesting is
  holding it); the submitter cannot read the final checkpoint and requests it; the solver answers
  with the bounded proof (open, headers, 64 samples: six transactions) and the verifier says where
  it serves the result; the submitter reads it there, the unit finalizes and `job fetch` writes
  the weights from the verifier's copy.
* A solver that withholds (it goes offline after committing) beside an attestor that holds
  nothing (`--lazy`): nobody answers the request, so the solver's collateral and the attestor's
  lock are slashed, the escrow stays, the unit is re-run by an honest solver and the job
  completes with the submitter holding its model.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import rolekit as rk
import torch
from safetensors.torch import load_file

from agents.__main__ import main
from agents.cli.job import load_factory
from scripts.demo import CLOCK_BUDGET
from scripts.demo import MANAGER_CONFIG as DEMO_WINDOWS
from tools.faultproxy import SilentServer

pytestmark = [pytest.mark.timeout(720), pytest.mark.slow]

GPT = rk.REPO / "examples" / "models" / "char_gpt.py"
COMPLETED = 2
#: The demo's windows; one verifier per unit (its honest replay of the whole job, from step 0,
#: is what holds the result when the solver's data is withheld).
WINDOWS = {**DEMO_WINDOWS, "verifiersPerUnit": 1, "verifyWindow": 60}


def build_gpt(tmp):
    spec = tmp / "gpt1m.json"
    assert main(["job", "build", "--model", f"{GPT}:make_model_1m", "--dataset",
                 "shakespeare-char/train", "--optimizer", "adamw", "--lr", "0.003", "--batch",
                 "2", "--steps", "4", "--checkpoint-every", "2", "--seed", "1", "--out",
                 str(spec), "--json"]) == 0  # fmt: skip
    return spec


def _events(contract, name: str) -> list[dict]:
    return [e["args"] for e in getattr(contract.events, name)().get_logs(from_block=0)]


def test_an_honest_1m_parameter_solver_behind_a_silent_server_is_paid_and_delivers(tmp_path):
    spec = build_gpt(tmp_path)
    submitter = rk.Party("submitter", "submitter", 1)
    solver = rk.Party("solver", "solver", 2, ["--stake", "100"])
    verifier = rk.Party("verifier", "verifier", 5, ["--stake", "100", "--replay-all"])
    with SilentServer() as silent, rk.chain() as (url, w3):
        addrs = rk.deploy(w3, WINDOWS, clock_budget=CLOCK_BUDGET)
        rk.fund(w3, addrs["Token"], rk.dev_private_key(0), [submitter, solver, verifier])
        manager = rk.contract(w3, "JobManager", addrs["JobManager"])
        registry = rk.contract(w3, "NodeRegistry", addrs["NodeRegistry"])
        deployment = tmp_path / "deployment.json"
        deployment.write_text(json.dumps({"format": "vtp.deployment.v1", "rpc_url": url,
                                          "block": 0, "contracts": addrs}))  # fmt: skip
        with rk.agents(tmp_path, url, addrs["JobManager"]) as ag:
            ag.start(solver, "--public-blob-url", silent.url)
            ag.start(verifier)
            rk.wait_registered(registry, ag, [solver, verifier])
            ag.start(submitter, "--spec", str(spec), "--claim-window", "10",
                     "--compute-time", "300", "--mine-when-idle")  # fmt: skip
            names = (solver.name, verifier.name, submitter.name)
            rk.wait_for("the job completed on chain",
                        lambda: manager.functions.jobCount().call() >= 1
                        and manager.functions.getJob(1).call()[4] == COMPLETED,
                        480, ag, names)  # fmt: skip
            rk.wait_for("the submitter's model", lambda: "val loss" in ag.log(submitter.name),
                        90, ag, names)  # fmt: skip
            logs = {p.name: ag.log(p.name) for p in (submitter, solver, verifier)}
        requested = _events(manager, "DataRequested")
        answered = _events(manager, "DataRequestAnswered")
        offered = _events(manager, "DataOffered")
        expired = _events(manager, "DataRequestExpired")
        slashed = [e["node"] for e in _events(registry, "NodeSlashed")]
        finalized = [e["solver"] for e in _events(manager, "UnitFinalized")]
        out = tmp_path / "model.safetensors"
        fetched = subprocess.run(
            [sys.executable, "-m", "agents", "job", "fetch", "1", "--deployment", str(deployment),
             "--out", str(out), "--allow-local-locators", "--json"],
            cwd=rk.REPO, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    assert silent.accepted >= 1  # the verifier and the submitter did try the solver's server
    # the submitter could not read the result, asked for it; the solver proved it holds it
    assert [(e["requester"], e["checkpoint"]) for e in requested] == [(submitter.address, 2)]
    assert [(e["answerer"], e["requester"]) for e in answered] == [
        (solver.address, submitter.address)
    ]
    assert expired == []
    # the verifier, which replayed the job itself, said where it serves the result, and the
    # submitter read it there
    assert [e["holder"] for e in offered] == [verifier.address]
    assert "own replay matches the commitment" in logs[verifier.name]
    assert "final state received from a holder" in logs[submitter.name]
    # nobody honest lost anything: the solver was paid for its work
    assert finalized == [solver.address] and slashed == []
    assert "Traceback" not in "".join(logs.values())
    # `job fetch` falls back to the holders too: the weights load into the plain module
    assert fetched.returncode == 0, fetched.stderr[-2000:]
    module = load_factory(f"{GPT}:make_model_1m")()
    module.load_state_dict(load_file(str(out)), strict=True)
    assert sum(p.numel() for p in module.parameters()) >= 1_000_000
    assert all(torch.isfinite(p).all() for p in module.parameters())


def test_a_withholding_solver_and_an_attestor_holding_nothing_pay_and_the_unit_is_rerun(
    tmp_path,
):
    spec = build_gpt(tmp_path)
    submitter = rk.Party("submitter", "submitter", 1)
    withholder = rk.Party("solver-withholding", "solver", 2, ["--stake", "100"])
    honest = rk.Party("solver-honest", "solver", 3, ["--stake", "200"])
    lazy = rk.Party("verifier-lazy", "verifier", 5, ["--stake", "100", "--lazy"])
    with SilentServer() as silent, rk.chain() as (url, w3):
        addrs = rk.deploy(w3, WINDOWS, clock_budget=CLOCK_BUDGET)
        rk.fund(w3, addrs["Token"], rk.dev_private_key(0), [submitter, withholder, honest, lazy])
        manager = rk.contract(w3, "JobManager", addrs["JobManager"])
        registry = rk.contract(w3, "NodeRegistry", addrs["NodeRegistry"])
        unit = 1 << 32
        with rk.agents(tmp_path, url, addrs["JobManager"]) as ag:
            ag.start(withholder, "--public-blob-url", silent.url)
            ag.start(lazy)
            rk.wait_registered(registry, ag, [withholder, lazy])
            ag.start(submitter, "--spec", str(spec), "--claim-window", "10",
                     "--compute-time", "300", "--mine-when-idle")  # fmt: skip
            names = (withholder.name, lazy.name, submitter.name)
            committed = manager.events.CheckpointsCommitted()
            rk.wait_for("the withholder's commitment", lambda: committed.get_logs(from_block=0),
                        240, ag, names)  # fmt: skip
            ag.kill9(withholder.name)  # gone with its data: it never serves nor answers
            names = (lazy.name, submitter.name)
            rk.wait_for("the re-opened unit",
                        lambda: manager.functions.getUnit(unit).call()[10] >= 1,
                        240, ag, names)  # fmt: skip
            ag.start(honest)
            names += (honest.name,)
            rk.wait_for("the job completed on chain",
                        lambda: manager.functions.getJob(1).call()[4] == COMPLETED,
                        480, ag, names)  # fmt: skip
            rk.wait_for("the submitter's model", lambda: "val loss" in ag.log(submitter.name),
                        90, ag, names)  # fmt: skip
            logs = {p.name: ag.log(p.name) for p in (submitter, honest, lazy)}
        expired = _events(manager, "DataRequestExpired")
        penalised = _events(manager, "VerifierPenalised")
        slashed = [e["node"] for e in _events(registry, "NodeSlashed")]
        finalized = [e["solver"] for e in _events(manager, "UnitFinalized")]
        job = manager.functions.getJob(1).call()
    # nobody answered the submitter's request for the result of attempt 0: it expired
    assert [(e["requester"], e["checkpoint"]) for e in expired] == [(submitter.address, 2)]
    # the withholder lost its collateral, the attestor that held nothing its lock
    assert withholder.address in slashed and lazy.address in slashed
    assert lazy.address in [e["verifier"] for e in penalised]
    # the escrow stayed for the re-run, which the honest solver finished and was paid for
    assert finalized == [honest.address] and honest.address not in slashed
    assert job[4] == COMPLETED
    assert "Traceback" not in "".join(logs.values())
