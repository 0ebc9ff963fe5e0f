"""A decomposed version-3 job through the agents on Anvil (issue #40, step (c)): the char GPT of
examples/models/char_gpt.py (batch 2, AdamW), 2 rounds x 2 shards of 2 local steps with the outer
Nesterov optimizer, every role an OS process: the submitter posts it to the RoundManager with the
record the roles check (RoundChain.posted), two solvers train a round's two units (one each: the
placement rule), the verifier replays them from G_r, the aggregator commits each round's H_{r+1}
(the aggregation graph on H_r and the units) and finalizes it. All honest: the job completes and
its result G_R (H_R's step state, recomputed by the submitter from the units and checked against
the chain) has the root of `python -m agents train --spec` of the same spec in one process."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
import rolekit as rk
from safetensors.torch import load_file

from agents.__main__ import main
from agents.cli.job import load_factory
from agents.core.deploy import DEFAULT_ABI_DIR, deploy_all
from tools.devnet import Party, fund

pytestmark = [pytest.mark.timeout(900), pytest.mark.slow]
MODEL = rk.REPO / "examples" / "models" / "char_gpt.py"

SUBMITTER = Party("submitter", "submitter", 1)
SOLVERS = [Party(f"solver-{i}", "solver", 2 + i, ["--stake", "200"]) for i in range(2)]
VERIFIER = Party("verifier", "verifier", 5, ["--stake", "100"])
AGGREGATOR = Party("aggregator", "aggregator", 6, ["--stake", "200"])


def _spec(tmp_path, rounds: int = 2):
    spec = tmp_path / f"gpt-{rounds}x2.json"
    argv = ["job", "build", "--model", f"{MODEL}:make_model", "--dataset",
            "shakespeare-char/train", "--optimizer", "adamw", "--lr", "0.003", "--batch", "2",
            "--steps", str(2 * rounds), "--checkpoint-every", "1", "--seed", "5", "--rounds",
            str(rounds), "--shards", "2", "--outer", "nesterov", "--out", str(spec)]  # fmt: skip
    assert main(argv) == 0
    return spec


def _train(spec) -> dict:
    """`python -m agents train --spec`: the job in one process (its last line, the summary)."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["train", "--spec", str(spec), "--json"]) == 0
    return json.loads(printed.getvalue().splitlines()[-1])


def _deploy(w3) -> dict:
    params = {
        "dispute_game": True,
        "clock_budget": 600,
        "round_manager": True,
        "round_config": {"aggregationWindow": 30, "aggregatorBond": 50 * 10**18},
        "manager_config": {
            "claimWindow": 8,
            "verifyWindow": 120,
            "revealWindow": 20,
            "disputeGrace": 10,
            "verifiersPerUnit": 1,
            "segmentsPerVerifier": 2,
            "forcedErrorBps": 0,
            "lazySlashFactor": 0,
        },
        "registry_config": {"unbondingDelay": 60, "heartbeatTtl": 3600},
    }
    addrs = deploy_all(w3, rk.dev_private_key(0), DEFAULT_ABI_DIR, params)
    rk.LENSES[addrs["JobManager"]] = addrs["JobLens"]
    return addrs


def _result(log: str) -> dict:
    """The submitter's result: the last JSON line of its log with a final state root."""
    for line in reversed(log.splitlines()):
        with contextlib.suppress(ValueError):
            obj = json.loads(line)
            if isinstance(obj, dict) and "final_state_root" in obj:
                return obj
    raise AssertionError(f"no result in the submitter's log:\n{log[-2000:]}")


