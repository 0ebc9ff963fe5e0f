"""A job as the roles see it: its spec fetched by hash, dataset, engine and dispute graph,
each checked against what the chain holds before anyone takes part.

A job's published data is anyone's (a submitter may be hostile), so loading it never raises
anything but JobRejected (one line saying why), which every role handles by not taking part;
and the cheap checks (the chain's steps, dataset root and size, registered config) come before
the costly work (building the dataset, the initial state).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from agents.core.blobs import BlobError, BlobStore
from agents.core.bounded import BoundedCache
from agents.data.chunks import FetchConfig
from agents.dispute.graph import JobGraph
from agents.dispute.model_graph import ModelJobGraph
from agents.model import job as mj
from agents.roles.errors import JobRejected
from agents.roles.errors import rejecting as rejecting  # re-exported: where roles found it
from agents.roles.runtime import ChainJob, JobRuntime, ModelRuntime, job_runtime
from agents.training import spec as specs
from agents.training.engine import Engine, EngineConfig
from agents.training.spec import JobSpec, ModelSpec

# A spec's canonical JSON is under 2 KiB (17 widths, a 200-character dataset name): a blob
# at its address that is larger is not one, and is not read.
SPEC_MAX_BYTES = 1 << 16
#: Default of every role's --max-params: the largest model whose job an agent takes part in. A
#: state is 4 bytes a parameter, and a replay keeps one per checkpoint it passes (the dispute
#: computation's cache): 2^26 parameters are 256 MiB a state.
DEFAULT_MAX_PARAMS = 1 << 26
#: Default of every role's --max-loaded-jobs: how many jobs' datasets and engines an agent keeps
#: in memory at once (LoadedJobs). A job it works on again after its eviction is loaded again.
DEFAULT_MAX_LOADED_JOBS = 8


@dataclass
class JobContext:
    """A job as a role works on it: its id, spec and runtime (agents/roles/runtime.py: the
    model, its dispute graph, its states), whatever the job's kind."""

    job_id: int
    spec: JobSpec | ModelSpec
    runtime: JobRuntime

    @property
    def jg(self) -> JobGraph | ModelJobGraph:
        return self.runtime.jg

    @property
    def engine(self) -> Engine:
        """A version-1 job's engine (decomposed jobs' helpers, which run version 1 only)."""
        return self.runtime.engine

    @property
    def segments(self) -> int:
        return self.spec.steps // self.spec.checkpoint_every


def fetch_spec(
    spec_hash: bytes, stores: list[BlobStore], what: str, max_params: int = DEFAULT_MAX_PARAMS
) -> JobSpec | ModelSpec:
    """The spec whose hash the chain holds, from the first store that has it (size-capped), of
    at most `max_params` parameters (this agent's memory budget: --max-params)."""
    raw = None
    for store in stores:
        try:
            raw = store.get("0x" + spec_hash.hex(), max_bytes=SPEC_MAX_BYTES)
            break
        except (BlobError, ValueError):
            continue
    if raw is None:
        raise JobRejected(f"{what}: spec 0x{spec_hash.hex()} not found in any blob store")
    with rejecting(f"{what}: published spec is invalid"):
        spec = specs.loads(raw)
    # a version-3 spec names its model by hash: its size is checked once its bundle is read
    if isinstance(spec, JobSpec) and spec.n_params > max_params:
        raise JobRejected(
            f"{what}: the model has {spec.n_params} parameters, over --max-params {max_params}"
        )
    return spec


def load_job(
    job_id: int,
    job: tuple,
    stores: list[BlobStore],
    config_hash: bytes | None,
    max_params: int = DEFAULT_MAX_PARAMS,
    engine_cfg: EngineConfig = EngineConfig(),
    fetch: FetchConfig = FetchConfig(),
) -> JobContext:
    """`job` is IJobManager.getJob's result, decoded by name (agents/core/bindings.py);
    `config_hash` the game's registered config (None: not checked, for a drawn verifier's
    replay: only a dispute game needs the config); a packed dataset fetched as `fetch` says."""
    what = f"job {job_id}"
    spec = fetch_spec(bytes(job.specHash), stores, what, max_params)
    chain = ChainJob.of(job)
    rt = job_runtime(spec, chain, stores, what, max_params, config_hash, engine_cfg, fetch)
    return JobContext(job_id, spec, rt)


class LoadedJobs(BoundedCache[int, JobContext]):
    """The job contexts an agent keeps loaded, by job id: at most --max-loaded-jobs, the least
    recently used evicted first.

    Without a bound an agent kept the dataset and engine of every job it ever took part in, for
    as long as it ran. Evicting is safe because a context is a pure function of the chain's job
    record and the spec under its hash (load_job checks one against the other, and neither
    changes after posting): a job loaded again is the same job, bit for bit. The spec itself is
    the one input that could vanish (its submitter's store may go away), so the roles keep a
    copy in their own blob store at the first load (`keep_spec`), and a reload reads it there.
    A `Computation` still holding an evicted context's engine keeps that engine alive until it
    is dropped itself (finalized unit, resolved game): the bound is on contexts, not on every
    engine object.
    """

    def __init__(self, capacity: int = DEFAULT_MAX_LOADED_JOBS) -> None:
        super().__init__(capacity)


def keep_spec(spec: JobSpec, store: BlobStore, log: logging.Logger) -> None:
    """Copy `spec` into my own blob store (its address is its hash), so that loading the job
    again after an eviction or a restart does not depend on the store that served it. Best
    effort: a store I cannot write to (an http or S3 store without rights) is said at each
    load and the job goes on; a reload then reads the other stores, as the first load did."""
    address = "0x" + spec.spec_hash().hex()
    try:
        if not store.has(address):
            store.put(spec.canonical_bytes())
    except (BlobError, OSError) as exc:
        log.warning("could not keep a copy of spec %s in my blob store: %s", address[:18], exc)


def keep_job(ctx: JobContext, store: BlobStore, log: logging.Logger) -> None:
    """keep_spec, and for a version-3 job its model bundle and S_0 too: the store a solver's
    commitment names then holds everything a reader of its checkpoints needs (`job fetch` with
    no other store), whatever became of the submitter's. Best effort, as keep_spec."""
    keep_spec(ctx.spec, store, log)
    rt = ctx.runtime
    if not isinstance(rt, ModelRuntime):
        return
    bundle = rt.job.bundle
    states = BlobStore(store.backend, lambda d: "0x" + mj.blob_state_root(bundle, d).hex())
    try:
        if not store.has(ctx.spec.graph):
            store.put(bundle.to_bytes())
        if not store.has(ctx.spec.state):
            states.put(rt.encode_state(rt.initial_state()))
    except (BlobError, OSError) as exc:
        log.warning("could not keep a copy of job %d's model in my blob store: %s", ctx.job_id,
                    exc)  # fmt: skip
