"""The network under load (issue #45): `python -m bench.load_bench` (in `make bench`).

A private Anvil with 1 s blocks, the protocol deployed as `make demo` deploys it (the real
dispute game, the attestation court) but with forced errors on at the default rate and a verify
window that fits the load, and eight agents started as `python -m agents` processes: 4 solvers,
3 verifiers, 1 whistleblower. Then, in turn, N jobs of the digits MLP are submitted at once by
one `submit --count N --no-follow` process, and the bench waits until every job completed:

- `warm-up`, N = 200: the deployment's first jobs, each on a record of its own (PROTOCOL §6.10:
  a settled job's record takes a new job only `recordRetention` after its deadline). Reported,
  but it is not the steady state: every record slot is written for the first time.
- chain time then jumps past `recordRetention` (8 days), so the records are free again, and the
  measured runs take recycled records, as a network that has run for a while does:
  `N=50`, `N=200`, and `N=200, solver killed`: solver0 killed with kill -9 once a quarter of
  the jobs completed, restarted 20 s later from its data folder. (Between runs, the same jump.)

The agents run through all the runs (their memory over some 650 jobs is the flatness check).
Per run, from the chain and the agents' logs and records:

- jobs completed, jobs per hour (from the first post to the last completion, wall clock), the
  latency of each job (chain time from its JobPosted block to its JobCompleted block);
- every transaction the agents and the submitter sent (all senders but the deployer): count,
  reverted ones with their gas, function and sender, the keeper steps' reverts apart, gas per
  completed job and by function; the single-job figure it is compared with is the steady
  lifecycle of bench/results/contracts.json (two verifiers, a recycled record);
- ERROR lines per role (JSON log lines at level error), peak RSS per role (/proc, sampled every
  2 s), duplicates (tools.devnet.audit_sends: a mined transaction that is no recorded intent's,
  or two for one intent), tokens stuck (what the manager and the registry hold beyond what the
  books say they owe, escrow of the run's jobs left, stake still locked once all are done).

And the submission itself, on a chain of its own: one `submit --count 200 --no-follow` against
`submit --no-follow` runs one after another (SEQUENTIAL_SAMPLE of them, timed; 200 of them take
200 times their mean: a process per job, each with its start-up, approval and posting).

Writes bench/results/load.json after every run (a run cut short by `--run-timeout` keeps what it
measured; `complete` says whether the plan ran to its end). Takes long on a shared 2-core machine
(the report says how long): `--warm-up 0` drops the warm-up (the first run's jobs then take new
records, and each run's `gas.lifecycle_reference` weights contracts.json's fresh and steady
figures by the records its jobs took), `--sizes` and `--killed` set the runs' N, `--work` keeps
the agents' folders and logs.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "roles"))  # rolekit: the one "job with N processes" kit

import rolekit as rk  # noqa: E402
from web3 import Web3  # noqa: E402

from agents.core.bindings import bind  # noqa: E402
from agents.core.chain import AnvilConfig, connect, dev_private_key, local_anvil  # noqa: E402
from agents.core.deploy import DEFAULT_ABI_DIR, deploy_all  # noqa: E402
from scripts.demo import deploy_params  # noqa: E402
from tools.devnet import Party, audit_sends, fund  # noqa: E402

OUT = REPO / "bench" / "results" / "load.json"
CONTRACTS = REPO / "bench" / "results" / "contracts.json"
SPEC = REPO / "examples" / "digits-mlp.json"
TOKEN = 10**18
REWARD, FEE = "10", "2.75"  # the jobs: reward 10, fee 2.75 (S = 143.8 per drawn unit)
CLAIM_WINDOW_S = 20
#: Deadlines that fit the load on 2 cores: a verifier drawn for many units at once replays them
#: one after another, and must seal each within the window; forced errors at the default rate.
MANAGER_CONFIG = {
    "verifyWindow": 240,
    "revealWindow": 30,
    "forcedErrorBps": 500,
    "lazySlashFactor": 68,
}
#: Stakes: a verifier locks S = 143.8 for each unit it is drawn for, at once for every unit
#: whose window runs; a solver its collateral (the reward) for each unit it holds.
SOLVER_STAKE, VERIFIER_STAKE, WHISTLEBLOWER_STAKE = 2_000, 30_000, 20
SOLVERS = [Party(f"solver{i}", "solver", 2 + i, ["--stake", str(SOLVER_STAKE)]) for i in range(4)]
VERIFIERS = [
    Party(f"verifier{i}", "verifier", 6 + i, ["--stake", str(VERIFIER_STAKE)]) for i in range(3)
]
WHISTLEBLOWER = Party("whistleblower", "whistleblower", 9, ["--stake", str(WHISTLEBLOWER_STAKE)])
NODES = [*SOLVERS, *VERIFIERS, WHISTLEBLOWER]
SUBMIT = Party("submitter", "submit", 1)
KILLED = SOLVERS[0]
RESTART_AFTER_S = 20
SEQUENTIAL_SAMPLE = 10
KEEPER_FUNCTIONS = (
    "closeClaims",
    "selectAssignee",
    "drawVerifiers",
    "finalize",
    "settleDispute",
    "expireDataRequest",
)
DAY = 86_400


@dataclass
class Run:
    """One batch of N jobs through the running agents."""

    name: str
    n: int
    kill: bool = False
    first_block: int = 0
    last_block: int = 0
    started: float = 0.0
    submit_s: float = 0.0
    ended: float = 0.0
    jobs: list[int] = field(default_factory=list)
    completed: dict[int, int] = field(default_factory=dict)  # job -> block of JobCompleted
    rss: dict[str, int] = field(default_factory=dict)  # role name -> peak RSS (KiB)
    rss_series: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    log_from: dict[str, int] = field(default_factory=dict)  # agent -> log offset at the start
    killed_at: float | None = None
    restarted_at: float | None = None


def rss_kib(pid: int) -> int:
    """The resident set of process `pid` (KiB), 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return 0
    return 0


