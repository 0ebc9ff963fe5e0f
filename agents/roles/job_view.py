"""What a job looks like from the chain, as text: the facts `job status` and `submit` show (job
phase, each unit's phase, the disputes and their winners, the chain time left in the window each
unit waits on) and their rendering, plain or as rich tables.

Pure: facts in, text out. The reads that gather the facts are agents/roles/job_reads.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from agents.core.enums import JobStatus, UnitStatus

TOKEN = 10**18
ZERO_ADDRESS = "0x" + "00" * 20


@dataclass(frozen=True)
class UnitFacts:
    """One unit as getUnit (and, while Disputed, heldUntil / dataRequestOf) shows it."""

    unit_id: int
    status: UnitStatus
    attempt: int
    assignee: str
    deadline: int  # claim (Open), commit (Assigned) or challenge (Verifying, Disputed) deadline
    seed_block: int  # the block Selecting and Committed wait for
    final_root: bytes
    held_until: int = 0  # Disputed, the challenger's win held until then (0: not held)
    answer_deadline: int = 0  # Disputed by an open data request: answer by then (0: none)


@dataclass(frozen=True)
class DisputeFacts:
    """A challenge (a dispute game) or a data request on a unit, folded from its events."""

    unit_id: int
    kind: str  # "game" or "data request"
    by: str  # the challenger or the requester
    game_id: int  # 0 for a data request
    outcome: str  # OUTCOMES
    until: int = 0  # a held win: applied after it; an open data request: its answer deadline


#: What a dispute's events say of it, in the order they can happen.
OUTCOMES = (
    "running",
    "held",  # the challenger won; the win waits for a forced round's reveal slot
    "challenger won",
    "solver won",
    "voided",  # a forced error was revealed (the game), or the unit moved on (a data request)
    "open",  # a data request not yet answered
    "answered",
    "expired",  # a data request left unanswered: the solver lost as in a lost game
)


@dataclass(frozen=True)
class JobFacts:
    job_id: int
    status: JobStatus
    submitter: str
    reward: int
    verification_fee: int
    escrow: int
    steps: int
    checkpoint_every: int
    spec_hash: bytes
    units: tuple[UnitFacts, ...]
    disputes: tuple[DisputeFacts, ...]
    block: int  # the chain's latest block when read
    now: int  # its timestamp: every window is chain time

    @property
    def done(self) -> bool:
        return self.status in (JobStatus.COMPLETED, JobStatus.CANCELLED)


# --- disputes from events -----------------------------------------------------------------------


def disputes_from_events(events: Iterable[tuple[str, Mapping[str, Any]]]) -> list[DisputeFacts]:
    """Fold a unit's dispute events (name, args), in chain order, into one DisputeFacts per
    challenge and per data request. A game's result applies to its game id; a data request's
    to the newest open request of its requester on the unit."""
    out: list[DisputeFacts] = []
    games: dict[int, int] = {}  # game id -> index in out
    requests: dict[tuple[int, str], int] = {}  # (unit, requester) -> index of its open request

    def update(i: int, **changes: Any) -> None:
        out[i] = DisputeFacts(**{**out[i].__dict__, **changes})

    for name, a in events:
        unit = int(a["unitId"])
        if name == "ChallengeOpened":
            games[int(a["gameId"])] = len(out)
            out.append(DisputeFacts(unit, "game", a["challenger"], int(a["gameId"]), "running"))
        elif name in ("DisputeResolved", "DisputeResultHeld", "DisputeVoided"):
            i = games.get(int(a["gameId"]))
            if i is None:
                continue  # a game opened before the range read
            if name == "DisputeVoided":
                update(i, outcome="voided")
            elif name == "DisputeResultHeld":
                update(i, outcome="held", until=int(a["until"]))
            else:
                update(i, outcome="challenger won" if a["challengerWon"] else "solver won")
        elif name == "DataRequested":
            key = (unit, a["requester"].lower())
            requests[key] = len(out)
            out.append(DisputeFacts(unit, "data request", a["requester"], 0, "open",
                                    int(a["answerDeadline"])))  # fmt: skip
        elif name in ("DataRequestAnswered", "DataRequestExpired", "DataRequestVoided"):
            i = requests.pop((unit, a["requester"].lower()), None)
            if i is not None:
                outcome = {"DataRequestAnswered": "answered", "DataRequestExpired": "expired"}
                update(i, outcome=outcome.get(name, "voided"), until=0)
    return out


#: The events `disputes_from_events` reads.
DISPUTE_EVENTS = (
    "ChallengeOpened",
    "DisputeResolved",
    "DisputeResultHeld",
    "DisputeVoided",
    "DataRequested",
    "DataRequestAnswered",
    "DataRequestExpired",
    "DataRequestVoided",
)


# --- windows and time left ----------------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    """What a unit waits on: a window ending at a chain time (`at_time`) or at a block."""

    name: str
    at_time: int = 0
    at_block: int = 0


def unit_window(u: UnitFacts) -> Window | None:
    """The window the unit's phase runs until (PROTOCOL §6.5); None once it is settled."""
    s = u.status
    if s == UnitStatus.OPEN:
        return Window("claim window", at_time=u.deadline)
    if s == UnitStatus.SELECTING:
        return Window("assignee drawn after", at_block=u.seed_block)
    if s == UnitStatus.ASSIGNED:
        return Window("training, commit by", at_time=u.deadline)
    if s == UnitStatus.COMMITTED:
        return Window("verifiers drawn after", at_block=u.seed_block)
    if s == UnitStatus.VERIFYING:
        return Window("challenge window", at_time=u.deadline)
    if s == UnitStatus.DISPUTED:
        if u.answer_deadline:
            return Window("data request, answer by", at_time=u.answer_deadline)
        if u.held_until:
            return Window("challenger's win held until", at_time=u.held_until)
        return Window("dispute game running")
    return None


