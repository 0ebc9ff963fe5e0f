"""Keeper steps sent once (issue #45, PROTOCOL §6.5): four solvers and three verifiers, each a
real role object with its own agent (store, sender, executor) in this process, look at the same
unit in the same block, every round, and take the keeper steps their role takes. Each of
closeClaims, selectAssignee and drawVerifiers lands exactly once, and nothing reverts.

The same harness with every agent at the first rank (keeping as before the fix: everyone acts
as soon as a step is due) sends steps several times: the test can tell.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import rolekit as rk
from web3 import Web3

from agents.cli.main import build_parser
from agents.cli.options import build
from agents.core.chain import dev_private_key
from agents.core.runtime import open_agent
from agents.core.tx import TxRequest
from agents.roles.config import SolverConfig, VerifierConfig
from agents.roles.logic import (
    DRAW_FOLD_BLOCKS,
    SOLVER_KEEPS,
    DrawVerifiers,
    Finalize,
    UnitStatus,
    keeper_acts,
)
from agents.roles.solver import Solver
from agents.roles.verifier import Verifier
from agents.training.merkle import checkpoint_root, final_proof
from tools.devnet import Party, fund

E18 = 10**18
SOLVERS = [Party(f"solver{i}", "solver", 2 + i) for i in range(4)]
VERIFIERS = [Party(f"verifier{i}", "verifier", 6 + i) for i in range(3)]
SUBMITTER = Party("submitter", "submitter", 1)
#: The five checkpoints' state roots a commitment of the test's jobs lists (8 steps, every 2)
ROOTS = [bytes([i + 1]) * 32 for i in range(5)]
STEPS = {
    "closeClaims": "closeClaims(uint256)",
    "selectAssignee": "selectAssignee(uint256)",
    "drawVerifiers": "drawVerifiers(uint256)",
}


def send(w3: Web3, p: Party, fn) -> None:
    tx = fn.build_transaction({"from": p.address, "nonce": w3.eth.get_transaction_count(p.address)})
    signed = w3.eth.account.sign_transaction(tx, dev_private_key(p.key_index))
    receipt = w3.eth.wait_for_transaction_receipt(
        w3.eth.send_raw_transaction(signed.raw_transaction)
    )
    assert receipt["status"] == 1


def register(w3: Web3, addrs: dict, p: Party) -> None:
    """`p` registered with its role and a stake of 200, as its agent's setup would."""
    token = rk.contract(w3, "TestToken", addrs["Token"])
    registry = rk.contract(w3, "NodeRegistry", addrs["NodeRegistry"])
    send(w3, p, token.functions.approve(addrs["NodeRegistry"], 200 * E18))
    send(
        w3,
        p,
        registry.functions.register({"solver": 1, "verifier": 2}[p.role], (0, 0, 0), 200 * E18),
    )


def post_and_claim(w3: Web3, addrs: dict, claimants: list[Party]) -> int:
    """A job posted by the submitter and claimed by `claimants` (in that order): its unit."""
    manager = rk.contract(w3, "JobManager", addrs["JobManager"])
    token = rk.contract(w3, "TestToken", addrs["Token"])
    send(w3, SUBMITTER, token.functions.approve(addrs["JobManager"], 100 * E18))
    now = w3.eth.get_block("latest")["timestamp"]
    params = (b"\x01" * 32, b"\x02" * 32, b"\x03" * 32, 8, 2, (0, 0, 0), 100 * E18, 10 * E18,
              now + 6, 600, b"\x04" * 32)  # fmt: skip
    send(w3, SUBMITTER, manager.functions.postJob(params))
    unit = manager.functions.jobCount().call() << 32
    for p in claimants:
        send(w3, p, manager.functions.claim(unit, Web3.keccak(text=p.name)))
    return unit


def keeper_sends(w3: Web3, manager: str, unit: int) -> dict[str, list[int]]:
    """The keeper steps' transactions on `unit`: step -> the status of each (1 mined, 0
    reverted on chain)."""
    selectors = {bytes(Web3.keccak(text=sig)[:4]): name for name, sig in STEPS.items()}
    arg = unit.to_bytes(32, "big")
    out: dict[str, list[int]] = {name: [] for name in STEPS}
    for n in range(w3.eth.block_number + 1):
        for tx in w3.eth.get_block(n, full_transactions=True)["transactions"]:
            data = bytes(tx["input"])
            if (tx["to"] or "").lower() != manager.lower() or data[4:36] != arg:
                continue
            if (name := selectors.get(data[:4])) is not None:
                out[name].append(w3.eth.get_transaction_receipt(tx["hash"])["status"])
    return out