class Sampler:
    """Samples every agent's RSS every 2 s into the current run."""

    def __init__(self, agents: rk.Agents) -> None:
        self.agents = agents
        self.run: Run | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self) -> None:
        while not self.stop.wait(2.0):
            run = self.run
            if run is None:
                continue
            for name, proc in list(self.agents.procs.items()):
                if name.startswith("submit"):
                    continue
                kib = rss_kib(proc.pid)
                if kib:
                    run.rss_series[name].append(kib)
                    run.rss[name] = max(run.rss.get(name, 0), kib)


class Network:
    """The chain, the deployment and the eight agents."""

    def __init__(self, url: str, w3: Web3, work: Path) -> None:
        self.url, self.w3, self.work = url, w3, work
        work.mkdir(parents=True, exist_ok=True)
        params = deploy_params(MANAGER_CONFIG)
        self.addrs = deploy_all(w3, dev_private_key(0), DEFAULT_ABI_DIR, params)
        rk.LENSES[self.addrs["JobManager"]] = self.addrs["JobLens"]
        fund(w3, self.addrs["Token"], dev_private_key(0), [SUBMIT, *NODES])
        token = rk.contract(w3, "TestToken", self.addrs["Token"])
        for p in [SUBMIT, *VERIFIERS, *SOLVERS]:  # beyond the kit's 1 000
            mint = token.functions.mint(p.address, 40_000 * TOKEN)
            tx = mint.transact({"from": Web3.to_checksum_address(rk_deployer())})
            w3.eth.wait_for_transaction_receipt(tx)
        self.manager = rk.contract(w3, "JobManager", self.addrs["JobManager"])
        self.registry = rk.contract(w3, "NodeRegistry", self.addrs["NodeRegistry"])
        self.agents = rk.Agents(work, url, self.addrs["JobManager"], self.addrs["JobLens"])
        try:
            for p in NODES:
                self.agents.start(p)
            rk.wait_registered(self.registry, self.agents, NODES, timeout=300)
        except BaseException:
            self.agents.stop_all()
            raise
        self.sampler = Sampler(self.agents)

    def all_jobs(self) -> list[int]:
        """Every job posted on this deployment (JobPosted)."""
        return [
            int(e["args"]["jobId"]) for e in self.manager.events.JobPosted().get_logs(from_block=0)
        ]

    def online(self) -> bool:
        return all(self.registry.functions.isOnline(p.address).call() for p in NODES)

    def jump(self, seconds: int) -> None:
        """Chain time `seconds` on (records free again), then wait for every node's heartbeat."""
        self.w3.provider.make_request("evm_increaseTime", [seconds])
        self.w3.provider.make_request("evm_mine", [])
        rk.wait_for("heartbeats after the jump", self.online, 300, self.agents,
                    tuple(p.name for p in NODES))  # fmt: skip

    def submit(self, n: int, run_dir: Path, extra: tuple[str, ...] = ()) -> subprocess.Popen:
        spec = str(SPEC)
        return self.agents.start(
            Party(f"submit-{run_dir.name}", "submit", SUBMIT.key_index),
            "--spec", spec, "--count", str(n), "--no-follow", "--reward", REWARD,
            "--verification-fee", FEE, "--claim-window", str(CLAIM_WINDOW_S),
            "--compute-time", "3600", *extra,
        )  # fmt: skip

    def run(self, run: Run, timeout_s: float) -> None:
        w3, agents = self.w3, self.agents
        run.first_block = w3.eth.block_number + 1
        run.log_from = {p.name: len(agents.log(p.name)) for p in NODES}
        self.sampler.run = run
        run.started = time.monotonic()
        proc = self.submit(run.n, self.work / run.name)
        name = f"submit-{run.name}"
        rk.wait_for(f"{run.name}: submission", lambda: proc.poll() is not None, 600, agents,
                    tuple(p.name for p in NODES))  # fmt: skip
        run.submit_s = time.monotonic() - run.started
        assert proc.returncode == 0, agents.log(name)[-2000:]
        posted = self.manager.events.JobPosted().get_logs(from_block=run.first_block)
        run.jobs = [int(e["args"]["jobId"]) for e in posted]
        assert len(run.jobs) == run.n, f"{run.name}: {len(run.jobs)} jobs posted of {run.n}"
        jobs = set(run.jobs)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and len(run.completed) < run.n:
            for e in self.manager.events.JobCompleted().get_logs(from_block=run.first_block):
                job = int(e["args"]["jobId"])
                if job in jobs:
                    run.completed.setdefault(job, int(e["blockNumber"]))
            if run.kill and run.killed_at is None and len(run.completed) >= run.n // 4:
                agents.kill9(KILLED.name)
                run.killed_at = time.monotonic() - run.started
            since = time.monotonic() - run.started
            if run.killed_at is not None and run.restarted_at is None:
                restart = since >= run.killed_at + RESTART_AFTER_S
                if restart:
                    agents.start(KILLED)
                    run.restarted_at = since
            for p in NODES:
                proc_p = agents.procs[p.name]
                if proc_p.poll() is not None and not (run.kill and p is KILLED):
                    raise AssertionError(f"{p.name} exited:\n{agents.log(p.name)[-2000:]}")
            time.sleep(2.0)
        run.ended = time.monotonic()
        run.last_block = w3.eth.block_number
        self.sampler.run = None

    def stop(self) -> None:
        self.sampler.stop.set()
        self.agents.stop_all()


