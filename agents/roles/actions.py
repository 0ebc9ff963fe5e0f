"""The roles' actions as typed values: what the pure decisions (agents/roles/logic.py) return and
what the one executor (agents/roles/executor.py) sends.

Three kinds, each a frozen dataclass with named fields:

- `LocalWork`: work done off chain (train, replay, play a game turn, answer a data request,
  re-check an attestation, report one). The role's handler does it, and may send chain actions.
- `Planned`: a send decided now whose arguments need I/O (my secret's hash, my replay's roots,
  the bond quoted just before a challenge): it names the send's intent, and the role's handler
  builds the complete `ChainAction` under that intent just before it is executed.
- `ChainAction`: one transaction, complete. `intent` names exactly one logical send (unit,
  attempt, deadline or move number): the core sender never signs a second transaction for an
  intent it has recorded, so a restarted agent that takes the same decision again resumes the
  recorded transaction. The intent strings are part of the agents' crash-restart contract with
  their stores: an intent string changed is a send repeated after an upgrade. `tx(c)` names its
  contract function explicitly (no lookup by the action's name).

Roles dispatch on the type (`match act: case Commit(): ...`), never on a string.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar, Protocol

from web3.contract import Contract
from web3.contract.contract import ContractFunction

from agents.dispute.availability import HeaderPart, Sample
from agents.dispute.player import Move


class Contracts(Protocol):
    """The contracts a role's chain actions go to (RoleAgent has them all)."""

    manager: Contract
    registry: Contract
    token: Contract
    game: Contract  # the job manager's dispute game
    judge: Contract  # ForcedErrorJudge
    court: Contract | None  # AttestationCourt, when deployed
    court_game: Contract | None  # the court's dispute game
    round_manager: Contract | None  # RoundManager (decomposed jobs), when deployed
    round_game: Contract | None  # the round manager's dispute game (version-3 aggregates)


def _court(c: Contracts) -> Contract:
    if c.court is None:
        raise ValueError("no AttestationCourt is wired: a court action cannot be sent")
    return c.court


def _court_game(c: Contracts) -> Contract:
    if c.court_game is None:
        raise ValueError("no AttestationCourt is wired: a court game move cannot be sent")
    return c.court_game


def _round_manager(c: Contracts) -> Contract:
    if c.round_manager is None:
        raise ValueError("no RoundManager is wired: a decomposed job's action cannot be sent")
    return c.round_manager


# --- the three kinds -------------------------------------------------------------------------


class LocalWork:
    """Work done off chain by the role's handler (it may send chain actions of its own)."""


class Planned:
    """A send whose arguments the role's handler gathers (I/O) just before it builds the
    complete `ChainAction` under `intent`."""

    intent: str


class ChainAction:
    """One transaction: `tx(c)` is its contract call, `intent` its send's one intent id."""

    intent: str
    #: Keeper steps anyone may take: a rival taking the same step first makes mine revert on
    #: chain, which is logged at INFO, not as an error (Executor.execute).
    keeper: ClassVar[bool] = False

    def tx(self, c: Contracts) -> ContractFunction:
        raise NotImplementedError

    @property
    def name(self) -> str:
        """The action in log lines."""
        return type(self).__name__


# --- local work ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Train(LocalWork):
    """Train my assigned unit's attempt (one training runs at a time, off the round loop)."""

    unit_id: int
    attempt: int


@dataclass(frozen=True)
class Defend(LocalWork):
    """Take my turn, as the defender, in the unit's dispute game."""

    game_id: int


@dataclass(frozen=True)
class AnswerData(LocalWork):
    """Answer a data request: open the requested state, its headers, prove its samples (the
    steps not yet on chain)."""

    unit_id: int
    attempt: int


@dataclass(frozen=True)
class Offer(LocalWork):
    """Say where I serve the unit's result (`offerData`): its data was requested."""

    unit_id: int
    attempt: int


@dataclass(frozen=True)
class Replay(LocalWork):
    """Decide my verdict of the unit's attempt: replay the sampled segments."""

    unit_id: int
    attempt: int


@dataclass(frozen=True)
class Play(LocalWork):
    """Take my turn, as the challenger, in the dispute game I opened."""

    game_id: int


@dataclass(frozen=True)
class Recheck(LocalWork):
    """Re-check the attestation `key` ("unit:verifier:block") by replaying its segments."""

    key: str


@dataclass(frozen=True)
class Report(LocalWork):
    """Report the false attestation `key` (a log line, and the record marked reported)."""

    key: str