def duration(seconds: int) -> str:
    """A short human duration: 45s, 3m05s, 2h07m, 3d04h."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86_400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86_400}d{s % 86_400 // 3600:02d}h"


def time_left(w: Window | None, now: int, block: int) -> str:
    """The window's end relative to the chain's head: "12s left", "closed 3s ago", "in 2
    blocks", "" when it has no end (a settled unit, a game on its players' clocks)."""
    if w is None:
        return ""
    if w.at_time:
        left = w.at_time - now
        return f"{duration(left)} left" if left >= 0 else f"closed {duration(-left)} ago"
    if w.at_block:
        blocks = w.at_block - block
        if blocks >= 0:
            return f"in {blocks + 1} block{'s' if blocks else ''}"
        return "due"
    return ""


def change_key(f: JobFacts) -> tuple:
    """What a followed job's view is reprinted for (not the clock: it moves every read): the
    job's and units' phases, attempts and assignees, the disputes and their outcomes."""
    units = tuple((u.status, u.attempt, u.assignee, u.held_until, u.answer_deadline)
                  for u in f.units)  # fmt: skip
    return (f.status, units, f.disputes)


# --- rendering -----------------------------------------------------------------------------------


def phase_name(status: JobStatus | UnitStatus) -> str:
    return status.name.lower()


def short(address: str) -> str:
    return "-" if int(address, 16) == 0 else f"{address[:8]}…{address[-4:]}"


def tokens(amount: int) -> str:
    return f"{amount / TOKEN:g}"


def summary(f: JobFacts) -> str:
    return (
        f"job {f.job_id}: {phase_name(f.status)} · reward {tokens(f.reward)} "
        f"(verification fee {tokens(f.verification_fee)}) · escrow {tokens(f.escrow)} · "
        f"{f.steps} steps, checkpoint every {f.checkpoint_every} · "
        f"block {f.block}, chain time {f.now}"
    )


UNIT_COLUMNS = ("unit", "phase", "attempt", "solver", "window", "time left")
DISPUTE_COLUMNS = ("unit", "kind", "by", "game", "outcome")


def unit_rows(f: JobFacts) -> list[tuple[str, ...]]:
    rows = []
    for i, u in enumerate(f.units):
        w = unit_window(u)
        rows.append((
            str(i),
            phase_name(u.status),
            str(u.attempt + 1),
            short(u.assignee),
            w.name if w else "",
            time_left(w, f.now, f.block),
        ))  # fmt: skip
    return rows


def dispute_rows(f: JobFacts) -> list[tuple[str, ...]]:
    index = {u.unit_id: i for i, u in enumerate(f.units)}
    rows = []
    for d in f.disputes:
        outcome = d.outcome
        if d.until and d.outcome in ("held", "open"):
            outcome += f" (until {d.until}: {time_left(Window('', at_time=d.until), f.now, 0)})"
        rows.append((
            str(index.get(d.unit_id, d.unit_id)),
            d.kind,
            short(d.by),
            str(d.game_id) if d.game_id else "-",
            outcome,
        ))  # fmt: skip
    return rows


def _table_lines(columns: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(columns)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return [fmt.format(*columns).rstrip()] + [fmt.format(*r).rstrip() for r in rows]


def render_text(f: JobFacts) -> str:
    """The plain view: the summary, the units' table, the disputes' table (or "no disputes")."""
    lines = [summary(f), ""]
    lines += _table_lines(UNIT_COLUMNS, unit_rows(f))
    lines.append("")
    disputes = dispute_rows(f)
    lines += _table_lines(DISPUTE_COLUMNS, disputes) if disputes else ["no disputes"]
    return "\n".join(lines)


def render_rich(f: JobFacts) -> Any:
    """The same view as rich tables (a renderable for a Console or a Live display)."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    units = Table(*UNIT_COLUMNS, title="units", title_justify="left")
    for row in unit_rows(f):
        units.add_row(*row)
    parts: list[Any] = [Text(summary(f), style="bold"), units]
    disputes = dispute_rows(f)
    if disputes:
        table = Table(*DISPUTE_COLUMNS, title="disputes", title_justify="left")
        for row in disputes:
            table.add_row(*row)
        parts.append(table)
    else:
        parts.append(Text("no disputes"))
    return Group(*parts)


def facts_json(f: JobFacts) -> dict[str, Any]:
    """The facts as one JSON object (`job status --json`): enums by name, bytes as 0x hex."""
    return {
        "job_id": f.job_id,
        "status": phase_name(f.status),
        "submitter": f.submitter,
        "reward": f.reward,
        "verification_fee": f.verification_fee,
        "escrow": f.escrow,
        "steps": f.steps,
        "checkpoint_every": f.checkpoint_every,
        "spec_hash": "0x" + f.spec_hash.hex(),
        "block": f.block,
        "chain_time": f.now,
        "units": [
            {
                "unit_id": u.unit_id,
                "status": phase_name(u.status),
                "attempt": u.attempt,
                "assignee": u.assignee,
                "final_state_root": "0x" + u.final_root.hex(),
                "window": (w := unit_window(u)) and w.name,
                "time_left": time_left(w, f.now, f.block),
            }
            for u in f.units
        ],
        "disputes": [d.__dict__ for d in f.disputes],
    }
