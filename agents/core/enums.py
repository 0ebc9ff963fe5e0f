"""The protocol's Solidity enums, the one Python copy of each (chain values are their numbers).

Every member is written out by name so that a reader sees the numbers the chain uses;
tests/core/test_enums_abi.py compares each enum here with the compiler's (`build/abi/enums.json`,
written by tools/export_abi.py from the AST), so a member added, renamed or moved on either side
fails the tests instead of shifting a number silently. Names are the Solidity members' in
UPPER_SNAKE case (`PostCheckpoints` -> `POST_CHECKPOINTS`).
"""

from __future__ import annotations

from enum import IntEnum


class JobStatus(IntEnum):
    """IJobManager.JobStatus."""

    NONE = 0
    OPEN = 1
    COMPLETED = 2
    CANCELLED = 3


class UnitStatus(IntEnum):
    """IJobManager.UnitStatus (life cycle: PROTOCOL §6.5, agents/roles/logic.py)."""

    NONE = 0
    OPEN = 1
    SELECTING = 2
    ASSIGNED = 3
    COMMITTED = 4
    VERIFYING = 5
    DISPUTED = 6
    FINALIZED = 7
    CANCELLED = 8


class VerifierStatus(IntEnum):
    """IJobManager.VerifierStatus."""

    NONE = 0
    PENDING = 1  # drawn, nothing sealed yet
    ATTESTED = 2  # its seal opened: the end roots are public
    SEALED = 3  # its end roots sealed (commit-reveal), not yet opened
    SLASHED = 4  # attested a wrong root at a forced round's perturbed checkpoints


class Role(IntEnum):
    """INodeRegistry.Role; NONE marks an unregistered (or fully exited) address."""

    NONE = 0
    SOLVER = 1
    VERIFIER = 2
    WHISTLEBLOWER = 3


class RoundJobStatus(IntEnum):
    """IRoundManager.JobStatus (a decomposed job's; not IJobManager's JobStatus)."""

    NONE = 0
    RUNNING = 1
    COMPLETED = 2


class RoundStatus(IntEnum):
    """IRoundManager.RoundStatus."""

    NONE = 0
    TRAINING = 1  # units posted; aggregation may be committed once all S are finalized
    COMMITTED = 2  # an aggregate is in its challenge window
    FINAL = 3  # G_{r+1} is final
    DISPUTED = 4  # version 3: the aggregate is disputed in the aggregation game


class Phase(IntEnum):
    """DisputeTypes.sol's Phase: the move a dispute game expects next, in the order of play
    (the walk down a large trace, PICK_TRACE_SUBTREE and POST_TRACE_SUBTREE, or down the
    disputed S_{t+1}'s list, PICK_STATE_SUBTREE and POST_STATE_SUBTREE, before PICK_NODE:
    PROTOCOL §7.3; the bisection of a reduction, POST_ACCUMULATORS … PROVE_ACCUMULATION, after
    PROVE_ELEMENT: PROTOCOL §7.10)."""

    NONE = 0
    POST_CHECKPOINTS = 1
    PICK_SEGMENT = 2
    OPEN_SEGMENT = 3
    PICK_STEP = 4
    POST_TRACE = 5
    PICK_TRACE_SUBTREE = 6
    POST_TRACE_SUBTREE = 7
    PICK_STATE_SUBTREE = 8
    POST_STATE_SUBTREE = 9
    PICK_NODE = 10
    POST_LEAVES = 11
    PICK_LEAF = 12
    REVEAL_CHUNK = 13
    PROVE_ELEMENT = 14
    POST_ACCUMULATORS = 15
    PICK_ACCUMULATORS = 16
    PROVE_ACCUMULATION = 17
    RESOLVED = 18


class Side(IntEnum):
    """DisputeTypes.sol's Side: the two parties of a game."""

    NONE = 0
    DEFENDER = 1
    CHALLENGER = 2


#: Each enum's qualified Solidity name, as `build/abi/enums.json` keys it (contract.Enum, or the
#: bare name of a file-level enum).
SOLIDITY: dict[str, type[IntEnum]] = {
    "IJobManager.JobStatus": JobStatus,
    "IJobManager.UnitStatus": UnitStatus,
    "IJobManager.VerifierStatus": VerifierStatus,
    "INodeRegistry.Role": Role,
    "IRoundManager.JobStatus": RoundJobStatus,
    "IRoundManager.RoundStatus": RoundStatus,
    "Phase": Phase,
    "Side": Side,
}
