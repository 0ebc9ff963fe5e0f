"""Task decomposition (job spec version 2, PROTOCOL §2, §3, §4, §5): local SGD over R rounds x S
shards, aggregated by the fixed-order weighted `average`.

Round r starts from the global state G_r (G_0 = S_0 of §5). Unit (r, s) runs k_local steps of the
ordinary step graph from G_r, drawing its batches only from shard s (examples i with i mod S = s),
and ends in S_{r,s}. Then G_{r+1} = average(S_{r,0}, ..., S_{r,S-1}; w) on every state tensor,
momentum buffers included, with w_s = fl(N_s / N). Everything is a pure function of the spec and
the dataset, so every party derives the same bits; with S = 1 the batches are exactly version 1's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from agents.training import float32 as F
from agents.training import merkle, ops, reference
from agents.training.engine import Dataset, Engine, EngineConfig
from agents.training.keccak import keccak256, keccak256_batch
from agents.training.spec import JobSpec, JobSpecError
from agents.training.state import State, state_root

AGGREGATION_DOMAIN = keccak256(b"vtp.aggregation.v1")
ROUNDS_DOMAIN = keccak256(b"vtp.rounds.v1")


# -- shards and the per-unit batch schedule (§4) ---------------------------------------------


def shard_size(n: int, shards: int, s: int) -> int:
    """N_s = |{i < N : i mod S = s}| = ceil((N - s) / S)."""
    return (n - s + shards - 1) // shards


def shard_indices(n: int, shards: int, s: int) -> np.ndarray:
    """Shard s: the example indices i with i mod S = s, ascending (position p holds p*S + s)."""
    return np.arange(s, n, shards, dtype=np.int64)


def unit_batch_indices(seed: int, g: int, batch: int, n: int, shards: int, s: int) -> np.ndarray:
    """Example indices of shard s's batch at global step g:
    idx_s(g, j) = S * (uint256(keccak256(abi.encode(seed, g, j*S + s))) mod N_s) + s.

    The hash is §4's idx with slot j*S + s (RepOps.batchIndex(seed, g, j*S + s, N_s)), so the S
    shards draw from disjoint hash inputs, and with S = 1 this is exactly the version-1 batch."""
    ns = shard_size(n, shards, s)
    msgs = np.zeros((batch, 96), dtype=np.uint8)
    msgs[:, :32] = np.frombuffer(int(seed).to_bytes(32, "big"), np.uint8)
    msgs[:, 32:64] = np.frombuffer(int(g).to_bytes(32, "big"), np.uint8)
    slots = np.arange(batch, dtype=np.uint64) * np.uint64(shards) + np.uint64(s)
    msgs[:, 88:96] = slots.astype(">u8").view(np.uint8).reshape(batch, 8)
    h = keccak256_batch(msgs, 96)
    hs = [bytes(row) for row in h]
    return np.array([shards * (int.from_bytes(x, "big") % ns) + s for x in hs], np.int64)


def check_shards(spec: JobSpec, n: int) -> None:
    """The spec rule that needs the dataset: every shard holds at least one example."""
    if spec.shards > n:
        raise JobSpecError("shards", f"must be <= the dataset's {n} examples, got {spec.shards}")


# -- aggregation (§2 `average`) ----------------------------------------------------------------


def aggregation_weights(n: int, shards: int) -> list[np.float32]:
    """w_s = fl(f32(N_s) / f32(N)), each count converted correctly rounded (exact up to 2^24),
    the way Solidity gets it: Float32.fromUint(N_s).div(Float32.fromUint(N))."""
    with np.errstate(all="ignore"):
        return [
            np.float32(np.float32(shard_size(n, shards, s)) / np.float32(n)) for s in range(shards)
        ]


def aggregate(states: list[State], weights: list[np.float32]) -> State:
    """G = average(states; weights) tensor by tensor (fast path: ops.average, vectorised over
    elements, shards in order s = 0..S-1). Bit-equal to aggregate_reference."""
    if len(states) != len(weights) or not states:
        raise ValueError(f"{len(states)} states and {len(weights)} weights")
    dev = next(iter(states[0].values())).device
    w = [torch.tensor(x, dtype=torch.float32, device=dev) for x in weights]
    return {name: ops.average([st[name] for st in states], w) for name in states[0]}


def aggregate_reference(states: list[State], weights: list[np.float32]) -> dict[str, np.ndarray]:
    """The scalar reference (reference.average, one binary32 operation per line)."""
    arrays = [{k: v.detach().cpu().numpy() for k, v in st.items()} for st in states]
    return {name: reference.average([a[name] for a in arrays], weights) for name in arrays[0]}


@dataclass(frozen=True)
class AggregationTrace:
    """What a dispute over one element of G_{r+1} needs: element `element` (row-major) of state
    tensor `tensor` is average(inputs; weights). Values are binary32 bits, NaN canonicalised."""

    tensor: str
    element: int
    inputs: list[int]  # S_{r,s}[tensor][element] for s = 0..S-1
    weights: list[int]
    output: int  # G_{r+1}[tensor][element]

    def recompute(self) -> int:
        """The output from the inputs with the scalar reference (what RepOps.average does)."""
        ps = [np.array([[F.f32(x)]], dtype=np.float32) for x in self.inputs]
        out = reference.average(ps, [F.f32(w) for w in self.weights])
        return F.canonical_bits(out[0, 0])


def aggregation_trace(
    units: list[State], weights: list[np.float32], new: State, tensor: str | int, element: int
) -> AggregationTrace:
    """Inputs, weights and claimed output of element `element` of tensor `tensor` (a name or a
    state position, §5 order) of the aggregate `new` of the unit final states `units`."""
    name = list(new)[tensor] if isinstance(tensor, int) else tensor

    def bits(t: torch.Tensor) -> int:
        return F.canonical_bits(t.detach().cpu().reshape(-1)[element].numpy())

    return AggregationTrace(
        name,
        element,
        [bits(u[name]) for u in units],
        [F.bits(w) for w in weights],
        bits(new[name]),
    )


# -- commitments (§3) --------------------------------------------------------------------------


def aggregation_root(unit_final_roots: list[bytes], new_root: bytes) -> bytes:
    """A_r: root list under vtp.aggregation.v1 of the S unit final state roots, then G_{r+1}'s."""
    return merkle.root_list(AGGREGATION_DOMAIN, [*unit_final_roots, new_root])


