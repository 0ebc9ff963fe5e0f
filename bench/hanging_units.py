"""Many hanging units at once (issue #23, PROPERTIES H14): one verifier drawn to every unit of
twenty jobs whose solvers publish their checkpoints behind a blob server that accepts
connections and never answers, some of them cheats, with the demo's deadlines (verify window
45 s, a 120 s game clock a side).

Each of the verifier's reads of a solver's data waits in a bounded pool and fails on its budget
(agents/core/fetches.py); the verifier then replays the job itself from step 0 and attests, or
challenges a cheat and plays its game, while the other reads still hang. Measured from the
chain: every unit the verifier was drawn to answered in its window (never penalised), every
game it held won (never by the clock against it), every job completed, no cheat paid, no
honest party slashed.

`python -m bench.reliability_bench --only hanging` runs it and writes its row under
"hanging_units" in bench/results/reliability.json; `make reliability` runs it with the rest.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from eth_account import Account
from web3 import Web3
from web3.logs import DISCARD

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "roles"))  # rolekit: the one "job with N processes" kit

import rolekit as rk  # noqa: E402

from agents.core.blobs import BlobStore, LocalDirBackend  # noqa: E402
from agents.core.chain import dev_private_key  # noqa: E402
from agents.data import builtin as datasets  # noqa: E402
from agents.dispute.graph import job_graph  # noqa: E402
from agents.dispute.trace import Computation  # noqa: E402
from agents.training import spec as specs  # noqa: E402
from agents.training.engine import Engine  # noqa: E402
from agents.training.state import state_root  # noqa: E402
from scripts.demo import CLOCK_BUDGET, MANAGER_CONFIG  # noqa: E402
from tools.faultproxy import SilentServer  # noqa: E402

TOKEN = 10**18
UNITS = 20
CHEATS = 4
#: Small jobs: the replays from step 0 that the hanging reads force stay a fraction of a window
#: on one core, so what is measured is the agent's handling of the reads, not its CPU.
STEPS, EVERY = 40, 10
CHEAT = "element:step=17,node=2,element=5,mask=0x40000000"
#: A job's reward and verifier fee: the cheat's collateral (the solver's pay, 22.5 tokens)
#: fits its 100-token stake exactly CHEATS = 4 times, so it claims four units and no more.
REWARD, FEE = 25 * TOKEN, 2 * TOKEN
TIMEOUT_S = 900.0
COMPLETED = 2

SUBMITTER = 1
PARTIES = {
    "cheat": rk.Party("solver-cheat", "solver", 2, ["--stake", "100", "--cheat", CHEAT]),
    "honest": rk.Party("solver-honest", "solver", 3, ["--stake", "600"]),
    "verifier": rk.Party("verifier", "verifier", 5, ["--stake", "400"]),
}


def _send_all(w3: Web3, key: str, calls: list) -> list[dict]:
    """Sign and send `calls` (contract functions) from `key` with consecutive nonces, then wait
    for every receipt; each must succeed."""
    acct = Account.from_key(key)
    nonce = w3.eth.get_transaction_count(acct.address, "pending")
    hashes = []
    for fn in calls:
        tx = fn.build_transaction(
            {"from": acct.address, "nonce": nonce, "chainId": w3.eth.chain_id, "gas": 1_500_000}
        )
        hashes.append(w3.eth.send_raw_transaction(acct.sign_transaction(tx).raw_transaction))
        nonce += 1
    receipts = [w3.eth.wait_for_transaction_receipt(h, timeout=120) for h in hashes]
    failed = [i for i, r in enumerate(receipts) if r["status"] != 1]
    if failed:
        raise RuntimeError(f"transactions {failed} of {len(calls)} reverted")
    return receipts


def _specs(units: int) -> list[specs.JobSpec]:
    """`units` jobs that differ by their seed (different batches, initial states and roots)."""
    base = json.loads(rk.SPEC.read_text())
    out = []
    for i in range(units):
        obj = dict(base, steps=STEPS, checkpoint_every=EVERY, seed=1000 + i)
        out.append(specs.parse_spec(obj))
    return out


def honest_roots(units: int) -> list[bytes]:
    """The checkpoint root an honest run of each job commits (what a cheat's must differ from:
    a flipped element can vanish, e.g. behind a ReLU, and leave the run right)."""
    data = datasets.load_dataset(json.loads(rk.SPEC.read_text())["dataset"]["name"])
    return [
        Computation(Engine(spec, data), spec.steps, spec.checkpoint_every).checkpoint_commit()
        for spec in _specs(units)
    ]


def post_jobs(w3: Web3, addrs: dict, blobs: Path, units: int) -> list[int]:
    """Post `units` jobs as one submitter would (spec published, reward escrowed, each job
    posted with its dispute config), without a submitter process per job: the solvers and the
    verifier move every unit along themselves (their keeper steps)."""
    key = dev_private_key(SUBMITTER)
    manager = rk.contract(w3, "JobManager", addrs["JobManager"])
    token = rk.contract(w3, "TestToken", addrs["Token"])
    store = BlobStore(LocalDirBackend(blobs))
    data = datasets.load_dataset(json.loads(rk.SPEC.read_text())["dataset"]["name"])
    now = w3.eth.get_block("latest")["timestamp"]
    posts = [token.functions.approve(manager.address, REWARD * units)]
    for spec in _specs(units):
        store.put(spec.canonical_bytes())
        initial = state_root(Engine(spec, data).initial_state())
        # posted with its dispute config, in one transaction (PROTOCOL §7.2)
        params = (
            spec.spec_hash(), data.root(), initial, spec.steps, spec.checkpoint_every,
            (0, 0, 0), REWARD, FEE, now + 60, 120, job_graph(spec, data.n).config.hash(),
        )  # fmt: skip
        posts.append(manager.functions.postJob(params))
    receipts = _send_all(w3, key, posts)[1:]
    posted = manager.events.JobPosted()
    return [int(posted.process_receipt(r, errors=DISCARD)[0]["args"]["jobId"]) for r in receipts]


def run(work: Path, units: int = UNITS, cheats: int = CHEATS, timeout_s: float = TIMEOUT_S):
    """One trial; the row of figures (see the module docstring)."""
    started = time.monotonic()
    work.mkdir(parents=True, exist_ok=True)
    with SilentServer() as silent, rk.chain() as (url, w3):
        addrs = rk.deploy(w3, MANAGER_CONFIG, clock_budget=CLOCK_BUDGET)
        behind = ["--public-blob-url", silent.url]
        parties, cheat = PARTIES, PARTIES["cheat"]
        submitter = rk.Party("submitter", "submitter", SUBMITTER)
        rk.fund(w3, addrs["Token"], dev_private_key(0), [submitter, *parties.values()])
        manager = rk.contract(w3, "JobManager", addrs["JobManager"])
        registry = rk.contract(w3, "NodeRegistry", addrs["NodeRegistry"])
        game = rk.contract(w3, "DisputeGame", addrs["Arbiter"])
        with rk.agents(work, url, addrs["JobManager"]) as ag:
            ag.start(parties["verifier"])
            ag.start(parties["cheat"], *behind)
            rk.wait_registered(registry, ag, [parties["verifier"], parties["cheat"]])
            jobs = post_jobs(w3, addrs, work / "blobs", units)
            names = (parties["verifier"].name, cheat.name)

            def cheat_assigned() -> int:
                ev = manager.events.UnitAssigned().get_logs(from_block=0)
                return sum(1 for e in ev if e["args"]["solver"] == cheat.address)

            # the cheat alone claims first: its stake covers `cheats` units; the honest solver
            # then takes the rest and the cheats' retrains
            rk.wait_for(
                "the cheat's assignments", lambda: cheat_assigned() >= cheats, 120, ag, names
            )
            ag.start(parties["honest"], *behind)
            names += (parties["honest"].name,)
            rk.wait_for(
                f"all {units} jobs completed",
                lambda: all(manager.functions.getJob(j).call()[4] == COMPLETED for j in jobs),
                timeout_s,
                ag,
                names,
            )
            honest = dict(zip(jobs, honest_roots(units), strict=True))
            row = _figures(manager, registry, game, parties, honest, silent.accepted)
            row["tracebacks"] = [p.name for p in parties.values() if "Traceback" in ag.log(p.name)]
    row["wall_s"] = round(time.monotonic() - started, 1)
    return row


def _figures(manager, registry, game, parties, honest_root, accepted) -> dict[str, Any]:
    """The trial's figures; `honest_root` maps each job to its honest checkpoint root."""
    verifier, cheat = parties["verifier"].address, parties["cheat"].address
    jobs = list(honest_root)

    def logs(contract, name: str) -> list:
        return list(getattr(contract.events, name)().get_logs(from_block=0))

    drawn = [e for e in logs(manager, "VerifiersDrawn") if verifier in e["args"]["verifiers"]]
    attested = [e for e in logs(manager, "Attested") if e["args"]["verifier"] == verifier]
    opened = [e for e in logs(manager, "ChallengeOpened") if e["args"]["challenger"] == verifier]
    resolved = {
        int(e["args"]["gameId"]): e["args"]["challengerWon"]
        for e in logs(manager, "DisputeResolved")
    }
    # the attempts the cheat committed wrong work in (unit id, attempt's commitment)
    wrong = {
        (int(e["args"]["unitId"]), bytes(e["args"]["checkpointRoot"]))
        for e in logs(manager, "CheckpointsCommitted")
        if e["args"]["solver"] == cheat
        and bytes(e["args"]["checkpointRoot"]) != honest_root[int(e["args"]["unitId"]) >> 32]
    }
    wrong_units = {uid for uid, _ in wrong}
    finals = logs(manager, "UnitFinalized")
    slashed = [e["args"]["node"] for e in logs(registry, "NodeSlashed")]
    penalised = [e["args"]["verifier"] for e in logs(manager, "VerifierPenalised")]
    games = {int(e["args"]["gameId"]) for e in opened}
    # how much of its window the verifier had left when it answered an undisputed attempt
    disputed = {int(e["args"]["unitId"]) for e in opened}
    margins = []
    for a in attested:
        uid = int(a["args"]["unitId"])
        if uid in disputed:
            continue
        draw = max(
            (
                d
                for d in drawn
                if int(d["args"]["unitId"]) == uid and d["blockNumber"] <= a["blockNumber"]
            ),
            key=lambda d: d["blockNumber"],
        )
        at = manager.w3.eth.get_block(a["blockNumber"])["timestamp"]
        margins.append(int(draw["args"]["challengeDeadline"]) - at)
    ended = [e["args"] for e in logs(game, "GameResolved") if int(e["args"]["gameId"]) in games]
    honest = {parties["honest"].address, verifier}
    return {
        "units": len(jobs),
        "cheat_assignments": sum(
            1 for e in logs(manager, "UnitAssigned") if e["args"]["solver"] == cheat
        ),
        # the cheat's flipped element changed its commitment in these (else it did right work)
        "cheats": len(wrong),
        "jobs_completed": sum(
            1 for j in jobs if manager.functions.getJob(j).call()[4] == COMPLETED
        ),
        "unit_attempts_drawn_to_the_verifier": len(drawn),
        "attested_in_window": len(attested),
        "window_left_at_attestation_s": (
            {
                "min": min(margins),
                "median": sorted(margins)[len(margins) // 2],
                "of": MANAGER_CONFIG["verifyWindow"],
            }
            if margins
            else None
        ),
        "verifier_penalised": penalised.count(verifier),
        "games_opened_by_the_verifier": len(games),
        "games_won_by_the_verifier": sum(1 for g in games if resolved.get(g) is True),
        # a game the verifier lost on its own clock: what a stalled round loop would cause
        "games_lost_by_the_verifiers_clock": sum(
            1 for g in ended if g["byTimeout"] and not g["challengerWon"]
        ),
        "games_won_on_the_cheats_clock": sum(
            1 for g in ended if g["byTimeout"] and g["challengerWon"]
        ),
        "cheat_paid_for_right_work": sum(
            1
            for e in finals
            if e["args"]["solver"] == cheat and int(e["args"]["unitId"]) not in wrong_units
        ),
        "cheat_paid_for_wrong_work": sum(
            1
            for e in finals
            if e["args"]["solver"] == cheat and int(e["args"]["unitId"]) in wrong_units
        ),
        "cheat_slashed": slashed.count(cheat),
        "honest_slashed_or_penalised": sorted(honest & set(slashed + penalised)),
        "silent_connections_accepted": accepted,
    }


def survived(row: dict[str, Any]) -> bool:
    """Every unit answered in its window, every game won, every job done, nobody honest hurt."""
    return (
        row["jobs_completed"] == row["units"]
        and row["verifier_penalised"] == 0
        and row["games_won_by_the_verifier"] == row["games_opened_by_the_verifier"] == row["cheats"]
        and row["games_lost_by_the_verifiers_clock"] == 0
        and row["cheat_paid_for_wrong_work"] == 0
        and not row["honest_slashed_or_penalised"]
        and not row["tracebacks"]
    )