def test_a_two_by_two_char_gpt_job_runs_through_the_agents_to_train_specs_root(tmp_path):
    spec = _spec(tmp_path)
    local = _train(spec)
    with rk.chain() as (url, w3):
        addrs = _deploy(w3)
        parties = [SUBMITTER, *SOLVERS, VERIFIER, AGGREGATOR]
        fund(w3, addrs["Token"], rk.dev_private_key(0), parties)
        registry = rk.contract(w3, "NodeRegistry", addrs["NodeRegistry"])
        extra = ("--round-manager", addrs["RoundManager"])
        # the waits for windows in which nobody acts any more (every unit attested, the
        # aggregator's aggregate unchallenged) are skipped on chain (rk.Warp)
        warp = rk.Warp(url, addrs, trusted=(AGGREGATOR.address,))
        with warp, rk.agents(tmp_path, url, addrs["JobManager"]) as ag:
            for p in (*SOLVERS, VERIFIER, AGGREGATOR):
                ag.start(p, *extra)
            rk.wait_registered(registry, ag, [*SOLVERS, VERIFIER, AGGREGATOR])
            ag.start(SUBMITTER, *extra, "--spec", str(spec), "--reward", "20",
                     "--verification-fee", "2", "--claim-window", "8",
                     "--compute-time", "120")  # fmt: skip
            rk.wait_job_completed(ag, 600, ("aggregator", "verifier"))
            result = _result(ag.log("submitter"))
        # `job fetch --decomposed`: G_R from the final aggregate's blob, checked on chain
        deployment = tmp_path / "deployment.json"
        deployment.write_text(json.dumps({"format": "vtp.deployment.v1", "rpc_url": url,
                                          "block": 0, "contracts": addrs}))  # fmt: skip
        out = tmp_path / "gpt.safetensors"
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            code = main(["job", "fetch", "1", "--decomposed", "--deployment", str(deployment),
                         "--out", str(out), "--allow-local-locators", "--json"])  # fmt: skip
        assert code == 0
        fetched = json.loads(printed.getvalue().splitlines()[-1])
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            code = main(["job", "status", "1", "--decomposed", "--deployment", str(deployment),
                         "--json"])  # fmt: skip
        assert code == 0
        status = json.loads(printed.getvalue())
        refused = _fetch_a_tampered_blob(w3, addrs, deployment, tmp_path)
    assert result["rounds"] == 2 and result["shards"] == 2
    assert result["final_state_root"] == local["final_root"]
    assert result["val_loss"] == pytest.approx(local["val_loss"], abs=1e-6)
    for r in (0, 1):  # a round's units on distinct solvers
        assert len({u["solver"] for u in result["units"] if u["round"] == r}) == 2
    assert all(a["aggregator"] == AGGREGATOR.address for a in result["aggregations"])
    # `job status --decomposed` shows the rounds: each final, its two units finalized
    assert (status["status"], status["version"], status["rounds"]) == ("completed", 3, 2)
    assert [r["status"] for r in status["round_states"]] == ["final", "final"]
    for r in status["round_states"]:
        assert [u["status"] for u in r["units"]] == ["finalized", "finalized"]
        assert r["aggregator"] == AGGREGATOR.address
    # the fetched weights are G_R: `train --spec`'s root, and they load into the plain module
    assert fetched["state_root"] == local["final_root"]
    assert fetched["val_loss"] == pytest.approx(local["val_loss"], abs=1e-6)
    module = load_factory(f"{MODEL}:make_model")()
    module.load_state_dict(load_file(str(out)), strict=True)
    # a final aggregate's blob that is not what it was committed as: one line, nothing written
    code, said, written = refused
    assert code == 2 and not written, (code, said)
    assert len(said.strip().splitlines()) == 1 and "is not readable" in said, said


def _fetch_a_tampered_blob(w3, addrs: dict, deployment, tmp_path) -> tuple[int, str, bool]:
    """`job fetch --decomposed` after one byte of the final aggregate's blob (in the honest
    aggregator's store, which the locator names) was flipped: (exit code, stderr, whether the
    --out file exists)."""
    rm = rk.contract(w3, "RoundManager", addrs["RoundManager"])
    final = rm.functions.globalRoot(1, rm.functions.getJob(1).call()[4][4]).call()  # G_R
    (locator,) = [ev["args"]["blobLocator"]
                  for ev in rm.events.AggregateCommitted().get_logs(from_block=0)
                  if ev["args"]["aggregateRoot"] == final]  # fmt: skip
    base, address = locator.rsplit("#", 1)
    blob = Path(base.removeprefix("file://")) / address[2:4] / address[2:]
    data = bytearray(blob.read_bytes())
    data[100] ^= 0x40
    blob.chmod(0o644)
    blob.write_bytes(bytes(data))
    out = tmp_path / "tampered.safetensors"
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["job", "fetch", "1", "--decomposed", "--deployment", str(deployment),
                     "--out", str(out), "--allow-local-locators"])  # fmt: skip
    return code, err.getvalue(), out.exists()
