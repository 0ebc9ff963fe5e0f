"""The version-1/2 runtime: the step graph (graph.py) lowered into the one graph form
(graph.step_ir), run by run_graph like every other graph.

`Engine.step` runs one step S_t -> S_{t+1} keeping nothing; `Engine.trace_step` runs the same
graph and returns every node's output (the op trace) as well, so the two are bit-identical by
construction (and tested to be). Kernel choice (`native` C kernels or the portable `torch` ops)
and thread count change speed only, never a bit.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import torch

from agents.training import native
from agents.training.graph import (
    StepGraph,
    build_step_graph,
    forward_ir,
    step_ir,
)
from agents.training.ir import Graph
from agents.training.registry import TritonUnavailable, run_node, triton_problem
from agents.training.run import RunConfig, run_graph
from agents.training.schedule import batch_indices
from agents.training.spec import JobSpec, JobSpecError
from agents.training.state import State, init_state, param_names, state_root


class Dataset(Protocol):
    """What the engine reads of the classification dataset it is handed (agents/data builds
    it; the engine imports no dataset code): X (N x F float32), labels (1 x N)."""

    x: torch.Tensor
    y: torch.Tensor

    @property
    def n(self) -> int: ...

    @property
    def features(self) -> int: ...

    @property
    def classes(self) -> int: ...


@dataclass(frozen=True)
class EngineConfig:
    # "native" (C, CPU only), "torch" (portable, any device) or "triton" (the device kernels of
    # agents/training/triton_ops.py: CUDA, or the CPU under TRITON_INTERPRET=1)
    kernels: str = "native"
    threads: int = 1  # torch intra-op threads and C matmul threads
    device: str = "cpu"


class Engine:
    def __init__(self, spec: JobSpec, data: Dataset, cfg: EngineConfig = EngineConfig()):
        RunConfig(cfg.kernels)  # refuses an unknown kernel choice
        if cfg.kernels == "native" and (cfg.device != "cpu" or not native.available()):
            cfg = EngineConfig("torch", cfg.threads, cfg.device)
        if data.features != spec.widths[0]:
            raise JobSpecError(
                "model.widths[0]", f"must equal the dataset's {data.features} features"
            )
        if data.classes > spec.widths[-1]:  # a packed split's: declared, its labels below
            raise JobSpecError(
                "model.widths", f"last width must cover the dataset's {data.classes} classes"
            )
        self.spec, self.data, self.cfg = spec, data, cfg
        self.graph: StepGraph = build_step_graph(spec.widths, spec.batch)
        dev = cfg.device
        self.x = data.x.to(dev)
        self.y = data.y.to(dev)
        self.ir = step_ir(self.graph, spec.lr_bits, spec.momentum_bits, data.n, data.features)
        self._run_cfg = RunConfig(cfg.kernels, max(1, cfg.threads), dev)
        # The graph's Y is i32: an i32 copy of the labels, made once. A dataset fetched as read
        # (a packed split) fills its labels lazily: each step copies its batch's labels in.
        self.y32 = self.y.to(torch.int32)
        self._forward: dict[int, Graph] = {}  # the forward graph, by the number of rows
        if cfg.kernels == "triton" and (problem := triton_problem(cfg.device)):
            raise TritonUnavailable(problem)

    # -- one step ----------------------------------------------------------------------------

    def batch(self, t: int) -> torch.Tensor:
        if self.spec.shards > 1:  # a sharded job's batch depends on the unit: never guess one
            raise ValueError("a spec with shards > 1 runs on decompose.UnitEngine, one per shard")
        idx = batch_indices(self.spec.seed, t, self.spec.batch, self.data.n)
        return torch.from_numpy(idx.reshape(1, -1)).to(self.cfg.device)

    def _op(self, index: int, a: list[torch.Tensor]) -> torch.Tensor:
        """Node `index`'s output from its inputs, with the registry's kernel of its operator
        (what a party that runs the step node by node calls: agents/adversaries/faults.py)."""
        c, n = self._run_cfg, self.ir.nodes[index]
        return run_node(n, a, c.kernels == "native", c.device, c.threads, c.kernels == "triton")

    def _run(self, st: State, t: int, keep: bool) -> tuple[State, list[torch.Tensor]]:
        idx = self.batch(t)
        prepare = getattr(self.data, "prepare", None)
        if prepare is not None:  # a packed split fetched as read: this batch's rows first
            rows = idx.reshape(-1)
            prepare(rows.cpu().numpy())
            self.y32[0, rows] = self.y[0, rows].to(torch.int32)
        inputs = [st[k] for k in self.graph.next_state] + [self.x, self.y32, idx]
        outs, trace = run_graph(self.ir, inputs, self._run_cfg, keep_trace=keep)
        return {k: outs[k].contiguous() for k in self.graph.next_state}, trace

    def step(self, st: State, t: int) -> State:
        return self._run(st, t, keep=False)[0]

    def trace_step(self, st: State, t: int) -> tuple[State, list[torch.Tensor]]:
        """S_{t+1} and every node's output in node order (the op trace of step t)."""
        return self._run(st, t, keep=True)

    def loss(self, st: State, t: int) -> float:
        _, trace = self.trace_step(st, t)
        return float(trace[self.graph.index_of(self.graph.loss)].item())

    # -- whole jobs --------------------------------------------------------------------------

    def initial_state(self) -> State:
        return init_state(self.spec.widths, self.spec.seed, self.cfg.device)

    def train(
        self, steps: int | None = None, every: int | None = None, st: State | None = None
    ) -> Iterator[tuple[int, bytes, State]]:
        """Yields (t, state root, S_t) at t = 0, every, 2*every, ..., steps."""
        steps = self.spec.steps if steps is None else steps
        every = self.spec.checkpoint_every if every is None else every
        st = self.initial_state() if st is None else st
        yield 0, state_root(st), st
        for t in range(steps):
            st = self.step(st, t)
            if (t + 1) % every == 0 or t + 1 == steps:
                yield t + 1, state_root(st), st

    def predict(self, st: State, x: torch.Tensor) -> torch.Tensor:
        """Class predictions with the protocol forward ops (first maximum on ties)."""
        rows, widths = int(x.shape[0]), self.spec.widths
        g = self._forward.get(rows) or self._forward.setdefault(rows, forward_ir(widths, rows))
        params = [st[k] for k in param_names(widths)]
        return torch.argmax(run_graph(g, params + [x], self._run_cfg)[0]["logits"], dim=1)

    def accuracy(self, st: State, data: Dataset) -> float:
        pred = self.predict(st, data.x).cpu()
        return float((pred == data.y.reshape(-1)).double().mean())
