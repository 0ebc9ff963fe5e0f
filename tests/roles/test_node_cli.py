"""`python -m agents node`: an operator's status, unbonding, leaving and withdrawing, against a
real deployment; each refusal is one `error:` line (exit 2) that says what to do."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from eth_account import Account
from rolekit import chain, contract, deploy

from agents.__main__ import main as cli_main
from agents.core.chain import dev_private_key
from agents.roles.config import bandwidth_mbps, zone_id
from agents.roles.node import ALL, NodeStatus, parse_amount, status_lines, unbond_request
from agents.roles.runner import RoleError

E18 = 10**18
KEY_INDEX = 5


def status(**overrides: int | str) -> NodeStatus:
    base = dict(
        address="0xabc",
        role_id=2,
        stake=100 * E18,
        locked=0,
        unbonding=0,
        unbond_ready_at=0,
        last_heartbeat=1_000,
        online=True,
        completed=3,
        failed=1,
        slashed=0,
        selection_weight=80 * E18,
        bandwidth_mbps=0,
        zone=0,
        pool_entry=4,
        credits=0,
        court_credits=0,
        balance=5 * E18,
    )
    base.update(overrides)
    return NodeStatus(**base)  # type: ignore[arg-type]


# ------------------------------------------------------------------ pure parts


def test_parse_amount_tokens_all_and_bad_input():
    assert parse_amount("1.5") == 3 * E18 // 2
    assert parse_amount("ALL") == ALL
    for bad in ("x", "0", "-1", "1e-19", "nan", "inf"):
        with pytest.raises(RoleError):
            parse_amount(bad)


def test_unbond_request_mirrors_the_registry_refusals():
    assert unbond_request(ALL, status(), 50 * E18) == 100 * E18
    assert unbond_request(40 * E18, status(), 50 * E18) == 40 * E18
    with pytest.raises(RoleError, match="locked in duties"):
        unbond_request(ALL, status(locked=10 * E18), 50 * E18)
    with pytest.raises(RoleError, match="only 90 of the stake is free, asked 95"):
        unbond_request(95 * E18, status(locked=10 * E18), 50 * E18)
    with pytest.raises(RoleError, match="below the verifier minimum of 50"):
        unbond_request(60 * E18, status(), 50 * E18)
    with pytest.raises(RoleError, match="not registered"):
        unbond_request(ALL, status(role_id=0, stake=0), 50 * E18)


def test_status_lines_say_what_the_operator_needs():
    text = "\n".join(
        status_lines(status(unbonding=7 * E18, unbond_ready_at=1_300, online=False), 1_100, 3600)
    )
    assert "node 0xabc: verifier" in text
    assert "stake 100: free 100, locked 0" in text
    assert "offline (heartbeats last 3600 s), last heartbeat 100 s ago; pool entry 4" in text
    assert "3 completed, 1 failed, 0 slashed; selection weight 80" in text
    assert "unbonding 7: ready in 200 s" in text
    assert "network: undeclared (node set-network)" in text
    declared = "\n".join(status_lines(status(bandwidth_mbps=20, zone=0x0203), 1_100, 3600))
    assert "network: 20 Mbit/s, zone 2.3" in declared
    gone = "\n".join(status_lines(status(role_id=0, stake=0, pool_entry=None), 1_100, 3600))
    assert "node 0xabc: none" in gone and "stake" not in gone


def test_network_values_parse_like_the_registry_bounds():
    assert bandwidth_mbps("1") == 1 and bandwidth_mbps("1000000") == 1_000_000
    assert zone_id("1.2") == 0x0102 and zone_id("0x0102") == 0x0102 and zone_id("0.1") == 1
    for bad in ("0", "1000001", "-5", "1.5", "fast"):
        with pytest.raises(ValueError, match="Mbit/s from 1 to 1,000,000"):
            bandwidth_mbps(bad)
    for bad in ("1.0", "256.1", "1.256", "0x0100", "0", "x.y", "-1.2"):
        with pytest.raises(ValueError):
            zone_id(bad)


# ------------------------------------------------------------------ against a chain


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


def _node(capsys, url: str, manager: str, data: Path, *args: str) -> Ran:
    """`python -m agents node ...`, run in this process (the CLI's own entry point, without a
    dozen interpreter start-ups)."""
    argv = ["node", *args, "--rpc-url", url, "--key", f"dev:{KEY_INDEX}", "--data-dir", str(data)]
    argv += ["--manager", manager, "--deployment", str(data / "no-deployment.json"), "--json-logs"]
    capsys.readouterr()
    code = cli_main(argv)
    out = capsys.readouterr()
    return Ran(code, out.out, out.err)


def _json(out: Ran) -> dict:
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _refused(out: Ran, text: str) -> None:
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert out.returncode == 2 and len(errors) == 1 and text in errors[0], out.stderr
    assert "Traceback" not in out.stderr


def test_node_unbonds_leaves_and_withdraws(tmp_path, capsys):
    with chain() as (url, w3):
        dep = deploy(w3)
        manager, registry = dep["JobManager"], contract(w3, "NodeRegistry", dep["NodeRegistry"])
        token = contract(w3, "TestToken", dep["Token"])
        me = Account.from_key(dev_private_key(KEY_INDEX)).address
        deployer = Account.from_key(dev_private_key(0)).address
        for fn, sender in (
            (token.functions.mint(me, 300 * E18), deployer),
            (token.functions.approve(registry.address, 300 * E18), me),
            (registry.functions.register(2, (1, 8192, 50), 100 * E18), me),
        ):
            w3.eth.wait_for_transaction_receipt(fn.transact({"from": sender}), timeout=30)
        run = lambda *a: _node(capsys, url, manager, tmp_path / "node", *a)  # noqa: E731

        s = _json(run("status", "--json"))
        assert (s["role"], s["stake"], s["free"], s["balance"]) == (
            "verifier",
            100 * E18,
            100 * E18,
            200 * E18,
        )
        assert s["pool_entry"] == 0 and s["online"]

        _refused(run("unbond", "60"), "below the verifier minimum of 50")
        _refused(run("withdraw-unbonded"), "nothing is unbonding")
        _refused(run("withdraw"), "nothing to withdraw")
        _refused(run("unbond"), "needs an amount")
        _refused(run("add-stake", "1000"), "the wallet holds 200, asked 1000")

        _refused(run("set-network", "--zone", "1.2"), "needs --bandwidth-mbps and --zone")
        _refused(run("set-network", "--bandwidth-mbps", "0", "--zone", "1.2"), "Mbit/s from 1")
        _refused(run("set-network", "--bandwidth-mbps", "20", "--zone", "1.0"), "site 1-255")
        _refused(run("status", "--zone", "1.2"), "takes no --bandwidth-mbps or --zone")
        s = _json(run("set-network", "--bandwidth-mbps", "1000", "--zone", "1.2", "--json"))
        assert (s["bandwidth_mbps"], s["zone"]) == (1000, 0x0102)

        s = _json(run("add-stake", "20", "--json"))
        assert (s["stake"], s["balance"]) == (120 * E18, 180 * E18)

        s = _json(run("unbond", "all", "--json"))
        assert (s["role"], s["stake"], s["unbonding"], s["pool_entry"]) == (
            "none",
            0,
            120 * E18,
            None,
        )
        assert registry.functions.poolAt(2, 0).call()[1] is False  # the entry is dead

        _refused(run("withdraw-unbonded"), "120 is unbonding, ready in")
        w3.provider.make_request("evm_increaseTime", [61])
        w3.provider.make_request("evm_mine", [])
        s = _json(run("withdraw-unbonded", "--json"))
        assert (s["unbonding"], s["balance"]) == (0, 300 * E18)
