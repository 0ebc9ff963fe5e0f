"""Transaction sending that survives restarts: simulate, record, sign, broadcast, await.

The rules that give "no double-send, no lost send":

1. Every send has a caller-chosen *intent id* (e.g. "commit:job7:round3"). Sending an intent
   that the store already holds never signs a new transaction: it resumes waiting for the
   recorded one (or returns its recorded outcome).
2. The signed raw transaction is committed to SQLite *before* it is broadcast. A crash after
   the commit leaves a pending intent that `reconcile()` (run at start-up) settles against the
   chain: mined -> done; still in the mempool -> wait; dropped -> re-broadcast the *same*
   signed bytes (same nonce, same hash, so it can be mined at most once); its nonce used by
   another transaction and ours provably not mined -> re-sign with a fresh nonce.
3. Every call is simulated with eth_call first, so a call that would revert raises `TxReverted`
   (custom error name and arguments decoded from the ABI) and nothing is signed or recorded.
4. One `NonceManager` per (event loop, chain, address) serialises nonce assignment, recording
   and broadcast, so concurrent sends from one key get consecutive nonces.

The order of observations in `_heal` matters: the account nonce is read *before* the receipt,
so "nonce consumed and no receipt" really means another transaction took the nonce (reading in
the other order could miss our own transaction mined in between and sign it twice).

Async (AsyncWeb3): an agent waits on many receipts and events at once; one event loop keeps
that simple and keeps the nonce lock an asyncio.Lock (no threads touch the sender).
"""

from __future__ import annotations

import asyncio
import enum
import hashlib
import inspect
import json
import logging
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from eth_abi import decode as abi_decode
from eth_account.signers.local import LocalAccount
from eth_utils import keccak, to_checksum_address

from agents.core.clock import Clock, RealClock, backoff_delays
from agents.core.rpc_errors import SendError, classify_send_error, revert_data, transport_errors
from agents.core.store import Intent, Store

log = logging.getLogger(__name__)
T = TypeVar("T")


# --- errors ----------------------------------------------------------------------------------


class TxError(RuntimeError):
    pass


class TxReverted(TxError):
    """The call reverts; `error_name`/`error_args` are decoded from the ABI when known."""

    def __init__(self, message: str, error_name: str | None, error_args: dict[str, Any],
                 data: bytes) -> None:  # fmt: skip
        super().__init__(message)
        self.error_name = error_name
        self.error_args = error_args
        self.data = data


class TxFailed(TxError):
    """Mined, but with status 0 (the chain state changed between simulation and inclusion):
    `tx_hash`, its `block_number` and the `gas_used` it cost."""

    def __init__(
        self, message: str, tx_hash: str = "", block_number: int = 0, gas_used: int = 0
    ) -> None:
        super().__init__(message)
        self.tx_hash = tx_hash
        self.block_number = block_number
        self.gas_used = gas_used


class TxTimeout(TxError):
    """No receipt within the timeout; the intent stays pending (reconcile or send again)."""


class TransportError(TxError):
    """The node could not be reached after every retry."""


class IntentConflict(TxError):
    """An intent id was reused for a different transaction."""


# --- error decoding --------------------------------------------------------------------------


def _type_str(inp: Mapping[str, Any]) -> str:
    t = inp["type"]
    if t.startswith("tuple"):
        return "(" + ",".join(_type_str(c) for c in inp["components"]) + ")" + t[len("tuple") :]
    return t


