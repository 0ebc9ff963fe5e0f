"""Decomposed jobs (spec version 2) for the roles: the RoundManager (PROTOCOL §6.9) posts unit
(r, s) of a job as an ordinary JobManager job whose submitter is the RoundManager. A unit job is
loaded here as a plain job of k_local steps whose engine draws shard s's batches at global step
r·k_local + t and starts from G_r, so the solver's training loop, its checkpoints and the
verifier's segment replays need no other change.

G_0 is the spec's initial state; G_r (r > 0) is recomputed from round r-1's finalized unit states
(fetched through their locators, every root checked) and must equal the RoundManager's G_r root:
nobody trusts the aggregator's blob for it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from typing import Any

from web3.contract import AsyncContract

from agents.core.blobs import BlobStore
from agents.core.bounded import BoundedCache
from agents.core.enums import JobStatus, RoundJobStatus, RoundStatus
from agents.data import datasets
from agents.data.builtin import Dataset
from agents.data.chunks import FetchConfig
from agents.dispute.graph import job_graph
from agents.roles.actions import Approve, ChainAction, FinalizeRound, PostRoundJob
from agents.roles.aggregation import layout_of
from agents.roles.artifacts import BadBlob, CheckpointReader, StateCodec, as_codec
from agents.roles.errors import RoleError
from agents.roles.jobs import (
    DEFAULT_MAX_LOADED_JOBS,
    DEFAULT_MAX_PARAMS,
    JobContext,
    JobRejected,
    fetch_spec,
    keep_job,
    keep_spec,
    rejecting,
)
from agents.roles.logic import KeeperFacts, keeper_acts
from agents.roles.runtime import (
    MlpRuntime,
    ModelRuntime,
    RoundChain,
    check_dataset,
    decomposed_runtime,
)
from agents.training import spec as specs
from agents.training.decompose import (
    RoundUnitEngine,
    UnitEngine,
    aggregate,
    aggregation_weights,
    check_shards,
)
from agents.training.engine import EngineConfig
from agents.training.spec import JobSpec, ModelSpec
from agents.training.state import State, state_root

log = logging.getLogger(__name__)


def unit_spec(spec: JobSpec | ModelSpec) -> JobSpec | ModelSpec:
    """The spec a unit's solver and verifiers iterate over: k_local steps, interval k."""
    return dataclasses.replace(spec, steps=spec.k_local)


