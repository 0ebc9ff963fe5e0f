"""One async client per agent (issue #27): a role reads the chain only through its agent's one
AsyncWeb3 (agents/core/runtime.py), the client its sends go through too, so no blocking read
holds up the agent's event loop (its sends, its event streams, its other units' turns).

The check reads the syntax tree of every module of the roles and the adversaries and fails,
naming file:line, on a contract call, a log query or a node read that is not awaited (a
synchronous web3 answers them in place; an AsyncWeb3 hands back a coroutine, which only an
`await` runs), and on a synchronous client made there (`Web3(...)`, `HTTPProvider(...)`,
`connect(...)`)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROLE_PACKAGES = ("agents/roles", "agents/adversaries")

#: Methods of a bound contract function or event that ask the node.
CHAIN_METHODS = {"call", "get_logs", "estimate_gas", "transact", "build_transaction"}
#: Constructors of a synchronous client (and agents.core.chain's).
SYNC_CLIENTS = {"Web3", "HTTPProvider", "connect"}


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _awaited(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    return isinstance(parents.get(node), ast.Await)


def _is_class(node: ast.AST) -> bool:
    """A class's own method (`TxRequest.call(fn)` builds a request; it asks no node)."""
    return isinstance(node, ast.Name) and node.id[:1].isupper()


def blocking_reads(source: str) -> list[tuple[int, str]]:
    """(line, what) of each chain read in `source` that is not awaited, and each synchronous
    client it makes."""
    tree = ast.parse(source)
    parents = _parents(tree)
    found = []
    for node in ast.walk(tree):
        if _contract_io(node) and not _awaited(node, parents):
            found.append((node.lineno, f".{node.func.attr}() not awaited"))
        if isinstance(node, ast.Call) and _names(node.func, SYNC_CLIENTS):
            found.append((node.lineno, f"a synchronous client: {node.func.id}(...)"))
        # w3.eth.<anything>: a property read (block_number) or a method's call (get_block)
        if isinstance(node, ast.Attribute) and _is_eth(node.value):
            parent = parents.get(node)
            used = parent if isinstance(parent, ast.Call) and parent.func is node else node
            if not _awaited(used, parents):
                found.append((node.lineno, f"eth.{node.attr} not awaited"))
    return sorted(set(found))


def _contract_io(node: ast.AST) -> bool:
    """`<contract function or event>.call()` and the like (not a class's own `call`)."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in CHAIN_METHODS
        and not _is_class(node.func.value)
    )


def _names(node: ast.AST, names: set[str]) -> bool:
    return isinstance(node, ast.Name) and node.id in names


def _is_eth(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "eth"


def role_modules() -> list[Path]:
    return sorted(p for pkg in ROLE_PACKAGES for p in (REPO / pkg).rglob("*.py"))


def test_every_chain_read_of_a_role_is_awaited_on_its_agents_one_client():
    found = [
        f"{path.relative_to(REPO).as_posix()}:{line}: {what}"
        for path in role_modules()
        for line, what in blocking_reads(path.read_text())
    ]
    assert not found, "blocking chain reads in the roles:\n" + "\n".join(found)


def test_the_check_sees_each_kind_of_blocking_read():
    source = (
        "async def round(self):\n"
        "    ok = await self.manager.functions.getUnit(1).call()\n"
        "    head = await self.w3.eth.block_number\n"
        "    block = await self.w3.eth.get_block('latest')\n"
        "    logs = await self.manager.events.Attested().get_logs(from_block=0)\n"
        "    request = TxRequest.call(fn, gas_floor=0)\n"
        "    u = self.manager.functions.getUnit(1).call()\n"
        "    n = self.w3.eth.block_number\n"
        "    b = self.w3.eth.get_block('latest')\n"
        "    e = self.manager.events.Attested().get_logs(from_block=0)\n"
        "    w3 = connect(url)\n"
    )
    assert blocking_reads(source) == [
        (7, ".call() not awaited"),
        (8, "eth.block_number not awaited"),
        (9, "eth.get_block not awaited"),
        (10, ".get_logs() not awaited"),
        (11, "a synchronous client: connect(...)"),
    ]