class ErrorDecoder:
    """Decodes revert data: custom errors from ABIs, plus Solidity's Error(string)/Panic."""

    BUILTIN = (
        {"type": "error", "name": "Error", "inputs": [{"name": "message", "type": "string"}]},
        {"type": "error", "name": "Panic", "inputs": [{"name": "code", "type": "uint256"}]},
    )

    def __init__(self, abi: Iterable[Mapping[str, Any]] = ()) -> None:
        self._errors: dict[bytes, Mapping[str, Any]] = {}
        for item in [*self.BUILTIN, *abi]:
            if item.get("type") != "error":
                continue
            sig = f"{item['name']}({','.join(_type_str(i) for i in item['inputs'])})"
            self._errors[keccak(text=sig)[:4]] = item

    @classmethod
    def from_artifacts(cls, names: Sequence[str] | None = None,
                       abi_dir: Path | None = None) -> ErrorDecoder:  # fmt: skip
        """From build/abi artifacts; every exported contract when `names` is None."""
        from agents.core.deploy import DEFAULT_ABI_DIR

        folder = Path(abi_dir or DEFAULT_ABI_DIR)
        paths = (
            [folder / f"{n}.json" for n in names]
            if names is not None
            else sorted(p for p in folder.glob("*.json") if p.name != "index.json")
        )
        abi: list[Mapping[str, Any]] = []
        for path in paths:
            abi += json.loads(path.read_text()).get("abi", [])
        return cls(abi)

    def decode(self, data: bytes) -> tuple[str, dict[str, Any]] | None:
        item = self._errors.get(bytes(data[:4]))
        if item is None:
            return None
        types = [_type_str(i) for i in item["inputs"]]
        try:
            values = abi_decode(types, bytes(data[4:]))
        except Exception:  # malformed payload: report the name only
            return item["name"], {}
        args = {}
        for inp, typ, value in zip(item["inputs"], types, values, strict=True):
            args[inp["name"] or f"arg{len(args)}"] = (
                to_checksum_address(value) if typ == "address" else value
            )
        return item["name"], args


def _revert_data(exc: Exception) -> bytes:
    return revert_data(getattr(exc, "data", None))


def revert_error(exc: Exception, decoder: ErrorDecoder, what: str) -> TxReverted:
    data = _revert_data(exc)
    decoded = decoder.decode(data) if data else None
    if decoded is not None:
        name, args = decoded
        shown = ", ".join(f"{k}={v}" for k, v in args.items())
        return TxReverted(f"{what} reverted: {name}({shown})", name, args, data)
    reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return TxReverted(f"{what} reverted: {reason}", None, {}, data)


# --- requests and outcomes -------------------------------------------------------------------


@dataclass(frozen=True)
class TxRequest:
    to: str | None  # None: contract creation
    data: bytes = b""
    value: int = 0
    gas: int | None = None  # None: estimate (with a margin)
    # The least gas to give it whatever the estimate says: a call whose cost depends on state a
    # rival may change between my estimate and my inclusion (gas_limit)
    gas_floor: int = 0

    def digest(self, sender: str) -> str:
        """What an intent id is bound to: reusing the id for something else is an error."""
        body = f"{sender.lower()}|{(self.to or '').lower()}|{self.data.hex()}|{self.value}"
        return hashlib.sha256(body.encode()).hexdigest()

    @classmethod
    def call(cls, contract_function: Any, value: int = 0, gas: int | None = None,
             gas_floor: int = 0) -> TxRequest:  # fmt: skip
        """From a web3 ContractFunction (sync or async contract object)."""
        data = contract_function._encode_transaction_data()
        return cls(contract_function.address, bytes.fromhex(data[2:]), value, gas, gas_floor)


@dataclass(frozen=True)
class TxOutcome:
    intent_id: str
    tx_hash: str
    nonce: int
    block_number: int
    gas_used: int
    resumed: bool  # True when this call did not sign anything new (intent already known)


# --- pure decision logic ---------------------------------------------------------------------


class Action(enum.Enum):
    DONE = "done"  # mined: record the receipt
    WAIT = "wait"  # still in the mempool
    REBROADCAST = "rebroadcast"  # dropped, nonce still free: send the same signed bytes
    RESIGN = "resign"  # nonce consumed by another tx and ours not mined: new nonce


def reconcile_action(mined: bool, in_mempool: bool, chain_nonce: int, intent_nonce: int) -> Action:
    """What to do with a pending intent. `chain_nonce` must be read before `mined`."""
    if mined:
        return Action.DONE
    if chain_nonce > intent_nonce:
        return Action.RESIGN
    if in_mempool:
        return Action.WAIT
    return Action.REBROADCAST