class Rounds:
    """One role's view of a RoundManager: decomposed jobs, their specs and global states."""

    def __init__(
        self, rm: AsyncContract, manager: AsyncContract, game: AsyncContract,
        stores: list[BlobStore],
        local_locators: bool = False, max_params: int = DEFAULT_MAX_PARAMS,
        max_loaded: int = DEFAULT_MAX_LOADED_JOBS, engine_cfg: EngineConfig = EngineConfig(),
        fetch: FetchConfig = FetchConfig(), round_game: AsyncContract | None = None,
    ) -> None:  # fmt: skip
        self.rm, self.manager, self.game, self.stores = rm, manager, game, stores
        self.round_game = round_game  # the RoundManager's game over version-3 aggregates
        self.engine_cfg = engine_cfg  # --device
        self.fetch = fetch  # where a packed dataset's chunks come from (--data-store, ...)
        self.local_locators = local_locators  # --allow-local-locators (dev chains)
        self.max_params = max_params  # --max-params
        # --max-loaded-jobs bounds both: a decomposed job's spec and dataset are loaded again
        # from the stores (my own first: keep_spec), G_r again from round r-1's unit blobs
        self._specs: BoundedCache[int, tuple[JobSpec, Dataset]] = BoundedCache(max_loaded)
        self._globals: BoundedCache[tuple[int, int], State] = BoundedCache(max_loaded)
        # version 3: the whole job's runtime (its units' are its `unit`s), and H_r by (job, r)
        self._models: BoundedCache[int, ModelRuntime] = BoundedCache(max_loaded)
        self._round_states: BoundedCache[tuple[int, int], State] = BoundedCache(max_loaded)

    def is_unit_job(self, job: Any) -> bool:
        return job.submitter.lower() == self.rm.address.lower()

    async def job_spec(self, dj: int) -> tuple[JobSpec, Dataset]:
        """The decomposed job's v2 spec and dataset, checked against its RoundManager record
        (cheap checks first; any error of the published data is JobRejected)."""
        kept = self._specs.get(dj)
        if kept is not None:
            return kept
        p = (await self.rm.functions.getJob(dj).call()).params
        what = f"decomposed job {dj}"
        spec = fetch_spec(bytes(p.specHash), self.stores, what, self.max_params)
        with rejecting(what):
            if spec.version != specs.SPEC_VERSION_DECOMPOSED:
                raise JobRejected(f"{what}: spec is not version 2")
            chain = (p.rounds, p.shards, p.localSteps, p.checkpointInterval)
            if (spec.rounds, spec.shards, spec.k_local, spec.checkpoint_every) != chain:
                raise JobRejected(f"{what}: R, S, k_local, k differ from the chain's")
            n = check_dataset(spec, bytes(p.datasetRoot), what, self.fetch)
            if n != p.numExamples:
                raise JobRejected(f"{what}: dataset differs from the chain's")
            check_shards(spec, n)
            data = datasets.load_dataset(spec.dataset_name, self.fetch)
            if data.root() != bytes(p.datasetRoot):
                raise JobRejected(f"{what}: dataset differs from the chain's")
        if self.stores:
            keep_spec(spec, self.stores[0], log)
        self._specs.put(dj, (spec, data))
        return spec, data

    async def unit_states(self, dj: int, r: int, codec: StateCodec | None = None) -> list[State]:
        """S_{r,s} for every shard, from the finalized unit jobs' checkpoint blobs, read as
        `codec` reads a unit's states (default: a version-2 unit's)."""
        shards = (await self.rm.functions.getJob(dj).call()).params.shards
        if codec is None:
            codec = as_codec(unit_spec((await self.job_spec(dj))[0]))
        out = []
        for s in range(shards):
            unit_job = await self.rm.functions.unitJobOf(dj, r, s).call()
            job = await self.manager.functions.getJob(unit_job).call()
            if job.status != JobStatus.COMPLETED:
                raise JobRejected(f"unit ({r}, {s}) of job {dj} not found finalized yet")
            u = await self.manager.functions.getUnit(unit_job << 32).call()
            locator = await self.locator(unit_job << 32)
            try:
                reader = CheckpointReader(codec, locator, bytes(u.checkpointRoot),
                                          self.local_locators)  # fmt: skip
                st = reader.state(reader.checkpoints - 1)
            except BadBlob as exc:  # the reader raises nothing else, whatever the unit's data
                raise JobRejected(f"unit ({r}, {s}) state not found: {exc}") from None
            if codec.state_root(st) != bytes(u.finalStateRoot):
                raise JobRejected(f"unit ({r}, {s}) final state not found under its root")
            out.append(st)
        return out

    async def locator(self, unit_id: int) -> str:
        """The unit's latest blob locator (only its CheckpointsCommitted event carries it)."""
        logs = await self.manager.events.CheckpointsCommitted().get_logs(
            argument_filters={"unitId": unit_id}, from_block=0
        )
        return str(logs[-1]["args"]["blobLocator"]) if logs else ""

    async def global_state(self, dj: int, r: int) -> State:
        """G_r, checked against the RoundManager's root of it."""
        kept = self._globals.get((dj, r))
        if kept is not None:
            return kept
        spec, data = await self.job_spec(dj)
        units = await self.unit_states(dj, r - 1) if r > 0 else []
        with rejecting(f"job {dj}: G_{r}"):
            if r == 0:
                g = UnitEngine(spec, data, 0).initial_state()
            else:
                g = aggregate(units, aggregation_weights(data.n, spec.shards))
        want = bytes(await self.rm.functions.globalRoot(dj, r).call())
        if state_root(g) != want:
            raise JobRejected(
                f"job {dj}: G_{r} from the units has root 0x{state_root(g).hex()[:16]}…, "
                f"the RoundManager has 0x{want.hex()[:16]}… (not found / not final yet)"
            )
        self._globals.put((dj, r), g)
        return g

    # --- version 3: the round state H_r (PROTOCOL §5.2, §6.9) --------------------------------

    async def model_job(self, dj: int) -> ModelRuntime:
        """A decomposed version-3 job's runtime, every commitment checked against its
        RoundManager record (runtime.decomposed_runtime)."""
        kept = self._models.get(dj)
        if kept is not None:
            return kept
        p = (await self.rm.functions.getJob(dj).call()).params
        what = f"decomposed job {dj}"
        spec = fetch_spec(bytes(p.specHash), self.stores, what, self.max_params)
        rt = decomposed_runtime(spec, RoundChain.of(p), self.stores, what, self.max_params,
                                self.engine_cfg, self.fetch)  # fmt: skip
        if self.stores:
            keep_job(JobContext(dj, spec, rt), self.stores[0], log)
        self._models.put(dj, rt)
        return rt

    async def round_state(self, dj: int, r: int) -> State:
        """H_r of a version-3 job: H_0 from S_0, H_r (r > 0) the aggregation graph on H_{r-1}
        and round r-1's finalized unit states, recomputed (nobody trusts an aggregator's blob)
        and checked against the RoundManager's root of it (its globalRoot)."""
        kept = self._round_states.get((dj, r))
        if kept is not None:
            return kept
        rt = await self.model_job(dj)
        if r == 0:
            h = rt.initial_round_state()
        else:
            _, prev, units = await self.round_inputs(dj, r - 1)
            with rejecting(f"job {dj}: H_{r}"):
                h = rt.next_round_state(prev, units)
        want = bytes(await self.rm.functions.globalRoot(dj, r).call())
        got = rt.state_root(h)
        if got != want:
            raise JobRejected(
                f"job {dj}: H_{r} from the units has root 0x{got.hex()[:16]}…, the "
                f"RoundManager has 0x{want.hex()[:16]}… (not found / not final yet)"
            )
        self._round_states.put((dj, r), h)
        return h

    async def round_inputs(self, dj: int, r: int) -> tuple[ModelRuntime, State, list[State]]:
        """A version-3 job's runtime, H_r and round r's S finalized unit states (JobRejected
        until all are there, each under its committed root)."""
        rt = await self.model_job(dj)
        h = await self.round_state(dj, r)
        # any unit's view reads a unit's states: k_local steps of the job's state
        codec = rt.unit(r, 0, rt.aggregation.unit_start(h))
        return rt, h, await self.unit_states(dj, r, codec)

    async def version3(self, dj: int) -> bool:
        """Decomposed job `dj` is a version-3 one (its record binds an aggregation graph)."""
        return RoundChain.of((await self.rm.functions.getJob(dj).call()).params).version3

    async def _check_registration(
        self, job_id: int, config: bytes, placement: tuple[int, int, int]
    ) -> None:
        """A unit is disputed under the job's config at its placement (PROTOCOL §6.9, §7.2):
        without both, a game over it would replay other batches, so take no part."""
        registered = bytes(await self.game.functions.configOf(job_id).call())
        if registered != config:
            raise JobRejected(
                f"job {job_id}: registered dispute config 0x{registered.hex()[:16]}… is not "
                f"the spec's 0x{config.hex()[:16]}…"
            )
        have = tuple(await self.game.functions.placementOf(job_id).call())
        if have != placement:
            raise JobRejected(
                f"job {job_id}: registered placement {have} is not unit "
                f"({placement[0]}, {placement[2]})'s {placement}"
            )

    async def _load_model_unit(self, job_id: int, job: Any, dj: int, r: int, s: int
                               ) -> JobContext:  # fmt: skip
        """Unit (r, s) of a version-3 job: k_local steps of the job's step graph from G_r (H_r's
        step state) at global steps r·k_local + t on shard s's batches."""
        rt = await self.model_job(dj)
        spec = rt.spec
        unit_hash = await self.rm.functions.unitSpecHash(spec.spec_hash(), r, s).call()
        if bytes(job.specHash) != bytes(unit_hash):
            raise JobRejected(f"job {job_id}: unit spec hash is not unit ({r}, {s})'s")
        uspec = unit_spec(spec)
        if (uspec.steps, uspec.checkpoint_every) != (job.steps, job.checkpointInterval):
            raise JobRejected(f"job {job_id}: steps/interval differ from the chain's")
        await self._check_registration(job_id, rt.jg.config.hash(),
                                       (r * spec.k_local, spec.shards, s))  # fmt: skip
        start = rt.aggregation.unit_start(await self.round_state(dj, r))
        if rt.state_root(start) != bytes(job.initialStateRoot):
            raise JobRejected(f"job {job_id}: initial state is not G_{r}")
        return JobContext(job_id, uspec, rt.unit(r, s, start))

    # --- loading a unit job -------------------------------------------------------------------

    async def load_unit(self, job_id: int, job: Any) -> JobContext:
        """A unit job as a JobContext (its runtime, its k_local-step spec, G_r as start); the
        registered config and placement are checked before G_r is built. `job` is
        IJobManager.Job, decoded by name."""
        dj, r, s = await self.rm.functions.unitOf(job_id).call()
        if await self.version3(dj):
            return await self._load_model_unit(job_id, job, dj, r, s)
        spec, data = await self.job_spec(dj)
        unit_hash = await self.rm.functions.unitSpecHash(spec.spec_hash(), r, s).call()
        if bytes(job.specHash) != bytes(unit_hash):
            raise JobRejected(f"job {job_id}: unit spec hash is not unit ({r}, {s})'s")
        uspec = unit_spec(spec)
        if (uspec.steps, uspec.checkpoint_every) != (job.steps, job.checkpointInterval):
            raise JobRejected(f"job {job_id}: steps/interval differ from the chain's")
        t0 = r * spec.k_local
        with rejecting(f"job {job_id}"):
            jg = job_graph(uspec, data.n)
        await self._check_registration(job_id, jg.config.hash(), (t0, spec.shards, s))
        start = await self.global_state(dj, r)
        if state_root(start) != bytes(job.initialStateRoot):
            raise JobRejected(f"job {job_id}: initial state is not G_{r}")
        with rejecting(f"job {job_id}"):
            engine = RoundUnitEngine(spec, data, s, t0, start, self.engine_cfg)
        return JobContext(job_id, uspec, MlpRuntime(uspec, engine, jg))

    # --- scheduling policy ------------------------------------------------------------------

    async def busy_in_round(self, job_id: int, me: str, limit: int = 1) -> bool:
        """I already hold `limit` other units of this unit's round (claimed while open, or
        assigned, whatever became of them): the S units of a round run on S machines where S
        live solvers exist (`limit` 0: no limit, for networks with fewer solvers than shards)."""
        if limit <= 0:
            return False
        dj, r, s = await self.rm.functions.unitOf(job_id).call()
        shards = (await self.rm.functions.getJob(dj).call()).params.shards
        held = 0
        for other in range(shards):
            if other == s:
                continue
            uid = await self.rm.functions.unitJobOf(dj, r, other).call() << 32
            u = await self.manager.functions.getUnit(uid).call()
            status, assignee = u.status, u.assignee
            if status in (1, 2):  # Open, Selecting: my claim holds me there
                claimants = (await self.manager.functions.getClaimants(uid).call()).solvers
                held += any(c.lower() == me.lower() for c in claimants)
            elif status in (3, 4, 5, 6, 7) and assignee.lower() == me.lower():
                held += 1  # Assigned, Committed, Verifying, Disputed, Finalized
        return held >= limit


