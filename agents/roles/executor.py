"""The one executor of the roles' chain actions: an action's transaction (its `tx`), simulated,
recorded under its intent and sent through the agent's one crash-safe sender (agents/core/tx.py).

Every transaction a role sends goes through `Executor.execute`: one nonce sequence, one intent
record per logical send (a restarted agent resumes a recorded send instead of signing a second
one), one place that says what a refusal means. A simulation (at the pending block: a rival's
transaction the node already holds counts) that reverts is logged (once per intent and reason)
and retried on a later round by a new decision, never sent; an intent whose transaction was
mined but reverted is not sent again: the decision logic names a new intent when a new send
makes sense. Such a revert is usually a race another party won — its transaction on the same
unit landed first, in the same block or the one before — which is said at INFO with the
winner's address (an expected outcome, issue #45). One that only met the chain's clock (its call,
replayed on its block, is refused for a window that passed meanwhile: CLOCK_REFUSALS) came too
late under load and is a WARNING naming the window; any other is an ERROR, with its refusal.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from agents.core.bounded import SaidOnce
from agents.core.runtime import Agent
from agents.core.tx import TxError, TxFailed, TxOutcome, TxRequest, TxReverted, revert_error
from agents.roles.actions import ChainAction, Contracts
from agents.roles.gas_floors import gas_floor


class Executor:
    """Sends `ChainAction`s for one agent (its store, sender) to its `contracts`."""

    def __init__(self, agent: Agent, contracts: Contracts, log: logging.Logger) -> None:
        self.agent = agent
        self.contracts = contracts
        self.log = log
        self.gas_used = 0  # by the transactions this process signed (not the resumed ones)
        self.reverted_gas = 0  # the part of it spent on transactions that reverted on chain
        self._warned = SaidOnce()  # (intent, refusal) pairs logged

    async def execute(self, action: ChainAction) -> TxOutcome | None:
        """Simulate and send `action` under its intent; None when it was not (or not newly)
        mined: refused in simulation, reverted on chain (now or in an earlier run), or failed
        (the next decision retries it). A refusal is logged, not raised."""
        recorded = self.agent.store.get_intent(action.intent)
        if recorded is not None and recorded.status == "failed":
            return None
        try:
            return await self.send(action)
        except TxReverted as exc:
            text = revert_text(exc)
            if self._warned.first((action.intent, text)):  # the same refusal is logged once
                self.log.warning("%s not sent: %s", action.name, text)
            return None
        except TxFailed as exc:
            # Mined but reverted: the chain moved between simulation and inclusion (usually
            # another party acted on the same unit in the same block).
            self.gas_used += exc.gas_used
            self.reverted_gas += exc.gas_used
            winner = await self.race_winner(exc)
            if winner is not None:
                self.log.info(
                    "%s lost a race on chain: %s's transaction %s landed first (block %d)",
                    action.name,
                    winner.sender,
                    winner.tx_hash[:12],
                    winner.block,
                )
                return None
            why = await self.chain_refusal(exc)
            if why is not None and why.error_name in CLOCK_REFUSALS:
                # the chain's clock passed the window between my check and the block: a send
                # that came too late (under load), not a fault (issue #45)
                self.log.warning(
                    "%s landed past its window (block %d): %s",
                    action.name,
                    exc.block_number,
                    revert_text(why),
                )
                return None
            level = logging.INFO if action.keeper else logging.ERROR
            said = f"{str(exc)[:300]}" + (f" ({revert_text(why)})" if why is not None else "")
            self.log.log(level, "%s reverted on chain: %s", action.name, said)
            return None
        except TxError as exc:
            self.log.error("%s failed (will retry): %s", action.name, str(exc)[:300])
            return None

    async def send(self, action: ChainAction) -> TxOutcome:
        """Simulate and send `action` under its intent, raising what the sender raises
        (TxReverted: refused in simulation; TxFailed: reverted on chain; TxError): for a
        one-shot command that reports a refusal instead of retrying it (the `node` role)."""
        fn = action.tx(self.contracts)
        request = TxRequest.call(fn, gas_floor=gas_floor(fn))
        out = await self.agent.sender.send(action.intent, request)
        if not out.resumed:
            self.gas_used += out.gas_used
            self.log.info(
                "%s mined in block %d (gas %d)", action.name, out.block_number, out.gas_used
            )
        return out

    async def race_winner(self, exc: TxFailed) -> RaceWinner | None:
        """The transaction that made mine revert, if a race did: another sender's successful
        call to the same contract with the same first argument (the unit, game or job), before
        mine in its block or in the block before. None when there is none (or it cannot be
        read): the revert is then no race."""
        if not exc.tx_hash:
            return None
        w3 = self.agent.w3
        try:
            mine = await w3.eth.get_transaction(exc.tx_hash)
            data = bytes(mine["input"])
            if len(data) < 36:
                return None
            for number in (exc.block_number, exc.block_number - 1):
                block = await w3.eth.get_block(number, full_transactions=True)
                for tx in block["transactions"]:
                    if number == exc.block_number and tx["hash"] == mine["hash"]:
                        break
                    if not _same_target(tx, mine, data):
                        continue
                    receipt = await w3.eth.get_transaction_receipt(tx["hash"])
                    if int(receipt["status"]) == 1:
                        return RaceWinner(str(tx["from"]), "0x" + bytes(tx["hash"]).hex(), number)
        except Exception:  # a node that cannot say: no winner named (logged as a revert)
            return None
        return None

    async def chain_refusal(self, exc: TxFailed) -> TxReverted | None:
        """Why my mined transaction reverted: its call replayed on its block (that block's state
        and clock), decoded. None when the node cannot say or the replay passes."""
        from web3.exceptions import ContractLogicError

        if not exc.tx_hash:
            return None
        w3 = self.agent.w3
        try:
            mine = await w3.eth.get_transaction(exc.tx_hash)
            call = {"from": mine["from"], "to": mine["to"], "data": mine["input"],
                    "value": mine.get("value", 0), "gas": mine.get("gas")}  # fmt: skip
            await w3.eth.call(call, exc.block_number)
        except ContractLogicError as refused:
            return revert_error(refused, self.agent.sender.errors, "replay")
        except Exception:  # a node that cannot replay it: the revert is told as it is
            return None
        return None


#: Refusals that only say the chain's clock passed a window (the errors of IJobManager and the
#: game that a send made in time, but mined late, meets): a send too late, not a fault.
CLOCK_REFUSALS = frozenset(
    {
        "ClaimWindowClosed",
        "CommitDeadlinePassed",
        "ChallengeWindowClosed",
        "RevealWindowClosed",
        "RevealTooLate",
        "SealingClosed",
        "DataAnswerWindowClosed",
        "CourtWindowClosed",
        "SeedExpired",
        "ClockExpired",
    }
)


@dataclass(frozen=True)
class RaceWinner:
    """The transaction that took what mine wanted first (Executor.race_winner)."""

    sender: str
    tx_hash: str
    block: int


def _same_target(tx: Any, mine: Any, data: bytes) -> bool:
    """`tx` is another sender's call to the contract `mine` called, on the same first argument."""
    other = bytes(tx["input"])
    return (
        tx.get("to") is not None
        and str(tx["to"]).lower() == str(mine["to"]).lower()
        and str(tx["from"]).lower() != str(mine["from"]).lower()
        and len(other) >= 36
        and other[4:36] == data[4:36]
    )


def revert_text(exc: TxReverted) -> str:
    """A simulation's refusal in one line: the custom error and its arguments when decoded."""
    if exc.error_name:
        args = ", ".join(f"{k}={_short(v)}" for k, v in exc.error_args.items())
        return f"{exc.error_name}({args})"
    return str(exc)[:200]


def _short(v: Any) -> str:
    if isinstance(v, bytes):
        return "0x" + v.hex()[:16] + "…"
    return str(v)
