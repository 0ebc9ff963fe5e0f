"""The roles' one executor (agents/roles/executor.py), without a chain: it sends an action's own
transaction under the action's intent through the agent's sender, never sends an intent that
was recorded as failed again, logs a refusal instead of raising it (once per intent and reason),
and counts the gas of what it signed, not of what it resumed."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace

import pytest
from web3 import Web3

from agents.core.bindings import bind
from agents.core.tx import TxError, TxFailed, TxOutcome, TxReverted
from agents.roles.actions import CHAIN_ACTIONS, ChallengeUnit, Finalize, Withdraw
from agents.roles.executor import Executor
from agents.roles.logic import KEEPER_STEPS

MANAGER = "0x" + "01" * 20
UNIT = 7 << 32


class FakeSender:
    """The core sender: records (intent, request) and answers `outcome` (or raises it)."""

    def __init__(self, outcome: object) -> None:
        self.outcome, self.sent = outcome, []

    async def send(self, intent: str, request) -> TxOutcome:
        self.sent.append((intent, request))
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome


def executor(outcome: object, recorded: dict | None = None) -> tuple[Executor, FakeSender]:
    intents = recorded or {}
    sender = FakeSender(outcome)
    agent = SimpleNamespace(
        sender=sender, store=SimpleNamespace(get_intent=lambda i: intents.get(i))
    )
    contracts = SimpleNamespace(manager=bind(Web3(), "JobManager", MANAGER))
    return Executor(agent, contracts, logging.getLogger("test.executor")), sender


def mined(intent: str, resumed: bool = False, gas: int = 21_000) -> TxOutcome:
    return TxOutcome(intent, "0xab", 3, 9, gas, resumed)


def test_an_action_is_sent_as_its_own_call_under_its_intent():
    action = ChallengeUnit(f"challenge:{UNIT}:0", UNIT, b"\x22" * 32)
    ex, sender = executor(mined(action.intent))
    out = asyncio.run(ex.execute(action))
    assert out is not None and out.block_number == 9
    ((intent, request),) = sender.sent
    expected = action.tx(ex.contracts)._encode_transaction_data()
    assert intent == action.intent
    assert (request.to, "0x" + request.data.hex()) == (MANAGER, expected)
    assert ex.gas_used == 21_000


def test_a_resumed_send_is_returned_but_its_gas_not_counted_again():
    ex, _ = executor(mined("finalize:1", resumed=True))
    assert asyncio.run(ex.execute(Finalize("finalize:1", UNIT))) is not None
    assert ex.gas_used == 0


def test_an_intent_recorded_as_failed_is_not_sent_again():
    ex, sender = executor(mined("withdraw:5:9"), {"withdraw:5:9": SimpleNamespace(status="failed")})
    assert asyncio.run(ex.execute(Withdraw("withdraw:5:9"))) is None
    assert sender.sent == []
    # a recorded intent still pending or mined goes to the sender, which resumes it
    recorded = {"withdraw:5:9": SimpleNamespace(status="mined")}
    ex, sender = executor(mined("withdraw:5:9", True), recorded)
    assert asyncio.run(ex.execute(Withdraw("withdraw:5:9"))) is not None
    assert [intent for intent, _ in sender.sent] == ["withdraw:5:9"]


def test_a_refusal_in_simulation_is_logged_once_per_intent_not_raised(caplog):
    refused = TxReverted(
        "reverted", "UnitNotVerifying", {"unitId": UNIT, "root": b"\x01" * 32}, b""
    )
    ex, sender = executor(refused)
    caplog.set_level(logging.INFO, logger="test.executor")
    for _ in range(3):
        assert asyncio.run(ex.execute(Finalize("finalize:1", UNIT))) is None
    assert len(sender.sent) == 3  # each round asks again: the chain may have moved
    (said,) = [r for r in caplog.records if "not sent" in r.getMessage()]
    assert said.levelno == logging.WARNING
    assert f"Finalize not sent: UnitNotVerifying(unitId={UNIT}, root=0x0101" in said.getMessage()


@pytest.mark.parametrize(
    ("action", "level"),
    [
        (Finalize("finalize:1", UNIT), logging.INFO),  # a rival keeper took the step first
        (ChallengeUnit("challenge:1:0", UNIT, b"\x22" * 32), logging.ERROR),
    ],
)
def test_a_send_reverted_on_chain_is_logged_by_who_may_take_it(action, level, caplog):
    ex, _ = executor(TxFailed("status 0 in block 9"))
    caplog.set_level(logging.INFO, logger="test.executor")
    assert asyncio.run(ex.execute(action)) is None
    (said,) = [r for r in caplog.records if "reverted on chain" in r.getMessage()]
    assert said.levelno == level


def test_the_keeper_steps_are_the_job_managers_seven():
    """Their on-chain reverts are a rival keeper's race (INFO); every other action's an ERROR."""
    assert {t for t in CHAIN_ACTIONS if t.keeper} == KEEPER_STEPS
    assert len(KEEPER_STEPS) == 7


def test_a_failed_send_is_logged_for_a_retry_and_a_one_shot_send_raises_it(caplog):
    ex, _ = executor(TxError("node unreachable"))
    caplog.set_level(logging.INFO, logger="test.executor")
    assert asyncio.run(ex.execute(Withdraw("withdraw:5:9"))) is None
    assert any("failed (will retry)" in r.getMessage() for r in caplog.records)
    with pytest.raises(TxError):  # the node command reports it instead (Executor.send)
        asyncio.run(ex.send(Withdraw("withdraw:5:9")))


MINE, RIVAL = "0x" + "aa" * 20, "0x" + "bb" * 20


def chain_with(rival_call: bytes | None, rival_status: int = 1) -> SimpleNamespace:
    """An AsyncWeb3's eth holding my reverted transaction (block 9) and, before it in the same
    block, a rival's call to the manager (`rival_call`: its calldata)."""
    mine = {"hash": b"\x01" * 32, "from": MINE, "to": MANAGER, "input": b""}
    txs = {b"\x01" * 32: mine}
    block = [mine]
    if rival_call is not None:
        rival = {"hash": b"\x02" * 32, "from": RIVAL, "to": MANAGER, "input": rival_call}
        txs[rival["hash"]] = rival
        block = [rival, mine]

    async def get_transaction(tx_hash):
        return txs[bytes(tx_hash) if isinstance(tx_hash, bytes) else bytes.fromhex(tx_hash[2:])]

    async def get_block(number, full_transactions=False):
        return {"transactions": block if number == 9 else []}

    async def get_transaction_receipt(tx_hash):
        return {"status": rival_status}

    eth = SimpleNamespace(
        get_transaction=get_transaction,
        get_block=get_block,
        get_transaction_receipt=get_transaction_receipt,
    )
    return SimpleNamespace(eth=eth), mine


