"""Running a committed graph: each node through its registry kernel, in node order.

`run_graph` is the only interpreter: training steps, op traces and evaluation all go through
it, so they are bit-identical by construction. Kernel choice (native C or portable torch),
thread count and device change speed only, never a bit (tests compare them).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from agents.model.graph import Graph
from agents.training import float32 as F
from agents.training.registry import TritonUnavailable, run_node, triton_problem

KERNELS = ("native", "torch", "triton")


@dataclass(frozen=True)
class RunConfig:
    # "native" (C where an operator has it, CPU only), "torch" (portable) or "triton" (the
    # device kernels, agents/training/triton_ops.py; CUDA, or interpreted on the CPU)
    kernels: str = "native"
    threads: int = 1
    device: str = "cpu"

    def __post_init__(self):
        if self.kernels not in KERNELS:
            raise ValueError(f"kernels must be one of {KERNELS}, got {self.kernels!r}")


def _last_uses(g: Graph) -> list[list[int]]:
    """For each node, the values whose last reader it is (freed after it runs)."""
    last: dict[int, int] = {}
    for i, n in enumerate(g.nodes):
        for v in n.inputs:
            last[v] = i
    keep = {vid for _, vid in g.outputs}
    free: list[list[int]] = [[] for _ in g.nodes]
    for v, i in last.items():
        if v not in keep:
            free[i].append(v)
    return free


@dataclass(frozen=True)
class _Plan:
    consts: dict[int, torch.Tensor]  # constant nodes' tensors: kernels never write into inputs
    frees: list[list[int]]


# Per graph and device, built once: a step's constants (index maps, scalars) never change.
_PLANS: dict[tuple[int, str], tuple[Graph, _Plan]] = {}


def _plan(g: Graph, device: str) -> _Plan:
    key = (id(g), device)
    hit = _PLANS.get(key)
    if hit is None or hit[0] is not g:  # an id can be reused once its graph is gone
        if len(_PLANS) >= 64:
            _PLANS.clear()
        consts = {
            i: run_node(n, [], False, device) for i, n in enumerate(g.nodes) if n.op == "const"
        }
        hit = _PLANS[key] = (g, _Plan(consts, _last_uses(g)))
    return hit[1]


def run_graph(
    g: Graph, inputs: list[torch.Tensor], cfg: RunConfig = RunConfig(), keep_trace: bool = False
) -> tuple[dict[str, torch.Tensor], list[torch.Tensor]]:
    """(outputs by name, op trace: every node's output in node order when keep_trace)."""
    if len(inputs) != len(g.inputs):
        raise ValueError(f"graph takes {len(g.inputs)} inputs, got {len(inputs)}")
    torch.set_num_threads(max(1, cfg.threads))
    torch.set_flush_denormal(False)
    F.check_no_flush_denormal()
    use_native = cfg.kernels == "native" and cfg.device == "cpu"
    use_gpu = cfg.kernels == "triton"
    if use_gpu and (problem := triton_problem(cfg.device)):
        raise TritonUnavailable(problem)
    vals: dict[int, torch.Tensor] = {}
    for i, (spec, t) in enumerate(zip(g.inputs, inputs, strict=True)):
        if tuple(t.shape) != spec.shape:
            raise ValueError(f"input {spec.name} has shape {tuple(t.shape)}, graph says "
                             f"{spec.shape}")  # fmt: skip
        want = torch.float32 if spec.dtype == "f32" else torch.int32
        vals[i] = t.to(cfg.device, want).contiguous()
    base = len(g.inputs)
    plan = _plan(g, cfg.device)
    consts = plan.consts
    trace: list[torch.Tensor] = []
    for i, n in enumerate(g.nodes):
        out = consts.get(i)
        if out is None:
            out = run_node(
                n, [vals[v] for v in n.inputs], use_native, cfg.device, cfg.threads, use_gpu
            )
        vals[base + i] = out
        if keep_trace:
            trace.append(out)
        else:
            for v in plan.frees[i]:
                vals.pop(v, None)
    return {name: vals[vid] for name, vid in g.outputs}, trace
