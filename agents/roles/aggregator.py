"""The aggregator role (PROTOCOL §6.9): what an aggregator commits to the RoundManager and what a
challenger proves against a wrong aggregate (the pure proofs: agents/roles/aggregation.py).

An aggregate G_{r+1} is committed as the data roots of its state tensors; the contract rebuilds
the state root from the job's layout (names and shapes), so only element values can be wrong. A
wrong element is proven by opening it in the S finalized unit states and in G_{r+1}: the
contract recomputes RepOps.average and slashes the aggregator's bond if it differs.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from agents.core.blobs import BlobError
from agents.core.bounded import BoundedCache
from agents.core.enums import Role, RoundJobStatus, RoundStatus, Side
from agents.dispute.aggregation import AggregationComputation
from agents.dispute.player import Challenger, Defender
from agents.roles.actions import (
    Approve,
    Arena,
    ChallengeAggregate,
    ClaimAggregateWithheld,
    CommitAggregate,
    FinalizeRound,
    PlayAggregate,
    ProveAggregationFraud,
    ReclaimRevealBond,
    RequestAggregateReveal,
    RevealAggregateLeaf,
    WithdrawRounds,
)
from agents.roles.aggregation import (
    data_roots,
    first_disputed_tensor,
    first_wrong_element,
    fraud_proof,
    layout_of,
    opening,
    reveal_answer,
    reveal_request,
    revealed_opening,
    wrong_element_in_chunk,
)
from agents.roles.artifacts import (
    BadBlob,
    decode_state,
    encode_state,
    locator_store,
    make_locator,
    parse_locator,
    state_bytes,
)
from agents.roles.config import AggregatorConfig
from agents.roles.games import take_turn
from agents.roles.jobs import JobRejected
from agents.roles.logic import AggregateFacts, SettledJobs, aggregate_acts
from agents.roles.runner import RoleAgent, RoleError
from agents.training.decompose import aggregate, aggregation_weights
from agents.training.state import State, state_root

TOKEN = 10**18

# --- the role -------------------------------------------------------------------------------


class AggregatorStrategy(Protocol):
    """What an aggregator commits and publishes: the honest aggregate at its blob's address
    (`HonestAggregator`) or a test adversary's (agents.adversaries: --cheat, --withhold)."""

    def announce(self, log: logging.Logger) -> None:
        """Say once at start-up what this strategy does, if it is not the honest one."""
        ...

    def aggregate_to_commit(self, honest: State) -> State:
        """The aggregate to commit, given my honest one (version 2)."""
        ...

    def aggregation(self, honest: AggregationComputation) -> AggregationComputation:
        """My account of a version-3 round's aggregation, given the honest one: its H_{r+1} is
        what I commit, and in the round manager's game I defend it with it."""
        ...

    def published_address(self, address: str) -> str:
        """The blob address to publish in the locator, given the committed aggregate's."""
        ...


@dataclass(frozen=True, kw_only=True)
class HonestAggregator:
    """Commits the honest aggregate and publishes where its blob is."""

    def announce(self, log: logging.Logger) -> None:
        return None

    def aggregate_to_commit(self, honest: State) -> State:
        return honest

    def aggregation(self, honest: AggregationComputation) -> AggregationComputation:
        return honest

    def published_address(self, address: str) -> str:
        return address


