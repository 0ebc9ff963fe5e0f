"""RPC calls per agent round, with a JobLens and without (issue #27): does a round cost a
bounded number of calls per live unit, whatever the number of verifiers drawn per unit?

Run: `python -m bench.agents_bench` (needs build/abi from `make compile`; starts a private
Anvil, about a minute). For each number of verifiers per unit in VERIFIERS_PER_UNIT, a fresh
deployment (deploy_all, a MockArbiter) holds UNITS live units of the demo's job
(examples/digits-mlp.json): each assigned to the solver, committed and its verifiers drawn; the
bench's verifier sealed where drawn; the last unit challenged by the whistleblower (Disputed).
A solver, a verifier and a whistleblower are built in this process as their CLIs build them,
over that chain, and each role's reads of one round are counted at the async HTTP provider of
its agent's one client, which its sends share (every JSON-RPC request sent to the node,
eth_call or not):

- solver: `units()`, then `facts(u, now)` of each unit (its claim, its dispute, and whether its
  forced round's reveal is due: a forced record is planted so that the drawn verifiers'
  statuses are read, as in a forced round);
- verifier: `units()`, then `facts(u, now)` of each unit (a verdict record is planted so that
  every drawn verifier's status is read, as before opening a seal);
- whistleblower: `units()`, the dispute of each Disputed unit (as its round reads it), and
  `report_leaks` with a (wrong) leaked secret of each unit (its unit, the assignee's secret
  hash, the drawn verifiers' statuses).

Each role runs one round first (the locators' event lookups and the config are read once and
kept), then the next round is counted, three ways in the same run:
- `lens`: through the JobLens (one call for the page of live units);
- `getters`: the role's lens unset: the JobManager's getters one by one, a verifierStatus per
  drawn verifier (the roles' read path before the lens, which a role still takes on a
  deployment without one);
- `before`: the getters with the connection's eth_chainId cache off: the requests the roles
  sent before issue #27 (web3 asked the chain id twice per eth_call). One difference: the leak
  check then also read getUnit once more per leaked secret (its assigneeIndex), now read with
  the unit, so `before` is one call per leak lower than the old code for the whistleblower.
Writes bench/results/agents.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from eth_account import Account
from eth_utils import keccak
from web3 import AsyncWeb3

from agents.core.bindings import bind
from agents.core.chain import AnvilConfig, connect, dev_private_key, local_anvil
from agents.core.deploy import DEFAULT_ABI_DIR, deploy_all
from agents.core.runtime import open_agent
from agents.data import builtin as datasets
from agents.roles.logic import UnitStatus, Verdict
from agents.roles.solver import Solver
from agents.roles.verifier import Verifier
from agents.roles.whistleblower import Whistleblower
from agents.training import spec as specs
from agents.training.engine import Engine
from agents.training.merkle import checkpoint_root, final_proof
from agents.training.state import state_root

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "agents.json"
SPEC = ROOT / "examples" / "digits-mlp.json"
E18 = 10**18
VERIFIERS_PER_UNIT = (1, 2, 4)
UNITS = 3  # live units of the demo's job
PATHS = ("before", "getters", "lens")
SOLVER, VERIFIER, WHISTLEBLOWER = 1, 2, 3  # INodeRegistry.Role
CAP = (1, 16_384, 1_000)
SECRET = b"\x5e" * 32
# accounts: 0 deployer, 1 submitter, 2 solver, 3 whistleblower, 4.. verifiers
SUBMITTER, SOLVER_ACCT, WHISTLE_ACCT, FIRST_VERIFIER = 1, 2, 3, 4


def counted(w3: AsyncWeb3) -> Counter:
    """Count every JSON-RPC request `w3`'s async HTTP provider sends from now on, by method: at
    the transport, below web3's middlewares and its request cache (what the node is asked)."""
    counts: Counter = Counter()
    provider = w3.provider
    send = type(provider)._make_request.__get__(provider)

    async def counting(method, request_data):
        counts[method] += 1
        return await send(method, request_data)

    provider._make_request = counting
    return counts


def counts_off(w3: AsyncWeb3) -> None:
    del w3.provider._make_request  # the class's again


