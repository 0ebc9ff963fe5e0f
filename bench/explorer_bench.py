"""The explorer under load (issue #44): 200 jobs and 1,000 units on a chain; how fast the jobs
page answers and whether the server's memory stays bounded while it serves.

A private Anvil with every contract (the real dispute game, a RoundManager); from one dev
account, 100 jobs on the JobManager (one unit each) and 100 decomposed jobs on the RoundManager
of 9 shards (round 0's 9 unit jobs each: 900 units), sent as signed transactions in one batch
per kind. Then `python -m agents explore` as a user starts it; once its index has read them all
(the jobs page lists 200), the jobs page is asked for 1,000 times in a row, each timed on the
client, the server's resident memory read (psutil) along the way, and a job, a decomposed job
and a node page timed too. Writes bench/results/explorer.json.

The issue's targets: the jobs page in under 300 ms, memory bounded. Nothing here asserts them:
the JSON says what was measured beside them.
"""

from __future__ import annotations

import json
import platform
import statistics
import sys
import time
from pathlib import Path

import psutil
from eth_account import Account
from web3 import Web3

from agents.core.chain import AnvilConfig, dev_private_key, local_anvil
from agents.core.deploy import DEFAULT_ABI_DIR, deploy_all, load_artifact
from tools.browser import explorer

OUT = Path("bench/results/explorer.json")
PLAIN_JOBS = 100
DECOMPOSED_JOBS = 100
SHARDS = 9
REQUESTS = 1_000
TOKEN = 10**18
TARGET_MS = 300


def _send_all(w3: Web3, key: str, calls: list) -> float:
    """Sign `calls` with consecutive nonces, send them all, wait for every receipt; seconds."""
    acct = Account.from_key(key)
    nonce = w3.eth.get_transaction_count(acct.address, "pending")
    started = time.monotonic()
    hashes = []
    for i, call in enumerate(calls):
        tx = call.build_transaction(
            {
                "from": acct.address,
                "nonce": nonce + i,
                "chainId": w3.eth.chain_id,
                "gas": 30_000_000,
            }
        )
        hashes.append(w3.eth.send_raw_transaction(acct.sign_transaction(tx).raw_transaction))
    for h in hashes:
        if w3.eth.wait_for_transaction_receipt(h, timeout=300)["status"] != 1:
            raise RuntimeError(f"transaction {h.hex()} reverted")
    return time.monotonic() - started


def populate(w3: Web3, addresses: dict[str, str]) -> dict:
    key = dev_private_key(0)
    me = Account.from_key(key).address
    token = w3.eth.contract(address=addresses["Token"], abi=load_artifact("TestToken")["abi"])
    manager = w3.eth.contract(
        address=addresses["JobManager"], abi=load_artifact("JobManager")["abi"]
    )
    rm = w3.eth.contract(
        address=addresses["RoundManager"], abi=load_artifact("RoundManager")["abi"]
    )
    total = 10**9 * TOKEN
    _send_all(
        w3,
        key,
        [
            token.functions.mint(me, total),
            token.functions.approve(manager.address, total),
            token.functions.approve(rm.address, total),
        ],
    )
    now = int(w3.eth.get_block("latest")["timestamp"])
    plain = []
    for i in range(PLAIN_JOBS):
        root = (i + 1).to_bytes(32, "big")
        plain.append(
            manager.functions.postJob(
                (
                    root,
                    root,
                    root,
                    100,
                    10,
                    (0, 0, 0),
                    100 * TOKEN,
                    10 * TOKEN,
                    now + 20 * 3600,
                    3600,
                    root,  # the dispute config's hash (a stand-in: these jobs are only listed)
                )
            )
        )
    decomposed = []
    for i in range(DECOMPOSED_JOBS):
        root = (10_000 + i).to_bytes(32, "big")
        decomposed.append(
            rm.functions.postJob(
                (
                    root,
                    root,
                    root,
                    root,
                    2,
                    SHARDS,
                    50,
                    10,
                    1_000,
                    (0, 0, 0),
                    100 * TOKEN,
                    10 * TOKEN,
                    5 * TOKEN,
                    3600,
                    root,
                    bytes(32),  # version 2: no aggregation graph
                    bytes(32),
                    0,
                )
            )
        )
    plain_s = _send_all(w3, key, plain)
    decomposed_s = _send_all(w3, key, decomposed)
    units = int(manager.functions.jobCount().call())
    return {
        "plain_jobs": PLAIN_JOBS,
        "decomposed_jobs": DECOMPOSED_JOBS,
        "shards": SHARDS,
        "units": units,
        "post_plain_s": round(plain_s, 1),
        "post_decomposed_s": round(decomposed_s, 1),
    }


