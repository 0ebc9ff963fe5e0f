"""A 2-round x 3-shard digits job on Anvil through the RoundManager, as OS processes: four
solvers, two aggregators (one cheats), the submitter. One solver goes offline holding a unit of
round 0 (killed right after its claim, so it is selected and misses its commit deadline): the
unit is re-opened and taken by the spare solver. The cheating aggregator commits round 0 first;
the honest one proves it wrong on chain, the cheater is slashed and the round re-aggregated. The
job's final state root equals, bit for bit, the engine's one-process run of the same spec, and
its test accuracy is within 2 points of the single solver with the same total steps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import rolekit as rk

from agents.core.deploy import DEFAULT_ABI_DIR, deploy_all
from agents.training import data as datasets
from agents.training import decompose as D
from agents.training import spec as specs
from agents.training.engine import Engine

pytestmark = [pytest.mark.timeout(900), pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "examples" / "digits-2x3.json"
SINGLE = REPO / "examples" / "digits-mlp.json"  # one solver, the same T = 400 steps
BOND = 50 * 10**18


def local_run() -> tuple[str, float, float]:
    """(G_R root, its test accuracy) of the engine's one-process run; the single solver's."""
    sp, one = specs.load(SPEC), specs.load(SINGLE)
    ds = datasets.load_dataset(sp.dataset_name)
    test = datasets.test_split_for(ds.name)
    last = list(D.run_job(sp, ds))[-1]
    eng = Engine(one, ds)
    single = eng.accuracy(list(eng.train())[-1][2], test)
    return "0x" + last.state_root.hex(), eng.accuracy(last.state, test), single


def test_two_by_three_job_with_offline_solver_and_cheating_aggregator(tmp_path):
    want_root, want_acc, single_acc = local_run()
    submitter = rk.Party("submitter", "submitter", 1)
    solvers = [rk.Party(f"solver-{i}", "solver", 2 + i, ["--stake", "200"]) for i in range(4)]
    cheater = rk.Party("agg-cheat", "aggregator", 6, ["--stake", "200", "--cheat"])
    honest = rk.Party("agg-honest", "aggregator", 7, ["--stake", "200"])
    with rk.chain() as (url, w3):
        addrs = deploy_all(
            w3,
            rk.dev_private_key(0),
            DEFAULT_ABI_DIR,
            {
                "dispute_game": True,
                "round_manager": True,
                "round_config": {"aggregationWindow": 45, "aggregatorBond": BOND},
                "manager_config": {"claimWindow": 8, "verifyWindow": 8, "verifiersPerUnit": 1},
                "registry_config": {"unbondingDelay": 60, "heartbeatTtl": 3600},
            },
        )
        rk.fund(w3, addrs["Token"], rk.dev_private_key(0), [submitter, *solvers, cheater, honest])
        manager = rk.contract(w3, "JobManager", addrs["JobManager"])
        rm = rk.contract(w3, "RoundManager", addrs["RoundManager"])
        registry = rk.contract(w3, "NodeRegistry", addrs["NodeRegistry"])
        extra = ("--round-manager", addrs["RoundManager"])
        with rk.agents(tmp_path, url, addrs["JobManager"]) as ag:
            # 1. the solver that will go offline registers first and is alone when round 0 opens
            offline = solvers[0]
            ag.start(offline, *extra)
            ag.start(cheater, *extra)
            rk.wait_for(
                "registrations",
                lambda: all(
                    registry.functions.roleOf(p.address).call() for p in (offline, cheater)
                ),
                120,
                ag,
                (offline.name, cheater.name),
            )
            ag.start(
                submitter, *extra, "--spec", str(SPEC), "--reward", "20",
                "--verification-fee", "2", "--claim-window", "8", "--compute-time", "45",
            )  # fmt: skip

            def held() -> int:
                """The unit job the offline solver claimed (0: none yet)."""
                if rm.functions.jobCount().call() == 0:
                    return 0
                for s in range(3):
                    job = rm.functions.unitJobOf(1, 0, s).call()
                    claimants = manager.functions.getClaimants(job << 32).call()[0]
                    if offline.address in claimants:
                        return job
                return 0

            rk.wait_for("the offline solver's claim", lambda: held() != 0, 120, ag)
            ag.kill9(offline.name)
            lost = held()
            # it is the only claimant, so it is selected once the claim window closes
            rk.wait_for(
                "the dead solver's assignment",
                lambda: manager.functions.getUnit(lost << 32).call()[7] == offline.address,
                60,
                ag,
                ("submitter",),
            )
            for p in solvers[1:]:
                ag.start(p, *extra)
            # 2. the cheater commits round 0's aggregate; then the honest aggregator starts
            rk.wait_for(
                "the cheating aggregate",
                lambda: rm.functions.getRound(1, 0).call()[3] == cheater.address,
                300,
                ag,
                ("submitter", cheater.name),
            )
            ag.start(honest, *extra)
            rk.wait_for(
                "job completion",
                lambda: ag.procs["submitter"].poll() is not None,
                480,
                ag,
                (honest.name,),
            )
            sub_log = ag.log(submitter.name)
            assert ag.procs["submitter"].returncode == 0, sub_log[-3000:]
            result = json.loads(next(ln for ln in sub_log.splitlines() if '"units"' in ln))
            proven = rm.events.AggregationFraudProven().get_logs(from_block=0)
            expired = manager.events.AssignmentExpired().get_logs(from_block=0)

    # the job's result is the engine's, bit for bit
    assert result["final_state_root"] == want_root
    assert result["rounds"] == 2 and result["shards"] == 3
    # the offline solver's unit was re-opened and finished by another solver
    assert [e["args"]["solver"] for e in expired] == [offline.address]
    lost_unit = next(u for u in result["units"] if u["job_id"] == lost)
    assert lost_unit["attempts"] == 2 and lost_unit["solver"] != offline.address
    solvers_of = {r: {u["solver"] for u in result["units"] if u["round"] == r} for r in (0, 1)}
    assert all(len(s) == 3 for s in solvers_of.values())  # distinct solvers in each round
    # the cheater was caught in round 0 (and in round 1 if it won that race too), the round
    # re-aggregated by the honest aggregator
    assert proven and all(e["args"]["aggregator"] == cheater.address for e in proven)
    assert proven[0]["args"]["round"] == 0 and proven[0]["args"]["challenger"] == honest.address
    assert result["aggregations"][0]["attempts"] >= 2
    assert all(a["aggregator"] == honest.address for a in result["aggregations"])
    assert rm.functions.jackpot().call() == len(proven) * BOND // 2
    # accuracy: reported, the engine's, and within 2 points of the single solver
    assert result["test_accuracy"] == pytest.approx(want_acc, abs=1e-6)
    assert abs(result["test_accuracy"] - single_acc) <= 0.02
    print(json.dumps({"test_accuracy": result["test_accuracy"], "single_solver": single_acc}))
