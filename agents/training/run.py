"""Running a committed graph: each node through its registry kernel, in node order.

`run_graph` is the only interpreter: training steps, op traces and evaluation all go through
it, so they are bit-identical by construction. Kernel choice (native C or portable torch),
thread count and device change speed only, never a bit (tests compare them).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from dataclasses import dataclass

import torch

from agents.training import float32 as F
from agents.training import fuse, native, plan
from agents.training.ir import Graph
from agents.training.registry import Node, TritonUnavailable, run_node, t_slice, triton_problem

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


def _frees(g: Graph, steps: list[fuse.Step]) -> list[list[int]]:
    """For each step of a run order, the values whose last reader it is (freed after it)."""
    last: dict[int, int] = {}
    for k, (kind, x) in enumerate(steps):
        for v in g.nodes[x].inputs if kind == "node" else x.inputs:
            last[v] = k
    keep = {vid for _, vid in g.outputs}
    free: list[list[int]] = [[] for _ in steps]
    for v, k in last.items():
        if v not in keep:
            free[k].append(v)
    return free


# On the native path without a trace, data movement returns views: the kernels that read them
# take strides (matmul, fused programs) or copy (the rest). The values are the same elements.
_VIEWS = {
    "permute": lambda a, n: a.permute(*n.attrs),
    "expand": lambda a, n: a.expand(n.shape),
    "slice": lambda a, n: t_slice(a, n),
}


@dataclass(frozen=True)
class _Plan:
    consts: dict[int, torch.Tensor]  # constant nodes' tensors: kernels never write into inputs
    steps: list[fuse.Step]  # run order: single nodes and fused groups
    frees: list[list[int]]


@functools.cache
def _reuse_freed_memory() -> None:
    """A step allocates and frees the same activation sizes every time. glibc serves blocks
    over its mmap threshold with fresh pages (a page fault per 4 KiB on first touch) and gives
    them back at free: keeping blocks up to 32 MiB in the heap, and the heap's top untrimmed,
    lets the next step reuse them. Speed only; the peak resident memory is the same."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc: nothing to tune
        return
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    mallopt(M_MMAP_THRESHOLD, 32 << 20)  # glibc's largest allowed threshold
    mallopt(M_TRIM_THRESHOLD, 1 << 30)


# Per graph, device and path, built once: a step's constants (index maps, scalars) never change.
_PLANS: dict[tuple[int, str, bool, bool], tuple[Graph, _Plan]] = {}


def _plan(g: Graph, device: str, fused: bool, keep_all: bool) -> _Plan:
    key = (id(g), device, fused, keep_all)
    hit = _PLANS.get(key)
    if hit is None or hit[0] is not g:  # an id can be reused once its graph is gone
        _reuse_freed_memory()
        if len(_PLANS) >= 64:
            _PLANS.clear()
        consts = {
            i: run_node(n, [], False, device) for i, n in enumerate(g.nodes) if n.op == "const"
        }
        steps = fuse.schedule(g, keep_all) if fused else [("node", i) for i in range(len(g.nodes))]
        hit = _PLANS[key] = (g, _Plan(consts, steps, _frees(g, steps)))
    return hit[1]


# Compiled plans (agents/training/plan.py) of the native path without a trace, most recent last;
# each holds its arena (a step's activations), so only a few are kept.
_COMPILED: dict[int, tuple[Graph, plan.Plan | None]] = {}
MAX_COMPILED = 4


def _compiled(g: Graph) -> plan.Plan | None:
    hit = _COMPILED.pop(id(g), None)
    if hit is None or hit[0] is not g:
        _reuse_freed_memory()
        try:
            hit = (g, plan.build(g))
        except plan.NotPlannable:
            hit = (g, None)
        while len(_COMPILED) >= MAX_COMPILED:
            del _COMPILED[next(iter(_COMPILED))]
    _COMPILED[id(g)] = hit
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
    for spec, t in zip(g.inputs, inputs, strict=True):
        if tuple(t.shape) != spec.shape:
            raise ValueError(f"input {spec.name} has shape {tuple(t.shape)}, graph says "
                             f"{spec.shape}")  # fmt: skip
    base = len(g.inputs)
    fused = use_native and native.available()
    if fused and not keep_trace and (compiled := _compiled(g)) is not None:
        return compiled.run(list(inputs), cfg.threads), []  # it makes them CPU, contiguous, typed
    vals: dict[int, torch.Tensor] = {}
    for i, (spec, t) in enumerate(zip(g.inputs, inputs, strict=True)):
        want = torch.float32 if spec.dtype == "f32" else torch.int32
        vals[i] = t.to(cfg.device, want).contiguous()
    plan = _plan(g, cfg.device, fused, keep_trace)
    consts = plan.consts
    views = _VIEWS if fused and not keep_trace else {}
    for k, (kind, x) in enumerate(plan.steps):
        if kind == "group":
            outs = x.run([vals[v] for v in x.inputs], cfg.threads)
            for v, t in zip(x.outputs, outs, strict=True):
                vals[v] = t
        else:
            n: Node = g.nodes[x]
            out = consts.get(x)
            if out is None:
                view = views.get(n.op)
                args = [vals[v] for v in n.inputs]
                out = view(args[0], n) if view else run_node(
                    n, args, use_native, cfg.device, cfg.threads, use_gpu
                )  # fmt: skip
            vals[base + x] = out
        if not keep_trace:
            for v in plan.frees[k]:
                vals.pop(v, None)
    trace = [vals[base + i] for i in range(len(g.nodes))] if keep_trace else []
    return {name: vals[vid] for name, vid in g.outputs}, trace