@contextlib.asynccontextmanager
async def roles(url: str, addrs: dict, tmp: Path) -> AsyncIterator[list]:
    """The seven roles, each with its own agent, opened in this process."""
    log = logging.getLogger("test.keepers")
    async with contextlib.AsyncExitStack() as stack:
        out = []
        for p in SOLVERS + VERIFIERS:
            argv = [p.role, "--rpc-url", url, "--key", f"dev:{p.key_index}",
                    "--data-dir", str(tmp / p.name), "--manager", addrs["JobManager"],
                    "--lens", addrs["JobLens"], "--deployment", str(tmp / "none.json"),
                    "--no-progress"]  # fmt: skip
            ns = build_parser().parse_args(argv)
            solver = p.role == "solver"
            config = build(SolverConfig if solver else VerifierConfig, ns)
            agent = await stack.enter_async_context(open_agent(config.agent))
            role = (Solver if solver else Verifier)(agent, addrs["JobManager"], config, log)
            stack.callback(role.close)
            await role.open()
            out.append(role)
        yield out


async def keep(url: str, addrs: dict, tmp: Path, unit: int, ranked: bool) -> None:
    """Every agent takes the keeper steps its role takes on `unit`, round after round, all from
    the same block each round, until the unit is Verifying (the assignee commits when
    assigned; no verifier answers, so the keepers' draw is due once the fold's blocks are
    mined). `ranked`: each agent at its rank in the unit's keeper order; else all first."""
    w3 = Web3(Web3.HTTPProvider(url))
    async with roles(url, addrs, tmp) as agents:
        views = []
        for _ in range(200):
            views = [await r.unit(unit) for r in agents]
            if views[0].status == UnitStatus.VERIFYING:
                return
            u = views[0]
            head = w3.eth.block_number
            if u.status == UnitStatus.COMMITTED and head < u.seed_block + DRAW_FOLD_BLOCKS:
                # no verifier here answers: mine through the fold at once (then block by block,
                # as a keeper's graces are counted)
                w3.provider.make_request("anvil_mine", [u.seed_block + DRAW_FOLD_BLOCKS - head])
            sends = []
            for role, u in zip(agents, views, strict=True):
                now = await role.now()
                mine = u.assignee.lower() == role.me.lower()
                steps = {DrawVerifiers}
                if isinstance(role, Solver):
                    steps = SOLVER_KEEPS | ({Finalize, DrawVerifiers} if mine else set())
                keeper = await role.keeper_facts(u) if ranked else None  # None: the first rank
                for act in keeper_acts(u, now, frozenset(steps), keeper):
                    sends.append(role.executor.execute(act))
                if u.status == UnitStatus.ASSIGNED and mine:
                    fn = role.manager.functions.commitCheckpoints(
                        unit, checkpoint_root(ROOTS), 5, ROOTS[-1], final_proof(ROOTS), "b://x",
                        b"\x33" * 32,
                    )  # fmt: skip
                    sends.append(role.agent.sender.send(f"commit:{unit}", TxRequest.call(fn)))
            await asyncio.gather(*sends)
            await asyncio.sleep(0.25)
    last = views[0]
    raise AssertionError(f"unit {unit} not drawn in time: {last.status.name} {last}")


def test_each_keeper_step_is_one_transaction_whatever_the_number_of_agents(tmp_path):
    with rk.chain() as (url, w3):
        addrs = rk.deploy(w3, {"verifiersPerUnit": 2})
        fund(w3, addrs["Token"], dev_private_key(0), [SUBMITTER, *SOLVERS, *VERIFIERS])
        for p in SOLVERS + VERIFIERS:
            register(w3, addrs, p)
        manager = addrs["JobManager"]
        # two claimants keep first, in claim order; the other solvers after them
        unit = post_and_claim(w3, addrs, [SOLVERS[2], SOLVERS[0]])
        asyncio.run(keep(url, addrs, tmp_path / "ranked", unit, ranked=True))
        assert keeper_sends(w3, manager, unit) == {name: [1] for name in STEPS}
        # control: every agent at the first rank, as before the fix
        unit = post_and_claim(w3, addrs, [SOLVERS[2], SOLVERS[0]])
        asyncio.run(keep(url, addrs, tmp_path / "unranked", unit, ranked=False))
        raced = keeper_sends(w3, manager, unit)
        assert sum(len(s) for s in raced.values()) > len(STEPS), raced
