"""`python -m agents node ACTION`: a node operator's one-shot commands on its own stake and pay.

The role agents stake, heartbeat and withdraw their pay by themselves; what they never do is
leave. This command shows where a node stands (`status`) and does the operator's own steps:
`add-stake`, `unbond` (part of the free stake, or `all` to leave the role: the node exits its
role pool, PROTOCOL §6.2), `withdraw-unbonded` once the unbonding delay has passed, and
`withdraw` of credits earned in the job manager and the attestation court.

Stop the role agent first when changing stake (it would otherwise keep claiming or being drawn)
and give this command a data folder of its own, or the role's while the role is stopped: two
processes must never share one (docs/OPERATORS.md). Each action is simulated before it is sent,
so a refusal is one line naming the contract's custom error and its values.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict, dataclass
from decimal import Decimal, InvalidOperation

from agents.core.tx import TxError, TxFailed, TxReverted
from agents.roles.actions import (
    AddStake,
    Approve,
    ChainAction,
    RequestUnbond,
    SetNetwork,
    Withdraw,
    WithdrawCourt,
    WithdrawUnbonded,
)
from agents.roles.config import NodeConfig
from agents.roles.executor import revert_text
from agents.roles.runner import RoleAgent, RoleError

TOKEN = 10**18
ROLE_NAMES = {0: "none", 1: "solver", 2: "verifier", 3: "whistleblower"}
ACTIONS = ("status", "add-stake", "unbond", "withdraw-unbonded", "withdraw", "set-network")
ALL = -1  # `unbond all`


@dataclass(frozen=True)
class NodeStatus:
    """What the chain says about one node (token amounts in wei, times in chain seconds)."""

    address: str
    role_id: int  # INodeRegistry.Role: 0 none, 1 solver, 2 verifier, 3 whistleblower
    stake: int
    locked: int
    unbonding: int
    unbond_ready_at: int
    last_heartbeat: int
    online: bool
    completed: int
    failed: int
    slashed: int
    selection_weight: int
    bandwidth_mbps: int  # declared (setNetwork); 0: undeclared
    zone: int  # region * 256 + site; 0: undeclared
    pool_entry: int | None  # index in its role pool, None when in none
    credits: int  # withdrawable from the job manager
    court_credits: int  # withdrawable from the attestation court (0 without one)
    balance: int  # tokens in the wallet

    @property
    def free(self) -> int:
        return self.stake - self.locked

    @property
    def role(self) -> str:
        return ROLE_NAMES.get(self.role_id, str(self.role_id))


def parse_amount(text: str) -> int:
    """Tokens as a decimal number (18 decimals) → wei; `all` → ALL. UserError-style RoleError."""
    if text.strip().lower() == "all":
        return ALL
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise RoleError(f"amount {text!r} is not a number of tokens (or `all`)") from None
    wei = value * TOKEN
    if not value.is_finite() or wei <= 0 or wei != wei.to_integral_value():
        raise RoleError(f"amount {text!r} must be a positive number of tokens, at most 18 decimals")
    return int(wei)


def unbond_request(amount: int, s: NodeStatus, min_stake: int) -> int:
    """The amount to pass to `requestUnbond`, or RoleError saying why it would be refused.

    The contract refuses the same cases with custom errors; checking first lets the operator
    read what to do instead of an error name."""
    if s.role == "none":
        raise RoleError(f"{s.address} is not registered: nothing to unbond")
    if amount == ALL:
        if s.locked:
            raise RoleError(
                f"{_tokens(s.locked)} of the stake is locked in duties (a claim, a draw or a "
                "court case); stop the agent, let them settle, then unbond all"
            )
        return s.stake
    if amount > s.free:
        raise RoleError(f"only {_tokens(s.free)} of the stake is free, asked {_tokens(amount)}")
    left = s.stake - amount
    if 0 < left < min_stake:
        raise RoleError(
            f"{_tokens(left)} would be left, below the {s.role} minimum of {_tokens(min_stake)}: "
            "unbond all to leave the role, or less"
        )
    return amount


def status_lines(s: NodeStatus, now: int, heartbeat_ttl: int) -> list[str]:
    """The human-readable `status` report."""
    lines = [f"node {s.address}: {s.role}"]
    if s.role != "none":
        age = now - s.last_heartbeat
        state = "online" if s.online else f"offline (heartbeats last {heartbeat_ttl} s)"
        entry = "none" if s.pool_entry is None else str(s.pool_entry)
        lines += [
            f"  stake {_tokens(s.stake)}: free {_tokens(s.free)}, locked {_tokens(s.locked)}",
            f"  {state}, last heartbeat {age} s ago; pool entry {entry}",
            f"  record: {s.completed} completed, {s.failed} failed, {s.slashed} slashed; "
            f"selection weight {_tokens(s.selection_weight)}",
            "  network: "
            + (
                f"{s.bandwidth_mbps} Mbit/s, zone {s.zone >> 8}.{s.zone & 0xFF}"
                if s.zone
                else "undeclared (node set-network)"
            ),
        ]
    if s.unbonding:
        wait = s.unbond_ready_at - now
        when = "ready now" if wait <= 0 else f"ready in {wait} s"
        lines.append(f"  unbonding {_tokens(s.unbonding)}: {when} (withdraw-unbonded)")
    lines.append(
        f"  credits {_tokens(s.credits)} (job manager), {_tokens(s.court_credits)} (court); "
        f"wallet {_tokens(s.balance)}"
    )
    return lines


def _tokens(wei: int) -> str:
    """Wei as tokens, without trailing zeros after the point (never before it: 90, not 9)."""
    text = f"{Decimal(wei) / TOKEN:f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


class NodeCommand(RoleAgent):
    role = "node"
    config: NodeConfig
    isolate_rounds = False

    @classmethod
    def check_config(cls, config: NodeConfig) -> None:
        needs_amount = config.action in ("add-stake", "unbond")
        if needs_amount and config.amount is None:
            raise RoleError(f"node {config.action} needs an amount of tokens (unbond: or `all`)")
        if not needs_amount and config.amount is not None:
            raise RoleError(f"node {config.action} takes no amount")
        if config.action == "add-stake" and parse_amount(config.amount) == ALL:
            raise RoleError("node add-stake needs an amount of tokens, not `all`")
        network = (config.bandwidth_mbps, config.zone)
        if config.action == "set-network" and None in network:
            raise RoleError("node set-network needs --bandwidth-mbps and --zone")
        if config.action != "set-network" and network != (None, None):
            raise RoleError(f"node {config.action} takes no --bandwidth-mbps or --zone")

    @property
    def amount(self) -> int:
        """The action's amount in wei (ALL: `unbond all`), checked in check_config."""
        assert self.config.amount is not None
        return parse_amount(self.config.amount)

    async def status(self) -> NodeStatus:
        registry = self.registry.functions
        n = await registry.getNode(self.me).call()  # INodeRegistry.Node, decoded by name
        court = await self.court.functions.credits(self.me).call() if self.court is not None else 0
        return NodeStatus(
            address=self.me,
            role_id=n.role,
            stake=n.stake,
            locked=n.locked,
            unbonding=n.unbonding,
            unbond_ready_at=n.unbondReadyAt,
            last_heartbeat=n.lastHeartbeat,
            online=await registry.isOnline(self.me).call(),
            completed=n.completed,
            failed=n.failed,
            slashed=n.slashed,
            selection_weight=await registry.selectionWeight(self.me).call(),
            bandwidth_mbps=n.bandwidthMbps,
            zone=n.zone,
            pool_entry=n.poolSlot - 1 if n.poolSlot else None,
            credits=await self.manager.functions.credits(self.me).call(),
            court_credits=court,
            balance=await self.token.functions.balanceOf(self.me).call(),
        )

    async def round(self) -> bool:
        action = self.config.action
        if action == "status":
            await self.report(await self.status())
            return True
        s = await self.status()
        block = await self.w3.eth.block_number  # names this command's intents
        if action == "add-stake":
            if s.role == "none":
                raise RoleError(f"{self.me} is not registered: run its role agent with --stake")
            amount = self.amount
            if s.balance < amount:
                raise RoleError(f"the wallet holds {_tokens(s.balance)}, asked {_tokens(amount)}")
            await self.do(Approve(f"node:approve:{amount}:{block}", self.registry.address, amount))
            await self.do(AddStake(f"node:add-stake:{amount}:{block}", amount))
        elif action == "unbond":
            min_stake = await self.registry.functions.minStake(s.role_id).call()
            amount = unbond_request(self.amount, s, min_stake)
            await self.do(RequestUnbond(f"node:unbond:{amount}:{block}", amount))
        elif action == "set-network":
            if s.role == "none":
                raise RoleError(f"{self.me} is not registered: run its role agent first")
            bw, zone = self.config.bandwidth_mbps, self.config.zone
            await self.do(SetNetwork(f"node:set-network:{bw}:{zone}:{block}", bw, zone))
        elif action == "withdraw-unbonded":
            if not s.unbonding:
                raise RoleError("nothing is unbonding")
            now = (await self.now()).timestamp
            if now < s.unbond_ready_at:
                wait = s.unbond_ready_at - now
                raise RoleError(f"{_tokens(s.unbonding)} is unbonding, ready in {wait} s")
            await self.do(WithdrawUnbonded(f"node:withdraw-unbonded:{block}"))
        elif action == "withdraw":
            if not s.credits and not s.court_credits:
                raise RoleError("nothing to withdraw: no credits in the job manager or the court")
            if s.credits:
                await self.do(Withdraw(f"node:withdraw:{block}"))
            if s.court_credits:
                await self.do(WithdrawCourt(f"node:withdraw-court:{block}"))
        await self.report(await self.status())
        return True

    async def do(self, action: ChainAction) -> None:
        """Simulate and send one action; a refusal is a one-line RoleError (exit 2)."""
        what = action.intent.split(":")[1]  # "node:<what>:...": the command's step
        try:
            await self.executor.send(action)
        except TxReverted as exc:
            raise RoleError(f"{what} refused: {revert_text(exc)}") from None
        except (TxFailed, TxError) as exc:
            raise RoleError(f"{what} failed: {str(exc).splitlines()[0]}") from None

    async def report(self, s: NodeStatus) -> None:
        if self.config.json:
            print(json.dumps(asdict(s) | {"role": s.role, "free": s.free}))
            return
        now = (await self.now()).timestamp
        ttl = await self.registry.functions.heartbeatTtl().call()
        print("\n".join(status_lines(s, now, ttl)))

    async def run(self, stop: asyncio.Event, run_for: float = 0.0) -> int:
        await self.round()
        return 0