class Aggregator(RoleAgent):
    """`python -m agents aggregator`: for every running decomposed job, once the current round's
    S units are finalized, recompute G_{r+1} from their states, publish it and commit it (bonded);
    check every aggregate others commit and prove a wrong one; finalize rounds whose window is
    over. What it commits and publishes is its `AggregatorStrategy`: `HonestAggregator` here;
    the test adversary of --cheat / --withhold (agents/adversaries/aggregator.py) is wired in at
    start-up (agents/cli/adversaries.py).

    A version-3 round's aggregate (H_{r+1}) is disputed in the round manager's game instead
    (`follow_round_state`): a wrong one is challenged and played down to one element of the
    aggregation graph with my account of the round (AggregationComputation), and my own is
    defended with the account my strategy committed.

    A wrong version-2 aggregate whose blob is withheld is disputed by a reveal request (PROTOCOL
    §6.9): the committed data roots are read from the commitAggregate transaction, the first tensor
    that differs from the honest aggregate is named with my leaves of it, and the revealed
    chunk is proven wrong element by element; an unanswered request is claimed as withheld.
    As the aggregator, I answer every request on my own aggregate."""

    role = "aggregator"
    config: AggregatorConfig
    # A class default, so aggregators built without __init__ (tests) are honest.
    strategy: AggregatorStrategy = HonestAggregator()

    def __init__(self, *a, strategy: AggregatorStrategy | None = None, **kw) -> None:
        super().__init__(*a, **kw)
        self.strategy = strategy or HonestAggregator()
        self.completed = SettledJobs()  # decomposed jobs no round reads again (unfinished_jobs)
        # (job, round) -> my aggregate of its units, recomputed from them when evicted
        self.honest: BoundedCache[tuple[int, int], State] = BoundedCache(self.max_loaded_jobs)
        # version 3: (job, round) -> my account of its aggregation (H_r, the units, H_{r+1})
        self.accounts: BoundedCache[tuple[int, int], AggregationComputation] = BoundedCache(
            self.max_loaded_jobs, on_evict=lambda acct: acct.release()
        )
        # (job, round, aggregate root) -> committed data roots and block: read once per aggregate
        self._committed: BoundedCache[tuple[int, int, bytes], tuple[list[bytes], int]] = (
            BoundedCache(self.max_loaded_jobs)
        )

    def opened(self) -> None:
        if self.rounds is None:
            raise RoleError("no RoundManager: pass --round-manager or a --deployment that has one")
        self.rm = self.rounds.rm

    async def setup(self) -> None:
        # RoundManager aggregators are registered solvers (PROTOCOL §6.9).
        await self.ensure_registered(Role.SOLVER, int(self.config.stake * TOKEN), (0, 0, 0))
        self.strategy.announce(self.log)

    async def round(self) -> bool:
        now = await self.now()
        for dj, job in await self.unfinished_jobs():
            if job.status != RoundJobStatus.RUNNING:
                continue
            with self.isolated(f"decomposed job {dj}"):
                await self.follow(dj, job.currentRound, now)
        await self.withdraw_round_credits(now)
        return False

    async def unfinished_jobs(self) -> list[tuple[int, tuple]]:
        """(id, getJob) of each decomposed job not known Completed for good. A job Completed
        `--confirmations` deep (no transition leaves Completed) is not read again, so a round's
        reads grow with the running jobs, not with every job ever posted."""
        out = []
        count = await self.rm.functions.jobCount().call()
        for dj in range(self.completed.floor + 1, count + 1):
            if dj in self.completed:
                continue
            job = await self.rm.functions.getJob(dj).call()
            if job.status == RoundJobStatus.COMPLETED and await self.holds_deep(
                self.completed_at(dj)
            ):
                self.completed.add(dj)
                continue
            out.append((dj, job))
        return out

    def completed_at(self, dj: int) -> Callable[[int], Awaitable[bool]]:
        """Whether decomposed job `dj` is Completed at a block (for `holds_deep`)."""

        async def holds(block: int) -> bool:
            job = await self.rm.functions.getJob(dj).call(block_identifier=block)
            return job.status == RoundJobStatus.COMPLETED

        return holds

    async def follow(self, dj: int, r: int, now) -> None:
        """Round `r` of decomposed job `dj`: aggregate, answer or check, then finalize."""
        rnd = await self.rm.functions.getRound(dj, r).call()
        status, attempt, deadline, aggregator, root = rnd[:5]
        if await self.rounds.version3(dj):
            await self.follow_round_state(dj, r, rnd, now)
            return
        if status == RoundStatus.TRAINING:
            await self.aggregate(dj, r, attempt)
        elif status != RoundStatus.COMMITTED:
            return
        elif aggregator.lower() == self.me.lower():
            if not await self.answer_reveal(dj, r, attempt, bytes(root)):
                await self.finalize(dj, r, attempt, deadline, now)
        elif not await self.check(dj, r, attempt, bytes(root)):
            await self.finalize(dj, r, attempt, deadline, now)

    async def finalize(self, dj: int, r: int, attempt: int, deadline: int, now) -> None:
        pending = await self.rm.functions.revealRequestOf(dj, r).call()
        if now.timestamp > deadline and int(pending.requester, 16) == 0:
            await self.executor.execute(FinalizeRound(f"finalizeRound:{dj}:{r}:{attempt}", dj))

    async def honest_aggregate(self, dj: int, r: int) -> tuple[list[State], State] | None:
        """Round r's unit states and my aggregate of them: G_{r+1}, or a version-3 job's H_{r+1}
        (its aggregation graph on H_r and the units); None until the units are all there."""
        if await self.rounds.version3(dj):
            return await self.honest_round_state(dj, r)
        try:
            units = await self.rounds.unit_states(dj, r)
        except JobRejected:
            return None  # units not finalized (or their blobs not there) yet
        spec, data = await self.rounds.job_spec(dj)
        weights = aggregation_weights(data.n, spec.shards)
        mine = self.honest.get((dj, r))
        if mine is None:
            mine = aggregate(units, weights)
            self.honest.put((dj, r), mine)
        return units, mine

    async def honest_round_state(self, dj: int, r: int) -> tuple[list[State], State] | None:
        acct = await self.honest_account(dj, r)
        return None if acct is None else (acct.units, acct.output())

    async def honest_account(self, dj: int, r: int) -> AggregationComputation | None:
        """My account of round r's aggregation of version-3 job `dj` (H_r and its finalized
        units, recomputed and checked: Rounds.round_inputs); None until the units are there."""
        acct = self.accounts.get((dj, r))
        if acct is not None:
            return acct
        try:
            rt, h, units = await self.rounds.round_inputs(dj, r)
        except JobRejected:
            return None  # units not finalized (or their blobs not there) yet
        acct = rt.aggregation_account(h, units)
        self.accounts.put((dj, r), acct)
        return acct

    # --- version 3: the aggregation game (PROTOCOL §6.9) ------------------------------------

    async def follow_round_state(self, dj: int, r: int, rnd, now) -> None:
        """Round `r` of version-3 job `dj`: commit my H_{r+1} while it trains; dispute a wrong
        aggregate in the round manager's game and take my turns there (logic.aggregate_acts);
        finalize an aggregate that is right, or mine, after its window."""
        status, attempt, deadline, aggregator, root = rnd[:5]
        if status == RoundStatus.TRAINING:
            await self.aggregate(dj, r, attempt)
            return
        if status not in (RoundStatus.COMMITTED, RoundStatus.DISPUTED):
            return
        acct = await self.honest_account(dj, r)
        differs = None if acct is None else acct.final_root() != bytes(root)
        facts = AggregateFacts(
            dj, r, attempt, RoundStatus(status), deadline, aggregator, rnd.challenger, self.me,
            differs, await self.aggregate_game(dj, r) if status == RoundStatus.DISPUTED else 0,
        )  # fmt: skip
        acts = aggregate_acts(facts, now)
        for act in acts:
            match act:
                case ChallengeAggregate():
                    await self.challenge_aggregate(act, r, bytes(root))
                case PlayAggregate():
                    await self.play_aggregate(act, acct, now)
        mine = aggregator.lower() == self.me.lower()
        if status == RoundStatus.COMMITTED and not acts and (mine or differs is False):
            await self.finalize(dj, r, attempt, deadline, now)

    async def aggregate_game(self, dj: int, r: int) -> int:
        """The round manager's game open over round r's aggregate (its last AggregateChallenged),
        0 when none is found."""
        logs = await self.rm.events.AggregateChallenged().get_logs(
            from_block=0, argument_filters={"jobId": dj}
        )
        games = [int(ev["args"]["gameId"]) for ev in logs if ev["args"]["round"] == r]
        return games[-1] if games else 0

    async def challenge_aggregate(self, act: ChallengeAggregate, r: int, root: bytes) -> None:
        """Dispute the committed aggregate (root `root`) that is not my H_{r+1}: the challenge
        takes a bond equal to the aggregator's."""
        bond = (await self.rm.functions.config().call()).aggregatorBond
        await self.approve_at_least(act.intent, self.rm.address, bond)
        if await self.executor.execute(act):
            self.log.info("job %d round %d: the aggregate 0x%s… is not mine: challenged it in "
                          "the aggregation game", act.job_id, r, root.hex()[:16])  # fmt: skip

    async def play_aggregate(
        self, act: PlayAggregate, honest: AggregationComputation | None, now
    ) -> None:
        """My turn in the round manager's game over an aggregate: the aggregator defends its
        account (as its strategy made it), the challenger plays the honest one."""
        if honest is None:
            return  # (cannot be: a challenger or an aggregator computed it first)
        if act.side == Side.DEFENDER:
            player = Defender(self.strategy.aggregation(honest), honest.jg)
        else:
            player = Challenger(honest, honest.jg)
        await take_turn(self.executor, self.round_game_reader, act.game_id, Side(act.side),
                        player, now, arena=Arena.ROUND)  # fmt: skip

    async def committed_form(self, dj: int, g: State) -> tuple[bytes, State, bytes]:
        """An aggregate as it is published and committed: its blob, the 2-D tensors whose layout
        and data roots commitAggregate takes (a version-3 state's committed views, §2.7) and
        its state root."""
        if await self.rounds.version3(dj):
            rt = await self.rounds.model_job(dj)
            return rt.encode_state(g), rt.committed(g), rt.state_root(g)
        return encode_state(g), g, state_root(g)

    async def aggregate(self, dj: int, r: int, attempt: int) -> None:
        if await self.rounds.version3(dj):
            acct = await self.honest_account(dj, r)
            if acct is None:
                return
            g = self.strategy.aggregation(acct).output()
        else:
            got = await self.honest_aggregate(dj, r)
            if got is None:
                return
            g = self.strategy.aggregate_to_commit(got[1])
        blob, committed, root = await self.committed_form(dj, g)
        bond = (await self.rm.functions.config().call()).aggregatorBond
        if await self.token.functions.allowance(self.me, self.rm.address).call() < bond:
            approve = Approve(f"aggregate:{dj}:{r}:{attempt}:approve", self.rm.address, bond)
            await self.executor.execute(approve)
        address = self.agent.blobs.put(blob)
        key = f"{dj}:{r}:{attempt}"
        self.agent.store.put_record("aggregate", key, "committed", {"blob": address})
        locator = make_locator(self.public_blob_url, self.strategy.published_address(address))
        commit = CommitAggregate(
            f"aggregate:{dj}:{r}:{attempt}", dj, layout_of(committed).as_tuple(),
            tuple(data_roots(committed)), locator,
        )  # fmt: skip
        if await self.executor.execute(commit):
            self.log.info("committed the aggregate of job %d round %d: root 0x%s…", dj, r,
                          root.hex()[:16])  # fmt: skip

    async def check(self, dj: int, r: int, attempt: int, root: bytes) -> bool:
        """Prove someone else's wrong aggregate wrong; True while I dispute it (the round is
        then not mine to finalize)."""
        got = await self.honest_aggregate(dj, r)
        if got is None or (await self.committed_form(dj, got[1]))[2] == root:
            return False
        units, honest = got
        claimed = await self.committed_state(dj, r, root)
        if claimed is None:  # withheld: make the aggregator reveal what I dispute
            await self.dispute_withheld(dj, r, attempt, root, units, honest)
            return True
        spec, data = await self.rounds.job_spec(dj)
        where = first_wrong_element(units, aggregation_weights(data.n, spec.shards), claimed)
        if where is None:
            return False
        args = fraud_proof(units, claimed, layout_of(honest), *where)
        proof = ProveAggregationFraud(f"fraud:{dj}:{r}:{attempt}", dj, tuple(args))
        if await self.executor.execute(proof):
            self.log.info("proved G_%d of job %d wrong at tensor %d element %d", r + 1, dj, *where)
        return True

    async def committed_roots(self, dj: int, r: int, root: bytes) -> tuple[list[bytes], int] | None:
        """The data roots the aggregate `root` was committed with (commitAggregate's calldata)
        and the block it was committed in."""
        kept = self._committed.get((dj, r, root))
        if kept is not None:
            return kept
        logs = await self.rm.events.AggregateCommitted().get_logs(
            from_block=0, argument_filters={"jobId": dj}
        )
        for log in reversed(logs):
            if log["args"]["round"] != r or bytes(log["args"]["aggregateRoot"]) != root:
                continue
            tx = await self.w3.eth.get_transaction(log["transactionHash"])
            _, args = self.rm.decode_function_input(tx["input"])
            found = [bytes(x) for x in args["dataRoots"]], int(log["blockNumber"])
            self._committed.put((dj, r, root), found)
            return found
        return None

    async def dispute_withheld(
        self, dj: int, r: int, attempt: int, root: bytes, units: list[State], honest: State
    ) -> None:
        committed = await self.committed_roots(dj, r, root)
        if committed is None:
            return
        roots, block = committed
        tensor = first_disputed_tensor(roots, honest)
        if tensor is None:
            return  # the same data roots: the state roots cannot differ
        layout = layout_of(honest)
        key = f"{dj}:{r}:{attempt}"
        revealed = await self.rm.events.AggregateLeafRevealed().get_logs(
            from_block=block, argument_filters={"jobId": dj}
        )
        for ev in revealed:
            a = ev["args"]
            if a["round"] != r or a["tensor"] != tensor:
                continue
            leaves, chunk = [bytes(x) for x in a["leaves"]], bytes(a["chunk"])
            element = wrong_element_in_chunk(honest, tensor, a["leaf"], chunk)
            if element is None:
                continue  # (a malformed padding was proven by the reveal itself)
            aggregate_open = revealed_opening(layout, roots, tensor, leaves, a["leaf"], chunk)
            unit_opens = [opening(u, tensor, element) for u in units]
            proof = ProveAggregationFraud(
                f"fraud:{key}", dj, (layout.as_tuple(), tensor, element, unit_opens, aggregate_open)
            )
            if await self.executor.execute(proof):
                self.log.info(
                    "proved G_%d of job %d wrong at tensor %d element %d from its reveal",
                    r + 1, dj, tensor, element,
                )  # fmt: skip
            return
        pending = await self.rm.functions.revealRequestOf(dj, r).call()
        if int(pending.requester, 16) != 0:
            mine = pending.requester.lower() == self.me.lower()
            due = mine and (await self.now()).timestamp > pending.deadline
            if due and await self.executor.execute(ClaimAggregateWithheld(f"withheld:{key}", dj)):
                self.log.info("job %d round %d: the aggregate was withheld; slashed", dj, r)
            return
        bond = await self.rm.functions.revealBond().call()
        if await self.token.functions.allowance(self.me, self.rm.address).call() < bond:
            await self.executor.execute(Approve(f"reveal:{key}:approve", self.rm.address, bond))
        request = RequestAggregateReveal(
            f"reveal:{key}", dj, tuple(reveal_request(layout, roots, honest, tensor))
        )
        # Recorded before the send: the bond of an answered request is held with this aggregate
        # (reclaim_reveal_bonds), and a kill right after the request is mined must not lose it.
        if self.agent.store.get_record("reveal-bond", key) is None:
            self.agent.store.put_record("reveal-bond", key, "requested", {})
        if await self.executor.execute(request):
            self.log.info(
                "job %d round %d: aggregate blob withheld; asked to reveal tensor %d",
                dj, r, tensor,
            )  # fmt: skip

    async def answer_reveal(self, dj: int, r: int, attempt: int, root: bytes) -> bool:
        """Answer a reveal request on my aggregate from my own blob; True while one pending."""
        req = await self.rm.functions.revealRequestOf(dj, r).call()
        if int(req.requester, 16) == 0:
            return False
        rec = self.agent.store.get_record("aggregate", f"{dj}:{r}:{attempt}")
        if rec is None:
            return True  # not committed from this data folder: nothing to reveal from
        spec, _ = await self.rounds.job_spec(dj)
        mine = decode_state(spec, self.agent.blobs.get(rec.data["blob"]))
        if state_root(mine) != root:
            return True
        logs = await self.rm.events.AggregateRevealRequested().get_logs(
            from_block=0, argument_filters={"jobId": dj}
        )
        ask = next(
            (ev["args"] for ev in reversed(logs) if ev["args"]["round"] == r),
            None,
        )
        if ask is None:
            return True
        requested = [bytes(x) for x in ask["leaves"]]
        key = f"{dj}:{r}:{attempt}:{ask['requester']}:{ask['deadline']}"
        answer = RevealAggregateLeaf(
            f"reveal-answer:{key}", dj, tuple(reveal_answer(mine, ask["tensor"], requested))
        )
        if await self.executor.execute(answer):
            self.log.info("job %d round %d: revealed tensor %d", dj, r, ask["tensor"])
        return True

    async def committed_state(self, dj: int, r: int, root: bytes) -> State | None:
        """The committed aggregate's state from the locator of its AggregateCommitted event."""
        spec, _ = await self.rounds.job_spec(dj)
        logs = await self.rm.events.AggregateCommitted().get_logs(
            from_block=0, argument_filters={"jobId": dj}
        )
        for log in reversed(logs):
            if log["args"]["round"] != r or bytes(log["args"]["aggregateRoot"]) != root:
                continue
            try:
                base, address = parse_locator(log["args"]["blobLocator"])
                store = locator_store(base, self.local_locators)
                st = decode_state(spec, store.get(address, max_bytes=state_bytes(spec)))
            except (BadBlob, BlobError, ValueError) as exc:
                self.log.warning("job %d round %d: aggregate blob unavailable: %s", dj, r, exc)
                return None
            return st if state_root(st) == root else None
        return None

    async def reclaim_reveal_bonds(self) -> None:
        """Take back the bonds of my answered reveal requests held with an aggregate that was
        then overturned, by my proof or anyone's (PROTOCOL §6.9); a record is closed once its
        aggregate is overturned (reclaimed, or nothing held: a pending request's bond is
        credited at once) or stood (the bond went to the jackpot)."""
        for rec in self.agent.store.list_records("reveal-bond", state="requested"):
            dj, r, attempt = (int(x) for x in rec.record_id.split(":"))
            rnd = await self.rm.functions.getRound(dj, r).call()
            if rnd.attempt > attempt:
                held = await self.rm.functions.heldBondOf(dj, r, attempt, self.me).call()
                if held:
                    act = ReclaimRevealBond(f"reclaim:{rec.record_id}", dj, r, attempt)
                    if not await self.executor.execute(act):
                        continue  # retried next round
                    self.log.info(
                        "job %d round %d: took back my reveal bond of %g tokens",
                        dj, r, held / 1e18,
                    )  # fmt: skip
                self.agent.store.put_record("reveal-bond", rec.record_id, "returned", {})
            elif rnd.status == RoundStatus.FINAL:
                self.agent.store.put_record("reveal-bond", rec.record_id, "forfeited", {})

    async def withdraw_round_credits(self, now) -> None:
        await self.reclaim_reveal_bonds()
        credits = await self.rm.functions.credits(self.me).call()
        withdraw = WithdrawRounds(f"rm-withdraw:{credits}:{now.block}")
        if credits > 0 and await self.executor.execute(withdraw):
            self.log.info("withdrew %g tokens from the RoundManager", credits / 1e18)