@dataclass(frozen=True)
class PlayAggregate(LocalWork):
    """Take my turn as `side` in the round manager's game `game_id` over the aggregate of round
    `round` of decomposed job `job_id`: its aggregator defends it, its challenger disputes it."""

    job_id: int
    round: int
    game_id: int
    side: int  # Side.DEFENDER or Side.CHALLENGER


@dataclass(frozen=True)
class PlayCourt(LocalWork):
    """Take my turn, as the challenger, in the court game over the attestation `key`."""

    key: str
    game_id: int


# --- planned sends (their arguments need I/O) ----------------------------------------------


@dataclass(frozen=True)
class ClaimUnit(Planned):
    """Claim the open unit (with my forced-error secret's hash): ClaimWithSecret."""

    intent: str
    unit_id: int


@dataclass(frozen=True)
class Commit(Planned):
    """Commit my trained checkpoints of the unit's attempt: CommitCheckpoints."""

    intent: str
    unit_id: int
    attempt: int


@dataclass(frozen=True)
class Reveal(Planned):
    """Prove my forced error of the unit's attempt: RevealForced."""

    intent: str
    unit_id: int
    attempt: int


@dataclass(frozen=True)
class Seal(Planned):
    """Seal my replay's end roots of the unit's attempt: SealAttestation."""

    intent: str
    unit_id: int
    attempt: int


@dataclass(frozen=True)
class Attest(Planned):
    """Open my seal (`clear`: attest in the clear, as the last drawn verifier): AttestRoots."""

    intent: str
    unit_id: int
    attempt: int
    clear: bool = False


@dataclass(frozen=True)
class Challenge(Planned):
    """Challenge the unit's commitment with my replay's root: ChallengeUnit. `revealed`: the
    commitment is a forced round's revealed one that judged my attestation wrong."""

    intent: str
    unit_id: int
    attempt: int
    revealed: bool = False


@dataclass(frozen=True)
class CourtChallenge(Planned):
    """Dispute the false attestation `key` in the court: ChallengeAttestation."""

    intent: str
    key: str


# --- chain actions: the job manager's keeper steps (anyone) ---------------------------------


@dataclass(frozen=True)
class CloseClaims(ChainAction):
    intent: str
    unit_id: int
    keeper: ClassVar[bool] = True

    def tx(self, c: Contracts) -> ContractFunction:
        return c.manager.functions.closeClaims(self.unit_id)


@dataclass(frozen=True)
class SelectAssignee(ChainAction):
    intent: str
    unit_id: int
    keeper: ClassVar[bool] = True

    def tx(self, c: Contracts) -> ContractFunction:
        return c.manager.functions.selectAssignee(self.unit_id)


@dataclass(frozen=True)
class DrawVerifiers(ChainAction):
    intent: str
    unit_id: int
    keeper: ClassVar[bool] = True

    def tx(self, c: Contracts) -> ContractFunction:
        return c.manager.functions.drawVerifiers(self.unit_id)


@dataclass(frozen=True)
class Finalize(ChainAction):
    intent: str
    unit_id: int
    keeper: ClassVar[bool] = True

    def tx(self, c: Contracts) -> ContractFunction:
        return c.manager.functions.finalize(self.unit_id)


@dataclass(frozen=True)
class SettleDispute(ChainAction):
    intent: str
    unit_id: int
    keeper: ClassVar[bool] = True

    def tx(self, c: Contracts) -> ContractFunction:
        return c.manager.functions.settleDispute(self.unit_id)


@dataclass(frozen=True)
class ExpireDataRequest(ChainAction):
    intent: str
    unit_id: int
    keeper: ClassVar[bool] = True

    def tx(self, c: Contracts) -> ContractFunction:
        return c.manager.functions.expireDataRequest(self.unit_id)


@dataclass(frozen=True)
class ExpireAssignment(ChainAction):
    """Re-open a unit whose assignee missed its commit deadline (a keeper step)."""

    intent: str
    unit_id: int
    keeper: ClassVar[bool] = True

    def tx(self, c: Contracts) -> ContractFunction:
        return c.manager.functions.expireAssignment(self.unit_id)


# --- chain actions: the job manager --------------------------------------------------------


@dataclass(frozen=True)
class RequestData(ChainAction):
    """Demand checkpoint `checkpoint`'s state on chain (PROTOCOL §6.11)."""

    intent: str
    unit_id: int
    checkpoint: int

    def tx(self, c: Contracts) -> ContractFunction:
        return c.manager.functions.requestData(self.unit_id, self.checkpoint)