def rounds_root(global_roots: list[bytes]) -> bytes:
    """Root list under vtp.rounds.v1 of the global state roots G_0, ..., G_R."""
    return merkle.root_list(ROUNDS_DOMAIN, global_roots)


# -- running units and rounds ------------------------------------------------------------------


class UnitEngine(Engine):
    """The engine of shard s: same graph, ops and bits as Engine, batches from shard s. Step
    numbers are global (g = r * k_local + t), so trace_step(st, g) is a unit's step g."""

    def __init__(
        self, spec: JobSpec, data: Dataset, shard: int, cfg: EngineConfig = EngineConfig()
    ):
        check_shards(spec, data.n)
        if not 0 <= shard < spec.shards:
            raise ValueError(f"shard must be in [0, {spec.shards}), got {shard}")
        super().__init__(spec, data, cfg)
        self.shard = shard

    def batch(self, t: int) -> torch.Tensor:
        sp = self.spec
        idx = unit_batch_indices(sp.seed, t, sp.batch, self.data.n, sp.shards, self.shard)
        return torch.from_numpy(idx.reshape(1, -1)).to(self.cfg.device)

    def run_unit(self, r: int, start: State) -> UnitResult:
        """Unit (r, shard) from G_r: checkpoints at local steps 0, k, 2k, ..., k_local."""
        k_local, every = self.spec.k_local, self.spec.checkpoint_every
        st, roots = start, [state_root(start)]
        for t in range(k_local):
            st = self.step(st, r * k_local + t)
            if (t + 1) % every == 0:
                roots.append(state_root(st))
        return UnitResult(r, self.shard, roots, st)


class RoundUnitEngine(UnitEngine):
    """Unit (r, s) seen as a job of k_local steps: local step t is global step t0 + t (its
    shard-s batch, PROTOCOL §4) and the initial state is G_r."""

    def __init__(
        self,
        spec: JobSpec,
        data: Dataset,
        shard: int,
        t0: int,
        start: State,
        cfg: EngineConfig = EngineConfig(),
    ) -> None:
        super().__init__(spec, data, shard, cfg)
        self.t0, self.start = t0, start

    def batch(self, t: int):
        return super().batch(self.t0 + t)

    def initial_state(self) -> State:
        return {k: v.clone() for k, v in self.start.items()}


@dataclass
class UnitResult:
    round: int
    shard: int
    roots: list[bytes]  # state roots at local steps 0, k, ..., k_local (roots[0] = root(G_r))
    final: State  # S_{r,s}

    @property
    def checkpoint_root(self) -> bytes:
        return merkle.checkpoint_root(self.roots)

    @property
    def final_root(self) -> bytes:
        return self.roots[-1]


@dataclass
class RoundResult:
    round: int
    units: list[UnitResult]
    weights: list[np.float32]
    state: State  # G_{r+1}
    state_root: bytes

    @property
    def aggregation_root(self) -> bytes:
        return aggregation_root([u.final_root for u in self.units], self.state_root)


def run_job(
    spec: JobSpec, data: Dataset, cfg: EngineConfig = EngineConfig(), start: State | None = None
) -> Iterator[UnitResult | RoundResult]:
    """The whole R x S job in one process: yields every unit (r, s = 0..S-1) of a round, then the
    round's aggregate, for r = 0..R-1. The last RoundResult's state is G_R, the job's result."""
    engines = [UnitEngine(spec, data, s, cfg) for s in range(spec.shards)]
    weights = aggregation_weights(data.n, spec.shards)
    g = engines[0].initial_state() if start is None else start
    for r in range(spec.rounds):
        units = []
        for eng in engines:
            units.append(eng.run_unit(r, g))
            yield units[-1]
        g = aggregate([u.final for u in units], weights)
        yield RoundResult(r, units, weights, g, state_root(g))
