"""Fusing a graph's elementwise nodes into C programs (the native path's speed, not its bits).

A group is a set of elementwise nodes (registry operators with a `fused` instruction) of one
output shape, each reading only values computed before the group runs or earlier members. It
runs as one `fastops.ew_run` call: per block of elements, every member in node order, each the
same IEEE operation on the same input words as its own kernel. So the group's values are the
nodes' values bit for bit; they are written out only where something outside the group (a
later node, the graph's outputs, the op trace) reads them.

Groups are formed in node order: a node joins the open group of one of its producers of the
same shape, or opens a new one. A group runs (is *closed*) right before the first node outside
it that reads one of its members, or at the end: so everything it reads exists when it runs,
and everything that reads it runs after.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from math import prod

import numpy as np
import torch

from agents.training import fastops
from agents.training.ir import Graph
from agents.training.registry import OPS, Node

MAX_MEMBERS = 256  # a bound on one program's length (and its block registers)


def fusable(n: Node, in_dtypes: list[str]) -> bool:
    op = OPS[n.op]
    if op.fused is None:
        return False
    code = op.fused[0 if in_dtypes[0] == "f32" else 1] if in_dtypes else None
    return code is not None


def _code(n: Node, in_dtypes: list[str]) -> int:
    op = OPS[n.op]
    assert op.fused is not None
    code = op.fused[0 if in_dtypes[0] == "f32" else 1]
    assert code is not None
    return code


@dataclass
class Group:
    shape: tuple[int, ...]
    members: list[int] = field(default_factory=list)  # node indices, in order
    closed: bool = False


@dataclass(frozen=True)
class Program:
    """One group, ready to run: its external inputs, the values it stores and its code."""

    shape: tuple[int, ...]
    members: tuple[int, ...]  # value ids the group computes, in order
    inputs: tuple[int, ...]  # value ids it reads from outside
    outputs: tuple[int, ...]  # value ids it writes out (a subset of members)
    out_dtypes: tuple[torch.dtype, ...]
    code: np.ndarray  # (instructions, 5) int64: op, d, a, b, c
    nregs: int
    _headers: dict = field(default_factory=dict, compare=False, repr=False)

    def run(self, args: list[torch.Tensor], threads: int = 1) -> list[torch.Tensor]:
        outs = [torch.empty(self.shape, dtype=dt) for dt in self.out_dtypes]
        # A plan's inputs arrive with the same strides every step: the header is cached by them.
        key = tuple(t.stride() for t in args)
        hdr = self._headers.get(key)
        if hdr is None:
            n = prod(self.shape)
            arr = self.header(tuple(layout(t, self.shape, n) for t in args), n)
            hdr = self._headers[key] = (arr, arr.ctypes.data)  # the array keeps the address live
        ptrs = (ctypes.c_void_p * (len(args) + len(outs)))(
            *[t.data_ptr() for t in args], *[t.data_ptr() for t in outs]
        )
        fastops.ew_run(hdr[1], ptrs, threads)
        return outs

    def header(self, layout: tuple, n: int) -> np.ndarray:
        shape, strides = _collapse(self.shape, [st for kind, st in layout if kind == 2])
        it = iter(strides)
        rows: list[int] = [n, len(shape), *shape]
        rows += [len(self.inputs), len(self.outputs), len(self.code), self.nregs]
        for kind, _ in layout:
            rows += [kind, *(next(it) if kind == 2 else [0] * len(shape))]
        return np.ascontiguousarray(np.concatenate([np.array(rows, np.int64),
                                                    self.code.reshape(-1)]))  # fmt: skip


def layout(t: torch.Tensor, shape: tuple[int, ...], n: int) -> tuple[int, tuple[int, ...]]:
    """How the program reads one input: (0, ()) contiguous with the group's n elements, (1, ())
    one element, or (2, strides over the group's shape, 0 on broadcast axes)."""
    if t.numel() == n and t.is_contiguous():
        return 0, ()
    if t.numel() == 1:
        return 1, ()
    return 2, tuple(t.expand(shape).stride()) if shape else (0,)


def _collapse(shape: tuple[int, ...], strides: list[tuple[int, ...]]):
    """Merge neighbouring axes that every strided input walks as one (longer inner runs)."""
    if not shape:
        return (1,), [[0] for _ in strides]
    dims = [[s, *(st[d] for st in strides)] for d, s in enumerate(shape) if s != 1] or [
        [1, *(0 for _ in strides)]
    ]
    out = [dims[0]]
    for d in dims[1:]:
        last = out[-1]
        if all(last[1 + k] == d[1 + k] * d[0] for k in range(len(strides))):
            out[-1] = [last[0] * d[0], *d[1:]]
        else:
            out.append(d)
    return tuple(d[0] for d in out), [[d[1 + k] for d in out] for k in range(len(strides))]


def _program(g: Graph, members: list[int], stored: set[int]) -> Program:
    base = len(g.inputs)
    vids = [base + i for i in members]
    mine = set(vids)
    ext: list[int] = []
    for i in members:
        for v in g.nodes[i].inputs:
            if v not in mine and v not in ext:
                ext.append(v)
    # last instruction (member position) reading each value, for register reuse
    last: dict[int, int] = {}
    for k, i in enumerate(members):
        for v in g.nodes[i].inputs:
            last[v] = k
    free: list[int] = []
    nregs = 0
    reg: dict[int, int] = {}
    code: list[list[int]] = []
    outputs = [v for v in vids if v in stored]

    def alloc() -> int:
        nonlocal nregs
        if free:
            return free.pop()
        nregs += 1
        return nregs - 1

    for k, i in enumerate(members):
        n = g.nodes[i]
        for v in n.inputs:
            if v not in reg:  # an external input: loaded right before its first use
                r = alloc()
                reg[v] = r
                code.append([fastops.EW_LOAD, r, ext.index(v), -1, -1])
        dts = [g.value(v)[1] for v in n.inputs]
        d = alloc()
        ops_ = [reg[v] for v in n.inputs] + [-1] * (3 - len(n.inputs))
        code.append([_code(n, dts), d, *ops_])
        vid = base + i
        reg[vid] = d
        if vid in stored:
            code.append([fastops.EW_STORE, outputs.index(vid), d, -1, -1])
        for v in set(n.inputs):
            if last.get(v) == k:
                free.append(reg[v])
        if vid not in last:  # read by nothing inside: its register is free at once
            free.append(d)
    out_dtypes = tuple(torch.float32 if g.value(v)[1] == "f32" else torch.int32 for v in outputs)
    return Program(
        tuple(g.nodes[members[0]].shape), tuple(vids), tuple(ext), tuple(outputs), out_dtypes,
        np.array(code, dtype=np.int64).reshape(-1, 5), nregs,
    )  # fmt: skip


Step = tuple[str, object]  # ("node", node index) or ("group", Program)


def schedule(g: Graph, keep_all: bool) -> list[Step]:
    """The graph's nodes as a run order of single nodes and fused groups. `keep_all` stores
    every member (the op trace needs every node's output)."""
    base = len(g.inputs)
    dtype = [v.dtype for v in g.inputs] + [n.dtype for n in g.nodes]
    member_of: dict[int, Group] = {}
    items: list[tuple[str, object]] = []  # ("node", i) or ("group", Group)
    readers: dict[int, set[int]] = {}  # value id -> nodes reading it

    for i, n in enumerate(g.nodes):
        for v in n.inputs:
            readers.setdefault(v, set()).add(i)

    def close(G: Group) -> None:
        if not G.closed:
            G.closed = True
            items.append(("group", G))

    for i, n in enumerate(g.nodes):
        ok = n.op != "const" and fusable(n, [dtype[v] for v in n.inputs])
        target = None
        if ok:
            for v in n.inputs:
                G = member_of.get(v)
                if G is not None and not G.closed and G.shape == n.shape:
                    if len(G.members) < MAX_MEMBERS:
                        target = G
                    break
        for v in n.inputs:
            G = member_of.get(v)
            if G is not None and G is not target:
                close(G)
        if ok:
            if target is None:
                target = Group(n.shape)
            target.members.append(i)
            member_of[base + i] = target
        else:
            items.append(("node", i))
    for G in {id(G): G for G in member_of.values()}.values():
        close(G)

    outs = {vid for _, vid in g.outputs}
    steps: list[Step] = []
    for kind, x in items:
        if kind == "node":
            steps.append(("node", x))
            continue
        G = x
        mine = {base + i for i in G.members}
        stored = {
            v for v in mine
            if keep_all or v in outs or any(r + base not in mine for r in readers.get(v, ()))
        }  # fmt: skip
        steps.append(("group", _program(g, G.members, stored)))
    return steps