def rk_deployer() -> str:
    from eth_account import Account

    return Account.from_key(dev_private_key(0)).address


# --- what a run shows ------------------------------------------------------------------------


def selectors(w3: Web3, names: list[str]) -> dict[bytes, str]:
    """4-byte selector -> function name of the protocol's contracts the agents call."""
    from agents.core.deploy import load_artifact

    out: dict[bytes, str] = {}
    for name in names:
        for item in load_artifact(name)["abi"]:
            if item.get("type") == "function":
                sig = f"{item['name']}({','.join(_type(i) for i in item['inputs'])})"
                out[bytes(Web3.keccak(text=sig)[:4])] = item["name"]
    return out


def _type(item: dict) -> str:
    if item["type"].startswith("tuple"):
        inner = ",".join(_type(c) for c in item["components"])
        return f"({inner}){item['type'][5:]}"
    return item["type"]


def transactions(w3: Web3, first: int, last: int) -> list[dict[str, Any]]:
    """Every transaction mined in blocks first..last: sender, function, status, gas."""
    names = selectors(w3, ["JobManager", "NodeRegistry", "TestToken", "DisputeGame",
                           "ForcedErrorJudge", "AttestationCourt"])  # fmt: skip
    out = []
    for n in range(first, last + 1):
        for tx in w3.eth.get_block(n, full_transactions=True)["transactions"]:
            receipt = w3.eth.get_transaction_receipt(tx["hash"])
            data = bytes(tx["input"])
            out.append({
                "from": tx["from"],
                "fn": names.get(data[:4], data[:4].hex()),
                "status": int(receipt["status"]),
                "gas": int(receipt["gasUsed"]),
                "block": n,
            })  # fmt: skip
    return out