@dataclass(frozen=True)
class ClaimWithSecret(ChainAction):
    intent: str
    unit_id: int
    secret_hash: bytes

    def tx(self, c: Contracts) -> ContractFunction:
        return c.manager.functions.claim(self.unit_id, self.secret_hash)


@dataclass(frozen=True)
class CommitCheckpoints(ChainAction):
    intent: str
    unit_id: int
    checkpoint_root: bytes
    checkpoints: int
    final_root: bytes
    final_proof: list[bytes]  # opens the list's last entry: the final root (PROTOCOL §6.5)
    locator: str
    seal: bytes

    def tx(self, c: Contracts) -> ContractFunction:
        return c.manager.functions.commitCheckpoints(
            self.unit_id, self.checkpoint_root, self.checkpoints, self.final_root,
            self.final_proof, self.locator, self.seal,
        )  # fmt: skip


@dataclass(frozen=True)
class SealAttestation(ChainAction):
    intent: str
    unit_id: int
    seal: bytes

    def tx(self, c: Contracts) -> ContractFunction:
        return c.manager.functions.sealAttestation(self.unit_id, self.seal)


@dataclass(frozen=True)
class AttestRoots(ChainAction):
    """Open a seal with its end roots and salt (a clear attestation: a zero salt)."""

    intent: str
    unit_id: int
    end_roots: tuple[bytes, ...]
    salt: bytes

    def tx(self, c: Contracts) -> ContractFunction:
        return c.manager.functions.attest(self.unit_id, list(self.end_roots), self.salt)


@dataclass(frozen=True)
class ChallengeUnit(ChainAction):
    intent: str
    unit_id: int
    counter_root: bytes

    def tx(self, c: Contracts) -> ContractFunction:
        return c.manager.functions.challenge(self.unit_id, self.counter_root)


@dataclass(frozen=True)
class OpenDataState(ChainAction):
    intent: str
    unit_id: int
    tensor_count: int
    state_tree: bytes
    checkpoint_proof: tuple[bytes, ...]

    def tx(self, c: Contracts) -> ContractFunction:
        return c.manager.functions.openDataState(
            self.unit_id, self.tensor_count, self.state_tree, list(self.checkpoint_proof)
        )


@dataclass(frozen=True)
class OpenDataHeaders(ChainAction):
    """One part of a data request's headers (agents/dispute/availability.py `HeaderPart`)."""

    intent: str
    unit_id: int
    part: HeaderPart

    def tx(self, c: Contracts) -> ContractFunction:
        return c.manager.functions.openDataHeaders(self.unit_id, *self.part.args())


@dataclass(frozen=True)
class ProveDataSamples(ChainAction):
    """A batch of a data request's samples; the batch that proves the last one answers it, with
    `locator`: where I serve the state."""

    intent: str
    unit_id: int
    samples: tuple[Sample, ...]
    locator: str

    def tx(self, c: Contracts) -> ContractFunction:
        samples = [s.args() for s in self.samples]
        return c.manager.functions.proveDataSamples(self.unit_id, samples, self.locator)


@dataclass(frozen=True)
class OfferData(ChainAction):
    """Say where I serve a unit's data (`DataOffered`): as its assignee or a drawn verifier."""

    intent: str
    unit_id: int
    locator: str

    def tx(self, c: Contracts) -> ContractFunction:
        return c.manager.functions.offerData(self.unit_id, self.locator)


@dataclass(frozen=True)
class PostJob(ChainAction):
    intent: str
    params: tuple[Any, ...]

    def tx(self, c: Contracts) -> ContractFunction:
        return c.manager.functions.postJob(self.params)


@dataclass(frozen=True)
class Withdraw(ChainAction):
    """My credits in the job manager."""

    intent: str

    def tx(self, c: Contracts) -> ContractFunction:
        return c.manager.functions.withdraw()


# --- chain actions: token, registry, judge, court --------------------------------------------


@dataclass(frozen=True)
class Approve(ChainAction):
    intent: str
    spender: str
    amount: int

    def tx(self, c: Contracts) -> ContractFunction:
        return c.token.functions.approve(self.spender, self.amount)


@dataclass(frozen=True)
class Register(ChainAction):
    intent: str
    role: int
    capability: tuple[int, int, int]
    stake: int

    def tx(self, c: Contracts) -> ContractFunction:
        return c.registry.functions.register(self.role, self.capability, self.stake)