def next_nonce(chain_pending: int, local_next: int | None, highest_pending: int | None) -> int:
    """The nonce for a new transaction: above what the node, this process and the store know.

    The store term matters after a restart: a recorded-but-dropped intent holds its nonce
    (it will be re-broadcast), so a new send must not take it.
    """
    candidates = [chain_pending]
    if local_next is not None:
        candidates.append(local_next)
    if highest_pending is not None:
        candidates.append(highest_pending + 1)
    return max(candidates)


def gas_limit(estimate: int, margin: float, floor: int = 0) -> int:
    """The gas to give a call estimated at `estimate`: the estimate with its margin, and never
    less than `floor`. An estimate holds for the state it ran on; a call that a rival's
    transaction makes dearer (a claim that lands after another claim reads one more claimant
    and fills slots nobody filled before) needs gas for the worst state it can meet, which no
    margin on the estimate bounds. Unused gas is not paid for."""
    return max(int(estimate * margin) + 10_000, floor)


# --- nonce manager ---------------------------------------------------------------------------


class NonceManager:
    """Serialises nonce use for one key; shared by every TxSender of that key in this loop."""

    # Per event loop: an asyncio.Lock belongs to one loop (tests run one loop per test).
    _registry: weakref.WeakKeyDictionary[Any, dict[tuple[int, str], NonceManager]] = (
        weakref.WeakKeyDictionary()
    )

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.local_next: int | None = None

    @classmethod
    def for_key(cls, chain_id: int, address: str) -> NonceManager:
        loop = asyncio.get_running_loop()
        per_loop = cls._registry.setdefault(loop, {})
        return per_loop.setdefault((chain_id, address.lower()), cls())

    def resync(self) -> None:
        """Forget the local counter (after 'nonce too low'); the next send asks the node."""
        self.local_next = None


# --- the sender ------------------------------------------------------------------------------


async def retry_transport(
    fn: Callable[[], Awaitable[T]], clock: Clock, what: str, attempts: int = 5,
    base_s: float = 0.25, cap_s: float = 8.0,
) -> T:  # fmt: skip
    """Run `fn`, retrying transport failures with exponential backoff on `clock`."""
    delays = backoff_delays(base_s, cap_s, attempts - 1)
    for attempt in range(attempts):
        try:
            return await fn()
        except transport_errors() as exc:
            if attempt == attempts - 1:
                raise TransportError(
                    f"{what}: node unreachable after {attempts} tries: {exc}"
                ) from exc
            log.warning("%s: transport error (%s); retry in %.2f s", what, exc, delays[attempt])
            await clock.sleep(delays[attempt])
    raise AssertionError("unreachable")


#: Called at each point of a send a crash can fall between: "recorded" (the intent committed,
#: not yet broadcast) and "broadcast", with the intent's id. The crash tests hand one that
#: raises there, to simulate the agent being killed at that point; an agent's is `no_crash`.
CrashPoint = Callable[[str, str], Awaitable[None] | None]


def no_crash(point: str, intent_id: str) -> None:
    """Every agent's crash point: nothing happens there."""


