"""The submitter: post a job from a spec file (publish the spec, approve, postJob into escrow
with its dispute config: one transaction, PROTOCOL §6.3), follow it to the end moving it along
(the keeper steps no node took, after every node's turn), fetch the final model, check its root
against the chain and report its test accuracy. `--count N` posts N jobs of the spec from this
one process: one approval, the N posts sent together (their receipts awaited side by side), then
each job followed.

Persistent memory: kind "post", id = the spec hash (the i-th copy of `--count`: "<spec hash>/i")
— the job id once posted, so a restarted submitter follows its jobs instead of posting them
again. Kind "final-request", id "<unit>:<attempt>" — the block of my mined data request for the
attempt's final checkpoint (PROTOCOL §6.11), where the answer's logs start.

An observer (`JobObserver`: the CLI's live view, agents/cli/submit.py) may watch: told once the
job is posted, then after every round; it never changes what the submitter does.
"""

from __future__ import annotations

import asyncio
import functools
import json
from typing import Protocol

from web3.logs import DISCARD

from agents.core import spec_files
from agents.core.blobs import BlobError, BlobStore, open_blob_store
from agents.core.bounded import SaidOnce
from agents.core.tx import TxError, TxFailed, TxOutcome
from agents.data import datasets
from agents.data.builtin import Dataset, DatasetError
from agents.data.chunks import FetchConfig
from agents.dispute.graph import job_graph
from agents.roles.actions import CloseClaims, PostJob, RequestData
from agents.roles.artifacts import BadBlob, read_final_state, read_served_state
from agents.roles.config import SubmitterConfig
from agents.roles.decomposed import follow_decomposed, post_decomposed
from agents.roles.errors import JobRejected
from agents.roles.logic import (
    KeeperFacts,
    Now,
    UnitStatus,
    UnitView,
    final_data_acts,
    keeper_acts,
    unclaimed_lapsed,
)
from agents.roles.runner import RoleAgent, RoleError
from agents.roles.runtime import JobRuntime, MlpRuntime, model_runtime_from_files
from agents.training import spec as specs
from agents.training.engine import Engine
from agents.training.state import State

TOKEN = 10**18
POST_ATTEMPTS = 5
#: Posts of one `--count` batch in flight at once (each awaiting its receipt).
POSTS_IN_FLIGHT = 25


# JobManager.MAX_CLAIM_HORIZON: a claim deadline more than a day after posting is refused.
MAX_CLAIM_HORIZON_S = 86_400


class JobObserver(Protocol):
    """Watches a submitter's jobs: `posted` once they are on chain (or found posted earlier),
    `after_round` after each of its rounds that ended with the job or with a RoleError (the
    view that explains the end), `close` when the process stops."""

    async def posted(self, submitter: Submitter) -> None: ...

    async def after_round(self) -> None: ...

    def close(self) -> None: ...