@dataclass(frozen=True)
class AddStake(ChainAction):
    intent: str
    amount: int

    def tx(self, c: Contracts) -> ContractFunction:
        return c.registry.functions.addStake(self.amount)


@dataclass(frozen=True)
class SetNetwork(ChainAction):
    """Declare my network capability: bandwidth (Mbit/s) and zone (PROTOCOL §6.2)."""

    intent: str
    bandwidth_mbps: int
    zone: int

    def tx(self, c: Contracts) -> ContractFunction:
        return c.registry.functions.setNetwork((self.bandwidth_mbps, self.zone))


@dataclass(frozen=True)
class RequestUnbond(ChainAction):
    intent: str
    amount: int

    def tx(self, c: Contracts) -> ContractFunction:
        return c.registry.functions.requestUnbond(self.amount)


@dataclass(frozen=True)
class WithdrawUnbonded(ChainAction):
    intent: str

    def tx(self, c: Contracts) -> ContractFunction:
        return c.registry.functions.withdrawUnbonded()


@dataclass(frozen=True)
class Heartbeat(ChainAction):
    intent: str

    def tx(self, c: Contracts) -> ContractFunction:
        return c.registry.functions.heartbeat()


@dataclass(frozen=True)
class RevealForced(ChainAction):
    """Prove a forced error: `reveal` is ForcedErrorJudge.revealForced's struct (forced_reveal)."""

    intent: str
    unit_id: int
    reveal: Any

    def tx(self, c: Contracts) -> ContractFunction:
        return c.judge.functions.revealForced(self.unit_id, self.reveal)


@dataclass(frozen=True)
class ReportPrematureReveal(ChainAction):
    intent: str
    unit_id: int
    secret: bytes

    def tx(self, c: Contracts) -> ContractFunction:
        return c.judge.functions.reportPrematureReveal(self.unit_id, self.secret)


@dataclass(frozen=True)
class ChallengeAttestation(ChainAction):
    intent: str
    unit_id: int
    verifier: str
    index: int
    end_roots: tuple[bytes, ...]
    start_root: bytes
    proof: tuple[bytes, ...]

    def tx(self, c: Contracts) -> ContractFunction:
        return _court(c).functions.challengeAttestation(
            self.unit_id, self.verifier, self.index, list(self.end_roots), self.start_root,
            list(self.proof),
        )  # fmt: skip


@dataclass(frozen=True)
class WithdrawCourt(ChainAction):
    """My credits in the attestation court."""

    intent: str

    def tx(self, c: Contracts) -> ContractFunction:
        return _court(c).functions.withdraw()


# --- chain actions: dispute games (the job manager's, or the court's) -----------------------

#: The dispute game's move functions (agents/dispute/player.py `Move.fn`): a move naming any
#: other function is refused before it is sent (tests/roles/test_actions_abi.py checks each is
#: in the game's ABI).
GAME_MOVES = frozenset(
    {
        "postCheckpoints",
        "pickSegment",
        "openSegment",
        "pickStep",
        "postTrace",
        "postTraceRoot",
        "postTraceSubtree",
        "pickTraceSubtree",
        "pickStateSubtree",
        "postStateSubtree",
        "pickNode",
        "proveProducer",
        "postLeaves",
        "postSubtree",
        "pickSubtree",
        "pickLeaf",
        "revealChunk",
        "proveElement",
        "postAccumulators",
        "pickAccumulators",
        "proveAccumulation",
        "openReduction",
    }
)


class Arena(StrEnum):
    """Which dispute game a game action goes to: the job manager's (a unit's claim), the
    attestation court's, or the round manager's (a version-3 round's aggregate, PROTOCOL §6.9)."""

    UNIT = "unit"
    COURT = "court"
    ROUND = "round"

    @property
    def prefix(self) -> str:
        """Its intents' prefix ("game:…", "court-game:…", "round-game:…"): the unit and court
        games' intents are the ones agents recorded before rounds had games."""
        return "" if self is Arena.UNIT else f"{self.value}-"


def _game(c: Contracts, arena: Arena) -> Contract:
    if arena is Arena.COURT:
        return _court_game(c)
    if arena is Arena.ROUND:
        if c.round_game is None:
            raise ValueError("no RoundManager game is wired: an aggregate's move cannot be sent")
        return c.round_game
    return c.game


