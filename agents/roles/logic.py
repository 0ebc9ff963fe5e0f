"""Pure decision logic of the roles: (what I remember, what the chain shows) -> next actions.

No I/O here. Each role's runner (agents/roles/runner.py and the role modules) reads a snapshot
of the chain, loads its persisted memory, calls these functions and executes the actions they
return, in order: typed values (agents/roles/actions.py) — local work, a planned send whose
arguments the role gathers, or a complete chain action, which the one executor
(agents/roles/executor.py) sends. Every on-chain action carries an *intent id* that names exactly
one logical send (unit, attempt, deadline or move number): the core sender (agents/core/tx.py)
never signs a second transaction for an intent it has recorded, so a restarted agent that takes
the same decision again resumes the recorded transaction instead of sending a new one.

Unit life cycle (IJobManager): Open -> Selecting -> Assigned -> Committed -> Verifying
(<-> Disputed) -> Finalized; Disputed -> Open when the challenger wins (with forced errors on, a
win before the end of the round's reveal slot is held until then: settleDispute). The keeper
steps (closeClaims, selectAssignee, drawVerifiers, finalize, settleDispute, expireDataRequest)
may be taken by anyone; each has one keeper order per unit (`keeper_order`: the parties it
concerns first, then a pool of nodes in an order of their own per unit), and the keeper at rank
r takes the step only r graces after it is due, so that each step costs one transaction under
any number of agents while a job never waits for a particular party (PROTOCOL §6.5).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from eth_abi import encode
from eth_utils import keccak

from agents.core.enums import Phase, RoundStatus, Side, UnitStatus, VerifierStatus
from agents.dispute.player import DEFENDER_PHASES, Move
from agents.roles.actions import (
    AnswerData,
    Arena,
    Attest,
    ChainAction,
    Challenge,
    ChallengeAggregate,
    ClaimTimeout,
    ClaimUnit,
    CloseClaims,
    Commit,
    CourtChallenge,
    Defend,
    DrawVerifiers,
    ExpireAssignment,
    ExpireDataRequest,
    Finalize,
    GameMove,
    LocalWork,
    Offer,
    Planned,
    Play,
    PlayAggregate,
    PlayCourt,
    Recheck,
    Replay,
    Report,
    ReportPrematureReveal,
    RequestData,
    Reveal,
    Seal,
    SelectAssignee,
    SettleDispute,
    Train,
    Withdraw,
)

# UnitStatus, VerifierStatus and Side are the protocol's one copy (agents/core/enums.py, tested
# against the compiler's); Phase stays the dispute player's until the player switches to
# enums.Phase together with the contracts whose numbers it has.


class Verdict(StrEnum):
    """A verifier's verdict of a unit's attempt from its replay (its "verdict" record's state,
    stored as the value)."""

    AGREE = "agree"  # the sampled segments replay to the solver's roots
    DISAGREE = "disagree"  # one does not: the verifier seals its own roots and challenges


class AttestationVerdict(StrEnum):
    """A whistleblower's re-check of an attestation (its "attestation" record's state once
    checked, stored as the value)."""

    TRUE = "true"  # the attested roots are what the segments replay to
    FALSE = "false"  # they are not: reported, and taken to the court where there is one
    UNAVAILABLE = "unavailable"  # the data to re-check it stayed away (retried)


#: No transition leaves these (PROTOCOL §6.5): a unit seen in one never changes again.
SETTLED = frozenset({UnitStatus.FINALIZED, UnitStatus.CANCELLED})


class SettledJobs:
    """The jobs whose (single) unit an agent has seen settled, so that its rounds stop reading
    them: with the set of every such job an agent's reads per round would still be cheap, but its
    memory would grow with every job ever posted, so it is a floor (every job up to it is
    settled) plus the settled jobs above it, which jobs settling roughly in order keep small."""

    def __init__(self) -> None:
        self.floor = 0
        self._above: set[int] = set()

    def add(self, job_id: int) -> None:
        if job_id <= self.floor:
            return
        self._above.add(job_id)
        while self.floor + 1 in self._above:
            self.floor += 1
            self._above.remove(self.floor)

    def __contains__(self, job_id: object) -> bool:
        return isinstance(job_id, int) and (0 < job_id <= self.floor or job_id in self._above)

    def __len__(self) -> int:
        return self.floor + len(self._above)

    def kept(self) -> int:
        """How many job ids are held one by one (the rest are under the floor)."""
        return len(self._above)


class SettledRecords:
    """The job manager's jobs whose (single) unit an agent has seen settled, so that its rounds
    stop reading them (`SettledJobs` is for dense ids, the round manager's). A job id is
    `generation << 32 | record` (PROTOCOL §6.10), and a record takes its next job only once the
    last one settled, so per record it keeps the newest settled generation: every older one is
    settled too. Memory grows with the records in use, not with every job ever posted."""

    def __init__(self) -> None:
        self._newest: dict[int, int] = {}  # record -> newest settled generation

    def add(self, job_id: int) -> None:
        record, generation = job_id & 0xFFFFFFFF, job_id >> 32
        if generation > self._newest.get(record, -1):
            self._newest[record] = generation

    def __contains__(self, job_id: object) -> bool:
        if not isinstance(job_id, int) or job_id <= 0:
            return False
        return job_id >> 32 <= self._newest.get(job_id & 0xFFFFFFFF, -1)

    def records(self) -> int:
        """How many records it keeps a generation for."""
        return len(self._newest)


@dataclass(frozen=True)
class Now:
    """The chain's latest block: its number and timestamp (deadlines are chain time)."""

    block: int
    timestamp: int


@dataclass(frozen=True)
class IdleBlock:
    """The empty block I last mined (--mine-when-idle): the chain's latest timestamp right after
    it, and my monotonic clock then."""

    chain_ts: int
    at_s: float


def idle_block_due(chain_ts: int, last: IdleBlock | None, now_s: float) -> bool:
    """Mine an empty block now (--mine-when-idle), pacing chain time by the wall clock: the block
    is due when, with it, the chain will have moved no more than the wall clock since my last
    one. A client that never repeats a timestamp (Hardhat: every block a second after the one
    before) runs ahead of the wall clock when blocks come faster than one a second, from me
    or from anyone's transactions; one that may repeat it (Anvil) stays with the wall clock
    anyway, and is then asked for a block at most once a second. Counting blocks instead made
    Hardhat's chain time run 2.4 times as fast as the wall clock, and every window shrink by
    as much."""
    if last is None:
        return True
    return chain_ts + 1 - last.chain_ts <= now_s - last.at_s


@dataclass(frozen=True)
class DataRequest:
    """An open data request on a unit (JobManager.dataRequestOf, PROTOCOL §6.11): `requester`
    demands proof that the state at checkpoint `checkpoint` is held, by `answer_deadline`: its
    state opened, then its headers (`opened` of `tensor_count` so far), then `samples` of the
    DATA_SAMPLES chunks the hash of block `seed_block` draws."""

    requester: str
    checkpoint: int
    answer_deadline: int
    bond: int = 0
    seed_block: int = 0
    state_opened: bool = False
    tensor_count: int = 0
    opened: int = 0
    samples: int = 0


@dataclass(frozen=True)
class Drawn:
    """A drawn verifier of a unit's current attempt and its response so far."""

    verifier: str
    status: VerifierStatus


@dataclass(frozen=True)
class UnitView:
    unit_id: int
    job_id: int
    status: UnitStatus
    deadline: int
    seed_block: int
    attempt: int
    assignee: str
    checkpoint_root: bytes
    final_root: bytes
    locator: str
    verify_seed: int
    assign_seed: int = 0  # low 64 bits of the assignment seed (forced errors, PROTOCOL §8.1)
    forced_revealed: bool = False
    # the root the locator's data was committed under; after a forced error's reveal the chain's
    # checkpoint root is the true one, which differs from it at the perturbed checkpoints
    published_root: bytes = b""
    # Disputed, and its dispute's game is over: the challenger's win is held for a forced round's
    # reveal (JobManager.DisputeResultHeld) until settleDispute or the reveal
    result_held: bool = False
    # when result_held: the time after which settleDispute applies it (JobManager.heldUntil)
    held_until: int = 0
    # Disputed by a data request instead of a game (PROTOCOL §6.11): what is asked, by when
    data_request: DataRequest | None = None
    # The assignee's claimant index (JobManager.secretHashOf)
    assignee_index: int = 0
    # Read with the unit in the same call when a JobLens is wired (RoleAgent.unit), else None:
    # RoleAgent.drawn / claimants / dispute / job_of read the getters for them when asked.
    drawn: tuple[Drawn, ...] | None = None  # the drawn verifiers, draw order
    claimants: tuple[str, ...] | None = None  # the claimants of the current attempt
    dispute: Any = None  # IJobManager.Dispute (gameId, challenger, bond): zeros when none
    job: Any = None  # IJobManager.Job of the unit's job


#: One action a decision returns (agents/roles/actions.py): local work, a planned send, or a
#: complete chain action.
Act = LocalWork | Planned | ChainAction


#: A send must be mined before its deadline: act only with this many seconds of chain time left.
SEND_MARGIN_S = 2


def late_by(now: Now, deadline: int) -> int:
    """Seconds by which a send made now misses `deadline` with its margin; <= 0: still in time."""
    return now.timestamp + SEND_MARGIN_S - deadline


#: A claim needs more. It is the last send of a round that read every open unit (and may have
#: loaded their jobs), the claim turns put the later ranks' claims near the window's end, and
#: one that lands past the window pays its gas for nothing: under load (issue #45's bench, 50
#: jobs at once on 2 cores) claims planned with SEND_MARGIN_S left landed a second late.
CLAIM_MARGIN_S = 5


def claim_late_by(now: Now, deadline: int) -> int:
    """`late_by` for a claim (CLAIM_MARGIN_S): <= 0 while a claim sent now still lands in time."""
    return now.timestamp + CLAIM_MARGIN_S - deadline


def chain_time_since(now: Now, latest: Now, elapsed_s: float) -> Now:
    """The chain's time now, for a deadline check right before a send: `latest` (the last block
    the agent read, `elapsed_s` wall seconds ago) moved on by that time, never earlier than
    `now` (the block a decision was made on). Counting from `latest`, not only from `now`:
    the round's block is stale once a later read (an eligibility check's) has replaced it, and
    a margin counted from it alone let 214 claims of issue #45's N=100 run land past their
    window."""
    moved = latest.timestamp + max(0, math.ceil(elapsed_s))
    return Now(max(now.block, latest.block), max(now.timestamp, moved))


def claim_send_refusal(planned: UnitView, fresh: UnitView, now: Now, me: str) -> str | None:
    """Why a claim planned on `planned` must not be sent, on the unit read again right before
    the send (`fresh`, its claimants read) at chain time `now` (`chain_time_since` a fresh
    block); None: send it. A round under load runs for many seconds after it read the unit:
    the window may have closed meanwhile, or another solver may have claimed it (a later rank
    after its graces, while my round was busy), and one claimant is all a unit needs."""
    if fresh.status != UnitStatus.OPEN or fresh.attempt != planned.attempt:
        return "it is no longer open for this attempt"
    if claim_late_by(now, fresh.deadline) > 0:
        return "its claim window closes before a claim sent now would land"
    others = [c for c in fresh.claimants or () if c.lower() != me.lower()]
    if others:
        return f"{others[0]} claimed it first"
    return None


#: The most a role waits (wall seconds) for a peer's data before it falls back to its own
#: replay (agents/core/fetches.py); less when the window has less left (`read_budget_s`).
READ_BUDGET_S = 10.0
#: The least: a healthy blob server answers a checkpoint read well within it.
READ_BUDGET_MIN_S = 2.0


def read_budget_s(now: Now, deadline: int) -> float:
    """How long a read of a peer's data for work due by `deadline` may take: a quarter of the
    chain time left (with the send margin), so that the fallback, my own replay from step 0,
    and its send still fit after a read that never answers; within [READ_BUDGET_MIN_S,
    READ_BUDGET_S]."""
    left = -late_by(now, deadline)
    return max(READ_BUDGET_MIN_S, min(READ_BUDGET_S, left / 4))


KeeperStep = (
    CloseClaims
    | SelectAssignee
    | ExpireAssignment
    | DrawVerifiers
    | Finalize
    | SettleDispute
    | ExpireDataRequest
)
#: The job manager's keeper steps (anyone may take them), by action type.
KEEPER_STEPS: frozenset[type[ChainAction]] = frozenset(
    {
        CloseClaims,
        SelectAssignee,
        ExpireAssignment,
        DrawVerifiers,
        Finalize,
        SettleDispute,
        ExpireDataRequest,
    }
)
SOLVER_KEEPS: frozenset[type[ChainAction]] = frozenset({CloseClaims, SelectAssignee})


# --- keeper turns (PROTOCOL §6.5) ---------------------------------------------------------------

#: Each keeper in a unit's keeper order waits this many seconds (blocks, for the seed-based
#: steps) longer than the one before it: the first takes a step as soon as it is due, the next
#: only if the step is still untaken a grace later (the first is down or slow), and so on.
KEEPER_GRACE = 4
#: Ranks past this one wait as long as it does: a bounded wait whatever the number of nodes,
#: which keeps the seed-based steps well inside a seed's 256 blocks.
MAX_KEEPER_RANK = 8
#: The rank of a keeper in no unit's order (the job's submitter): after every node in it.
FALLBACK_RANK = MAX_KEEPER_RANK + 1
#: Blocks after a commitment's seed block during which the drawn verifiers' first answer draws
#: them (JobManager.sealAttestation on a Committed unit): a keeper's drawVerifiers is due only
#: after it, for units whose drawn verifiers did not answer in time (or that draw nobody).
DRAW_FOLD_BLOCKS = 64
#: A drawn verifier's answer draws only until this many blocks before the fold ends, so that it
#: is mined before a keeper's drawVerifiers is due.
FOLD_MARGIN_BLOCKS = 8


#: The most a keeper's grace grows to under load (`keeper_grace`): ranks up to MAX_KEEPER_RANK
#: times it, after a Committed unit's fold, stay inside a seed's 256 blocks.
MAX_KEEPER_GRACE = 22


def keeper_delay(rank: int, grace: int = KEEPER_GRACE) -> int:
    """How long (seconds, or blocks) after a step is due the keeper at `rank` takes it."""
    return min(rank, FALLBACK_RANK) * grace


def keeper_grace(round_seconds: Iterable[float]) -> int:
    """The grace between keeper ranks, from my latest rounds' durations (seconds): KEEPER_GRACE,
    or longer when rounds take longer. A keeper sees a step due only when its round reaches the
    unit, up to a round after it became due: with 4 s graces and 20 s rounds under load (issue
    #45, N=200), the first keeper's step went out when the later ranks' graces were over too,
    and hundreds of closeClaims and selectAssignee reverted as lost races. A grace of two of my
    longest recent rounds keeps the next rank waiting until the first had its next round (the
    agents of a network under one load have rounds alike), within MAX_KEEPER_GRACE."""
    longest = max(round_seconds, default=0.0)
    return min(MAX_KEEPER_GRACE, max(KEEPER_GRACE, math.ceil(2 * longest)))


def rendezvous(unit_id: int, attempt: int, pool: Iterable[str]) -> list[str]:
    """`pool` in the unit's own order: by keccak256(abi.encode(unitId, attempt, node)), so each
    node comes first for its share of the units (rendezvous hashing) and every agent that reads
    the same pool computes the same order."""

    def key(node: str) -> bytes:
        return keccak(encode(["uint256", "uint32", "address"], [unit_id, attempt, node]))

    return sorted({n.lower(): n for n in pool}.values(), key=key)


@dataclass(frozen=True)
class KeeperFacts:
    """Who I am among a unit's keepers: my address, the registry's live pools, and the unit's
    parties a step concerns (read by the role: claimants and challenger are the unit's)."""

    me: str
    solvers: tuple[str, ...] = ()  # the live solver pool (NodeRegistry.poolAt)
    verifiers: tuple[str, ...] = ()  # the live verifier pool
    claimants: tuple[str, ...] = ()  # the unit's claimants, in claim order
    challenger: str = ""  # the open dispute's challenger (a held win's owner)
    # a Committed unit's draw picks a verifier, whose first answer may draw (a keeper waits the
    # fold out); False: it picks nobody, and a keeper draws at once
    fold: bool = True
    grace: int = KEEPER_GRACE  # between ranks: keeper_grace() of my rounds


def keeper_order(u: UnitView, step: type[ChainAction], k: KeeperFacts) -> tuple[str, ...]:
    """The keepers of `step` on unit `u`, first to last: the parties it concerns (the claimants
    close and select, the assignee draws and finalizes, the winning challenger settles, the
    requester expires its request), then the pool of nodes that keep it, in the unit's own
    order (`rendezvous`)."""
    first: Sequence[str] = ()
    pool: Sequence[str] = ()
    if step in (CloseClaims, SelectAssignee):
        first, pool = k.claimants, k.solvers
    elif step is DrawVerifiers:
        first, pool = (u.assignee,), k.verifiers
    elif step is Finalize:
        first = (u.assignee,)
    elif step is SettleDispute:
        first = (k.challenger,)
    elif step is ExpireDataRequest and u.data_request is not None:
        first = (u.data_request.requester,)
    seen = {a.lower() for a in first}
    rest = [n for n in rendezvous(u.unit_id, u.attempt, pool) if n.lower() not in seen]
    return (*first, *rest)


def keeper_rank(u: UnitView, step: type[ChainAction], k: KeeperFacts | None) -> int:
    """My rank among the unit's keepers of `step` (0: first); FALLBACK_RANK when I am in no
    order (the submitter's keeper, unless the step concerns it: its own data request). None for
    `k` is the first rank (a lone keeper, tests)."""
    if k is None:
        return 0
    order = [a.lower() for a in keeper_order(u, step, k)]
    me = k.me.lower()
    return order.index(me) if me in order else FALLBACK_RANK


def claim_turn(
    u: UnitView, me: str, solvers: Sequence[str], claimants: Sequence[str], waited: int
) -> bool:
    """Is it my turn to claim the open unit? Each claim that loses the selection costs its
    claimant gas, so solvers take turns (PROTOCOL §6.5): the first solver in the unit's order
    (`rendezvous` over the live solver pool) claims at once; the one at rank r only if nobody
    has claimed after r graces (`waited`: seconds of chain time since I first saw this attempt
    open), so a unit whose first solver is down or busy is still claimed. Nobody claims a unit
    another solver claimed: one claimant is all it needs (a second only pays for the claim, and
    the selection among them)."""
    if claimants:
        return False
    order = [a.lower() for a in rendezvous(u.unit_id, u.attempt, solvers)]
    rank = order.index(me.lower()) if me.lower() in order else len(order)
    return waited >= keeper_delay(rank)


def fold_open(u: UnitView, now: Now) -> bool:
    """A drawn verifier's first answer may still draw the verifiers of this Committed unit: its
    seed block is mined and the fold has FOLD_MARGIN_BLOCKS left (PROTOCOL §6.5)."""
    if u.status != UnitStatus.COMMITTED:
        return False
    return u.seed_block < now.block <= u.seed_block + DRAW_FOLD_BLOCKS - FOLD_MARGIN_BLOCKS


# --- keeper steps (anyone) ---------------------------------------------------------------------


def keeper_acts(
    u: UnitView,
    now: Now,
    steps: frozenset[type[ChainAction]] = KEEPER_STEPS,
    keeper: KeeperFacts | None = None,
    reveal_slot: int = 0,
) -> list[Act]:
    """The keeper step the unit is waiting for, if it is in `steps` and it is my turn: my rank
    in the unit's keeper order for it (`keeper`; None: first) times KEEPER_GRACE after it is
    due (seconds, or blocks for the seed-based steps), so that a keeper steps in only when the
    ones before it have not, instead of racing them for the same block. Anyone but the unit's
    assignee passes `reveal_slot` = 2 · revealWindow: the job manager keeps that long after the
    challenge deadline for a forced round's reveal (PROTOCOL §6.7), refusing a third party's
    finalize of an unrevealed unit before it, and holding a challenger's win until it is over
    (settleDispute, `held_result_due`)."""
    due = _due_step(u, now, reveal_slot, keeper is None or keeper.fold)
    if due is None or type(due[0]) not in steps:
        return []
    step, overdue = due
    grace = KEEPER_GRACE if keeper is None else keeper.grace
    return [step] if overdue > keeper_delay(keeper_rank(u, type(step), keeper), grace) else []


def _due_step(
    u: UnitView, now: Now, reveal_slot: int = 0, fold: bool = True
) -> tuple[KeeperStep, int] | None:
    """The keeper step the unit waits for and how long it has been possible: seconds, or blocks
    for the seed-based steps (it may be sent when this is > 0). None when it waits for none.
    `fold`: a drawn verifier may answer first (the draw waits DRAW_FOLD_BLOCKS for it)."""
    uid, a = u.unit_id, u.attempt
    if u.status == UnitStatus.OPEN:
        return CloseClaims(f"close:{uid}:{a}:{u.deadline}", uid), now.timestamp - u.deadline
    if u.status == UnitStatus.SELECTING:
        return SelectAssignee(f"select:{uid}:{a}:{u.seed_block}", uid), now.block - u.seed_block
    if u.status == UnitStatus.ASSIGNED:
        # the assignee missed its commit deadline (or its commitment was refused): re-open
        return ExpireAssignment(f"expire:{uid}:{a}", uid), now.timestamp - u.deadline
    if u.status == UnitStatus.COMMITTED:
        # after the fold: the drawn verifiers' first answer draws them until then
        overdue = now.block - u.seed_block - (DRAW_FOLD_BLOCKS if fold else 0)
        return DrawVerifiers(f"draw:{uid}:{a}:{u.seed_block}", uid), overdue
    slot = 0 if u.forced_revealed else reveal_slot
    if u.status == UnitStatus.VERIFYING:
        return Finalize(f"finalize:{uid}:{a}:{u.deadline}", uid), now.timestamp - u.deadline - slot
    if u.status == UnitStatus.DISPUTED and u.result_held:
        return settle_act(u), now.timestamp - held_until(u, reveal_slot)
    req = u.data_request
    if u.status == UnitStatus.DISPUTED and req:
        # unanswered: the solver loses as in a lost game (PROTOCOL §6.11)
        intent = f"expire-data:{uid}:{a}:{req.requester.lower()}"
        return ExpireDataRequest(intent, uid), now.timestamp - req.answer_deadline
    return None


def held_until(u: UnitView, reveal_slot: int) -> int:
    """The end of a held win's hold: `held_until`, else the end of the round's reveal slot."""
    return u.held_until or u.deadline + reveal_slot


def held_result_due(u: UnitView, now: Now, reveal_slot: int, delay: int = 0) -> bool:
    """A challenger's held win may be applied (JobManager.settleDispute): the unit is Disputed,
    its dispute's game is over (`result_held`) and so is its hold, `held_until` (one
    revealWindow after the win when the reveal phase was open then), else the forced round's
    reveal slot, which ends `reveal_slot` = 2 · revealWindow after the challenge deadline (which
    does not move while Disputed). Until then the solver may still reveal its forced error,
    voiding the dispute."""
    if u.status != UnitStatus.DISPUTED or not u.result_held:
        return False
    return now.timestamp > held_until(u, reveal_slot) + delay


def settle_act(u: UnitView) -> SettleDispute:
    """settleDispute of the unit's held result: one per attempt (a held result ends it)."""
    return SettleDispute(f"settle:{u.unit_id}:{u.attempt}", u.unit_id)


def final_data_acts(u: UnitView, now: Now, final_read: str, checkpoints: int) -> list[RequestData]:
    """The submitter's keeper demands the final checkpoint's data on chain (requestData, PROTOCOL
    §6.11) when its read of the solver's copy failed (`final_read` "failed"; "ok" when it holds
    the checked state, "pending" while the read runs), while the unit is Verifying and its
    window is open: the request keeps the unit from being finalized until the state is posted,
    or slashes the solver if it never is, so a job never completes on data its submitter cannot
    have. The contract takes one request per requester and attempt; the intent also names the
    window, so a request that lost a race on chain (the unit was disputed first) is sent again
    once the unit is Verifying with its new deadline."""
    if u.status != UnitStatus.VERIFYING or final_read != "failed" or late_by(now, u.deadline) > 0:
        return []
    uid, a = u.unit_id, u.attempt
    return [RequestData(f"request-data:{uid}:{a}:{u.deadline}", uid, checkpoints - 1)]


# --- sealed attestations (commit-reveal) ---------------------------------------------------------


def seals_open(statuses: list[VerifierStatus], now: Now, deadline: int) -> bool:
    """Seals may be opened (`attest`): no drawn verifier is left to seal, or the challenge window
    closed at `deadline` (before that, an opened seal could be copied by one still to seal)."""
    return now.timestamp > deadline or all(s != VerifierStatus.PENDING for s in statuses)


def forced_reveal_open(
    statuses: list[VerifierStatus], now: Now, deadline: int, reveal_window: int
) -> bool:
    """A forced round's secret may be shown (ForcedErrorJudge.revealForced): no drawn verifier can
    still seal (Pending while the challenge window runs) or still open its seal (Sealed while the
    reveal window runs); showing it earlier would tell that verifier the answer."""
    for s in statuses:
        if s == VerifierStatus.PENDING and now.timestamp <= deadline:
            return False
        if s == VerifierStatus.SEALED and now.timestamp <= deadline + reveal_window:
            return False
    return True


# --- solver ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SolverFacts:
    """What the solver knows about itself for one unit."""

    me: str
    claimed: bool  # I am among this attempt's claimants
    eligible: bool  # capable, online, enough free stake, config checked, not retired
    trained: bool  # my checkpoints of this attempt are published
    game_id: int  # the open dispute's game (0: none)
    reveal_due: bool = False  # my forced round is published and forced_reveal_open() holds
    keeper: KeeperFacts | None = None  # my place among the unit's keepers (None: first)


def solver_acts(u: UnitView, now: Now, f: SolverFacts) -> list[Act]:
    """Claim (when `eligible` says it is my turn and I can), train, commit, reveal a forced
    error, defend, answer a data request; keep selection moving and, as the assignee, draw the
    verifiers (when none answered in the fold) and finalize my unit."""
    acts: list[Act] = []
    uid, a = u.unit_id, u.attempt
    mine = u.assignee.lower() == f.me.lower()
    if u.status == UnitStatus.OPEN and claim_late_by(now, u.deadline) <= 0:
        if not f.claimed and f.eligible:
            acts.append(claim_act(u))
    elif u.status == UnitStatus.ASSIGNED and mine:
        if not f.trained:
            acts.append(Train(uid, a))
        elif late_by(now, u.deadline) <= 0:
            acts.append(Commit(f"commit:{uid}:{a}", uid, a))
    if u.status in (UnitStatus.VERIFYING, UnitStatus.DISPUTED) and mine and f.reveal_due:
        # prove the forced error before anything else: it voids a dispute over it
        acts.append(Reveal(f"reveal:{uid}:{a}", uid, a))
    elif u.status == UnitStatus.DISPUTED and mine and f.game_id and not u.result_held:
        acts.append(Defend(f.game_id))
    req = u.data_request
    if u.status == UnitStatus.DISPUTED and mine and req and late_by(now, req.answer_deadline) <= 0:
        # post the asked checkpoint's state on chain, the pieces not yet posted
        acts.append(AnswerData(uid, a))
    # Keeper steps: solvers move selection along; the assignee finalizes its own unit.
    steps = SOLVER_KEEPS | ({Finalize, DrawVerifiers} if mine else set())
    if f.keeper is not None and unclaimed_lapsed(u, f.keeper.claimants) and not f.eligible:
        steps -= {CloseClaims}  # an extension is the claim's first step: mine to take only
    return acts + keeper_acts(u, now, frozenset(steps), f.keeper)


def claim_act(u: UnitView) -> ClaimUnit:
    """A claim of the unit's current window (a new intent per attempt and window)."""
    return ClaimUnit(f"claim:{u.unit_id}:{u.attempt}:{u.deadline}", u.unit_id)


def unclaimed_lapsed(u: UnitView, claimants: Sequence[str] | None) -> bool:
    """An Open unit whose claim window passed with no claimant (`claimants` None: not known).
    Its closeClaims only extends the window, and is worth a transaction only to a solver that
    will claim it now: the solver eligible for it extends it, then claims. Every other keeper
    leaves it (issue #45's N=200 run: with every solver busy, keepers extended 114 waiting
    units every claim window, 5,157 closeClaims in 30 minutes, 868 of them reverted races)."""
    return u.status == UnitStatus.OPEN and claimants is not None and not claimants


# --- verifier ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class VerifierFacts:
    me: str
    # my slot in this attempt's draw (NONE: not drawn); on a Committed unit, PENDING when the
    # draw simulated now picks me (its first answer draws, PROTOCOL §6.5)
    status: VerifierStatus
    verdict: Verdict | None  # None: not replayed yet
    game_id: int  # the open dispute's game (0: none)
    my_challenge: bool  # the open dispute is mine
    seals_open: bool = False  # seals_open(): every drawn verifier sealed, or the window closed
    reveal_window: int = 0  # JobManager.Config.revealWindow: seals open until deadline + this
    challenged: bool = False  # I already challenged this attempt
    last_to_answer: bool = False  # I am Pending and every other drawn verifier sealed or attested
    replayed: bool = False  # my verdict comes from a replay (its record does not say otherwise)
    contested: bool = False  # I already challenged the revealed C of this attempt (or chose not to)
    # PROTOCOL §6.11: a data request for this attempt's final checkpoint is open, I hold that
    # state (my verdict record keeps it), and I said where I serve it (offerData)
    result_requested: bool = False
    holds_result: bool = False
    offered: bool = False
    keeper: KeeperFacts | None = None  # my place among the unit's keepers (None: first)


def verifier_acts(u: UnitView, now: Now, f: VerifierFacts) -> list[Act]:
    """Replay, then seal my end roots in the challenge window (a replay that disagrees also
    challenges), then open the seal once seals are open and before the reveal window closes.
    The last drawn verifier to answer attests in the clear instead (one transaction: every other
    one is bound by its seal already, so nobody is left to copy it). On a Committed unit whose
    simulated draw picks me, I replay before the draw and my first answer draws while the fold
    is open (`fold_open`)."""
    acts: list[Act] = []
    uid, a = u.unit_id, u.attempt
    live = u.status in (UnitStatus.VERIFYING, UnitStatus.DISPUTED)
    in_window = late_by(now, u.deadline) <= 0
    drawn = f.status not in (VerifierStatus.NONE, VerifierStatus.SLASHED)
    # A challenge waits for the unit to be Verifying again; one per attempt. It goes first: the
    # unit must not be finalized before it, while the attestation may follow during the dispute.
    # My dissent is with the published root: after a forced reveal the chain holds the solver's
    # true root C, which the judge checked against my attestation (WRONG: `contest` below).
    dissent = drawn and f.verdict == Verdict.DISAGREE and not f.challenged
    if dissent and u.status == UnitStatus.VERIFYING and in_window and not u.forced_revealed:
        acts.append(Challenge(f"challenge:{uid}:{a}", uid, a))
    # Sealing goes on during a dispute (so a forced round's reveal phase can begin, §8.1) and
    # stops once a forced error is revealed (the true root is public: the contract refuses).
    # Drawn by simulation on a Committed unit: I replay at once, and answer while the fold is
    # open (later a keeper draws, and I answer on the Verifying unit).
    drawing = u.status == UnitStatus.COMMITTED
    answering = (live and in_window) or (drawing and fold_open(u, now))
    if (answering or drawing) and not u.forced_revealed and f.status == VerifierStatus.PENDING:
        if f.verdict is None:
            acts.append(Replay(uid, a))
        elif answering and f.last_to_answer:
            acts.append(Attest(f"attest-clear:{uid}:{a}", uid, a, clear=True))
        elif answering:
            # a dissenter attests its own (true) roots too: its public challenge is no verdict
            acts.append(Seal(f"seal:{uid}:{a}", uid, a))
    reveal_left = late_by(now, u.deadline + f.reveal_window) <= 0
    # A seal still closed at a forced reveal was judged silent: the contract refuses to open it.
    opening = live and not u.forced_revealed and f.status == VerifierStatus.SEALED
    if opening and f.seals_open and reveal_left:
        acts.append(Attest(f"attest:{uid}:{a}", uid, a))
    # A forced reveal judged my replayed attestation WRONG: the verdict trusts the solver's C,
    # and my lock is slashed at finalize unless a dispute overturns C first. My replay is the
    # evidence that C is wrong at a perturbed checkpoint, so I challenge C (once).
    contest = f.status == VerifierStatus.SLASHED and u.forced_revealed and f.replayed
    if contest and not f.contested and u.status == UnitStatus.VERIFYING and in_window:
        acts.append(Challenge(f"challenge-revealed:{uid}:{a}", uid, a, revealed=True))
    if u.status == UnitStatus.DISPUTED and f.my_challenge and f.game_id and not u.result_held:
        acts.append(Play(f.game_id))
    # I won the game and the win is held for a forced round's reveal: I am owed my bond and the
    # reward, so I apply it myself once the reveal's slot is over
    if f.my_challenge and held_result_due(u, now, 2 * f.reveal_window):
        acts.append(settle_act(u))
    acts += holder_acts(u, now, f)
    # keeper steps: the draw (after the fold), and the expiry of my own unanswered data request
    mine = u.data_request is not None and u.data_request.requester.lower() == f.me.lower()
    steps = {DrawVerifiers} | ({ExpireDataRequest} if mine else set())
    return acts + keeper_acts(u, now, frozenset(steps), f.keeper)


def holder_acts(u: UnitView, now: Now, f: VerifierFacts) -> list[Act]:
    """Attesting is holding the result (PROTOCOL §6.11). When it is requested, a drawn verifier
    that holds it says where it serves it (once per attempt), and one that attested also answers
    the request itself once half the answer window has passed without the assignee's answer: an
    unanswered request for the result costs every attestor its lock."""
    req = u.data_request
    drawn = f.status not in (VerifierStatus.NONE, VerifierStatus.SLASHED)
    if not (f.result_requested and f.holds_result and drawn and req is not None):
        return []
    acts: list[Act] = []
    if not f.offered:
        acts.append(Offer(u.unit_id, u.attempt))
    half_gone = now.timestamp >= req.answer_deadline - f.reveal_window // 2
    if f.status == VerifierStatus.ATTESTED and half_gone and late_by(now, req.answer_deadline) <= 0:
        acts.append(AnswerData(u.unit_id, u.attempt))
    return acts


# --- whistleblower -----------------------------------------------------------------------------


#: A whistleblower re-fetches data that failed its checks this many seconds (chain time) after
#: the first try, doubling the wait after each failure up to RECHECK_MAX_S: a solver's server
#: that is down for a while around an attestation does not hide it, and a dead one is not
#: hammered.
RECHECK_BASE_S = 10
RECHECK_MAX_S = 600


@dataclass(frozen=True)
class AttestationFacts:
    verdict: AttestationVerdict | None  # None: not re-checked yet
    # the re-check also showed the solver's roots are wrong (or, its data withheld, my own
    # replay from step 0 is not its commitment)
    commitment_wrong: bool
    reported: bool
    court: bool = False  # an AttestationCourt is deployed (attestations can be disputed)
    court_game: int = 0  # the court game I opened over this attestation (0: none)
    court_done: bool = False  # that game is resolved
    tries: int = 0  # re-checks that found the data unusable ("unavailable")
    last_try: int = 0  # chain time of the last of them
    court_open: bool = False  # the court still takes this attestation (its unit final, in window)
    # the unit's attempt the attestation was made on (None: not known yet): `commitment_wrong`
    # is about that attempt's commitment, and says nothing of a later attempt's
    attested_attempt: int | None = None
    # my challenge of that attempt cannot succeed (my replay gives the chain's root): recorded,
    # never planned again
    challenge_dropped: bool = False


def recheck_due(tries: int, last_try: int, now: Now) -> bool:
    """An "unavailable" attestation is re-checked RECHECK_BASE_S after the first failed try,
    then after twice as long each time, at most RECHECK_MAX_S apart."""
    wait = min(RECHECK_BASE_S << min(max(tries - 1, 0), 16), RECHECK_MAX_S)
    return now.timestamp >= last_try + wait


def attestation_done(u: UnitView, now: Now, f: AttestationFacts, court_window: int | None) -> bool:
    """Nothing more can come of my record of an attestation of `u`, whose unit the caller knows
    to be settled for good (a unit that may still change keeps every record open), so it is no
    longer read each round. `court_window`: the court's window after the unit's challenge
    deadline, or None without a court.

    True: confirmed, there is nothing to do. Unavailable: its data is chased only while the
    court may still take the attestation (`whistleblower_acts`), so until its window ends. False:
    once reported, and the court case I opened is resolved, or I opened none and the court's
    window ended (without a court: once reported). Not checked yet: never (checking is next)."""
    if u.status not in SETTLED:
        return False
    court_over = (
        court_window is None
        or u.status == UnitStatus.CANCELLED
        or now.timestamp > u.deadline + court_window
    )
    if f.verdict == AttestationVerdict.TRUE:
        return True
    if f.verdict == AttestationVerdict.UNAVAILABLE:
        return court_over
    if f.verdict == AttestationVerdict.FALSE:
        return f.reported and (f.court_done if f.court_game else court_over)
    return False


def whistleblower_acts(u: UnitView, now: Now, key: str, f: AttestationFacts) -> list[Act]:
    """For one attestation `key` ("unit:verifier:block") of unit `u`."""
    if f.verdict is None:
        return [Recheck(key)]
    challenge = Challenge(f"challenge:{u.unit_id}:{u.attempt}", u.unit_id, u.attempt)
    # the unit is challenged over the attempt attested only: a re-opened unit's new commitment
    # is the new attempt's verifiers' (and my other records') to judge
    same_attempt = f.attested_attempt is None or f.attested_attempt == u.attempt
    # After a forced reveal the chain holds the solver's true root: my check was of the
    # published one, wrong by design at the perturbed checkpoints; the true root's check is the
    # drawn verifiers' and the judge's (the verifier judged WRONG contests it).
    may_challenge = (
        u.status == UnitStatus.VERIFYING
        and late_by(now, u.deadline) <= 0
        and same_attempt
        and not u.forced_revealed
        and not f.challenge_dropped
    )
    if f.verdict == AttestationVerdict.UNAVAILABLE:
        # retried while the unit can still be challenged or is being disputed, or the court can
        # still take the attestation (from my own replay, once the data stays away)
        live = u.status in (UnitStatus.VERIFYING, UnitStatus.DISPUTED) or f.court_open
        due = live and recheck_due(f.tries, f.last_try, now)
        acts: list[Act] = [Recheck(key)] if due else []
        # My replay from step 0 is not the commitment while its data stays away: the unit is
        # challenged with my replay's root, as a drawn verifier whose data is withheld does
        # (a forced round's perturbed commitment too: its reveal voids the game and returns the
        # bond).
        if f.commitment_wrong and may_challenge:
            acts.append(challenge)
        return acts
    acts = []
    if f.verdict == AttestationVerdict.FALSE and not f.reported:
        acts.append(Report(key))
    if f.verdict == AttestationVerdict.FALSE and f.court and not f.court_game:
        acts.append(CourtChallenge(f"court:{key}", key))
    if f.court_game and not f.court_done:
        acts.append(PlayCourt(key, f.court_game))
    if f.commitment_wrong and may_challenge:
        acts.append(challenge)
    return acts


# --- premature reveals (a leaked forced-error secret) ----------------------------------------


def premature_reveal_open(u: UnitView, now: Now, statuses: list[VerifierStatus]) -> bool:
    """The assignee's secret shown now is premature (ForcedErrorJudge.reportPrematureReveal): the
    unit is Assigned before its commit deadline, Committed, or Verifying with a drawn verifier
    still to seal (Pending, nobody's seal opened yet) while the challenge window runs. After that
    every verdict is fixed and the secret tells nobody anything; a Disputed unit is its game's
    to decide, and after a reveal the secret is public (both refused on chain)."""
    in_window = late_by(now, u.deadline) <= 0
    if u.status == UnitStatus.ASSIGNED:
        return in_window
    if u.status == UnitStatus.COMMITTED:
        return True
    if u.status != UnitStatus.VERIFYING or u.forced_revealed:
        return False
    if any(s == VerifierStatus.ATTESTED for s in statuses):
        return False
    pending = any(s == VerifierStatus.PENDING for s in statuses)
    return pending and in_window


def parse_leak(name: str, text: str) -> tuple[int, bytes]:
    """A leak file `<unitId>.hex` (decimal or 0x id) holding a 32-byte secret in hex -> (unit,
    secret); ValueError with the reason otherwise."""
    stem, dot, ext = name.rpartition(".")
    if not dot or ext != "hex" or not stem:
        raise ValueError("the name is not <unitId>.hex")
    unit_id = int(stem, 0)  # ValueError for a name that is no number
    if not 0 < unit_id < 2**256:
        raise ValueError("the unit id must be a positive uint256")
    body = text.strip().removeprefix("0x")
    if len(body) != 64:
        raise ValueError(f"expected 32 bytes in hex, got {len(body)} hex digits")
    return unit_id, bytes.fromhex(body)


@dataclass(frozen=True)
class LeakFacts:
    secret: bytes  # the leaked candidate for the unit's current assignee
    matches: bool  # keccak256(secret) == JobManager.secretHashOf(unit, assigneeIndex)
    reported: bool  # I already reported this attempt


def leak_acts(
    u: UnitView, now: Now, statuses: list[VerifierStatus], f: LeakFacts
) -> list[ReportPrematureReveal]:
    """Report a leaked secret that matches the assignee's claim while showing it is premature:
    the assignee's collateral is slashed (half of it to me) and the unit re-opens. One report
    per (unit, attempt)."""
    if f.reported or not f.matches or not premature_reveal_open(u, now, statuses):
        return []
    uid, a = u.unit_id, u.attempt
    return [ReportPrematureReveal(f"premature:{uid}:{a}", uid, f.secret)]


# --- games -------------------------------------------------------------------------------------


# --- aggregates of version-3 rounds (PROTOCOL §6.9, the aggregation game) --------------------


@dataclass(frozen=True)
class AggregateFacts:
    """A decomposed version-3 job's current round as an aggregator sees it: the round manager's
    getRound, the game open over its aggregate (AggregateChallenged) and my own H_{r+1}."""

    job_id: int
    round: int
    attempt: int
    status: RoundStatus
    deadline: int  # the aggregation window's end (challenges are taken until then)
    aggregator: str  # who committed the aggregate
    challenger: str  # the open game's challenger (the zero address: none)
    me: str
    # my H_{r+1} from the round's finalized units; None while they are not all there
    mine_differs: bool | None
    game_id: int = 0  # the open game over the aggregate (0: none found yet)


def aggregate_acts(f: AggregateFacts, now: Now) -> list[Act]:
    """What I do about a version-3 round's aggregate: dispute someone else's wrong aggregate in
    the round manager's game while its window runs (ChallengeAggregate: its bond is the
    aggregator's), and take my turns in that game, as its aggregator (the defender) or as its
    challenger. Finalizing a round is the caller's (after the window, no game open)."""
    if f.status == RoundStatus.COMMITTED:
        mine = f.aggregator.lower() == f.me.lower()
        wrong = bool(f.mine_differs) and not mine and now.timestamp <= f.deadline
        intent = f"challenge-aggregate:{f.job_id}:{f.round}:{f.attempt}"
        return [ChallengeAggregate(intent, f.job_id)] if wrong else []
    if f.status != RoundStatus.DISPUTED or not f.game_id:
        return []
    if f.aggregator.lower() == f.me.lower():
        return [PlayAggregate(f.job_id, f.round, f.game_id, Side.DEFENDER)]
    if f.challenger.lower() == f.me.lower():
        return [PlayAggregate(f.job_id, f.round, f.game_id, Side.CHALLENGER)]
    return []


def game_act(
    game_id: int,
    side: Side,
    phase: int,
    moves: int,
    turn_deadline: int,
    now: Now,
    move: Move | None,
    arena: Arena = Arena.UNIT,
) -> GameMove | ClaimTimeout | None:
    """My next act in a game: my move when it is my turn, or a timeout claim when the
    opponent's clock has run out. `moves` (the game's move count) makes each intent unique.
    `arena`: whose game it is (the court's and the round manager's intents say so:
    "court-game:...", "round-game:...")."""
    if phase in (Phase.NONE, Phase.RESOLVED):
        return None
    to_move = Side.DEFENDER if phase in DEFENDER_PHASES else Side.CHALLENGER
    prefix = arena.prefix
    if to_move == side:
        if move is None or now.timestamp > turn_deadline:
            return None
        return GameMove(f"{prefix}game:{game_id}:move:{moves}", game_id, move, arena)
    if now.timestamp > turn_deadline:
        return ClaimTimeout(f"{prefix}game:{game_id}:timeout", game_id, arena)
    return None


#: An agent withdraws its job manager credits at most this often (chain seconds): a withdrawal
#: is a transaction, and a busy verifier is credited a fee every few seconds.
WITHDRAW_EVERY_S = 3600


def withdraw_due(credits: int, last: int | None, now: Now) -> bool:
    """Withdraw now: something is owed and my last withdrawal (chain time; None: never) is
    WITHDRAW_EVERY_S old. The credits wait in the manager meanwhile, owed and withdrawable."""
    return credits > 0 and (last is None or now.timestamp - last >= WITHDRAW_EVERY_S)


def withdraw_act(credits: int, block: int) -> Withdraw | None:
    """Withdraw my job manager credits: one intent per amount and block."""
    if credits <= 0:
        return None
    return Withdraw(f"withdraw:{credits}:{block}")