class Submitter(RoleAgent):
    role = "submitter"
    config: SubmitterConfig
    # A class default, so submitters built without __init__ (tests) have none.
    observer: JobObserver | None = None

    @classmethod
    def check_config(cls, config: SubmitterConfig) -> None:
        load_spec(config.spec, spec_fetch(config))
        if not config.verification_fee < config.reward:
            raise RoleError("--reward must be > 0 and 0 <= --verification-fee < --reward")
        if not config.claim_window <= MAX_CLAIM_HORIZON_S:
            raise RoleError(
                f"--claim-window {config.claim_window:g}: must be in (0, {MAX_CLAIM_HORIZON_S}] "
                "s (the job manager's MAX_CLAIM_HORIZON: claims lock collateral until it ends)"
            )

    def __init__(self, *a, observer: JobObserver | None = None, **kw) -> None:
        super().__init__(*a, **kw)
        self.observer = observer
        self.fetch = spec_fetch(self.config)
        self.spec, self.data = load_spec(self.config.spec, self.fetch)
        _ = self.runtime  # a version-3 spec's blobs are checked at start-up
        self.job_id = 0  # the (first) job posted
        self.job_ids: list[int] = []  # every job posted (--count)
        self.count = self.config.count
        self.last_status: dict[int, UnitStatus] = {}
        self.result: dict = {}  # the last job's result
        self.results: dict[int, dict] = {}  # job -> its result, once completed
        self.seen: set[tuple] = set()  # decomposed jobs: unit and round states already logged
        # the final state of an attempt ("<unit>:<attempt>"), read and checked while the unit is
        # verified; an attempt whose read failed is demanded on chain (PROTOCOL §6.11)
        self.finals: dict[str, State] = {}
        # the manifest's per-checkpoint losses of an attempt read from the solver (a state posted
        # on chain comes without them)
        self.losses: dict[str, list] = {}
        self.final_failed: set[str] = set()
        self._unserved = SaidOnce()  # holders' locators (and finals) whose failure I logged

    @functools.cached_property
    def runtime(self) -> JobRuntime:
        """My job's runtime, from the spec file (a version-3 one: and its blobs, --spec-blobs)."""
        if isinstance(self.spec, specs.ModelSpec):
            store = open_blob_store(spec_blob_url(self.config))
            try:
                return model_runtime_from_files(self.spec, [store], self.fetch)
            except JobRejected as exc:
                raise RoleError(f"{self.config.spec}: {str(exc).removeprefix('spec: ')}") from None
        engine = Engine(self.spec, self.data, self.engine_cfg)
        return MlpRuntime(self.spec, engine, job_graph(self.spec, self.data.n))

    @property
    def decomposed(self) -> bool:
        """A decomposed job (version 2, or version 3 with rounds x shards): posted to the
        RoundManager, R x S unit jobs."""
        spec = self.spec
        return spec.version == specs.SPEC_VERSION_DECOMPOSED or (
            isinstance(spec, specs.ModelSpec) and spec.decomposed
        )

    @property
    def engine(self) -> Engine:
        """A version-1/2 job's engine (a decomposed job's helpers, agents/roles/decomposed.py)."""
        return self.runtime.engine

    def publish_model(self) -> None:
        """A version-3 job's model bundle and S_0 into my blob store, beside its spec: the roles
        read them there by the spec's hashes (their addresses)."""
        if not isinstance(self.spec, specs.ModelSpec):
            return
        rt = self.runtime
        self.agent.blobs.put(rt.job.bundle.to_bytes())
        # S_0 is addressed by its state root (as `job build` stores it), not by keccak-256
        states = BlobStore(self.agent.blobs.backend,
                           lambda d: "0x" + rt.state_root(rt.decode_state(d)).hex())  # fmt: skip
        states.put(rt.encode_state(rt.initial_state()))

    async def setup(self) -> None:
        await self.post()
        if self.observer is not None:
            await self.observer.posted(self)

    async def post(self) -> None:
        """Post my jobs (or find them posted by an earlier run), each with its dispute config."""
        if self.decomposed:
            return await post_decomposed(self)  # R x S units through the RoundManager
        self.publish_model()
        spec_hash = "0x" + self.spec.spec_hash().hex()
        keys = [spec_hash if i == 0 else f"{spec_hash}/{i}" for i in range(self.count)]
        posted: dict[str, int] = {}
        for key in keys:
            rec = self.agent.store.get_record("post", key)
            if rec is not None and rec.data.get("job_id"):
                posted[key] = int(rec.data["job_id"])
        todo = [key for key in keys if key not in posted]
        if posted:
            self.log.info("following %d job(s) posted earlier", len(posted))
        if todo:
            address = self.agent.blobs.put(self.spec.canonical_bytes())
            assert address == spec_hash
            reward = int(self.config.reward * TOKEN)
            fee = int(self.config.verification_fee * TOKEN)
            await self.check_funds(reward * len(todo))
            await self.approve_at_least(
                f"post:{spec_hash}", self.manager.address, reward * len(todo)
            )
            # sent together: the sender signs them in nonce order and their receipts are awaited
            # side by side, so N jobs take about as long as one (issue #45). At most
            # POSTS_IN_FLIGHT at once: each post's claim deadline is read when its turn comes,
            # not when the batch began (200 at once queued for 40 s at the one nonce sequence
            # on a loaded machine, past a 20 s claim window, and reverted ClaimDeadlineInPast).
            gate = asyncio.Semaphore(POSTS_IN_FLIGHT)

            async def post_one(key: str) -> TxOutcome:
                async with gate:
                    return await self.post_job(key, reward, fee)

            outs = await asyncio.gather(*(post_one(key) for key in todo))
            for key, out in zip(todo, outs, strict=True):
                receipt = await self.w3.eth.get_transaction_receipt(out.tx_hash)
                jobs = self.manager.events.JobPosted().process_receipt(receipt, errors=DISCARD)
                posted[key] = int(jobs[0]["args"]["jobId"])
                self.agent.store.put_record("post", key, "posted", {"job_id": posted[key]})
                self.log.info("posted job %d (reward %g, escrowed)", posted[key], reward / 1e18)
        self.job_ids = [posted[key] for key in keys]
        self.job_id = self.job_ids[0]

    async def check_funds(self, amount: int) -> None:
        """RoleError (one line) unless I hold `amount` tokens and some ether for gas."""
        balance = await self.token.functions.balanceOf(self.me).call()
        if balance < amount:
            what = f"the reward of {self.count} jobs" if self.count > 1 else "the job's reward"
            raise RoleError(
                f"account {self.me} holds {balance / 1e18:g} tokens, {what} "
                f"is {amount / 1e18:g}: fund it first"
            )
        if await self.w3.eth.get_balance(self.me) == 0:
            raise RoleError(f"account {self.me} has no ether to pay gas")

    async def job_params(self, reward: int, fee: int) -> tuple:
        now = await self.now()
        return (
            self.spec.spec_hash(),
            self.data.root(),
            self.runtime.state_root(self.runtime.initial_state()),
            self.spec.steps,
            self.spec.checkpoint_every,
            self.config.requirements,
            reward,
            fee,
            now.timestamp + int(self.config.claim_window),
            int(self.config.compute_time),
            # the dispute config, bound to the job in the same transaction (PROTOCOL §6.3)
            self.runtime.jg.config.hash(),
        )

    async def post_job(self, key: str, reward: int, fee: int) -> TxOutcome:
        """postJob of the job recorded under `key` (the spec hash, or "<spec hash>/i"), with
        the claim deadline taken from the latest block. A slow transport can let a short
        deadline pass before the transaction lands (it then reverts on chain with
        ClaimDeadlineInPast): only then is a new attempt signed, with a fresh deadline under a
        new intent id. A recorded attempt (e.g. after a restart) is resumed, never re-signed,
        so the job is posted at most once."""
        for attempt in range(POST_ATTEMPTS):
            intent = f"post:{key}" + (f":{attempt}" if attempt else "")
            while True:
                recorded = self.agent.store.get_intent(intent)
                if recorded is None:
                    post = PostJob(intent, await self.job_params(reward, fee))
                    out = await self.executor.execute(post)
                    if out is not None:
                        return out
                    if self.agent.store.get_intent(intent) is None:  # refused in simulation
                        raise RoleError("postJob reverted (see the warning above)")
                    continue
                if recorded.status == "failed":
                    self.log.warning("postJob attempt %d reverted on chain; retrying", attempt)
                    break
                try:
                    return await self.agent.sender.wait(intent, resumed=True)
                except TxFailed:
                    break
                except TxError as exc:  # still pending: keep waiting for the same transaction
                    self.log.error("postJob pending (will keep waiting): %s", str(exc)[:200])
        raise RoleError(f"postJob reverted on chain {POST_ATTEMPTS} times (see the warnings)")

    async def round(self) -> bool:
        if self.config.no_follow:
            return True  # posted, each with its dispute config (one transaction each)
        try:
            done = await self.follow()
        except RoleError:
            await self.observed()  # the view that explains the end
            raise
        await self.observed()
        return done

    async def observed(self) -> None:
        if self.observer is not None:
            await self.observer.after_round()

    def close(self) -> None:
        if self.observer is not None:
            self.observer.close()
        super().close()

    async def follow(self) -> bool:
        """One round of following my jobs; True once every one is done."""
        if self.decomposed:
            return await follow_decomposed(self)
        now = await self.now()
        acted = False
        for job_id in self.job_ids:
            if job_id not in self.results:
                acted = await self.follow_job(job_id, now) or acted
        if not acted and len(self.results) < len(self.job_ids):
            # An automining dev chain makes no blocks while nobody sends: its clock and block
            # number stand still, and with them every deadline this job waits for.
            await self.mine_if_idle()
        return len(self.results) == len(self.job_ids)

    async def follow_job(self, job_id: int, now: Now) -> bool:
        """One round of job `job_id`: log its unit's phase, take the keeper steps no node took
        (I keep after every node, logic.FALLBACK_RANK), read or demand the final checkpoint,
        report the result once final. True when it sent something."""
        u = await self.unit(job_id << 32)
        if u.status != self.last_status.get(job_id):
            self.log.info(
                "job %d unit: %s (attempt %d%s)",
                job_id,
                u.status.name.lower(),
                u.attempt,
                f", assignee {u.assignee}" if u.assignee != _ZERO else "",
            )
            self.last_status[job_id] = u.status
        if u.status == UnitStatus.FINALIZED:
            await self.finish(u)
            return False
        if u.status == UnitStatus.CANCELLED:
            raise RoleError(f"job {job_id} was cancelled")
        keeper = KeeperFacts(self.me)
        acts = keeper_acts(u, now, keeper=keeper, reveal_slot=2 * await self.reveal_window())
        if unclaimed_lapsed(u, u.claimants):
            acts = [a for a in acts if not isinstance(a, CloseClaims)]  # a claiming solver's
        checkpoints = self.spec.steps // self.spec.checkpoint_every + 1
        acts += final_data_acts(u, now, await self.final_read(u, now), checkpoints)
        for act in acts:
            match act:
                case RequestData():
                    await self.request_data(act, u)
                case _:  # keeper steps
                    await self.executor.execute(act)
        return bool(acts)

    # --- the final checkpoint's data (PROTOCOL §6.11) -------------------------------------------

    async def final_read(self, u: UnitView, now: Now) -> str:
        """My read of the attempt's final state while the unit is verified: "ok" (held and
        checked), "pending" (read off the round loop, within its budget), "failed" (unusable
        or late: demand it, PROTOCOL §6.11), "requested" (demanded: read from its holders), or
        "" (nothing to read)."""
        if u.status not in (UnitStatus.VERIFYING, UnitStatus.DISPUTED):
            return ""
        key = f"{u.unit_id}:{u.attempt}"
        if key in self.finals:
            return "ok"
        if self.agent.store.get_record("final-request", key) is not None:
            return "ok" if await self.final_from_holders(u) is not None else "requested"
        if key in self.final_failed or u.status != UnitStatus.VERIFYING:
            return "failed" if key in self.final_failed else ""
        last = self.spec.steps // self.spec.checkpoint_every
        root = u.published_root or u.checkpoint_root
        try:
            got = self.checkpoints_read(
                f"final:{key}:", self.runtime, u.locator, root, [last], now, u.deadline
            )
        except BadBlob as exc:
            self.log.error("unit %d: final checkpoint unavailable: %s", u.unit_id, exc)
            self.final_failed.add(key)
            return "failed"
        if got is None:
            return "pending"
        st = got.state(last)
        if self.runtime.state_root(st) != u.final_root:
            self.log.error("unit %d: the final checkpoint's root is not committed", u.unit_id)
            self.final_failed.add(key)
            return "failed"
        self.finals[key] = st
        self.losses[key] = list(got.manifest.losses)
        return "ok"

    async def request_data(self, act: RequestData, u: UnitView) -> None:
        """Demand proof that the final checkpoint's state is held (my bond as submitter is zero):
        its holders answer and say where they serve it."""
        unit_id, checkpoint = act.unit_id, act.checkpoint
        out = await self.executor.execute(act)
        if out is not None:
            # where the answer's and the offers' logs start (kept: a restarted submitter still
            # finds them)
            key = f"{unit_id}:{u.attempt}"
            self.agent.store.put_record("final-request", key, "mined", {"block": out.block_number})
            self.log.warning(
                "unit %d: demanded proof that checkpoint %d's state is held: a holder must "
                "answer, or the solver and every attesting verifier lose their stake",
                unit_id,
                checkpoint,
            )

    async def holder_locators(self, u: UnitView) -> list[str]:
        """Where the holders of the attempt's result serve it (PROTOCOL §6.11): the answers to my
        request, then the offers of the attempt's assignee and drawn verifiers, in chain order."""
        sent = self.agent.store.get_record("final-request", f"{u.unit_id}:{u.attempt}")
        first = int(sent.data["block"]) if sent is not None else 0
        ev, filters = self.manager.events, {"unitId": u.unit_id}
        answers = await ev.DataRequestAnswered().get_logs(from_block=first,
                                                          argument_filters=filters)  # fmt: skip
        offers = await ev.DataOffered().get_logs(from_block=first, argument_filters=filters)
        out = [str(e["args"]["locator"]) for e in answers
               if e["args"]["requester"].lower() == self.me.lower()]  # fmt: skip
        out += [str(e["args"]["locator"]) for e in offers if e["args"]["attempt"] == u.attempt]
        return list(dict.fromkeys(out))

    async def final_from_holders(self, u: UnitView) -> State | None:
        """The attempt's final state from the first holder that serves it, checked against the
        committed final root; None while none does (each locator is tried once per call)."""
        key = f"{u.unit_id}:{u.attempt}"
        if key in self.finals:
            return self.finals[key]
        for locator in await self.holder_locators(u):
            try:
                st = read_served_state(self.runtime, locator, u.final_root, self.local_locators)
            except BadBlob as exc:
                if self._unserved.first(f"{key}:{locator}"):
                    self.log.warning("unit %d: a holder's copy is unusable: %s", u.unit_id, exc)
                continue
            self.log.info("unit %d: final state received from a holder (%s)", u.unit_id, locator)
            self.finals[key] = st
            return st
        return None

    async def finish(self, u) -> bool:
        """Fetch the job's final model, check it and report its result (True); False while its
        data cannot be had (retried next round)."""
        job_id = u.job_id
        key = f"{u.unit_id}:{u.attempt}"
        losses = self.losses.get(key, [])
        final = self.finals.get(key) or await self.final_from_holders(u)
        try:
            if final is None:
                # the published data (after a forced error's reveal it differs from the true
                # root at the perturbed checkpoints only, never at the final state)
                root = u.published_root or u.checkpoint_root
                final, losses = read_final_state(
                    self.runtime, u.locator, root, u.final_root, self.local_locators
                )
        except (BadBlob, BlobError) as exc:
            if not await self.withheld_for_good(u):
                if self._unserved.first(f"{key}:final"):
                    self.log.error("final model unavailable (will retry): %s", exc)
                return False
            raise RoleError(
                f"job {job_id} completed, but neither its solver nor any verifier holding "
                f"its result served the final state (the last error: {exc}); the spec fixes "
                f"every bit of it: recompute it with `python -m agents train --spec "
                f"{self.config.spec}`"
            ) from None
        if self.runtime.state_root(final) != u.final_root:  # read earlier, or posted on chain
            self.log.error("final model's root differs from the committed one (will retry)")
            return False
        metrics = self.runtime.metrics(final)
        acc = metrics.get("test_accuracy")
        self.result = {
            "job_id": job_id,
            "status": "completed",
            "solver": u.assignee,
            "final_state_root": "0x" + u.final_root.hex(),
            "checkpoint_root": "0x" + u.checkpoint_root.hex(),
            "test_accuracy": acc,
            **{k: v for k, v in metrics.items() if k != "test_accuracy"},  # val_loss (an LM's)
            "checkpoint_losses": losses,
            "attempts": u.attempt + 1,
            "gas_used": self.gas_used,
        }
        self.results[job_id] = self.result
        self.log.info(
            "job %d completed: final root %s…, %s",
            job_id,
            self.result["final_state_root"][:18],
            ", ".join(f"{k.replace('_', ' ')} {v:.4f}" for k, v in metrics.items())
            or "no held-out metric",
        )
        if self.config.out:
            out = self.result if self.count == 1 else [self.results.get(j) for j in self.job_ids]
            self.config.out.write_text(json.dumps(out, indent=2) + "\n")
        print(json.dumps(self.result), flush=True)
        return True

    async def withheld_for_good(self, u: UnitView) -> bool:
        """The finalized result is not served, and the holders have had a whole reveal window
        past the unit's deadline to serve it: the outcome is final (PROTOCOL §6.11), so I stop
        asking rather than loop."""
        return (await self.now()).timestamp > u.deadline + 2 * await self.reveal_window()