class TxSender:
    """Sends transactions from one local key, recording intents in `store`."""

    def __init__(
        self,
        w3: Any,  # AsyncWeb3
        account: LocalAccount,
        store: Store,
        *,
        errors: ErrorDecoder | None = None,
        clock: Clock | None = None,
        poll_interval: float = 0.5,
        receipt_timeout: float = 120.0,
        resend_after: float = 15.0,
        rpc_attempts: int = 5,
        gas_margin: float = 1.2,
        crash_point: CrashPoint = no_crash,
    ) -> None:
        self.w3 = w3
        self.account = account
        self.address = to_checksum_address(account.address)
        self.store = store
        self.errors = errors or ErrorDecoder()
        self.clock = clock or RealClock()
        self.poll_interval = poll_interval
        self.receipt_timeout = receipt_timeout
        self.resend_after = resend_after
        self.rpc_attempts = rpc_attempts
        self.gas_margin = gas_margin
        self._crash_point = crash_point
        self._chain_id: int | None = None

    # --- plumbing ----------------------------------------------------------------------------
    async def _rpc(self, what: str, fn: Callable[[], Awaitable[T]]) -> T:
        return await retry_transport(fn, self.clock, what, self.rpc_attempts)

    async def _reached(self, point: str, intent_id: str) -> None:
        outcome = self._crash_point(point, intent_id)
        if inspect.isawaitable(outcome):
            await outcome

    async def chain_id(self) -> int:
        if self._chain_id is None:
            self._chain_id = int(await self._rpc("chain id", lambda: self.w3.eth.chain_id))
        return self._chain_id

    async def _manager(self) -> NonceManager:
        return NonceManager.for_key(await self.chain_id(), self.address)

    def _call_params(self, request: TxRequest) -> dict[str, Any]:
        params: dict[str, Any] = {"from": self.address, "value": request.value}
        if request.to is not None:
            params["to"] = to_checksum_address(request.to)
        if request.data:
            params["data"] = "0x" + request.data.hex()
        return params

    async def _receipt(self, tx_hash: str) -> Mapping[str, Any] | None:
        from web3.exceptions import TransactionNotFound

        async def get() -> Mapping[str, Any] | None:
            try:
                return await self.w3.eth.get_transaction_receipt(tx_hash)
            except TransactionNotFound:
                return None

        return await self._rpc("receipt", get)

    async def _in_mempool(self, tx_hash: str) -> bool:
        from web3.exceptions import TransactionNotFound

        async def get() -> bool:
            try:
                return (await self.w3.eth.get_transaction(tx_hash)) is not None
            except TransactionNotFound:
                return False

        return await self._rpc("transaction lookup", get)

    async def _nonce(self, block: str) -> int:
        return int(
            await self._rpc("nonce", lambda: self.w3.eth.get_transaction_count(self.address, block))
        )

    # --- simulation ----------------------------------------------------------------------------
    async def simulate(self, request: TxRequest) -> bytes:
        """eth_call the request against the pending state (the next block, with the
        transactions the node holds for it): a rival's transaction that will land first
        already counts, so the call is refused instead of reverting on chain (issue #45);
        TxReverted if it would revert."""
        from web3.exceptions import ContractLogicError

        params = self._call_params(request)
        try:
            return bytes(await self._rpc("eth_call", lambda: self.w3.eth.call(params, "pending")))
        except ContractLogicError as exc:
            raise revert_error(exc, self.errors, "simulation") from None

    async def _estimate_gas(self, request: TxRequest) -> int:
        from web3.exceptions import ContractLogicError

        if request.gas is not None:
            return request.gas
        try:
            # One try: the request just simulated without a revert, so an estimate the node does
            # not answer in time is no reason to wait for more. A node that estimates by running
            # the call many times (Ganache's binary search) took over a minute for a dispute
            # move's proof, twice, and five tries ran the challenger's game clock out.
            est = await retry_transport(
                lambda: self.w3.eth.estimate_gas(self._call_params(request), "pending"),
                self.clock,
                "estimate gas",
                attempts=1,
            )
        except ContractLogicError as exc:
            raise revert_error(exc, self.errors, "gas estimation") from None
        except TransportError as exc:
            return await self._unestimated_gas(exc)
        return gas_limit(int(est), self.gas_margin, request.gas_floor)

    async def _unestimated_gas(self, exc: TransportError) -> int:
        """The gas of a simulated call whose estimate did not come: the latest block's gas
        limit, the most any transaction can use (what it does not use is not paid for)."""
        latest = await self._rpc("latest block", lambda: self.w3.eth.get_block("latest"))
        gas = int(latest["gasLimit"])
        log.warning("%s; sending with the block gas limit %d instead", exc, gas)
        return gas

    async def _sign(self, request: TxRequest, nonce: int, gas: int) -> tuple[str, str]:
        latest = await self._rpc("latest block", lambda: self.w3.eth.get_block("latest"))
        base_fee = int(latest.get("baseFeePerGas", 0) or 0)
        try:
            tip = int(await self._rpc("priority fee", lambda: self.w3.eth.max_priority_fee))
        except Exception:  # nodes without eth_maxPriorityFeePerGas
            tip = 10**9
        tx: dict[str, Any] = {
            "chainId": await self.chain_id(),
            "nonce": nonce,
            "gas": gas,
            "maxFeePerGas": 2 * base_fee + tip,
            "maxPriorityFeePerGas": tip,
            "value": request.value,
            "data": "0x" + request.data.hex(),
            "type": 2,
        }
        if request.to is not None:
            tx["to"] = to_checksum_address(request.to)
        signed = self.account.sign_transaction(tx)
        return "0x" + bytes(signed.raw_transaction).hex(), "0x" + bytes(signed.hash).hex()

    # --- sending ---------------------------------------------------------------------------------
    async def send(self, intent_id: str, request: TxRequest) -> TxOutcome:
        """Send `request` once under `intent_id`, wait for its receipt, return the outcome.

        Raises TxReverted (simulation; nothing sent), TxFailed (mined with status 0),
        TxTimeout (still pending; call again or reconcile later), IntentConflict.
        """
        digest = request.digest(self.address)
        existing = self.store.get_intent(intent_id)
        if existing is not None:
            if existing.request_digest != digest:
                raise IntentConflict(f"intent {intent_id!r} was recorded for another transaction")
            if existing.status != "pending" and await self._receipt(existing.tx_hash) is None:
                # Asked again for an action recorded as done whose transaction is gone: the
                # chain lost it (reorg). Put our lost transactions back, in nonce order.
                manager = await self._manager()
                async with manager.lock:
                    await self._replay_lost_locked(manager, force=True)
            return await self.wait(intent_id, resumed=True)
        await self.simulate(request)
        gas = await self._estimate_gas(request)
        manager = await self._manager()
        async with manager.lock:
            # A concurrent send of the same intent may have recorded it while we simulated.
            raced = self.store.get_intent(intent_id) is not None
            if not raced:
                await self._sign_record_broadcast(intent_id, request, digest, gas, manager)
        if raced:
            return await self.send(intent_id, request)  # the resume path (digest checked)
        await self._reached("broadcast", intent_id)
        return await self.wait(intent_id)

    async def _sign_record_broadcast(
        self, intent_id: str, request: TxRequest, digest: str, gas: int, manager: NonceManager
    ) -> None:
        """Under the nonce lock: pick the nonce, sign, commit the intent, then broadcast."""
        await self._replay_lost_locked(manager)
        pending = self.store.pending_intents(self.address)
        nonce = next_nonce(
            await self._nonce("pending"),
            manager.local_next,
            max((i.nonce for i in pending), default=None),
        )
        raw, tx_hash = await self._sign(request, nonce, gas)
        # Recorded (and committed) before the broadcast: the core of "no double-send".
        self.store.record_intent(intent_id, self.address, digest, nonce, raw, tx_hash)
        manager.local_next = nonce + 1
        await self._reached("recorded", intent_id)
        await self._broadcast_locked(intent_id, request_for_resign=request, gas=gas)

    async def _broadcast_locked(
        self, intent_id: str, request_for_resign: TxRequest | None = None, gas: int | None = None
    ) -> None:
        """Broadcast the recorded raw tx (caller holds the nonce lock)."""
        intent = self._intent(intent_id)
        try:
            await self._rpc("broadcast", lambda: self.w3.eth.send_raw_transaction(intent.raw_tx))
        except TransportError:
            log.warning("intent %s: broadcast failed, will retry while waiting", intent_id)
            return
        except Exception as exc:
            kind = classify_send_error(str(exc))
            if kind is SendError.NONCE_LOW:
                # Observed "nonce consumed" first; now check whether it was consumed by us.
                if await self._receipt(intent.tx_hash) is None:
                    await self._resign_locked(intent, request_for_resign, gas)
                return
            if kind is SendError.NONCE_HIGH:
                # A node without a queue (Hardhat's automine, Ganache) refuses a nonce past the
                # account's: one of ours before it never reached the node. The next send puts
                # our lost transactions back in nonce order (_replay_lost_locked), and waiting
                # on this one re-broadcasts it (_heal), so it is left pending.
                (await self._manager()).resync()
                log.warning("intent %s: nonce %d is past the node's; an earlier tx of ours is "
                            "missing", intent_id, intent.nonce)  # fmt: skip
                return
            if kind is SendError.UNDERPRICED:
                # Another pool tx holds our nonce: if it mines, _heal sees the nonce taken.
                log.warning("intent %s: nonce %d held by another pool tx", intent_id, intent.nonce)
                return
            if kind is SendError.OTHER:
                raise TxError(f"intent {intent_id}: node refused the transaction: {exc}") from exc
            # KNOWN: already in the pool; MINED_FAILED: mined (a client that answers the send
            # with the failure), so its receipt (status 0) settles it as TxFailed while waiting
        self.store.count_broadcast(intent_id)

    async def _replay_lost_locked(self, manager: NonceManager, force: bool = False) -> None:
        """Re-broadcast, in nonce order, our recorded transactions that a reorg, a rollback or
        a node restarted from older state took off the chain (the node forgets them; a real
        node's pool would re-inject them). Same signed bytes, so each can land at most once;
        without this, a later nonce waits forever behind the gap and an action recorded as
        done is never done. Cheap when nothing was lost: one nonce read, compared with ours."""
        chain_next = await self._nonce("pending")
        ours = [i for i in self.store.intents(self.address) if i.nonce >= chain_next]
        if not ours or (not force and manager.local_next is not None
                        and chain_next >= manager.local_next):  # fmt: skip
            return
        for intent in ours:
            if await self._receipt(intent.tx_hash) is not None:
                continue
            if intent.status != "pending":
                log.warning("intent %s: tx %s (nonce %d) left the chain; re-broadcasting it",
                            intent.intent_id, intent.tx_hash, intent.nonce)  # fmt: skip
                self.store.reopen_intent(intent.intent_id)
            await self._broadcast_locked(intent.intent_id)

    async def _resign_locked(
        self, intent: Intent, request: TxRequest | None, gas: int | None
    ) -> None:
        """Our nonce went to another transaction and ours was not mined: sign again, fresh nonce.

        Safe: the old signed tx can never be mined (its nonce is used), so at most one of the
        two can land. The request is rebuilt from the old raw tx when not given (restart).
        """
        manager = await self._manager()
        manager.resync()
        if request is None or gas is None:
            request, gas = _request_from_raw(intent.raw_tx)
        pending = [
            i for i in self.store.pending_intents(self.address) if i.intent_id != intent.intent_id
        ]
        nonce = next_nonce(
            await self._nonce("pending"), None, max((i.nonce for i in pending), default=None)
        )
        raw, tx_hash = await self._sign(request, nonce, gas)
        self.store.resign_intent(intent.intent_id, nonce, raw, tx_hash)
        manager.local_next = nonce + 1
        log.warning("intent %s: nonce %d was taken; re-signed with nonce %d",
                    intent.intent_id, intent.nonce, nonce)  # fmt: skip
        await self._broadcast_locked(intent.intent_id, request, gas)

    def _intent(self, intent_id: str) -> Intent:
        intent = self.store.get_intent(intent_id)
        if intent is None:
            raise KeyError(intent_id)
        return intent

    async def _heal(self, intent: Intent) -> Action:
        """Look at a pending intent on chain and act on it (see `reconcile_action`)."""
        chain_nonce = await self._nonce("latest")  # read first: see the module docstring
        receipt = await self._receipt(intent.tx_hash)
        in_pool = receipt is None and await self._in_mempool(intent.tx_hash)
        action = reconcile_action(receipt is not None, in_pool, chain_nonce, intent.nonce)
        if action is Action.DONE:
            assert receipt is not None
            self._finish(intent, receipt)
        elif action in (Action.REBROADCAST, Action.RESIGN):
            async with (await self._manager()).lock:
                # Another waiter of this intent may have acted while we looked: our
                # observations are about `intent.tx_hash`, so act only if it is still the one
                # recorded. (Two re-signs would put the call on chain twice.)
                current = self._intent(intent.intent_id)
                if current.status != "pending" or current.tx_hash != intent.tx_hash:
                    return Action.WAIT
                if action is Action.REBROADCAST:
                    log.warning("intent %s: tx %s dropped; re-broadcasting it",
                                intent.intent_id, intent.tx_hash)  # fmt: skip
                    await self._broadcast_locked(intent.intent_id)
                else:
                    await self._resign_locked(current, None, None)
        return action

    def _finish(self, intent: Intent, receipt: Mapping[str, Any]) -> None:
        status = "mined" if int(receipt["status"]) == 1 else "failed"
        self.store.finish_intent(
            intent.intent_id, status, int(receipt["blockNumber"]), int(receipt["gasUsed"])
        )

    def _outcome(self, intent: Intent, resumed: bool) -> TxOutcome:
        if intent.status == "failed":
            raise TxFailed(
                f"intent {intent.intent_id}: tx {intent.tx_hash} mined in block "
                f"{intent.block_number} but reverted",
                intent.tx_hash,
                intent.block_number or 0,
                intent.gas_used or 0,
            )
        assert intent.block_number is not None and intent.gas_used is not None
        return TxOutcome(intent.intent_id, intent.tx_hash, intent.nonce, intent.block_number,
                         intent.gas_used, resumed)  # fmt: skip

    async def wait(
        self, intent_id: str, timeout: float | None = None, resumed: bool = False
    ) -> TxOutcome:
        """Wait for a recorded intent's receipt, re-broadcasting it if it is dropped."""
        deadline = self.clock.monotonic() + (timeout or self.receipt_timeout)
        last_heal = self.clock.monotonic()
        while True:
            intent = self._intent(intent_id)
            if intent.status != "pending":
                return self._outcome(intent, resumed)
            receipt = await self._receipt(intent.tx_hash)
            if receipt is not None:
                self._finish(intent, receipt)
                continue
            now = self.clock.monotonic()
            if now - last_heal >= self.resend_after:
                last_heal = now
                await self._heal(intent)
                continue
            if now >= deadline:
                raise TxTimeout(
                    f"intent {intent_id}: tx {intent.tx_hash} (nonce {intent.nonce}) not mined "
                    f"within {timeout or self.receipt_timeout:g} s; it stays pending"
                )
            await self.clock.sleep(self.poll_interval)

    async def reconcile(self) -> dict[str, Action]:
        """Settle every pending intent of this key against the chain (call at start-up)."""
        done: dict[str, Action] = {}
        for intent in self.store.pending_intents(self.address):
            done[intent.intent_id] = await self._heal(intent)
        return done


def _request_from_raw(raw_tx: str) -> tuple[TxRequest, int]:
    """Rebuild the request (to, data, value) and gas from a signed EIP-1559 transaction."""
    from eth_account.typed_transactions import TypedTransaction
    from hexbytes import HexBytes

    tx = TypedTransaction.from_bytes(HexBytes(raw_tx)).as_dict()
    to = tx.get("to")
    to_addr = to_checksum_address(to) if to else None
    data = tx.get("data", b"")
    data_bytes = bytes.fromhex(data[2:]) if isinstance(data, str) else bytes(data)
    return TxRequest(to_addr, data_bytes, int(tx.get("value", 0))), int(tx["gas"])
