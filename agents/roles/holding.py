"""Holding a unit's data (PROTOCOL §6.11): the steps of a data request's answer, shared by the
holders that send it — the assignee, and a drawn verifier that attested (attesting is holding the
result) when the assignee has not answered by half the window.

An answer is bounded whatever the state's size: the state opened against the checkpoint root, its
headers in parts of at most DATA_OPEN_PART, then DATA_SAMPLES chunks in batches of SAMPLE_BATCH.
Each step is its own intent and is skipped once the chain shows it done (by anyone), so a restarted
or a second holder resumes where the chain is. The answer names where its sender serves the state
(`<store URL>#<state blob address>`), where the requester then reads it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

from agents.dispute.availability import DATA_SAMPLES, StateOpening
from agents.roles.actions import OpenDataHeaders, OpenDataState, ProveDataSamples
from agents.roles.executor import Executor
from agents.roles.logic import UnitView

#: Samples per proveDataSamples call: ~25 k gas of calldata each at 124M parameters, so a batch
#: stays far below a block and a transaction's size (bench/results/availability.json).
SAMPLE_BATCH = 16


async def answer_request(
    executor: Executor,
    u: UnitView,
    opening: StateOpening,
    checkpoint_roots: Sequence[bytes],
    locator: str,
    seed_of: Callable[[int], Awaitable[bytes | None]],
    log: logging.Logger,
) -> None:
    """Send the steps of the answer to the unit's open data request that the chain does not show
    done yet (`u.data_request`: its snapshot this round). `opening` is the requested state,
    `checkpoint_roots` the state roots its commitment binds; `seed_of(block)` is the block's
    hash, None while it is not mined. Stops at the first step that is not sent (retried next
    round, from a fresh snapshot)."""
    req = u.data_request
    assert req is not None
    uid = u.unit_id
    tag = f"{uid}:{u.attempt}:{req.requester.lower()}"
    if not req.state_opened:
        s = opening.open_state(checkpoint_roots, req.checkpoint)
        act = OpenDataState(f"open-data:{tag}", uid, s.tensor_count, s.state_tree,
                            s.checkpoint_proof)  # fmt: skip
        if await executor.execute(act) is None:
            return
        log.info(
            "unit %d: answering %s's data request for checkpoint %d (%d tensors, %d chunks)",
            uid, req.requester, req.checkpoint, opening.tensor_count, opening.total_leaves,
        )  # fmt: skip
    for part in opening.header_parts():
        if part.first_tensor < req.opened:
            continue  # on chain already
        act = OpenDataHeaders(f"open-headers:{tag}:{part.first_tensor}", uid, part)
        if await executor.execute(act) is None:
            return
    seed = await seed_of(req.seed_block)
    if seed is None:
        return  # the seed block is not mined yet
    for first in range(req.samples, DATA_SAMPLES, SAMPLE_BATCH):
        batch = tuple(opening.samples(seed, first, min(SAMPLE_BATCH, DATA_SAMPLES - first)))
        # the seed block names the draw: a re-armed seed (PROTOCOL §6.11) is another batch
        act = ProveDataSamples(f"prove-data:{tag}:{req.seed_block}:{first}", uid, batch, locator)
        if await executor.execute(act) is None:
            return
    log.info("unit %d: answered the data request for checkpoint %d", uid, req.checkpoint)
