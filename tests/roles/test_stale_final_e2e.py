"""Issue #38's finding, end to end with the agents on Anvil: a solver trains honestly and
publishes an honest checkpoint list, but commits an earlier checkpoint's state root (checkpoint
1's) as the final one, with that entry's own valid list proof.

Before, every verifier agreed with the list (so none could challenge: its counter-claim equalled
the committed root), the unit finalized and the solver was paid for a wrong result. Now the
commitment must prove its final root is the list's last entry (PROTOCOL §6.5), so the chain
refuses it (`FinalRootNotLast`), the unit expires on its commit deadline with the solver's
collateral slashed, and an honest solver's retrain completes the job with the honest root: the
one the engine computes in one process."""

from __future__ import annotations

import pytest
import rolekit as rk

from agents.data.datasets import load_dataset
from agents.training import spec as specs
from agents.training.engine import Engine

pytestmark = [pytest.mark.timeout(420), pytest.mark.slow]
ASSIGNED, COMPLETED = 3, 2


def test_a_stale_final_root_is_refused_slashed_and_the_job_completes_with_the_honest_root(
    tmp_path,
):
    spec_path = rk.write_spec(tmp_path / "spec.json", steps=40, every=10)
    spec = specs.load(str(spec_path))
    *_, (_, honest_final, _) = Engine(spec, load_dataset(spec.dataset_name)).train()
    submitter = rk.Party("submitter", "submitter", 1)
    stale = rk.Party("solver-stale", "solver", 2, ["--stake", "100", "--stale-final", "1"])
    honest = rk.Party("solver-honest", "solver", 3, ["--stake", "200"])
    verifier = rk.Party("verifier", "verifier", 5, ["--stake", "100"])
    with rk.chain() as (url, w3):
        addrs = rk.deploy(w3)
        rk.fund(w3, addrs["Token"], rk.dev_private_key(0), [submitter, stale, honest, verifier])
        manager = rk.contract(w3, "JobManager", addrs["JobManager"])
        registry = rk.contract(w3, "NodeRegistry", addrs["NodeRegistry"])
        with rk.agents(tmp_path, url, addrs["JobManager"]) as ag:
            for p in (stale, verifier):
                ag.start(p)
            rk.wait_registered(registry, ag, [stale, verifier])
            ag.start(
                submitter,
                *("--spec", str(spec_path), "--claim-window", "8", "--compute-time", "30"),
                "--mine-when-idle",
            )
            names = (stale.name, verifier.name, submitter.name)
            unit = 1 << 32  # job 1's first unit
            # the stale solver alone claims the first attempt; the honest one joins once assigned
            rk.wait_for(
                "the first assignment",
                lambda: (
                    manager.functions.jobCount().call() >= 1
                    and manager.functions.getUnit(unit).call()[0] >= ASSIGNED
                ),
                90,
                ag,
                names,
            )
            ag.start(honest)
            names += (honest.name,)
            rk.wait_for(
                "the job completed on chain",
                lambda: manager.functions.getJob(1).call()[4] == COMPLETED,
                300,
                ag,
                names,
            )
            rk.wait_for(
                "the submitter's trained model",
                lambda: "test accuracy" in ag.log(submitter.name),
                60,
                ag,
                names,
            )
            logs = {p.name: ag.log(p.name) for p in (stale, honest, submitter)}
        committed = manager.events.CheckpointsCommitted().get_logs(from_block=0)
        expired = manager.events.AssignmentExpired().get_logs(from_block=0)
        finalized = manager.events.UnitFinalized().get_logs(from_block=0)
        slashed = [e["args"]["node"] for e in registry.events.NodeSlashed().get_logs(from_block=0)]
        unit_now = manager.functions.getUnit(unit).call()
    # the stale commitment never landed: the only commitment is the honest retrain's
    assert [e["args"]["solver"] for e in committed] == [honest.address]
    assert committed[0]["args"]["finalStateRoot"] == honest_final
    assert "FinalRootNotLast" in logs[stale.name]
    # its unit expired on the commit deadline, its collateral slashed; the retrain was paid
    assert [e["args"]["solver"] for e in expired] == [stale.address]
    assert stale.address in slashed and honest.address not in slashed
    assert [e["args"]["solver"] for e in finalized] == [honest.address]
    # the job's result is the honest root, the one the submitter fetched and checked
    assert unit_now[13] == honest_final  # Unit.finalStateRoot
    assert "0x" + honest_final.hex() in logs[submitter.name]
    assert "Traceback" not in "".join(logs.values())
