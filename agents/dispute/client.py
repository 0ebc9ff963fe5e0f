"""Chain I/O of the dispute game: read a game into a `GameView` (`GameReader`, keyless: what the
role agents use, whose moves go through their one executor, agents/roles/executor.py), and, for
the test harness, benches and tests only, send a player's move (simulate first, then send), claim
a timeout, and play a whole game between two players (`GameClient`, `run_game`).

`GameClient` signs locally (eth-account) and sends raw; every move is simulated with
`eth_estimateGas` first, so a move the contract would reject is never sent and is reported as a
`MoveRejected` with the revert reason. It keeps no intent record: no agent sends through it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from eth_account import Account
from web3 import AsyncWeb3, Web3
from web3.contract import AsyncContract, Contract
from web3.exceptions import ContractCustomError, ContractLogicError

from agents.dispute.player import DEFENDER_PHASES, GameView, Move, Phase

GAS_CAP = 15_000_000


class MoveRejected(RuntimeError):
    """The contract would revert the move (it was not sent)."""


class Player(Protocol):
    def next_move(self, v: GameView) -> Move | None: ...


_EVENT_FIELDS = {
    "CheckpointsPosted": ("checkpoints", "roots"),
    "LeavesPosted": ("leaves", "leaves"),
    "ChunkRevealed": ("chunk", "chunk"),
}


def _topic0_names(game: Any) -> dict[bytes, str]:
    """Event topic0 -> event name, for every event of the game's ABI."""
    out = {}
    for ev in game.abi:
        if ev.get("type") == "event":
            sig = f"{ev['name']}({','.join(_abi_type(i) for i in ev['inputs'])})"
            out[Web3.keccak(text=sig)] = ev["name"]
    return out


def _log_filter(game: Any, game_id: int, from_block: int) -> dict[str, Any]:
    """eth_getLogs filter of every event of game `game_id` (its id is every event's topic 1)."""
    return {
        "address": game.address,
        "fromBlock": from_block,
        "toBlock": "latest",
        "topics": [None, "0x" + game_id.to_bytes(32, "big").hex()],
    }


def game_view(
    game: Any, topic0: dict[bytes, str], game_id: int, c: dict, p: dict, logs: list
) -> GameView:
    """The `GameView` of game `game_id` from its claimOf and progressOf structs (`c`, `p`: by
    the ABI's component names) and its event logs: pure, so the sync and the async reader
    share it."""
    v = GameView(
        game_id=game_id, step_offset=c["stepOffset"], steps=c["steps"], interval=c["interval"]
    )
    v.phase, v.winner, v.moves = p["phase"], p["winner"], p["moves"]
    v.segment, v.step, v.node, v.leaf = p["segment"], p["step"], p["node"], p["leaf"]
    v.element, v.lo, v.hi = p["element"], p["lo"], p["hi"]
    v.walk_height, v.walk_index = p["walkHeight"], p["walkIndex"]
    for log in logs:
        name = topic0.get(bytes(log["topics"][0]))
        if name is None:
            continue
        args = getattr(game.events, name)().process_log(log)["args"]
        if name in _EVENT_FIELDS:
            attr, key = _EVENT_FIELDS[name]
            setattr(v, attr, _norm(args[key]))
        elif name == "SegmentOpened":
            v.step_roots = [args["startRoot"], *_norm(args["intermediateRoots"]), args["endRoot"]]
        elif name == "TracePosted":
            v.node_roots = _norm(args["roots"])
        elif name == "AccumulatorsPosted":
            v.cut_values = [int(x) for x in args["values"]]
        elif name == "TraceRootPosted":
            v.state_top = _norm(args["stateNodes"])
        elif name == "StateSubtreePosted":
            nodes = _norm(args["nodes"])
            v.state_rounds.append((int(args["height"]), int(args["index"]), nodes))
        elif name == "StateSubtreePicked":
            v.state_walk = True
        elif name == "TraceSubtreePosted":
            nodes = _norm(args["nodes"])
            v.trace_rounds.append((int(args["height"]), int(args["index"]), nodes))
        elif name == "SubtreePosted":
            v.subtree = _norm(args["nodes"])
            v.subtree_height, v.subtree_index = int(args["height"]), int(args["index"])
    return v


@dataclass
class GameReader:
    """Reads of the game contract over a synchronous Web3 (the harness, benches and tests): no
    key, no sends. `game` is bound by agents.core.bindings.bind (results decoded by name)."""

    w3: Web3
    game: Contract

    def __post_init__(self) -> None:
        self._topic0 = _topic0_names(self.game)

    def view(self, game_id: int, from_block: int = 0) -> GameView:
        claim, progress = (
            self.read_struct("claimOf", game_id),
            self.read_struct("progressOf", game_id),
        )
        logs = self.w3.eth.get_logs(_log_filter(self.game, game_id, from_block))
        return game_view(self.game, self._topic0, game_id, claim, progress, logs)

    def read_struct(self, fn: str, *args: Any) -> dict[str, Any]:
        """A view returning one struct, as a dict keyed by the ABI's component names (the game
        may be bound with or without decode_tuples)."""
        return _by_name(self.game, fn, getattr(self.game.functions, fn)(*args).call())

    def deadline(self, game_id: int) -> int:
        _, deadline = self.game.functions.turn(game_id).call()
        return int(deadline)