def preference(me: str, unit_id: int) -> bytes:
    """Each solver orders units differently, so concurrent solvers spread over a round's units
    instead of all claiming shard 0 first."""
    return hashlib.sha256(bytes.fromhex(me[2:]) + unit_id.to_bytes(32, "big")).digest()


# --- the submitter's side -----------------------------------------------------------------------


def posted_record(sub) -> RoundChain:
    """The round manager's record of my decomposed job (`sub` the Submitter): a version-3 job's
    from its runtime (RoundChain.posted; its bundle and S_0 published in my blob store first),
    a version-2 job's with H = G and no aggregation graph (element fraud proofs)."""
    if isinstance(sub.spec, ModelSpec):
        sub.publish_model()
        return RoundChain.posted(sub.runtime)
    spec, data = sub.spec, sub.data
    g0 = sub.engine.initial_state()
    return RoundChain(
        spec.rounds, spec.shards, spec.k_local, spec.checkpoint_every, data.root(), data.n,
        state_root(g0), layout_of(g0).hash(), job_graph(spec, data.n).config.hash(), bytes(32),
        bytes(32), 0,
    )  # fmt: skip


async def post_decomposed(sub) -> None:
    """Publish the spec (version 2, or 3 with its bundle and S_0), escrow R·(S·reward +
    aggregator reward) in the RoundManager and post the job (round 0's units go into the
    JobManager in the same transaction). `sub` is the Submitter; its --reward is the reward of
    one unit."""
    from web3.logs import DISCARD

    if sub.rounds is None:
        raise RoleError("a decomposed spec needs a RoundManager (--round-manager or --deployment)")
    spec, rm = sub.spec, sub.rounds.rm
    spec_hash = "0x" + spec.spec_hash().hex()
    rec = sub.agent.store.get_record("post", spec_hash)
    if rec is not None and rec.data.get("job_id"):
        sub.job_id = int(rec.data["job_id"])
        sub.log.info("following decomposed job %d posted earlier", sub.job_id)
        return
    if sub.agent.blobs.put(spec.canonical_bytes()) != spec_hash:
        raise RoleError("the blob store's address of the spec is not its spec hash")
    unit_reward = int(sub.config.reward * 10**18)
    agg_reward = int(sub.config.aggregator_reward * 10**18)
    escrow = spec.rounds * (spec.shards * unit_reward + agg_reward)
    if await sub.token.functions.balanceOf(sub.me).call() < escrow:
        raise RoleError(f"account {sub.me} cannot escrow {escrow / 1e18:g} tokens: fund it first")
    await sub.executor.execute(Approve(f"post:{spec_hash}:approve", rm.address, escrow))
    c = posted_record(sub)
    params = (
        spec.spec_hash(),
        c.dataset_root,
        c.initial_root,
        c.layout_hash,
        c.rounds,
        c.shards,
        c.local_steps,
        c.checkpoint_every,
        c.num_examples,
        sub.config.requirements,
        unit_reward,
        int(sub.config.verification_fee * 10**18),
        agg_reward,
        int(sub.config.compute_time),
        c.dispute_config,
        c.aggregation_config,
        c.initial_round_root,
        c.num_step,
    )
    out = await sub.executor.execute(PostRoundJob(f"post:{spec_hash}", params))
    if out is None:
        raise RoleError("RoundManager.postJob reverted (see the warning above)")
    receipt = await sub.w3.eth.get_transaction_receipt(out.tx_hash)
    posted = rm.events.DecomposedJobPosted().process_receipt(receipt, errors=DISCARD)
    sub.job_id = int(posted[0]["args"]["jobId"])
    sub.agent.store.put_record("post", spec_hash, "posted", {"job_id": sub.job_id})
    sub.log.info(
        "posted decomposed job %d: %d rounds x %d shards, %g tokens escrowed",
        sub.job_id,
        spec.rounds,
        spec.shards,
        escrow / 1e18,
    )