def error_lines(agents: rk.Agents, name: str, offset: int) -> list[str]:
    """The JSON log lines at level error that `name` wrote from `offset` on."""
    out = []
    for line in agents.log(name)[offset:].splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if obj.get("level") == "error":
            out.append(obj.get("msg", "")[:300])
    return out


def stuck(net: Network, run: Run) -> dict[str, int]:
    """What nobody is owed, once the run ended: the manager's balance beyond the escrow, open
    bonds and credits of the deployment's jobs and parties and the jackpot (tokens the books do
    not name), the run's jobs' escrow left and the nodes' stake still locked (both 0 once every
    job completed), the registry's balance beyond stakes and unbonding."""
    m = bind(net.w3, "JobManager", net.addrs["JobManager"]).functions
    r = bind(net.w3, "NodeRegistry", net.addrs["NodeRegistry"]).functions
    token = bind(net.w3, "TestToken", net.addrs["Token"]).functions
    accounts = [SUBMIT.address, *(p.address for p in NODES)]
    credits = sum(m.credits(a).call() for a in accounts)
    jobs = net.all_jobs()
    escrow_all = sum(m.getJob(j).call().escrow for j in jobs)
    bonds = sum(m.getDispute(j << 32).call().bond for j in jobs)
    nodes = [r.getNode(p.address).call() for p in NODES]
    books = escrow_all + bonds + credits + m.jackpot().call()
    return {
        "manager_unaccounted": token.balanceOf(net.addrs["JobManager"]).call() - books,
        "registry_unaccounted": token.balanceOf(net.addrs["NodeRegistry"]).call()
        - sum(n.stake + n.unbonding for n in nodes),
        "run_escrow_left": sum(m.getJob(j).call().escrow for j in run.jobs),
        "stake_locked": sum(n.locked for n in nodes),
    }