class World:
    """A deployment with UNITS live units of the demo's job, verifiers drawn."""

    def __init__(self, url: str, verifiers_per_unit: int) -> None:
        self.url, self.w3 = url, connect(url)
        self.n_verifiers = 2 * verifiers_per_unit + 1  # registered: the draw has a choice
        cfg = {"verifiersPerUnit": verifiers_per_unit, "forcedErrorBps": 0,
               "lazySlashFactor": 0, "claimWindow": 60}  # fmt: skip
        self.addrs = deploy_all(self.w3, dev_private_key(0), DEFAULT_ABI_DIR,
                                {"mock_arbiter": True, "manager_config": cfg})  # fmt: skip
        self.manager = bind(self.w3, "JobManager", self.addrs["JobManager"])
        self.registry = bind(self.w3, "NodeRegistry", self.addrs["NodeRegistry"])
        self.token = bind(self.w3, "TestToken", self.addrs["Token"])
        self.accounts = [
            Account.from_key(dev_private_key(i)).address
            for i in range(FIRST_VERIFIER + self.n_verifiers)
        ]
        self.units = self.setup()

    def send(self, who: int, fn: Any) -> None:
        tx = fn.transact({"from": self.accounts[who]})
        if self.w3.eth.wait_for_transaction_receipt(tx)["status"] != 1:
            raise RuntimeError(f"{fn.fn_name} reverted")

    def warp(self, seconds: int, blocks: int = 1) -> None:
        """Chain time `seconds` on, and `blocks` blocks mined (a seed block must be past)."""
        self.w3.provider.make_request("evm_increaseTime", [seconds])
        for _ in range(blocks):
            self.w3.provider.make_request("evm_mine", [])

    def setup(self) -> list[int]:
        f = self.manager.functions
        for who in range(1, len(self.accounts)):
            self.send(0, self.token.functions.mint(self.accounts[who], 10_000 * E18))
            for spender in (self.registry.address, self.manager.address):
                self.send(who, self.token.functions.approve(spender, 2**256 - 1))
        self.send(SOLVER_ACCT, self.registry.functions.register(SOLVER, CAP, 1_000 * E18))
        self.send(WHISTLE_ACCT, self.registry.functions.register(WHISTLEBLOWER, CAP, 20 * E18))
        for i in range(self.n_verifiers):
            reg = self.registry.functions.register(VERIFIER, CAP, 200 * E18)
            self.send(FIRST_VERIFIER + i, reg)
        spec = specs.load(SPEC)
        data = datasets.load_dataset(spec.dataset_name)
        s0 = state_root(Engine(spec, data).initial_state())
        units = []
        for _ in range(UNITS):
            now = self.w3.eth.get_block("latest")["timestamp"]
            params = (spec.spec_hash(), data.root(), s0, spec.steps, spec.checkpoint_every,
                      (0, 0, 0), 100 * E18, 10 * E18, now + 60, 3_600)  # fmt: skip
            self.send(SUBMITTER, f.postJob(params))
            unit_id = f.unitIdOf(f.jobCount().call(), 0).call()
            self.send(SOLVER_ACCT, f.claim(unit_id, keccak(SECRET)))
            units.append(unit_id)
        self.warp(61)
        checkpoints = spec.steps // spec.checkpoint_every + 1
        for unit_id in units:
            self.send(0, f.closeClaims(unit_id))
            self.warp(1, blocks=2)
            self.send(0, f.selectAssignee(unit_id))
            roots = [keccak(b"checkpoint" + bytes([c])) for c in range(checkpoints)]
            root = checkpoint_root(roots)
            seal = keccak(root + SECRET)
            commit = f.commitCheckpoints(unit_id, root, checkpoints, roots[-1], final_proof(roots),
                                         "http://127.0.0.1:9/blobs", seal)  # fmt: skip
            self.send(SOLVER_ACCT, commit)
            self.warp(1, blocks=2)
            self.send(0, f.drawVerifiers(unit_id))
        # the bench's verifier: the one drawn for the most units (the draw is random)
        drawn = [a for u in units for a in f.getVerifiers(u).call()]
        self.verifier = self.accounts.index(max(dict.fromkeys(drawn), key=drawn.count))
        for unit_id in units:
            if self.verifier_drawn(unit_id):
                self.send(self.verifier, f.sealAttestation(unit_id, b"\x33" * 32))
        self.send(WHISTLE_ACCT, f.challenge(units[-1], b"\x55" * 32))
        return units

    def verifier_drawn(self, unit_id: int) -> bool:
        drawn = self.manager.functions.getVerifiers(unit_id).call()
        return self.accounts[self.verifier] in drawn

    def drawn(self) -> list[int]:
        return [len(self.manager.functions.getVerifiers(u).call()) for u in self.units]