async def follow_decomposed(sub) -> bool:
    """One round of the submitter of a decomposed job: keeper steps of the current round's unit
    jobs (a missed commit deadline re-opens the unit: expireAssignment), finalizing the round
    after its aggregation window; at the end, G_R from the units, checked, and its accuracy."""
    rm, dj, now = sub.rounds.rm, sub.job_id, await sub.now()
    job = await rm.functions.getJob(dj).call()
    if job.status == RoundJobStatus.COMPLETED:
        return await finish_decomposed(sub)
    r = job.currentRound
    status, attempt, deadline, aggregator, *_ = await rm.functions.getRound(dj, r).call()
    reveal_slot = 2 * await sub.reveal_window()
    acted = False
    for s in range(sub.spec.shards):
        u = await sub.unit(await rm.functions.unitJobOf(dj, r, s).call() << 32)
        key = (r, s, u.status, u.attempt)
        if key not in sub.seen:
            sub.seen.add(key)
            sub.log.info(
                "round %d unit %d: %s (attempt %d)", r, s, u.status.name.lower(), u.attempt
            )
        # the keeper steps no node took: after every node's turn (logic.FALLBACK_RANK)
        keeper = KeeperFacts(sub.me)
        acts: list[ChainAction] = [*keeper_acts(u, now, keeper=keeper, reveal_slot=reveal_slot)]
        for act in acts:
            await sub.executor.execute(act)
        acted = acted or bool(acts)
    if ("round", r, status, attempt) not in sub.seen:
        sub.seen.add(("round", r, status, attempt))
        sub.log.info("round %d: aggregation %s (attempt %d)", r, _ROUND[status], attempt)
    if status == RoundStatus.COMMITTED and now.timestamp > deadline:
        await sub.executor.execute(FinalizeRound(f"finalizeRound:{dj}:{r}:{attempt}", dj))
        acted = True
    if not acted:
        await sub.mine_if_idle()
    return False