@pytest.mark.parametrize(
    ("rival", "level"),
    [
        ("challenge", logging.INFO),  # the rival's challenge of the same unit landed first
        ("other unit", logging.ERROR),  # no race: a revert nobody won
    ],
)
def test_a_revert_on_chain_that_lost_a_race_is_info_naming_the_winner(rival, level, caplog):
    """Issue #45: two verifiers challenge one unit in one block; the loser's revert is an
    expected outcome (INFO, with the winner's address), not an ERROR."""
    action = ChallengeUnit(f"challenge:{UNIT}:0", UNIT, b"\x22" * 32)
    ex, _ = executor(TxFailed("reverted", "0x" + "01" * 32, 9, 41_000))
    mine_call = action.tx(ex.contracts)._encode_transaction_data()
    unit = UNIT if rival == "challenge" else UNIT + (1 << 32)
    other = ChallengeUnit("x", unit, b"\x33" * 32).tx(ex.contracts)._encode_transaction_data()
    w3, mine = chain_with(bytes.fromhex(other[2:]))
    mine["input"] = bytes.fromhex(mine_call[2:])
    ex.agent.w3 = w3
    caplog.set_level(logging.INFO, logger="test.executor")
    assert asyncio.run(ex.execute(action)) is None
    (said,) = [r for r in caplog.records if "on chain" in r.getMessage()]
    assert said.levelno == level
    if level == logging.INFO:
        assert "lost a race" in said.getMessage() and RIVAL in said.getMessage()
    assert ex.gas_used == 41_000 and ex.reverted_gas == 41_000


def test_a_revert_that_only_met_the_clock_is_a_warning_naming_the_window(caplog):
    """Issue #45's bench: a claim checked in time but mined a block past its window reverts with
    nobody's rival transaction before it. Its call replayed on its block names the window
    (ClaimWindowClosed): a send too late, a WARNING; a revert replayed to another refusal, or
    one the node cannot replay, stays an ERROR."""
    from web3.exceptions import ContractLogicError

    from agents.core.tx import ErrorDecoder

    selector = Web3.keccak(text="ClaimWindowClosed(uint256,uint64)")[:4]
    late = "0x" + (selector + UNIT.to_bytes(32, "big") + (1000).to_bytes(32, "big")).hex()
    other = "0x" + (Web3.keccak(text="NotDeployer(address)")[:4] + bytes(32)).hex()
    for data, level in ((late, logging.WARNING), (other, logging.ERROR), (None, logging.ERROR)):
        action = ChallengeUnit(f"challenge:{UNIT}:0", UNIT, b"\x22" * 32)
        ex, sender = executor(TxFailed("reverted", "0x" + "01" * 32, 9, 25_000))
        sender.errors = ErrorDecoder.from_artifacts(["JobManager"])
        w3, mine = chain_with(None)

        async def call(params, block, data=data):
            assert block == 9 and params["to"] == MANAGER
            if data is None:
                raise OSError("the node cannot replay it")
            raise ContractLogicError("execution reverted", data=data)

        w3.eth.call = call
        ex.agent.w3 = w3
        caplog.clear()
        caplog.set_level(logging.INFO, logger="test.executor")
        assert asyncio.run(ex.execute(action)) is None
        (said,) = [r for r in caplog.records if r.name == "test.executor"]
        assert said.levelno == level, said.getMessage()
        if level == logging.WARNING:
            assert "landed past its window" in said.getMessage()
            assert "ClaimWindowClosed" in said.getMessage()