@dataclass
class AsyncGameReader:
    """The same reads over an agent's one AsyncWeb3 (the roles' game turns,
    agents/roles/games.py): no key, no sends."""

    w3: AsyncWeb3
    game: AsyncContract

    def __post_init__(self) -> None:
        self._topic0 = _topic0_names(self.game)

    async def view(self, game_id: int, from_block: int = 0) -> GameView:
        f = self.game.functions
        claim = _by_name(self.game, "claimOf", await f.claimOf(game_id).call())
        progress = _by_name(self.game, "progressOf", await f.progressOf(game_id).call())
        logs = await self.w3.eth.get_logs(_log_filter(self.game, game_id, from_block))
        return game_view(self.game, self._topic0, game_id, claim, progress, logs)

    async def deadline(self, game_id: int) -> int:
        _, deadline = await self.game.functions.turn(game_id).call()
        return int(deadline)


def _by_name(game: Any, fn: str, result: Any) -> dict[str, Any]:
    """`result` of `fn` (a view returning one struct) keyed by the ABI's component names."""
    (out,) = next(i for i in game.abi if i.get("type") == "function" and i["name"] == fn)["outputs"]
    names = [c["name"] for c in out["components"]]
    return dict(zip(names, result, strict=True))


@dataclass
class GameClient(GameReader):
    """One account's access to the game contract: its reads and its own sends (the test harness,
    benches and tests; agents send through their executor)."""

    key: str = field(repr=False)  # the private key: never in a repr, log line or traceback
    gas_price: int | None = None
    address: str = field(init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.address = Account.from_key(self.key).address
        if self.gas_price is None:
            self.gas_price = self.w3.eth.gas_price

    # -- writing ----------------------------------------------------------------------------

    def transact(self, fn: str, *args: Any) -> dict:
        """Simulates, then sends `fn(*args)`; returns the receipt. Raises MoveRejected."""
        call = getattr(self.game.functions, fn)(*args)
        base = {"from": self.address, "gasPrice": self.gas_price, "chainId": self.w3.eth.chain_id}
        try:
            gas = call.estimate_gas(base)
        except (ContractLogicError, ContractCustomError, ValueError) as exc:
            raise MoveRejected(f"{fn}: {exc}") from exc
        except Exception as exc:  # noqa: BLE001 - in-process chains raise their own type
            if type(exc).__name__ != "TransactionFailed":
                raise
            raise MoveRejected(f"{fn}: {exc}") from exc
        tx = call.build_transaction(
            {
                **base,
                "gas": min(GAS_CAP, gas + gas // 5 + 50_000),
                "nonce": self.w3.eth.get_transaction_count(self.address, "pending"),
            }
        )
        signed = Account.sign_transaction(tx, self.key)
        receipt = self.w3.eth.wait_for_transaction_receipt(
            self.w3.eth.send_raw_transaction(signed.raw_transaction)
        )
        if receipt["status"] != 1:
            raise MoveRejected(f"{fn}: reverted in block {receipt['blockNumber']}")
        return receipt

    def play(self, move: Move, game_id: int) -> dict:
        return self.transact(move.fn, *move.call_args(game_id))

    def claim_timeout(self, game_id: int) -> dict:
        return self.transact("claimTimeout", game_id)


def _abi_type(inp: dict) -> str:
    t = inp["type"]
    if t.startswith("tuple"):
        return "(" + ",".join(_abi_type(c) for c in inp["components"]) + ")" + t[5:]
    return t


def _norm(x: Any) -> Any:
    if isinstance(x, (list, tuple)):
        return [bytes(i) for i in x]
    return bytes(x)


@dataclass
class GameRecord:
    """How a game went: moves made, gas per move, who won and whether by timeout."""

    game_id: int
    moves: list[tuple[str, int]] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    phases: list[int] = field(default_factory=list)  # the phase of every turn, in order
    winner: int = 0
    by_timeout: bool = False

    @property
    def gas(self) -> int:
        return sum(g for _, g in self.moves)

    @property
    def challenger_won(self) -> bool:
        return self.winner == 2


def run_game(
    game_id: int,
    defender: tuple[Player, GameClient],
    challenger: tuple[Player, GameClient],
    advance_time: Callable[[int], None],
    from_block: int = 0,
    max_moves: int = 64,
) -> GameRecord:
    """Plays a game to the end. A side with no move (or whose move the chain rejects) is
    silent: time is advanced past its deadline and the other side claims the timeout."""
    rec = GameRecord(game_id)
    reader = defender[1]
    for _ in range(max_moves):
        v = reader.view(game_id, from_block)
        if v.phase == Phase.RESOLVED:
            break
        rec.phases.append(v.phase)
        side, other = (
            (defender, challenger) if v.phase in DEFENDER_PHASES else (challenger, defender)
        )
        player, client = side
        move = player.next_move(v)
        if move is not None:
            try:
                receipt = client.play(move, game_id)
                rec.moves.append((move.fn, int(receipt["gasUsed"])))
                continue
            except MoveRejected as exc:
                rec.rejected.append(str(exc)[:300])
        now = reader.w3.eth.get_block("latest")["timestamp"]
        advance_time(max(1, client.deadline(game_id) - int(now) + 1))
        receipt = other[1].claim_timeout(game_id)
        rec.moves.append(("claimTimeout", int(receipt["gasUsed"])))
        rec.by_timeout = True
    p = reader.read_struct("progressOf", game_id)
    if p["phase"] != Phase.RESOLVED:
        raise RuntimeError(f"game {game_id} did not end in {max_moves} moves")
    rec.winner = int(p["winner"])
    return rec