_ROUND = {
    RoundStatus.NONE: "none",
    RoundStatus.TRAINING: "open",
    RoundStatus.COMMITTED: "committed",
    RoundStatus.FINAL: "final",
    RoundStatus.DISPUTED: "disputed",
}


async def final_model(sub) -> tuple[bytes, dict[str, float | None]]:
    """The root of my completed decomposed job's result G_R, recomputed from its units and
    checked against the round manager (version 3: the step state of H_R), and its held-out
    metrics (version 2: test_accuracy, None without a held-out split)."""
    dj, R = sub.job_id, sub.spec.rounds
    if isinstance(sub.spec, ModelSpec):
        rt = sub.runtime
        final = rt.aggregation.unit_start(await sub.rounds.round_state(dj, R))
        return rt.state_root(final), dict(rt.metrics(final))
    final = await sub.rounds.global_state(dj, R)
    test = datasets.held_out(sub.data)
    acc = sub.engine.accuracy(final, test) if test is not None else None
    return state_root(final), {"test_accuracy": acc}


async def finish_decomposed(sub) -> bool:
    rm, dj, spec = sub.rounds.rm, sub.job_id, sub.spec
    try:
        final_root, metrics = await final_model(sub)
    except JobRejected as exc:
        sub.log.error("final model unavailable (will retry): %s", exc)
        return False
    units = []
    for r in range(spec.rounds):
        for s in range(spec.shards):
            unit_job = await rm.functions.unitJobOf(dj, r, s).call()
            u = await sub.manager.functions.getUnit(unit_job << 32).call()
            root = "0x" + bytes(u.finalStateRoot).hex()
            units.append(
                {
                    "round": r,
                    "shard": s,
                    "job_id": unit_job,
                    "solver": u.assignee,
                    "attempts": u.attempt + 1,
                    "final_root": root,
                }
            )
    aggregations = []
    for r in range(spec.rounds):
        rnd = await rm.functions.getRound(dj, r).call()
        root = "0x" + bytes(await rm.functions.globalRoot(dj, r + 1).call()).hex()
        aggregations.append(
            {
                "round": r,
                "attempts": rnd.attempt + 1,
                "aggregator": rnd.aggregator,
                "global_root": root,
            }
        )
    sub.result = {
        "job_id": dj,
        "status": "completed",
        "rounds": spec.rounds,
        "shards": spec.shards,
        "final_state_root": "0x" + final_root.hex(),
        **metrics,
        "units": units,
        "aggregations": aggregations,
        "gas_used": sub.gas_used,
    }
    said = ", ".join(f"{k} {v:.4f}" if v is not None else f"{k} n/a" for k, v in metrics.items())
    sub.log.info("decomposed job %d completed: final root %s…, %s", dj,
                 sub.result["final_state_root"][:18], said or "no held-out metric")  # fmt: skip
    if sub.config.out:
        sub.config.out.write_text(json.dumps(sub.result, indent=2) + "\n")
    print(json.dumps(sub.result), flush=True)
    return True
