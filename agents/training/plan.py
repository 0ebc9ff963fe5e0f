"""Compiled plans: a graph's native run as a few C calls, its activations in one arena.

`run_graph`'s interpreter pays Python work per step (argument lists, a tensor object per value,
a foreign call per node): for small models that is most of a training step. A plan does that
work once per graph. Every value gets a fixed place: a view (permute, expand, slice, reshape
without a copy) is a new shape and strides over its producer's place; a computed value gets a
block of a per-plan arena, reused once its last reader has run (blocks are assigned at build
time, first fit), or of the step's output buffer when the graph returns it. The steps then run
as one C call (`kernels.c` `vtp_plan_run`): fused elementwise programs, matmuls and reductions,
each the very kernel call the interpreter makes for its node, and the data movement (strided
copies, cat, gather, scatter_value, index_rows, index_add_rows) as word copies, and the
committed random stream (`uniform`: Philox4x32-10, the registry's words). An operator
without an instruction here runs its registry kernel between C runs.

Speed only: every instruction is the kernel its node runs in the interpreter, on the same input
elements, so the values are the interpreter's bit for bit (tests compare the two, and the
portable path, on every example).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from math import prod

import numpy as np
import torch

from agents.training import fastops, fuse, native
from agents.training.ir import Graph
from agents.training.registry import Node, run_node, t_const, t_slice

ALIGN = 16  # elements (64 bytes): every block starts on a cache line
ARENA, OUT = 0, 1  # slots 0 and 1; inputs, constants and Python results take the rest
# kernels.c's instruction codes
(PL_EW, PL_MM, PL_RED, PL_COPY, PL_GATHER, PL_SCATTER, PL_ROWS, PL_ROWS_ADD,
 PL_UNIFORM) = range(1, 10)  # fmt: skip
# f32, i32 operand; a version-1 row_sum / row_max is sum_last / max_last as a (1, M) row
_RED = {"sum_last": (0, 2), "max_last": (1, 3), "argmax_last": (4, 5), "row_sum": (0, 2),
        "row_max": (1, 3)}  # fmt: skip
MAX_DIMS = 8  # kernels.c's PL_MAXDIM and EW_MAXDIM
_OP_OF = {"scatter": "scatter_value", "rows": "index_rows", "rows_add": "index_add_rows"}
_DT = {"f32": torch.float32, "i32": torch.int32}


class NotPlannable(Exception):
    """The graph has something a plan does not express (the interpreter runs it instead)."""


@dataclass(frozen=True)
class Loc:
    """Where a value's elements are: block `buf` (a buffer id), `off` elements into it, read with
    `strides` (in elements) over `shape`."""

    buf: int
    off: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str

    def meta(self) -> torch.Tensor:
        return torch.empty_strided(self.shape, self.strides, dtype=_DT[self.dtype], device="meta")


def _contig(shape) -> tuple[int, ...]:
    return tuple(torch.empty(shape, device="meta").stride())


@dataclass
class _Buf:
    size: int  # elements
    kind: str  # "arena", "out" or "slot" (an input, a constant or a Python result)
    first: int = 0  # the instruction that writes it
    last: int = -1  # the last instruction reading it (through any view)
    slot: int = -1
    off: int = 0


@dataclass
class _Instr:
    kind: str  # "ew", "mm", "red" (C) or "py"
    args: tuple
    reads: tuple[Loc, ...]
    writes: tuple[int, ...]  # buffer ids


@dataclass
class Plan:
    """A compiled graph: `run(inputs, threads)` -> outputs by name."""

    g: Graph
    code: np.ndarray  # int64 instruction words of every C run
    segments: list  # ("c", first word, count, kinds) or ("py", node, input locs, out slot)
    slots: np.ndarray  # int64 base addresses, by slot
    slot_tensors: list  # the tensor behind each slot (arena, out, inputs, constants, results)
    in_slots: list[int]
    out_size: int
    outputs: list[tuple[str, Loc]]
    bufs: list[_Buf]
    arena_views: dict  # Loc -> a tensor view of the arena (Python operators' arena inputs)
    step_slots: tuple[int, ...] = ()  # inputs' and Python results' slots: let go after a run
    in_dtypes: tuple[torch.dtype, ...] = ()
    # per output: (name, loc, f32, (shape, strides, offset) in the output buffer, or ())
    out_views: tuple = ()
    lock: threading.Lock = field(default_factory=threading.Lock)

    def _addr(self, loc: Loc) -> tuple[int, int]:
        b = self.bufs[loc.buf]
        return b.slot, b.off + loc.off

    def tensor(self, loc: Loc) -> torch.Tensor:
        """The value at `loc` as a tensor (a view of its slot's tensor)."""
        slot, off = self._addr(loc)
        base = self.slot_tensors[slot]
        if slot > OUT and off == 0 and tuple(base.shape) == loc.shape and (
                tuple(base.stride()) == loc.strides):  # fmt: skip
            return base
        base = base.view(_DT[loc.dtype]) if base.dtype != _DT[loc.dtype] else base
        return base.as_strided(loc.shape, loc.strides, base.storage_offset() + off)

    def run(self, inputs: list[torch.Tensor], threads: int) -> dict[str, torch.Tensor]:
        with self.lock:  # the arena is one: a second caller waits
            lib = native.lib()
            st, slots = self.slot_tensors, self.slots
            for s, t, want in zip(self.in_slots, inputs, self.in_dtypes, strict=True):
                if t.dtype != want or not t.is_contiguous() or t.device.type != "cpu":
                    t = t.to("cpu", want).contiguous()  # the kernels read 4-byte words in order
                st[s] = t
                slots[s] = t.data_ptr()
            out = torch.empty(max(1, self.out_size), dtype=torch.int32)
            st[OUT] = out
            slots[OUT] = out.data_ptr()
            code, sp = self.code.ctypes.data, slots.ctypes.data
            for seg in self.segments:
                if seg[0] == "c":
                    bad = lib.vtp_plan_run(code + 8 * seg[1], seg[2], sp, threads)
                    if bad:
                        op = _OP_OF.get(seg[3][bad - 1], seg[3][bad - 1])
                        raise IndexError(f"{op}: an index is outside its axis")
                    continue
                _, n, locs, slot = seg
                views = self.arena_views
                args = [views[loc] if loc in views else self.tensor(loc) for loc in locs]
                res = run_node(n, args, True, "cpu", threads).contiguous()
                if tuple(res.shape) != n.shape or res.dtype != _DT[n.dtype]:
                    raise RuntimeError(f"{n.op} gave {tuple(res.shape)} {res.dtype}")
                p = res.untyped_storage().data_ptr()
                if p in (self.slots[ARENA], self.slots[OUT]):  # a view of a reused block: own it
                    res = res.clone()
                st[slot] = res
                slots[slot] = res.data_ptr()
            as_f32 = out.view(torch.float32)
            outs = {
                name: (as_f32 if f32 else out).as_strided(*where) if where else self.tensor(loc)
                for name, loc, f32, where in self.out_views
            }  # fmt: skip
            for s in self.step_slots:  # the caller's inputs and this run's results: let go
                st[s] = None
            return outs


def _view(loc: Loc, n: Node) -> Loc | None:
    """`n` (permute, expand, slice, reshape) of the value at `loc` without a copy, or None."""
    m = loc.meta()
    if n.op == "permute":
        v = m.permute(*n.attrs)
    elif n.op == "expand":
        v = m.expand(n.shape)
    elif n.op == "slice":
        v = t_slice(m, n)
    elif n.op == "reshape":
        try:
            v = m.view(n.shape)
        except RuntimeError:  # the strides do not allow it: a copy first
            return None
    else:
        raise AssertionError(n.op)
    return Loc(loc.buf, loc.off + v.storage_offset(), tuple(v.shape), tuple(v.stride()), loc.dtype)


class _Builder:
    def __init__(self, g: Graph):
        self.g = g
        self.bufs: list[_Buf] = []
        self.instrs: list[_Instr] = []
        self.loc: dict[int, Loc] = {}
        self.slot_count = OUT + 1
        self.consts: dict[int, torch.Tensor] = {}  # slot -> tensor

    def new_buf(self, size: int, kind: str) -> int:
        b = _Buf(max(1, size), kind, first=len(self.instrs))
        if kind == "slot":
            b.slot = self.slot_count
            self.slot_count += 1
        self.bufs.append(b)
        return len(self.bufs) - 1

    def fresh(self, shape, dtype: str, kind: str = "arena") -> Loc:
        return Loc(self.new_buf(prod(shape), kind), 0, tuple(shape), _contig(shape), dtype)

    def emit(self, kind: str, args: tuple, reads, writes) -> None:
        self.instrs.append(_Instr(kind, args, tuple(reads), tuple(writes)))

    def ew(self, prog: fuse.Program, ins: list[Loc], outs: list[Loc]) -> None:
        n = prod(prog.shape)
        layouts = tuple(fuse.layout(loc.meta(), prog.shape, n) for loc in ins)
        hdr = prog.header(layouts, n)
        if hdr[1] > MAX_DIMS:
            raise NotPlannable(f"an elementwise program over {hdr[1]} axes")
        self.emit("ew", (hdr,), ins + outs, [o.buf for o in outs])

    def copy(self, loc: Loc) -> Loc:
        """A contiguous copy of the value at `loc` (a one-load, one-store program)."""
        out = self.fresh(loc.shape, loc.dtype)
        code = np.array([[fastops.EW_LOAD, 0, 0, -1, -1], [fastops.EW_STORE, 0, 0, -1, -1]],
                        dtype=np.int64)  # fmt: skip
        prog = fuse.Program(loc.shape, (), (-1,), (-2,), (_DT[loc.dtype],), code, 1)
        self.ew(prog, [loc], [out])
        return out

    def contiguous_view(self, loc: Loc, shape) -> Loc:
        v = _view(loc, Node("reshape", (), (), tuple(shape), loc.dtype))
        return v if v is not None else _view(self.copy(loc), Node("reshape", (), (), tuple(shape),
                                                                    loc.dtype))  # fmt: skip

    def node(self, i: int) -> None:
        g, n = self.g, self.g.nodes[i]
        vid = len(g.inputs) + i
        ins = [self.loc[v] for v in n.inputs]
        if n.op == "const":
            t = t_const(n, "cpu")
            self.loc[vid] = loc = self.fresh(n.shape, n.dtype, "slot")
            self.consts[self.bufs[loc.buf].slot] = t
            return
        if n.op in ("permute", "expand", "slice", "reshape"):
            v = _view(ins[0], n)
            self.loc[vid] = v if v is not None else _view(self.copy(ins[0]), n)
            return
        if n.op == "transpose":  # a version-1 step's: a view, like permute
            self.loc[vid] = _view(ins[0], Node("permute", (), (1, 0), n.shape, n.dtype))
            return
        if n.op in ("matmul", "matmul_nt"):  # matmul_nt(A, B) is matmul(A, B^T), the same sums
            b = ins[1] if n.op == "matmul" else _view(ins[1], Node("permute", (), (1, 0), (), ""))
            self.loc[vid] = self.matmul(ins[0], b, n)
            return
        if n.op in _RED:
            x = ins[0]
            N = x.shape[-1]
            flat = self.contiguous_view(x, (prod(x.shape) // N, N))
            out = self.fresh(n.shape, n.dtype)
            kind = _RED[n.op][x.dtype != "f32"]
            self.emit("red", (kind, flat, out, flat.shape[0], N), [flat], [out.buf])
            self.loc[vid] = out
            return
        move = _MOVES.get(n.op)
        if move is not None and (out := move(self, n, ins)) is not None:
            self.loc[vid] = out
            return
        out = self.fresh(n.shape, n.dtype, "slot")
        self.emit("py", (n,), ins, [out.buf])
        self.loc[vid] = out

    # -- data movement in C (None: the operator's own kernel runs, and raises what it raises) --

    def _cat(self, n: Node, ins: list[Loc]) -> Loc | None:
        (dim,) = n.attrs
        if len(n.shape) > MAX_DIMS:
            return None
        out = self.fresh(n.shape, n.dtype)
        start = 0
        for x in ins:
            part = _view(out, Node("slice", (), (dim, start, 1), x.shape, n.dtype))
            self.emit("copy", (part, x), [x], [out.buf])
            start += x.shape[dim]
        return out

    def _gather(self, n: Node, ins: list[Loc]) -> Loc | None:
        x, idx = ins
        (dim,) = n.attrs
        if len(x.shape) != len(idx.shape) or len(x.shape) > MAX_DIMS or not x.shape or any(
            i > s for d, (i, s) in enumerate(zip(idx.shape, x.shape, strict=True)) if d != dim
        ):  # fmt: skip
            return None
        out = self.fresh(n.shape, n.dtype)
        self.emit("gather", (dim, x, idx, out), [x, idx], [out.buf])
        return out

    def _scatter_value(self, n: Node, ins: list[Loc]) -> Loc | None:
        x, idx = ins
        dim, word = n.attrs
        if len(x.shape) != len(idx.shape) or len(x.shape) > MAX_DIMS or not x.shape or any(
            i > s for d, (i, s) in enumerate(zip(idx.shape, x.shape, strict=True)) if d != dim
        ):  # fmt: skip
            return None
        out = self.copy(x)
        self.emit("scatter", (dim, word & 0xFFFFFFFF, idx, out), [idx, out], [out.buf])
        return out

    def _index_rows(self, n: Node, ins: list[Loc]) -> Loc | None:
        w, idx = ins
        if not w.shape:
            return None
        w = self.contiguous_view(w, w.shape)
        idx = self.contiguous_view(idx, idx.shape)
        out = self.fresh(n.shape, n.dtype)
        rows, D = w.shape[0], prod(w.shape[1:])
        self.emit("rows", (out, w, idx, prod(idx.shape), D, rows), [w, idx], [out.buf])
        return out

    def _index_add_rows(self, n: Node, ins: list[Loc]) -> Loc | None:
        dest, idx, src = ins
        if not dest.shape or dest.dtype != "f32" or src.dtype != "f32":
            return None
        idx = self.contiguous_view(idx, idx.shape)
        src = self.contiguous_view(src, src.shape)
        out = self.copy(dest)
        rows, D = dest.shape[0], prod(dest.shape[1:])
        self.emit("rows_add", (out, idx, src, prod(idx.shape), D, rows), [idx, src, out],
                  [out.buf])  # fmt: skip
        return out

    def _uniform(self, n: Node, ins: list[Loc]) -> Loc | None:
        (step,) = ins
        if prod(n.shape) > 1 << 32:  # the counter's e is one 32-bit word
            return None
        step = self.contiguous_view(step, (3,))
        out = self.fresh(n.shape, "f32")
        self.emit("uniform", (out, step, prod(n.shape), n.attrs[0]), [step], [out.buf])
        return out

    def matmul(self, a: Loc, b: Loc, n: Node) -> Loc:
        """fastops.matmul_strided's operands as (up to) two batch axes and strides."""
        lead = a.shape[:-2]
        if len(a.shape) > 4:
            a = self.contiguous_view(a, (-1, *a.shape[-3:]))
            b = self.contiguous_view(b, (-1, *b.shape[-3:]))
        while len(a.shape) < 4:
            a = _view(a, Node("reshape", (), (), (1, *a.shape), "f32"))
            b = _view(b, Node("reshape", (), (), (1, *b.shape), "f32"))
        nb0, nb1, M, K = a.shape
        N = b.shape[-1]
        out = self.fresh((*lead, M, N), "f32")
        self.emit("mm", (a, b, out, nb0, nb1, M, N, K), [a, b], [out.buf])
        return out


# The operators a plan moves in C; the rest run their own kernel between C runs.
_MOVES = {
    "cat": _Builder._cat,
    "gather": _Builder._gather,
    "scatter_value": _Builder._scatter_value,
    "index_rows": _Builder._index_rows,
    "index_add_rows": _Builder._index_add_rows,
    "uniform": _Builder._uniform,
}


def _words(ins: _Instr, addr) -> list[int]:
    """kernels.c's words of one C instruction (vtp_plan_run describes them)."""
    k, a = ins.kind, ins.args
    if k == "ew":
        (hdr,) = a
        ptrs = [w for loc in ins.reads for w in addr(loc)]
        body = [len(ins.reads), *ptrs, *hdr.tolist()]
        op = PL_EW
    elif k == "mm":
        x, y, c, nb0, nb1, M, N, K = a
        sa, sb = x.strides, y.strides
        body = [*addr(x), nb0, nb1, sa[0], sa[1], sa[2], sa[3], *addr(y), sb[0], sb[1], sb[3],
                sb[2], *addr(c), M, N, K]  # fmt: skip
        op = PL_MM
    elif k == "red":
        kind, x, out, M, N = a
        body = [kind, *addr(x), x.strides[0], x.strides[1], *addr(out), M, N]
        op = PL_RED
    elif k == "copy":
        dst, src = a
        body = [len(dst.shape), *addr(dst), *addr(src), *dst.shape, *dst.strides, *src.strides]
        op = PL_COPY
    elif k == "gather":
        dim, x, idx, out = a
        body = [len(idx.shape), dim, x.shape[dim], *addr(out), *addr(x), *addr(idx), *idx.shape,
                *x.strides, *idx.strides]  # fmt: skip
        op = PL_GATHER
    elif k == "scatter":
        dim, word, idx, out = a
        body = [len(idx.shape), dim, word, out.shape[dim], *addr(out), *addr(idx), *idx.shape,
                *out.strides, *idx.strides]  # fmt: skip
        op = PL_SCATTER
    elif k == "rows":
        out, w, idx, count, D, rows = a
        body = [*addr(out), *addr(w), *addr(idx), count, D, rows]
        op = PL_ROWS
    elif k == "uniform":
        out, step, count, site = a
        body = [*addr(out), *addr(step), count, site]
        op = PL_UNIFORM
    else:
        assert k == "rows_add", k
        out, idx, src, count, D, rows = a
        body = [*addr(out), *addr(idx), *addr(src), count, D, rows]
        op = PL_ROWS_ADD
    return [op, 2 + len(body), *body]


def _allocate(bufs: list[_Buf]) -> tuple[int, int]:
    """Offsets for the arena's and the output buffer's blocks: (arena size, output size). Arena
    blocks are live from their writer to their last reader; first fit over the free gaps."""
    out_size = 0
    for b in bufs:
        if b.kind == "out":
            b.slot, b.off = OUT, out_size
            out_size += -(-b.size // ALIGN) * ALIGN
    arena = [b for b in bufs if b.kind == "arena"]
    events: dict[int, list[_Buf]] = {}
    for b in arena:
        events.setdefault(max(b.last, b.first), []).append(b)
    free: list[tuple[int, int]] = []  # (offset, size), sorted
    top = 0
    starts: dict[int, list[_Buf]] = {}
    for b in arena:
        starts.setdefault(b.first, []).append(b)
    for k in range(max(starts, default=-1) + 1):
        for b in starts.get(k, ()):
            need = -(-b.size // ALIGN) * ALIGN
            for j, (o, s) in enumerate(free):
                if s >= need:
                    b.off = o
                    free[j] = (o + need, s - need)
                    if s == need:
                        del free[j]
                    break
            else:
                if free and free[-1][0] + free[-1][1] == top:  # grow the last gap
                    o, s = free.pop()
                    b.off, top = o, o + need
                else:
                    b.off, top = top, top + need
            b.slot = ARENA
        for b in events.get(k, ()):
            free.append((b.off, -(-b.size // ALIGN) * ALIGN))
            free.sort()
            merged: list[tuple[int, int]] = []
            for o, s in free:
                if merged and merged[-1][0] + merged[-1][1] == o:
                    merged[-1] = (merged[-1][0], merged[-1][1] + s)
                else:
                    merged.append((o, s))
            free = merged
    return top, out_size


def _f32_bits(x: float) -> int:
    return int(np.array(x, dtype=np.float32).view(np.uint32))


def general_form(g: Graph) -> Graph:
    """`g` with each version-1 element-wise, gather and loss node spelled in general operators
    the plan compiles (fused programs, gathers, views), so a version-1 step runs in C like a
    version-3 one. The same IEEE operations on the same input words in the same order as the
    version-1 kernels (agents/training/ops.py), so the outputs are theirs bit for bit; the
    nodes in between are the plan's own (never a trace: the interpreter runs traces)."""
    if not any(n.op in _GENERAL for n in g.nodes):
        return g
    base = len(g.inputs)
    nodes: list[Node] = []
    new = list(range(base))  # old value id -> new value id

    def add(op: str, ins: tuple[int, ...], shape, dtype: str = "f32", attrs=()) -> int:
        nodes.append(Node(op, tuple(ins), tuple(attrs), tuple(shape), dtype))
        return base + len(nodes) - 1

    def const(word: int) -> int:  # an f32 scalar by its bits: the programs broadcast it
        return add("const", (), (), "f32", (word & 0xFFFFFFFF,))

    for n in g.nodes:
        a = [new[v] for v in n.inputs]
        spell = _GENERAL.get(n.op)
        if spell is None:
            new.append(add(n.op, a, n.shape, n.dtype, n.attrs))
            continue
        new.append(spell(n, a, add, const, [_shape(g, v) for v in n.inputs]))
    return Graph(g.inputs, tuple(nodes), tuple((k, new[v]) for k, v in g.outputs))


def _shape(g: Graph, vid: int) -> tuple[int, ...]:
    return tuple(g.value(vid)[0])


def _col(a: int, s, add) -> int:
    """A (1, M) row read as an (M, 1) column (a view)."""
    return add("reshape", (a,), (s[1], 1))


def _xent_grad(n, a, add, const, s) -> int:
    # a label outside the classes gives no 1 here: version-1 operators are in version-1 steps
    # only (registry.check_node), where nll gathers at the same labels first and stops the step
    # with an index error (test_plan's label test)
    B, C = s[0]
    y = add("reshape", (a[1],), (B, 1), "i32")
    classes = add("const", (), (1, C), "i32", tuple(range(C)))
    hot = add("cast_f32", (add("eq", (y, classes), (B, C), "i32"),), (B, C))
    return add("div", (add("sub", (a[0], hot), (B, C)), const(_f32_bits(B))), (B, C))


def _nll(n, a, add, const, s) -> int:
    B = s[1][0]
    y = add("reshape", (a[2],), (B, 1), "i32")
    picked = add("reshape", (add("gather", (a[1], y), (B, 1), "f32", (1,)),), (1, B))
    return add("sub", (a[0], picked), (1, B))


def _relu_bwd(n, a, add, const, s) -> int:
    g, x = a
    pos = add("gt", (x, const(0)), n.shape, "i32")
    return add("where", (pos, g, add("relu", (x,), n.shape)), n.shape)


# version-1 operator -> its general spelling (ops.py's kernel, operation for operation)
_GENERAL = {
    "add_row": lambda n, a, add, c, s: add("add", (a[0], a[1]), n.shape),
    "sub_col": lambda n, a, add, c, s: add("sub", (a[0], _col(a[1], s[1], add)), n.shape),
    "div_col": lambda n, a, add, c, s: add("div", (a[0], _col(a[1], s[1], add)), n.shape),
    "relu_bwd": _relu_bwd,
    "momentum": lambda n, a, add, c, s: add(
        "add", (add("mul", (c(n.attrs[0]), a[0]), n.shape), a[1]), n.shape
    ),
    "sgd": lambda n, a, add, c, s: add(
        "sub", (a[0], add("mul", (c(n.attrs[0]), a[1]), n.shape)), n.shape
    ),
    "mean": lambda n, a, add, c, s: add(
        "div",
        (add("reshape", (add("sum_last", (a[0],), (1,)),), (1, 1)), c(_f32_bits(s[0][1]))),
        (1, 1),
    ),
    "gather_rows": lambda n, a, add, c, s: add(
        "index_rows", (a[0], add("reshape", (a[1],), (s[1][1],), "i32")), n.shape
    ),
    "gather_labels": lambda n, a, add, c, s: add("gather", (a[0], a[1]), n.shape, "i32", (1,)),
    "nll": _nll,
    "xent_grad": _xent_grad,
}


def build(g: Graph) -> Plan:
    """Compile `g` (raises NotPlannable for what a plan does not express)."""
    if any(0 in v.shape for v in g.inputs) or any(0 in n.shape for n in g.nodes):
        raise NotPlannable("a value with no elements")
    g = general_form(g)
    bld = _Builder(g)
    in_slots = []
    for vid, v in enumerate(g.inputs):
        bld.loc[vid] = loc = bld.fresh(v.shape, v.dtype, "slot")
        in_slots.append(bld.bufs[loc.buf].slot)
    for kind, x in fuse.schedule(g, False):
        if kind == "node":
            bld.node(x)
            continue
        ins = [bld.loc[v] for v in x.inputs]
        outs = [bld.fresh(x.shape, "f32" if dt == torch.float32 else "i32") for dt in x.out_dtypes]
        bld.ew(x, ins, outs)
        for v, loc in zip(x.outputs, outs, strict=True):
            bld.loc[v] = loc
    bufs = bld.bufs
    for k, ins in enumerate(bld.instrs):
        for loc in ins.reads:
            bufs[loc.buf].last = max(bufs[loc.buf].last, k)
    outputs = [(name, bld.loc[vid]) for name, vid in g.outputs]
    for _, loc in outputs:  # a returned value lives in the step's output buffer, not the arena
        b = bufs[loc.buf]
        if b.kind == "arena":
            b.kind = "out"
        b.last = len(bld.instrs)
    arena_size, out_size = _allocate(bufs)
    addr = lambda loc: (bufs[loc.buf].slot, bufs[loc.buf].off + loc.off)  # noqa: E731
    words: list[int] = []
    segments: list = []
    for ins in bld.instrs:
        if ins.kind == "py":
            (n,) = ins.args
            segments.append(("py", n, list(ins.reads), bufs[ins.writes[0]].slot))
            continue
        if not segments or segments[-1][0] != "c":
            segments.append(("c", len(words), 0, []))  # (kind, first word, count, their kinds)
        segments[-1] = ("c", segments[-1][1], segments[-1][2] + 1, segments[-1][3])
        segments[-1][3].append(ins.kind)
        words += _words(ins, addr)
    arena = torch.empty(max(1, arena_size), dtype=torch.int32)
    slot_tensors: list = [None] * bld.slot_count
    slot_tensors[ARENA] = arena
    slots = np.zeros(bld.slot_count, dtype=np.int64)
    slots[ARENA] = arena.data_ptr()
    for s, t in bld.consts.items():
        slot_tensors[s] = t
        slots[s] = t.data_ptr()
    step_slots = tuple(s for s in range(OUT + 1, bld.slot_count) if s not in bld.consts)
    plan = Plan(g, np.array(words, dtype=np.int64), segments, slots, slot_tensors, in_slots,
                out_size, outputs, bufs, {}, step_slots,
                tuple(_DT[v.dtype] for v in g.inputs))  # fmt: skip
    plan.out_views = tuple(
        (name, loc, loc.dtype == "f32",
         (loc.shape, loc.strides, bufs[loc.buf].off + loc.off) if bufs[loc.buf].slot == OUT else ())
        for name, loc in outputs
    )  # fmt: skip
    for seg in segments:  # the Python operators' arena inputs: views made once
        if seg[0] == "py":
            for loc in seg[2]:
                if bufs[loc.buf].kind == "arena":
                    plan.arena_views[loc] = plan.tensor(loc)
    return plan