def report(net: Network, run: Run, lifecycle_gas: int) -> dict[str, Any]:
    w3 = net.w3
    txs = transactions(w3, run.first_block, run.last_block)
    deployer = rk_deployer().lower()
    sent = [t for t in txs if t["from"].lower() != deployer]
    role_of = {p.address.lower(): p.name for p in [SUBMIT, *NODES]}
    reverted = [t for t in sent if t["status"] == 0]
    keeper_reverted = [t for t in reverted if t["fn"] in KEEPER_FUNCTIONS]
    gas = sum(t["gas"] for t in sent)
    done = len(run.completed)
    by_fn: Counter = Counter()
    count_fn: Counter = Counter()
    for t in sent:
        by_fn[t["fn"]] += t["gas"]
        count_fn[t["fn"]] += 1
    latency = []
    for job, block in run.completed.items():
        posted = net.manager.events.JobPosted().get_logs(
            from_block=run.first_block, argument_filters={"jobId": job}
        )[0]["blockNumber"]
        t0 = w3.eth.get_block(posted)["timestamp"]
        latency.append(w3.eth.get_block(block)["timestamp"] - t0)
    wall = run.ended - run.started
    last_done = max(run.completed.values(), default=run.first_block)
    errors = {p.name: error_lines(net.agents, p.name, run.log_from.get(p.name, 0)) for p in NODES}
    dirs = {p.name: net.work / p.name for p in [*NODES]}
    dirs[f"submit-{run.name}"] = net.work / f"submit-{run.name}"
    dups = audit_sends(w3, run.first_block, dirs)
    quarter = {name: s[: max(1, len(s) // 4)] for name, s in run.rss_series.items()}
    per_job = gas / done if done else None
    return {
        "n": run.n,
        "solver_killed": run.kill,
        "killed_at_s": run.killed_at,
        "restarted_at_s": run.restarted_at,
        "jobs_posted": len(run.jobs),
        "jobs_completed": done,
        "every_job_completed": done == run.n,
        "submission_s": round(run.submit_s, 1),
        "wall_s": round(wall, 1),
        "jobs_per_hour": round(done / wall * 3600, 1) if wall else None,
        "latency_s": {
            "median": statistics.median(latency) if latency else None,
            "p90": sorted(latency)[int(0.9 * (len(latency) - 1))] if latency else None,
            "max": max(latency, default=None),
        },
        "chain_blocks": [run.first_block, last_done],
        "transactions": len(sent),
        "reverted": {
            "count": len(reverted),
            "gas": sum(t["gas"] for t in reverted),
            "share_of_transactions": round(len(reverted) / len(sent), 4) if sent else 0,
            "keeper_steps": len(keeper_reverted),
            "each": [
                {
                    "fn": t["fn"],
                    "by": role_of.get(t["from"].lower(), t["from"]),
                    "gas": t["gas"],
                    "block": t["block"],
                }
                for t in reverted
            ],  # fmt: skip
        },
        "gas": {
            "total": gas,
            "per_completed_job": round(per_job) if per_job else None,
            "single_job_lifecycle": lifecycle_gas,
            "ratio_to_lifecycle": round(per_job / lifecycle_gas, 3) if per_job else None,
            "by_function": dict(by_fn.most_common()),
            "count_by_function": dict(count_fn.most_common()),
        },
        "error_lines": {name: len(lines) for name, lines in errors.items()},
        "error_samples": {name: lines[:5] for name, lines in errors.items() if lines},
        "peak_rss_mib": {name: round(kib / 1024, 1) for name, kib in sorted(run.rss.items())},
        "rss_first_quarter_peak_mib": {
            name: round(max(s) / 1024, 1) for name, s in sorted(quarter.items()) if s
        },
        "duplicates": len(dups),
        "duplicate_samples": dups[:5],
        "stuck": stuck(net, run),
    }


# --- submitting: one process for 200 jobs against a process per job -----------------------------


def submission_speed(work: Path, n: int, sample: int) -> dict[str, Any]:
    """On a chain of its own (no agents: nothing but the posting is timed)."""
    with local_anvil(AnvilConfig(block_time=1, accounts=20)) as url:
        w3 = connect(url)
        addrs = deploy_all(w3, dev_private_key(0), DEFAULT_ABI_DIR, deploy_params(MANAGER_CONFIG))
        fund(w3, addrs["Token"], dev_private_key(0), [SUBMIT])
        token = rk.contract(w3, "TestToken", addrs["Token"])
        tx = token.functions.mint(SUBMIT.address, 40_000 * TOKEN).transact({"from": rk_deployer()})
        w3.eth.wait_for_transaction_receipt(tx)
        work.mkdir(parents=True, exist_ok=True)
        agents = rk.Agents(work, url, addrs["JobManager"], addrs["JobLens"])
        common = ("--spec", str(SPEC), "--no-follow", "--reward", REWARD, "--verification-fee",
                  FEE, "--claim-window", "3600", "--compute-time", "3600")  # fmt: skip
        try:
            t0 = time.monotonic()
            proc = agents.start(Party("batch", "submit", SUBMIT.key_index), *common,
                                "--count", str(n))  # fmt: skip
            assert proc.wait(timeout=1800) == 0, agents.log("batch")[-2000:]
            batch_s = time.monotonic() - t0
            one = []
            for i in range(sample):
                t0 = time.monotonic()
                # its own data folder: a submitter that finds the spec posted follows that job
                proc = agents.start(Party(f"one-{i}", "submit", SUBMIT.key_index), *common)
                assert proc.wait(timeout=300) == 0, agents.log(f"one-{i}")[-2000:]
                one.append(time.monotonic() - t0)
            manager = rk.contract(w3, "JobManager", addrs["JobManager"])
            posted = manager.functions.jobCount().call()
        finally:
            agents.stop_all()
    sequential = statistics.mean(one) * n
    return {
        "jobs": n,
        "one_process_s": round(batch_s, 1),
        "sequential_runs_measured": sample,
        "sequential_run_s": {
            "mean": round(statistics.mean(one), 2),
            "each": [round(s, 2) for s in one],
        },
        "sequential_estimate_s": round(sequential, 1),
        "speedup": round(sequential / batch_s, 1),
        "jobs_posted": posted,
    }


def lifecycle_reference(fresh: int, recycled: int) -> dict[str, Any]:
    """The single-job lifecycle a run's jobs compare with: bench/results/contracts.json's steady
    figure (two verifiers) for a job on a recycled record, its fresh one for a job whose record
    is written for the first time, weighted by how many of each the run's jobs took."""
    figures = json.loads(CONTRACTS.read_text())
    warm = figures["lifecycle_warm"]["total_gas"]
    cold = figures["lifecycle"]["total_gas"]
    n = fresh + recycled
    return {
        "steady_recycled_record": warm,
        "fresh_record": cold,
        "jobs_on_fresh_records": fresh,
        "jobs_on_recycled_records": recycled,
        "weighted": round((fresh * cold + recycled * warm) / n) if n else warm,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--sizes",
        type=int,
        nargs="*",
        default=[50, 200],
        help="the measured runs' N",
    )
    parser.add_argument(
        "--killed", type=int, default=None, help="N of the solver-killed run (the last size)"
    )
    parser.add_argument(
        "--warm-up", type=int, default=200, help="jobs of the warm-up run (0: none)"
    )
    parser.add_argument("--speed-jobs", type=int, default=200, help="jobs of the submission test")
    parser.add_argument(
        "--sequential",
        type=int,
        default=SEQUENTIAL_SAMPLE,
        help="`submit` runs timed one after another (their mean, times --speed-jobs)",
    )
    parser.add_argument("--run-timeout", type=float, default=3600, help="seconds a run may take")
    parser.add_argument("--note", default="", help="why this plan (written to the results)")
    parser.add_argument("--work", type=Path, default=None, help="keep the agents' folders here")
    args = parser.parse_args()
    # a bench stopped with kill (SIGTERM) still stops its agents and its chain (`finally`)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.monotonic()
    runs: dict[str, Any] = {}
    killed = args.killed if args.killed is not None else args.sizes[-1]
    plan = [Run("warm-up", args.warm_up)] if args.warm_up else []
    plan += [Run(f"n{n}", n) for n in args.sizes]
    plan.append(Run(f"n{killed}-solver-killed", killed, kill=True))
    result: dict[str, Any] = {
        "what": "the network under load (module doc of bench/load_bench.py)",
        "plan": {
            "runs": [{"name": r.name, "n": r.n, "solver_killed": r.kill} for r in plan],
            "note": args.note,
        },
        "setup": {
            "chain": "anvil, 1 s blocks",
            "agents": {"solvers": len(SOLVERS), "verifiers": len(VERIFIERS), "whistleblowers": 1},
            "job": f"{SPEC.name}, reward {REWARD}, fee {FEE}, claim window {CLAIM_WINDOW_S} s",
            "manager_config": MANAGER_CONFIG,
            "stakes": {"solver": SOLVER_STAKE, "verifier": VERIFIER_STAKE},
        },
        "complete": False,
        "runs": runs,
    }

    def write() -> None:
        # After every step: a run cut short by the clock still leaves what it measured.
        result["wall_s"] = round(time.monotonic() - started, 1)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")

    with tempfile.TemporaryDirectory(prefix="load-bench-") as tmp:
        work = args.work or Path(tmp)
        speed = submission_speed(work / "speed", args.speed_jobs, args.sequential)
        result["submission"] = speed
        write()
        print("submission:", json.dumps(speed), flush=True)
        with local_anvil(AnvilConfig(block_time=1, accounts=20)) as url:
            net = Network(url, connect(url), work / "net")
            m = bind(net.w3, "JobManager", net.addrs["JobManager"]).functions
            try:
                retention = int(m.config().call().recordRetention)
                for i, run in enumerate(plan):
                    if i:
                        net.jump(retention + 60)
                    allocated = m.recordCounts().call()[0]
                    net.run(run, timeout_s=args.run_timeout)
                    fresh = m.recordCounts().call()[0] - allocated
                    reference = lifecycle_reference(fresh, len(run.jobs) - fresh)
                    runs[run.name] = report(net, run, reference["weighted"])
                    runs[run.name]["gas"]["lifecycle_reference"] = reference
                    write()
                    brief = {
                        k: v for k, v in runs[run.name].items() if k not in ("reverted", "gas")
                    }
                    print(run.name, json.dumps(brief), flush=True)
            finally:
                net.stop()
    result["complete"] = True
    write()
    print(f"wrote {args.out} after {result['wall_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