def _timed(e, path: str) -> tuple[float, int, str]:
    started = time.perf_counter()
    status, body = e.get(path)
    return (time.perf_counter() - started) * 1000, status, body


def _stats(ms: list[float]) -> dict:
    s = sorted(ms)
    return {
        "n": len(s),
        "median": round(statistics.median(s), 2),
        "p95": round(s[int(0.95 * (len(s) - 1))], 2),
        "max": round(s[-1], 2),
        "mean": round(statistics.fmean(s), 2),
    }


def measure(url: str, deployment: Path, log: Path) -> dict:
    with explorer(url, deployment, log, ready_s=120) as e:
        started = time.monotonic()
        listed = 0
        while listed < PLAIN_JOBS + DECOMPOSED_JOBS:
            body = e.get("/")[1]
            listed = body.count('<tr data-job="')
            if time.monotonic() - started > 600:
                raise RuntimeError(f"the explorer listed {listed} jobs after 600 s")
            time.sleep(0.5)
        synced_s = time.monotonic() - started
        proc = psutil.Process(e.proc.pid)
        rss = {"after_sync": proc.memory_info().rss}
        jobs_ms, open_ms = [], []
        for i in range(REQUESTS):
            ms, status, _ = _timed(e, "/")
            assert status == 200
            jobs_ms.append(ms)
            if i % 10 == 0:
                open_ms.append(_timed(e, "/?status=open")[0])
            if i + 1 in (100, 500, REQUESTS):
                rss[f"after_{i + 1}_requests"] = proc.memory_info().rss
        job_ms = [_timed(e, "/job/1")[0] for _ in range(20)]
        decomposed_ms = [_timed(e, "/decomposed/1")[0] for _ in range(20)]
        return {
            "index_synced_s": round(synced_s, 1),
            "listed_jobs": listed,
            "jobs_page_ms": _stats(jobs_ms),
            "jobs_page_open_filter_ms": _stats(open_ms),
            "job_page_ms": _stats(job_ms),
            "decomposed_page_ms": _stats(decomposed_ms),
            "rss_mib": {k: round(v / 2**20, 1) for k, v in rss.items()},
            "rss_growth_over_requests_mib": round(
                (rss[f"after_{REQUESTS}_requests"] - rss["after_100_requests"]) / 2**20, 1
            ),
        }


def main() -> int:
    with local_anvil(AnvilConfig(extra_args=("--gas-limit", "100000000"))) as url:
        w3 = Web3(Web3.HTTPProvider(url, request_kwargs={"timeout": 120}))
        addresses = deploy_all(
            w3, dev_private_key(0), DEFAULT_ABI_DIR, {"dispute_game": True, "round_manager": True}
        )
        chain = populate(w3, addresses)
        deployment = Path("build/explorer-bench/deployment.json")
        deployment.parent.mkdir(parents=True, exist_ok=True)
        deployment.write_text(json.dumps({"rpc_url": url, "block": 0, "contracts": addresses}))
        got = measure(url, deployment, deployment.parent / "explore.log")
    result = {
        "bench": "explorer",
        "what": "python -m agents explore on a chain of 200 jobs (100 JobManager jobs, 100 "
        "decomposed jobs of 9 shards) and 1,000 units; the jobs page asked "
        f"{REQUESTS} times in a row, timed on the client; the server's RSS (psutil)",
        "machine": {"cpus": psutil.cpu_count(), "python": platform.python_version()},
        "chain": chain,
        **got,
        "target": {
            "jobs_page_ms": TARGET_MS,
            "jobs_page_p95_under_target": got["jobs_page_ms"]["p95"] < TARGET_MS,
        },
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
