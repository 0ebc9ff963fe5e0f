"""A version-3 job on the reproducible engine: its blobs, its batches, its steps, its metrics.

`ModelJob` binds a `ModelSpec` to the bundle and initial state its hashes name (checked on
load), and to its dataset. `step` / `trace_step` run the committed step graph; `train` yields
(t, state root, S_t, loss); `evaluate` reports held-out accuracy (classification) or
validation loss (language models) with the committed forward graph.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from math import prod

import numpy as np
import torch

from agents.data import tokens
from agents.data.datasets import held_out
from agents.model.aggregate import Aggregation, Outer, aggregation_graph, graph_hash
from agents.model.bundle import BUFFER_PREFIX, STEP_INPUT, Bundle
from agents.training import decompose, merkle
from agents.training.keccak import keccak256
from agents.training.registry import GraphError
from agents.training.run import RunConfig, run_graph
from agents.training.spec import JobSpecError, ModelSpec

State = dict[str, torch.Tensor]
MAX_PARAMS = 1 << 28


def view2d(t: torch.Tensor) -> torch.Tensor:
    """How an N-d tensor is committed: 0-d -> (1, 1), (n,) -> (1, n), (d0, ...) -> (d0, rest)."""
    if t.dim() == 0:
        return t.reshape(1, 1)
    if t.dim() == 1:
        return t.reshape(1, -1)
    return t.reshape(t.shape[0], -1)


def commit_view(t: torch.Tensor) -> torch.Tensor:
    """The 2-D tensor a value is committed as: view2d, and i32 values as their two's-complement
    uint32 words (merkle's DTYPE_U32)."""
    v = view2d(t)
    return v if v.is_floating_point() else v.to(torch.int64) & 0xFFFFFFFF


def trace_root(trace: list[torch.Tensor]) -> bytes:
    """Op-trace root of a version-3 step: root list under vtp.trace.v1 of every node output's
    tensor root, in node order (PROTOCOL §2.7)."""
    return merkle.trace_root([merkle.tensor_root(commit_view(t)) for t in trace])


def state_root(st: State) -> bytes:
    return merkle.state_root([(k, view2d(v)) for k, v in st.items()])


def state_parts(st: State) -> list[memoryview]:
    """The state blob in parts, one a tensor: its float32 little-endian bytes, row-major, in
    state order (views of the tensors' own memory where they are float32 and contiguous)."""
    parts = []
    for v in st.values():
        a = v.detach().cpu().contiguous().numpy()
        parts.append(memoryview(a if a.dtype == np.dtype("<f4") else a.astype("<f4")).cast("B"))
    return parts


def encode_state(st: State) -> bytes:
    """The state blob: state_parts joined (the blob is the only copy made)."""
    return b"".join(state_parts(st))


def _blob_arrays(bundle: Bundle, blob: bytes) -> list[tuple[str, np.ndarray]]:
    """Each state tensor of a blob as a read-only float32 view into it."""
    out = []
    off = 0
    for v in bundle.state:
        n = prod(v.shape)
        if off + 4 * n > len(blob):
            raise GraphError(f"state blob of {len(blob)} bytes is too short for {v.name}")
        out.append((v.name, np.frombuffer(blob, "<f4", n, off).reshape(v.shape)))
        off += 4 * n
    if off != len(blob):
        raise GraphError(f"state blob has {len(blob) - off} trailing bytes")
    return out


def decode_state(bundle: Bundle, blob: bytes) -> State:
    return {name: torch.from_numpy(a.astype(np.float32)) for name, a in _blob_arrays(bundle, blob)}


def blob_state_root(bundle: Bundle, blob: bytes) -> bytes:
    """state_root(decode_state(bundle, blob)), read in place (no decoded copy of the state)."""
    return merkle.state_root([(k, _view2d_np(a)) for k, a in _blob_arrays(bundle, blob)])


def _view2d_np(a: np.ndarray) -> np.ndarray:
    return a.reshape(1, 1) if a.ndim == 0 else a.reshape(1, -1) if a.ndim == 1 else a.reshape(
        a.shape[0], -1)  # fmt: skip


RANDOM_DOMAIN = keccak256(b"vtp.random.v1")


def step_key(seed: int) -> tuple[int, int]:
    """The key words (k0, k1) of a job's random stream: the low 64 bits of
    keccak256(abi.encode(keccak256("vtp.random.v1"), seed)), k0 the lowest 32."""
    k = int.from_bytes(keccak256(RANDOM_DOMAIN + int(seed).to_bytes(32, "big")), "big")
    return k & 0xFFFFFFFF, (k >> 32) & 0xFFFFFFFF


def step_input(seed: int, t: int) -> torch.Tensor:
    """The step graph's `step` input at global step t: (k0, k1, t) as i32 words (PROTOCOL §2.7)."""
    k0, k1 = step_key(seed)
    words = np.array([k0, k1, t & 0xFFFFFFFF], dtype=np.uint32).view(np.int32)
    return torch.from_numpy(words.copy())


def has_step_input(g) -> bool:
    return bool(g.inputs) and g.inputs[-1].name == STEP_INPUT


def n_params(bundle: Bundle) -> int:
    return sum(prod(v.shape) for v in bundle.state if v.name in bundle.params)


def module_state_dict(bundle: Bundle, st: State) -> dict[str, torch.Tensor]:
    """The trained state as the PyTorch module's own `state_dict`: each parameter under its
    module name (and a tied parameter under every name it has), the buffers the step updates
    (BatchNorm's running statistics) from the state in their own dtype, and the other buffers
    (constants of the graph, e.g. a causal mask) as the bundle recorded them, so
    `module.load_state_dict` takes it strictly."""
    out = {bundle.params[k]: v.contiguous() for k, v in st.items() if k in bundle.params}
    for alias, name in bundle.tied.items():
        out[alias] = out[name].clone()  # its own storage: safetensors refuses shared tensors
    for name, b in bundle.buffers.items():
        dtype = getattr(torch, b["dtype"])
        kept = st.get(BUFFER_PREFIX + name)
        if kept is not None:
            out[name] = kept.to(dtype).reshape(b["shape"]).contiguous()
            continue
        words = np.array(b["words"], dtype=np.uint32)
        arr = words.view(np.float32) if b["dtype"].startswith("float") else words.view(np.int32)
        out[name] = torch.from_numpy(arr.copy()).reshape(b["shape"]).to(dtype)
    return out


def positions(bundle: Bundle, data) -> int:
    """How many examples (classification) or window starts (tokens) batches draw from."""
    if bundle.task == "lm":
        return data.n - bundle.item_shape[0]
    return data.n


def job_aggregation(bundle: Bundle, spec: ModelSpec, n: int) -> Aggregation:
    """A decomposed job's aggregation graph (PROTOCOL §2.9): a pure function of the bundle's
    state, the shard weights over the n batch positions, and the outer optimizer."""
    weights = decompose.aggregation_weights(n, spec.shards)
    params = [v.name for v in bundle.state if v.name in bundle.params]
    return Aggregation.of(aggregation_graph(bundle.state, params, weights, Outer.of(spec)))


def dataset_root(ds) -> str:
    return "0x" + ds.root().hex()


@dataclass(frozen=True)
class UnitRun:
    round: int
    shard: int
    roots: list[bytes]  # S_0 of the unit (G_r), then every checkpoint_every steps
    final: State
    loss: float | None

    @property
    def checkpoint_root(self) -> bytes:
        return merkle.checkpoint_root(self.roots)


@dataclass(frozen=True)
class RoundRun:
    round: int
    aggregation_root: bytes
    state_root: bytes  # G_{r+1}
    state: State


@dataclass
class ModelJob:
    spec: ModelSpec
    bundle: Bundle
    data: object  # a classification Dataset or a tokens.TokenDataset (agents/data)
    cfg: RunConfig = RunConfig()
    # a unit (r, s) of a decomposed job seen as a job of k_local steps (`unit`): its local step t
    # is global step step_offset + t, and its batches are shard unit_shard's
    step_offset: int = 0
    unit_shard: int = 0
    unit_view: bool = False

    def __post_init__(self):
        b, s = self.bundle, self.spec
        if "0x" + b.hash().hex() != s.graph:
            raise JobSpecError("model.graph", f"the bundle hashes to 0x{b.hash().hex()}")
        if tuple(b.hyper) != tuple(k for k, _ in s.hyper_bits):
            raise JobSpecError("optimizer", f"the graph takes hyper-parameters {list(b.hyper)}")
        x_in = b.step.inputs[len(b.state) + len(b.hyper)]
        if x_in.shape[0] != s.batch:
            raise JobSpecError("batch", f"the graph was lowered for batches of {x_in.shape[0]}")
        is_lm = isinstance(self.data, tokens.TokenDataset)
        if is_lm != (b.task == "lm"):
            raise JobSpecError("dataset.name", f"a {b.task} model cannot train on {s.dataset_name}")
        if n_params(b) > MAX_PARAMS:
            raise JobSpecError("model.graph", f"{n_params(b)} parameters exceed {MAX_PARAMS}")
        self._hyper = [torch.tensor(float(v), dtype=torch.float32)
                       for v in s.hyper().values()]  # fmt: skip
        if s.decomposed:
            if s.shards > self.positions():
                raise JobSpecError("shards", f"must be <= the dataset's {self.positions()} "
                                   f"positions, got {s.shards}")  # fmt: skip
            got = graph_hash(self.aggregation.graph)
            if got != s.aggregate:
                raise JobSpecError("aggregate", f"the job's aggregation graph hashes to {got}")

    # -- decomposition -----------------------------------------------------------------------

    @functools.cached_property
    def aggregation(self) -> Aggregation:
        """The aggregation graph of a decomposed job (PROTOCOL §2.9)."""
        return job_aggregation(self.bundle, self.spec, self.positions())

    def unit(self, r: int, shard: int) -> ModelJob:
        """Unit (r, shard) as a job of k_local steps (the roles' view of a unit job)."""
        if not 0 <= shard < self.spec.shards or not 0 <= r < self.spec.rounds:
            raise ValueError(f"unit ({r}, {shard}) of a job of {self.spec.rounds} x "
                             f"{self.spec.shards}")  # fmt: skip
        u = dataclasses.replace(self, step_offset=r * self.spec.k_local, unit_shard=shard,
                                unit_view=True)  # fmt: skip
        if "aggregation" in self.__dict__:  # built once per job, not per unit
            u.__dict__["aggregation"] = self.aggregation
        return u

    # -- batches and steps ---------------------------------------------------------------------

    def positions(self) -> int:
        """How many examples (classification) or window starts (tokens) batches draw from."""
        return positions(self.bundle, self.data)

    def picks(self, t: int, shard: int | None = None) -> np.ndarray:
        """The batch positions of step t (a unit's local step; shard `shard`, default the
        unit's): version 2's unit schedule (decompose.unit_batch_indices) at the global step,
        which with one shard is exactly §4's batch."""
        s = self.spec
        shard = self.unit_shard if shard is None else shard
        if not 0 <= shard < s.shards:
            raise ValueError(f"shard {shard} of a job of {s.shards} shards")
        n = self.positions()
        if n < 1:
            raise JobSpecError("dataset.name", f"{s.dataset_name} is shorter than one window")
        g = self.step_offset + t
        return decompose.unit_batch_indices(s.seed, g, s.batch, n, s.shards, shard)

    def batch(self, t: int, shard: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Step t's batch (`picks`): the token windows, or the rows and labels."""
        s, b = self.spec, self.bundle
        pick = torch.from_numpy(self.picks(t, shard))
        if b.task == "lm":
            return self.data.windows(pick, b.item_shape[0])
        prepare = getattr(self.data, "prepare", None)
        if prepare is not None:  # a packed split fetched as read: this batch's rows first
            prepare(pick.numpy())
        x = self.data.x.index_select(0, pick).reshape(s.batch, *b.item_shape)
        return x, self.data.y.reshape(-1).index_select(0, pick)

    def step_inputs(self, st: State, t: int, shard: int | None = None) -> list[torch.Tensor]:
        """The step graph's inputs at step t (a unit's local step: global step_offset + t): S_t,
        the hyper-parameters, the batch x, y and, when the graph reads it, the step input (random
        draws, the lr schedule) of the global step."""
        x, y = self.batch(t, shard)
        ins = [st[v.name] for v in self.bundle.state] + self._hyper + [x, y]
        if has_step_input(self.bundle.step):
            ins.append(step_input(self.spec.seed, self.step_offset + t))
        return ins

    def step(self, st: State, t: int, shard: int | None = None) -> tuple[State, float]:
        out, _ = run_graph(self.bundle.step, self.step_inputs(st, t, shard), self.cfg)
        return {v.name: out[v.name] for v in self.bundle.state}, float(out["loss"])

    def trace_step(
        self, st: State, t: int, shard: int | None = None
    ) -> tuple[State, list[torch.Tensor]]:
        """S_{t+1} and every node's output in node order (the op trace of step t)."""
        out, trace = run_graph(self.bundle.step, self.step_inputs(st, t, shard), self.cfg,
                               keep_trace=True)  # fmt: skip
        return {v.name: out[v.name] for v in self.bundle.state}, trace

    def train(
        self, st: State, steps: int | None = None, every: int | None = None
    ) -> Iterator[tuple[int, bytes, State, float | None]]:
        """Yields (t, root of S_t, S_t, loss of the step that made it) at t = 0, k, 2k, ..."""
        if self.spec.decomposed and not self.unit_view:
            raise ValueError("a decomposed job runs with run_rounds (or a unit's view)")
        steps = self.spec.k_local if steps is None else steps
        every = self.spec.checkpoint_every if every is None else every
        yield 0, state_root(st), st, None
        for t in range(steps):
            st, loss = self.step(st, t)
            if (t + 1) % every == 0 or t + 1 == steps:
                yield t + 1, state_root(st), st, loss

    def run_unit(self, r: int, shard: int, g: State) -> UnitRun:
        """Unit (r, shard) from G_r: k_local steps at global steps r*k_local + i on the shard's
        batches, checkpoints every k."""
        s = self.spec
        st, roots, loss = g, [state_root(g)], None
        for i in range(s.k_local):
            st, loss = self.step(st, r * s.k_local + i, shard)
            if (i + 1) % s.checkpoint_every == 0:
                roots.append(state_root(st))
        return UnitRun(r, shard, roots, st, loss)

    def run_rounds(self, g: State) -> Iterator[UnitRun | RoundRun]:
        """A decomposed job (PROTOCOL §5.1, §5.2): round r's units s = 0..S-1 each run k_local
        steps (global steps r*k_local + i) from G_r on shard s's batches; H_{r+1} is the
        aggregation graph on H_r and their final states (H_0: S_0 and zero outer buffers).
        Yields every unit, then the round (its state: H_{r+1})."""
        agg = self.aggregation
        h = agg.initial(g)
        for r in range(self.spec.rounds):
            units = []
            for shard in range(self.spec.shards):
                units.append(self.run_unit(r, shard, agg.unit_start(h)))
                yield units[-1]
            h, _ = agg.run(h, [u.final for u in units], self.cfg)
            root = state_root(h)
            a_r = decompose.aggregation_root([u.roots[-1] for u in units], root)
            yield RoundRun(r, a_r, root, h)

    # -- evaluation ------------------------------------------------------------------------------

    def logits(self, st: State, x: torch.Tensor) -> torch.Tensor:
        """The committed forward graph over any number of examples, in batches of B (the last
        one padded by repeating its first example)."""
        g = self.bundle.forward
        B = g.inputs[-1].shape[0]
        params = [st[v.name] for v in g.inputs[:-1]]  # the parameters and the kept buffers
        out = []
        for i in range(0, x.shape[0], B):
            chunk = x[i : i + B]
            n = chunk.shape[0]
            if n < B:
                chunk = torch.cat([chunk, chunk[:1].expand(B - n, *chunk.shape[1:])])
            res, _ = run_graph(g, params + [chunk], self.cfg)
            out.append(res["logits"][:n])
        return torch.cat(out)

    def evaluate(self, st: State, split=None) -> dict[str, float]:
        """{"test_accuracy": ...} (classification) or {"val_loss": ...} (language models) on the
        dataset's held-out split (or `split`); {} when there is none."""
        ds = held_out(self.data) if split is None else split
        if ds is None:
            return {}
        if self.bundle.task == "lm":
            x, y = ds.eval_windows(self.bundle.item_shape[0])
            return {"val_loss": lm_loss(self.logits(st, x), y)}
        x = ds.x.reshape(ds.n, *self.bundle.item_shape)
        pred = torch.argmax(self.logits(st, x), dim=-1)
        return {"test_accuracy": float((pred == ds.y.reshape(-1)).double().mean())}


def lm_loss(logits: torch.Tensor, y: torch.Tensor) -> float:
    """Mean next-token cross-entropy in float64 (a reported metric, not a committed value)."""
    lg = logits.double().reshape(-1, logits.shape[-1])
    return float(torch.nn.functional.cross_entropy(lg, y.reshape(-1)))