_ZERO = "0x" + "00" * 20


def spec_blob_url(config: SubmitterConfig) -> str:
    """Where a version-3 spec's blobs are: --spec-blobs, else where `job build` recorded them
    beside the spec (agents/core/spec_files.py), else the folder <spec>.blobs."""
    try:
        return spec_files.blob_url(config.spec, config.spec_blobs)
    except spec_files.SourcesError as exc:
        raise RoleError(str(exc)) from None


def spec_fetch(config: SubmitterConfig) -> FetchConfig:
    """How my spec's packed dataset is fetched: my configured stores, then the ones recorded
    beside the spec (where `job build` read its chunks)."""
    try:
        return config.fetch.with_stores(*spec_files.data_stores(config.spec))
    except spec_files.SourcesError as exc:
        raise RoleError(str(exc)) from None


def load_spec(
    path: str, fetch: FetchConfig = FetchConfig()
) -> tuple[specs.JobSpec | specs.ModelSpec, object]:
    """The spec file and its dataset (a packed one fetched as `fetch` says), checked; RoleError
    (one line) on any problem."""
    try:
        spec = specs.load(path)
    except OSError as exc:
        raise RoleError(f"cannot read spec {path}: {exc.strerror}") from None
    except specs.JobSpecError as exc:
        raise RoleError(f"spec {path}: {exc}") from None
    except ValueError as exc:  # not JSON at all
        raise RoleError(f"spec {path}: not valid JSON: {str(exc).splitlines()[0]}") from None
    try:
        data = datasets.load_dataset(spec.dataset_name, fetch)
    except (DatasetError, ValueError) as exc:
        raise RoleError(f"spec {path}: {exc}") from None
    if not isinstance(spec, specs.ModelSpec) and not isinstance(data, Dataset):
        raise RoleError(f"spec {path}: {spec.dataset_name} is a token stream: it needs a "
                        "version-3 spec")  # fmt: skip
    if "0x" + data.root().hex() != spec.dataset_root:
        raise RoleError(f"spec {path}: dataset root does not match {spec.dataset_name}")
    return spec, data