def role_config(cls: Any, key_index: int, url: str, manager: str, data_dir: Path, lens: str,
                extra=()):  # fmt: skip
    """The role's config as its command line builds it (agents/cli/options.py)."""
    from agents.cli.main import build_parser
    from agents.cli.options import build
    from agents.roles.config import SolverConfig, VerifierConfig, WhistleblowerConfig

    argv = [cls.role, "--rpc-url", url, "--key", f"dev:{key_index}", "--data-dir", str(data_dir),
            "--manager", manager, "--deployment", str(data_dir / "none.json"),
            "--lens", lens, "--no-progress", *extra]  # fmt: skip
    kind = {"solver": SolverConfig, "verifier": VerifierConfig,
            "whistleblower": WhistleblowerConfig}[cls.role]  # fmt: skip
    return build(kind, build_parser().parse_args(argv))


async def solver_round(s: Solver) -> None:
    now = await s.now()
    for u in await s.units():
        await s.facts(u, now)


async def verifier_round(v: Verifier) -> None:
    now = await v.now()
    for u in await v.units():
        await v.facts(u, now)


async def whistleblower_round(w: Whistleblower) -> None:
    now = await w.now()
    for u in await w.units():
        if u.status == UnitStatus.DISPUTED:
            await w.dispute(u)
    await w.report_leaks(now)


async def measure(world: World, tmp: Path) -> dict[str, dict]:
    """Each role's calls of one counted round, with the lens and with the getters."""
    manager = world.addrs["JobManager"]
    lens = world.addrs["JobLens"]
    leaks = tmp / "leaks"
    leaks.mkdir()
    for unit_id in world.units:  # a secret that is not the solver's: nothing to report
        (leaks / f"{unit_id}.hex").write_text("ab" * 32)
    roles = {
        "solver": (Solver, SOLVER_ACCT, (), solver_round),
        "verifier": (Verifier, world.verifier, (), verifier_round),
        "whistleblower": (Whistleblower, WHISTLE_ACCT, ("--leaked-secrets", str(leaks)),
                          whistleblower_round),
    }  # fmt: skip
    out: dict[str, dict] = {}
    log = logging.getLogger("bench.agents")
    for name, (cls, key_index, extra, one_round) in roles.items():
        config = role_config(cls, key_index, world.url, manager, tmp / name, lens, extra)
        async with open_agent(config.agent) as agent:
            role = cls(agent, manager, config, log)
            try:
                await role.open()
                plant(role, world)
                out[name] = {}
                paths = (("lens", role.lens, True), ("getters", None, True),
                         ("before", None, False))  # fmt: skip
                for path, wired, cache_chain_id in paths:
                    role.lens = wired
                    role.w3.provider.cache_allowed_requests = cache_chain_id
                    await one_round(role)  # warm: locators, config, JobPosted scan
                    counts = counted(role.w3)
                    await one_round(role)
                    out[name][path] = {"calls": sum(counts.values()), "by_method": dict(counts)}
                    counts_off(role.w3)
            finally:
                role.close()
    return out


def plant(role: Any, world: World) -> None:
    """The records that make a round read every drawn verifier's status (see module doc)."""
    for unit_id in world.units:
        attempt = world.manager.functions.getUnit(unit_id).call().attempt
        if isinstance(role, Solver):
            role.agent.store.put_record("forced", f"{unit_id}:{attempt}", "sealed", {})
        if isinstance(role, Verifier):
            role.agent.store.put_record("verdict", f"{unit_id}:{attempt}", Verdict.AGREE, {})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    runs = []
    with local_anvil(AnvilConfig(accounts=20)) as url:
        for k in VERIFIERS_PER_UNIT:
            world = World(url, k)
            with tempfile.TemporaryDirectory(prefix="agents-bench-") as tmp:
                calls = asyncio.run(measure(world, Path(tmp)))
            runs.append({
                "verifiers_per_unit": k,
                "drawn": world.drawn(),  # verifiers drawn, per unit
                "bench_verifier_drawn": [world.verifier_drawn(u) for u in world.units],
                "calls": calls,
            })  # fmt: skip
            print(f"verifiers/unit {k} (drawn {world.drawn()}):", {
                role: {path: c[path]["calls"] for path in c} for role, c in calls.items()
            })  # fmt: skip
    result = {
        "what": "JSON-RPC requests of one agent round over UNITS live units (module doc)",
        "units": UNITS,
        "job": SPEC.name,
        "runs": runs,
        "per_live_unit": {
            role: {
                path: [round(r["calls"][role][path]["calls"] / UNITS, 2) for r in runs]
                for path in PATHS
            }
            for role in ("solver", "verifier", "whistleblower")
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
