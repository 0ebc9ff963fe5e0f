"""A job as the roles see it: its spec fetched by hash, dataset, engine and dispute graph,
each checked against what the chain holds before anyone takes part."""

from __future__ import annotations

from dataclasses import dataclass

from agents.core.blobs import BlobError, BlobStore
from agents.dispute.graph import JobGraph, job_graph
from agents.training import data as datasets
from agents.training import spec as specs
from agents.training.engine import Engine
from agents.training.spec import JobSpec
from agents.training.state import state_root


class JobRejected(RuntimeError):
    """The job's published data does not match its on-chain commitments (or is missing)."""


@dataclass
class JobContext:
    job_id: int
    spec: JobSpec
    engine: Engine
    jg: JobGraph
    test: datasets.Dataset | None

    @property
    def segments(self) -> int:
        return self.spec.steps // self.spec.checkpoint_every


def load_job(job_id: int, job: tuple, stores: list[BlobStore], config_hash: bytes) -> JobContext:
    """`job` is IJobManager.getJob's tuple; `config_hash` the game's registered config."""
    spec_hash = bytes(job[13])
    raw = None
    for store in stores:
        try:
            raw = store.get("0x" + spec_hash.hex())
            break
        except BlobError:
            continue
    if raw is None:
        raise JobRejected(f"job {job_id}: spec 0x{spec_hash.hex()} not found in any blob store")
    try:
        spec = specs.loads(raw)
    except specs.JobSpecError as exc:
        raise JobRejected(f"job {job_id}: published spec is invalid: {exc}") from None
    data = datasets.load_dataset(spec.dataset_name)
    if data.root() != bytes(job[14]):
        raise JobRejected(f"job {job_id}: dataset root differs from the chain's")
    if (spec.steps, spec.checkpoint_every) != (job[1], job[10]):
        raise JobRejected(f"job {job_id}: steps/interval differ from the chain's")
    engine = Engine(spec, data)
    if state_root(engine.initial_state()) != bytes(job[15]):
        raise JobRejected(f"job {job_id}: initial state root differs from the chain's")
    jg = job_graph(spec, data.n)
    if config_hash != jg.config.hash():
        raise JobRejected(
            f"job {job_id}: registered dispute config 0x{config_hash.hex()[:16]}… is not the "
            "one derived from the spec (or none is registered)"
        )
    return JobContext(job_id, spec, engine, jg, datasets.test_split_for(spec.dataset_name))