@dataclass(frozen=True)
class GameMove(ChainAction):
    """My move in game `game_id` of `arena`'s dispute game."""

    intent: str
    game_id: int
    move: Move
    arena: Arena = Arena.UNIT

    def tx(self, c: Contracts) -> ContractFunction:
        if self.move.fn not in GAME_MOVES:
            raise ValueError(f"{self.move.fn!r} is no dispute game move")
        # the move names one of GAME_MOVES, the game's move functions, checked just above
        function = getattr(_game(c, self.arena).functions, self.move.fn)
        return function(*self.move.call_args(self.game_id))

    @property
    def name(self) -> str:
        return f"{self.arena.prefix.replace('-', ' ')}game {self.game_id} {self.move.fn}"


@dataclass(frozen=True)
class ClaimTimeout(ChainAction):
    """The opponent's clock in game `game_id` of `arena`'s dispute game ran out."""

    intent: str
    game_id: int
    arena: Arena = Arena.UNIT

    def tx(self, c: Contracts) -> ContractFunction:
        return _game(c, self.arena).functions.claimTimeout(self.game_id)

    @property
    def name(self) -> str:
        return f"{self.arena.prefix.replace('-', ' ')}game {self.game_id} claimTimeout"


# --- chain actions: the round manager (decomposed jobs) -------------------------------------


@dataclass(frozen=True)
class PostRoundJob(ChainAction):
    intent: str
    params: tuple[Any, ...]

    def tx(self, c: Contracts) -> ContractFunction:
        return _round_manager(c).functions.postJob(self.params)


@dataclass(frozen=True)
class FinalizeRound(ChainAction):
    intent: str
    job_id: int

    def tx(self, c: Contracts) -> ContractFunction:
        return _round_manager(c).functions.finalizeRound(self.job_id)


@dataclass(frozen=True)
class CommitAggregate(ChainAction):
    intent: str
    job_id: int
    layout: tuple[Any, ...]
    data_roots: tuple[bytes, ...]
    locator: str

    def tx(self, c: Contracts) -> ContractFunction:
        return _round_manager(c).functions.commitAggregate(
            self.job_id, self.layout, list(self.data_roots), self.locator
        )


@dataclass(frozen=True)
class ProveAggregationFraud(ChainAction):
    """`proof`: proveAggregationFraud's arguments after the job id (aggregation.fraud_proof)."""

    intent: str
    job_id: int
    proof: tuple[Any, ...]

    def tx(self, c: Contracts) -> ContractFunction:
        return _round_manager(c).functions.proveAggregationFraud(self.job_id, *self.proof)


@dataclass(frozen=True)
class ChallengeAggregate(ChainAction):
    """Dispute the committed aggregate of job `job_id`'s current round in the round manager's
    game (a version-3 job; the aggregator bond is taken: approve it first)."""

    intent: str
    job_id: int

    def tx(self, c: Contracts) -> ContractFunction:
        return _round_manager(c).functions.challengeAggregate(self.job_id)


@dataclass(frozen=True)
class ClaimAggregateWithheld(ChainAction):
    intent: str
    job_id: int

    def tx(self, c: Contracts) -> ContractFunction:
        return _round_manager(c).functions.claimAggregateWithheld(self.job_id)


@dataclass(frozen=True)
class RequestAggregateReveal(ChainAction):
    """`request`: requestAggregateReveal's arguments after the job id (aggregation)."""

    intent: str
    job_id: int
    request: tuple[Any, ...]

    def tx(self, c: Contracts) -> ContractFunction:
        return _round_manager(c).functions.requestAggregateReveal(self.job_id, *self.request)


@dataclass(frozen=True)
class RevealAggregateLeaf(ChainAction):
    """`answer`: revealAggregateLeaf's arguments after the job id (aggregation)."""

    intent: str
    job_id: int
    answer: tuple[Any, ...]

    def tx(self, c: Contracts) -> ContractFunction:
        return _round_manager(c).functions.revealAggregateLeaf(self.job_id, *self.answer)


@dataclass(frozen=True)
class ReclaimRevealBond(ChainAction):
    intent: str
    job_id: int
    round: int
    attempt: int

    def tx(self, c: Contracts) -> ContractFunction:
        return _round_manager(c).functions.reclaimRevealBond(self.job_id, self.round, self.attempt)


@dataclass(frozen=True)
class WithdrawRounds(ChainAction):
    """My credits in the round manager."""

    intent: str

    def tx(self, c: Contracts) -> ContractFunction:
        return _round_manager(c).functions.withdraw()


#: Every chain action type (the ABI test maps each to its contract).
CHAIN_ACTIONS: tuple[type[ChainAction], ...] = tuple(ChainAction.__subclasses__())
