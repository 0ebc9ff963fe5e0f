"""A job's runtime: everything a role does with a job's model, whatever its kind, behind one
interface — the dispute graph and config, a party's account of a claim (the players' computation),
training steps and losses, state encoding, decoding and roots, held-out metrics and the cost
model's figures.

Two kinds: `MlpRuntime` (version 1, and a version-2 unit: the MLP engine and its step graph) and
`ModelRuntime` (version 3: a general model's committed step graph, agents/model). The kind is
chosen in one place, `job_runtime`, from the spec; every role works on the interface. A job's
published data is anyone's, so loading one raises JobRejected only (one line saying why), and the
cheap checks (roots, sizes, the registered config) come before the costly work (the dataset, S_0).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np
import torch

from agents.core.blobs import BlobError, BlobStore
from agents.data import datasets
from agents.data.chunks import FetchConfig
from agents.dispute.aggregation import AggregationComputation, aggregation_job_graph
from agents.dispute.budget import StateBudget
from agents.dispute.graph import JobGraph, job_graph
from agents.dispute.model_graph import ModelJobGraph, model_job_graph
from agents.dispute.model_trace import ModelComputation
from agents.dispute.trace import Computation
from agents.model import job as mj
from agents.model.aggregate import Aggregation
from agents.model.bundle import MAX_BUNDLE_BYTES, bundle_from_bytes
from agents.roles.aggregation import layout_of
from agents.roles.artifacts import BadBlob, MlpCodec, encode_state
from agents.roles.errors import JobRejected, rejecting
from agents.training.engine import Engine, EngineConfig
from agents.training.registry import GraphError
from agents.training.run import RunConfig
from agents.training.spec import JobSpec, ModelSpec
from agents.training.state import State, state_names


class MlpRuntime(MlpCodec):
    """A version-1 job (or a version-2 unit) on the MLP engine: `engine` may be a unit's engine
    (agents/training/decompose.py), which starts from G_r."""

    def __init__(self, spec: JobSpec, engine: Engine, jg: JobGraph) -> None:
        super().__init__(spec)
        object.__setattr__(self, "engine", engine)
        object.__setattr__(self, "jg", jg)

    @property
    def n_params(self) -> int:
        return self.spec.n_params

    @property
    def step_macs(self) -> int:
        """Multiply-adds of one training step: forward, and backward for weights and
        activations (3·B·Σ d_i·d_(i+1))."""
        w = self.spec.widths
        return 3 * self.spec.batch * sum(a * b for a, b in zip(w, w[1:], strict=False))

    @property
    def state_names(self) -> list[str]:
        return list(state_names(self.spec.widths))

    def initial_state(self) -> State:
        return self.engine.initial_state()

    def step(self, st: State, t: int) -> State:
        return self.engine.step(st, t)

    def loss(self, st: State, t: int) -> float:
        return self.engine.loss(st, t)

    def encode_state(self, st: State) -> bytes:
        return encode_state(st)

    def committed(self, st: State) -> State:
        """The state as its root commits it: 2-D tensors (an MLP's are already)."""
        return st

    def computation(
        self,
        steps: int,
        interval: int,
        t0: int = 0,
        start: State | None = None,
        budget: StateBudget | None = None,
    ) -> Computation:
        return Computation(self.engine, steps, interval, t0=t0, start=start, budget=budget)

    def metrics(self, final: State) -> dict[str, float]:
        test = datasets.held_out(self.engine.data)
        return {} if test is None else {"test_accuracy": self.engine.accuracy(final, test)}


@dataclass(frozen=True)
class ModelRuntime:
    """A version-3 job: its model bundle's step graph on the reproducible engine (ModelJob), its
    dispute graph (model_job_graph) and its initial state S_0."""

    job: mj.ModelJob
    jg: ModelJobGraph
    start: State

    @property
    def spec(self) -> ModelSpec:
        return self.job.spec

    @property
    def steps(self) -> int:
        """T; a unit of a decomposed job (`unit`): its k_local steps."""
        return self.spec.k_local if self.job.unit_view else self.spec.steps

    @property
    def checkpoint_every(self) -> int:
        return self.spec.checkpoint_every

    @property
    def n_params(self) -> int:
        return mj.n_params(self.job.bundle)

    @property
    def state_bytes(self) -> int:
        return 4 * sum(prod(v.shape) for v in self.job.bundle.state)

    @property
    def state_names(self) -> list[str]:
        return [v.name for v in self.job.bundle.state]

    @property
    def step_macs(self) -> int:
        """Operations of one step: each node's output elements, a matmul's times its K (the
        step graph holds the backward pass and the optimizer update already)."""
        g = self.job.bundle.step
        total = 0
        for node in g.nodes:
            k = g.value(node.inputs[0])[0][-1] if node.op == "matmul" else 1
            total += prod(node.shape) * k
        return total

    def initial_state(self) -> State:
        return self.start

    def step(self, st: State, t: int) -> State:
        return self.job.step(st, t)[0]

    def loss(self, st: State, t: int) -> float:
        return self.job.step(st, t)[1]

    def state_root(self, st: State) -> bytes:
        return mj.state_root(st)

    def encode_state(self, st: State) -> bytes:
        return mj.encode_state(st)

    def committed(self, st: State) -> State:
        """The state as its root commits it: each tensor's 2-D view (PROTOCOL §2.7)."""
        return {k: mj.view2d(v) for k, v in st.items()}

    def decode_state(self, data: bytes) -> State:
        try:
            return mj.decode_state(self.job.bundle, data)
        except GraphError as exc:
            raise BadBlob(str(exc)) from None

    def computation(
        self,
        steps: int,
        interval: int,
        t0: int = 0,
        start: State | None = None,
        budget: StateBudget | None = None,
    ) -> ModelComputation:
        """A party's account of a claim, its states kept under the agent's `budget`
        (--state-cache-mib) like a version-1 claim's."""
        if start is None:
            if t0:
                raise ValueError(f"a claim from step {t0} needs its start state")
            start = self.start
        return ModelComputation(self.job, self.jg, start, steps, interval, t0=t0, budget=budget)

    def metrics(self, final: State) -> dict[str, float]:
        return self.job.evaluate(final)

    # -- a decomposed job (PROTOCOL §5.2, §6.9) ---------------------------------------------------

    @property
    def aggregation(self) -> Aggregation:
        return self.job.aggregation

    def unit(self, r: int, shard: int, start: State) -> ModelRuntime:
        """Unit (r, shard) of this decomposed job as a job of k_local steps from `start` (G_r):
        its local step t is global step r·k_local + t on the shard's batches, under the job's
        dispute graph (its placement, registered with the game, tells the prover where)."""
        return ModelRuntime(self.job.unit(r, shard), self.jg, start)

    def initial_round_state(self) -> State:
        """H_0: S_0, then zero outer buffers."""
        return self.aggregation.initial(self.start)

    def decode_round_state(self, data: bytes) -> State:
        """An H blob (an aggregate as published): H's tensors, binary32 little-endian and
        row-major, in H's order; BadBlob for any other size."""
        agg = self.aggregation
        values = agg.graph.inputs[: len(agg.round_names)]
        want = 4 * sum(prod(v.shape) for v in values)
        if len(data) != want:
            raise BadBlob(f"an H blob of this job is {want} bytes, got {len(data)}")
        out, at = {}, 0
        for name, v in zip(agg.round_names, values, strict=True):
            n = prod(v.shape)
            a = np.frombuffer(data, dtype="<f4", count=n, offset=at).astype(np.float32)
            out[name] = torch.from_numpy(a).reshape(v.shape)
            at += 4 * n
        return out

    def next_round_state(self, h: State, units: list[State]) -> State:
        """H_{r+1}: the aggregation graph on H_r and round r's S unit final states."""
        return self.aggregation.run(h, units, self.job.cfg)[0]

    @functools.cached_property
    def aggregation_jg(self) -> ModelJobGraph:
        """The aggregation graph's dispute graph (its config is the record's aggregation
        config: the round manager's game checks every descriptor against it)."""
        return aggregation_job_graph(self.aggregation)

    def aggregation_account(self, h: State, units: list[State]) -> AggregationComputation:
        """A party's account of round r's aggregation claim (H_r and the units to H_{r+1}):
        what the round manager's game over an aggregate is played with."""
        return AggregationComputation(self.aggregation, self.aggregation_jg, h, units,
                                      self.job.cfg)  # fmt: skip


JobRuntime = MlpRuntime | ModelRuntime
#: A party's account of a claim (a ModelComputation is a Computation): the players
#: (agents/dispute/player.py) play every kind.
Claim = Computation


@dataclass(frozen=True)
class ChainJob:
    """What the chain holds of a job that its runtime must match (IJobManager.getJob)."""

    steps: int
    checkpoint_every: int
    dataset_root: bytes
    initial_root: bytes

    @classmethod
    def of(cls, job: Any) -> ChainJob:
        """Of IJobManager.getJob's result, decoded by name (agents/core/bindings.py)."""
        return cls(
            int(job.steps), int(job.checkpointInterval), bytes(job.datasetRoot),
            bytes(job.initialStateRoot),
        )  # fmt: skip


@dataclass(frozen=True)
class RoundChain:
    """What a RoundManager holds of a decomposed version-3 job that its runtime must match
    (IRoundManager.JobParams): the decomposition, the dataset and its batch positions N, S_0,
    H's layout, the commitments of the step graph (`dispute_config`) and of the aggregation
    graph (`aggregation_config`), H_0's root and the step state's tensor count."""

    rounds: int
    shards: int
    local_steps: int
    checkpoint_every: int
    dataset_root: bytes
    num_examples: int
    initial_root: bytes
    layout_hash: bytes
    dispute_config: bytes
    aggregation_config: bytes
    initial_round_root: bytes
    num_step: int

    @classmethod
    def of(cls, p: Any) -> RoundChain:
        """Of IRoundManager.JobParams, decoded by name (agents/core/bindings.py)."""
        return cls(
            int(p.rounds), int(p.shards), int(p.localSteps), int(p.checkpointInterval),
            bytes(p.datasetRoot), int(p.numExamples), bytes(p.initialStateRoot),
            bytes(p.layoutHash), bytes(p.disputeConfigHash), bytes(p.aggregationConfigHash),
            bytes(p.initialRoundRoot), int(p.numStep),
        )  # fmt: skip

    @classmethod
    def posted(cls, rt: ModelRuntime) -> RoundChain:
        """The record of the decomposed job `rt` as its submitter posts it (PROTOCOL §6.9): N
        the batch positions (the shard weights' N), the layout that of H's committed 2-D views."""
        spec, agg = rt.spec, rt.aggregation
        h0 = rt.initial_round_state()
        return cls(
            spec.rounds, spec.shards, spec.k_local, spec.checkpoint_every,
            bytes.fromhex(spec.dataset_root[2:]), rt.job.positions(), rt.state_root(rt.start),
            layout_of(rt.committed(h0)).hash(), rt.jg.config.hash(),
            rt.aggregation_jg.config.hash(), rt.state_root(h0), len(agg.step_names),
        )  # fmt: skip

    @property
    def version3(self) -> bool:
        """A version-3 job binds an aggregation graph (version 2's is zero)."""
        return any(self.aggregation_config)


#: RoundChain's fields a role checks once the job is built, with the chain's name of each.
_RECORD_FIELDS = (
    ("num_examples", "numExamples (the batch positions N)"),
    ("initial_root", "initialStateRoot (S_0)"),
    ("dispute_config", "disputeConfigHash (the step graph's dispute config)"),
    ("aggregation_config", "aggregationConfigHash (the aggregation config)"),
    ("initial_round_root", "initialRoundRoot (H_0)"),
    ("num_step", "numStep (the step state's tensor count)"),
    ("layout_hash", "layoutHash (H's layout)"),
)


def decomposed_runtime(
    spec: JobSpec | ModelSpec,
    chain: RoundChain,
    stores: list[BlobStore],
    what: str,
    max_params: int,
    engine_cfg: EngineConfig = EngineConfig(),
    fetch: FetchConfig = FetchConfig(),
) -> ModelRuntime:
    """The runtime of the decomposed version-3 job a RoundManager holds as `chain` (its units'
    runtimes are its `unit`s): the decomposition and dataset root checked first, then the job
    built (model bundle, S_0, dataset) and every other field compared with `RoundChain.posted`."""
    with rejecting(what):
        if not (isinstance(spec, ModelSpec) and spec.decomposed):
            raise JobRejected(f"{what}: a version-3 round job's spec is no decomposed version 3")
        have = (spec.rounds, spec.shards, spec.k_local, spec.checkpoint_every)
        want = (chain.rounds, chain.shards, chain.local_steps, chain.checkpoint_every)
        if have != want:
            raise JobRejected(f"{what}: R, S, k_local, k are {have}, the chain's {want}")
        if spec.dataset_root != "0x" + chain.dataset_root.hex():
            raise JobRejected(f"{what}: the spec's dataset root differs from the chain's")
        whole = ChainJob(spec.steps, spec.checkpoint_every, chain.dataset_root, chain.initial_root)
        rt = _model_runtime(spec, whole, stores, what, max_params, engine_cfg, fetch)
        honest = RoundChain.posted(rt)
        for field, name in _RECORD_FIELDS:
            if getattr(honest, field) != getattr(chain, field):
                raise JobRejected(f"{what}: the chain's {name} is not the spec's")
        return rt


def job_runtime(
    spec: JobSpec | ModelSpec,
    chain: ChainJob,
    stores: list[BlobStore],
    what: str,
    max_params: int,
    config_hash: bytes | None,
    engine_cfg: EngineConfig = EngineConfig(),
    fetch: FetchConfig = FetchConfig(),
) -> JobRuntime:
    """The runtime of the job the chain holds as `chain`, from its spec (and, for version 3, the
    model bundle and S_0 from the first of `stores` that has them), every commitment checked;
    `config_hash` the game's registered config (None: not checked, for a drawn verifier's
    replay); a packed dataset fetched as `fetch` says, then from `stores`. The one place the
    job's kind decides anything."""
    with rejecting(what):
        if (spec.steps, spec.checkpoint_every) != (chain.steps, chain.checkpoint_every):
            raise JobRejected(f"{what}: steps/interval differ from the chain's")
        if spec.dataset_root != "0x" + chain.dataset_root.hex():
            raise JobRejected(f"{what}: the spec's dataset root differs from the chain's")
        if spec.shards > 1 or (isinstance(spec, ModelSpec) and spec.rounds > 1):
            raise JobRejected(_decomposed_refusal(spec, what))
        if isinstance(spec, ModelSpec):
            rt: JobRuntime = _model_runtime(spec, chain, stores, what, max_params, engine_cfg,
                                            fetch)  # fmt: skip
            _check_config(rt.jg.config.hash(), config_hash, what)
        else:
            rt = _mlp_runtime(spec, chain, stores, what, config_hash, engine_cfg, fetch)
        if rt.state_root(rt.initial_state()) != chain.initial_root:
            raise JobRejected(f"{what}: initial state root differs from the chain's")
        return rt


def _check_config(derived: bytes, registered: bytes | None, what: str) -> None:
    if registered is not None and registered != derived:
        raise JobRejected(
            f"{what}: registered dispute config 0x{registered.hex()[:16]}… is not the "
            "one derived from the spec (or none is registered)"
        )


def _decomposed_refusal(spec: JobSpec | ModelSpec, what: str) -> str:
    if isinstance(spec, ModelSpec):
        return (
            f"{what}: a decomposed version-3 job ({spec.rounds} rounds x {spec.shards} shards) "
            "runs only as a round manager's unit jobs"
        )
    return f"{what}: a spec of {spec.shards} shards runs only as unit jobs"


def check_dataset(spec: JobSpec, root: bytes, what: str, fetch: FetchConfig) -> int:
    """Cheap checks of a version-1/2 spec's dataset against the chain's root (no data is built):
    the spec's own root, a known name of a buildable size, the input width. Returns N."""
    if spec.dataset_root != "0x" + bytes(root).hex():
        raise JobRejected(f"{what}: the spec's dataset root differs from the chain's")
    n, features = datasets.shape(spec.dataset_name, fetch)
    if spec.widths[0] != features:
        raise JobRejected(
            f"{what}: model.widths[0] is {spec.widths[0]}, the dataset has {features} features"
        )
    return n


def _mlp_runtime(
    spec: JobSpec,
    chain: ChainJob,
    stores: list[BlobStore],
    what: str,
    config_hash: bytes | None,
    engine_cfg: EngineConfig,
    fetch: FetchConfig,
) -> MlpRuntime:
    n = check_dataset(spec, chain.dataset_root, what, fetch)
    jg = job_graph(spec, n)
    _check_config(jg.config.hash(), config_hash, what)
    # the costly part: the dataset and the engine (bounded by the checks above)
    data = job_data(spec.dataset_name, stores, fetch)
    if data.root() != chain.dataset_root:
        raise JobRejected(f"{what}: dataset root differs from the chain's")
    if engine_cfg.device != "cpu" and hasattr(data, "complete"):
        data.complete()  # the engine copies X onto its device once: all of it, first
    return MlpRuntime(spec, Engine(spec, data, engine_cfg), jg)


def job_data(name: str, stores: list[BlobStore], fetch: FetchConfig):
    """A job's training data as the roles read it: a built-in dataset whole; a packed one
    opened, its chunks fetched (checked, cached, from `fetch`'s dataset stores and then
    `stores`) as each step's batch first reads them, so a verifier replaying two segments
    fetches only those batches' chunks (PROTOCOL §4.4)."""
    return datasets.open_dataset(name, fetch, stores)


def _model_runtime(
    spec: ModelSpec,
    chain: ChainJob,
    stores: list[BlobStore],
    what: str,
    max_params: int,
    engine_cfg: EngineConfig,
    fetch: FetchConfig,
) -> ModelRuntime:
    bundle = bundle_from_bytes(_first(stores, spec.graph, what, "model bundle", MAX_BUNDLE_BYTES))
    n = mj.n_params(bundle)
    if n > max_params:
        raise JobRejected(f"{what}: the model has {n} parameters, over --max-params {max_params}")
    state_bytes = 4 * sum(prod(v.shape) for v in bundle.state)
    blob = _first(stores, spec.state, what, "initial state", state_bytes,
                  lambda d: "0x" + mj.blob_state_root(bundle, d).hex())  # fmt: skip
    start = mj.decode_state(bundle, blob)
    data = job_data(spec.dataset_name, stores, fetch)
    if data.root() != chain.dataset_root:
        raise JobRejected(f"{what}: dataset root differs from the chain's")
    cfg = RunConfig(kernels=engine_cfg.kernels, device=engine_cfg.device)
    job = mj.ModelJob(spec, bundle, data, cfg)
    return ModelRuntime(job, model_job_graph(job), start)


def _first(stores: list[BlobStore], address: str, what: str, name: str, max_bytes: int,
           address_fn=None) -> bytes:  # fmt: skip
    """The blob at `address` from the first store holding it (each store checks its address)."""
    for store in stores:
        try:
            return store.get(address, address_fn=address_fn, max_bytes=max_bytes)
        except (BlobError, ValueError):
            continue
    raise JobRejected(f"{what}: {name} {address} not found in any blob store")


def model_runtime_from_files(
    spec: ModelSpec, stores: list[BlobStore], fetch: FetchConfig = FetchConfig()
) -> ModelRuntime:
    """A version-3 runtime from a submitter's own spec and blob store (nothing on chain yet;
    a decomposed job's whole runtime, whose `RoundChain.posted` its submitter posts);
    JobRejected if a blob is missing or does not match the spec."""
    dataset_root, s0_root = bytes.fromhex(spec.dataset_root[2:]), bytes.fromhex(spec.state[2:])
    if spec.decomposed:
        with rejecting("spec"):
            chain = ChainJob(spec.steps, spec.checkpoint_every, dataset_root, s0_root)
            rt = _model_runtime(spec, chain, stores, "spec", mj.MAX_PARAMS, EngineConfig(), fetch)
            if rt.state_root(rt.start) != s0_root:
                raise JobRejected("spec: initial state root differs from the spec's")
            return rt
    chain = ChainJob(spec.steps, spec.checkpoint_every, dataset_root, s0_root)
    return job_runtime(spec, chain, stores, "spec", mj.MAX_PARAMS, None, fetch=fetch)
