"""The front end: a PyTorch module's whole training step, lowered to a protocol graph.

`build_bundle` traces one step — forward, cross-entropy, backward, optional global-norm clip,
optimizer update, written functionally — with `torch.func` + `make_fx` under
`core_aten_decompositions()` (attention in its math form), then rewrites every ATen node with
the registry's operators (`_RULES`: one function per ATen op). Python-double constants become
binary32 bits; hyper-parameters are graph inputs, so the graph does not change with them.
Whatever has no rule is refused with one line naming the ATen op and the layer that used it.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import logging
import operator
from collections.abc import Callable
from dataclasses import dataclass, replace
from math import prod

import numpy as np
import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode

from agents.model.bundle import STEP_INPUT, Bundle
from agents.training import float32 as F
from agents.training.ir import Graph, Value
from agents.training.registry import GraphError, Node, Shape, check_node

aten = torch.ops.aten

SUPPORTED_LAYERS = (
    "Linear", "Conv2d", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "Flatten", "ReLU",
    "GELU", "SiLU", "Sigmoid", "Tanh", "LayerNorm", "RMSNorm", "BatchNorm1d", "BatchNorm2d",
    "Embedding", "Dropout", "Identity", "Sequential", "ModuleList", "ModuleDict",
    "causal self-attention (masked softmax or scaled_dot_product_attention, grouped-query)",
    "rotary embeddings",
)  # fmt: skip


class LoweringError(ValueError):
    """The module cannot be lowered: one line for the user."""


OPTIMIZERS = ("sgd", "nesterov", "adam", "adamw")


@dataclass(frozen=True)
class Optimizer:
    """Optimizer and its hyper-parameters (decimal here; binary32 once in the spec).

    `sgd`: momentum SGD; `nesterov`: SGD with Nesterov momentum; `adam`: Adam with L2 weight
    decay (added to the gradient); `adamw`: decoupled weight decay. `no_decay_1d`: parameter
    groups as nanoGPT and LLaMA make them: no weight decay on parameters of fewer than 2
    dimensions (biases, norm gains)."""

    kind: str
    lr: float
    momentum: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    clip_norm: float | None = None
    no_decay_1d: bool = False

    def hyper(self) -> dict[str, float]:
        """Hyper-parameter name -> value, in step-graph input order."""
        if self.kind in ("sgd", "nesterov"):
            h = {"lr": self.lr, "momentum": self.momentum}
        elif self.kind in ("adam", "adamw"):
            h = {"lr": self.lr, "beta1": self.betas[0], "beta2": self.betas[1], "eps": self.eps,
                 "weight_decay": self.weight_decay}  # fmt: skip
        else:
            raise LoweringError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, "
                                f"got {self.kind!r}")  # fmt: skip
        if self.clip_norm is not None:
            h["clip_norm"] = self.clip_norm
        return h

    @property
    def momentum_only(self) -> bool:
        return self.kind in ("sgd", "nesterov")


@dataclass(frozen=True)
class Recipe:
    """How a step trains beyond its optimizer: micro-batches whose gradients are summed (in
    order) before one update, a learning-rate multiplier per step (the step's lr is
    fl(hp.lr x schedule[min(t, len - 1)])), and the cross-entropy's options."""

    accumulate: int = 1
    schedule: tuple[float, ...] | None = None
    ignore_index: int = -100
    label_smoothing: float = 0.0


# -- the functional training step ------------------------------------------------------------


def _opt_state_names(kind: str, pnames: list[str]) -> list[str]:
    if kind in ("sgd", "nesterov"):
        return [f"m.{n}" for n in pnames]
    return [f"m.{n}" for n in pnames] + [f"v.{n}" for n in pnames] + ["adam.b1t", "adam.b2t"]


def initial_opt_state(kind: str, params: list[torch.Tensor]) -> list[torch.Tensor]:
    zeros = [_zeros(p.shape) for p in params]
    if kind in ("sgd", "nesterov"):
        return zeros
    ones = [torch.ones((), dtype=torch.float32), torch.ones((), dtype=torch.float32)]
    return zeros + [_zeros(p.shape) for p in params] + ones


def _zeros(shape) -> torch.Tensor:
    """float32 zeros from calloc (numpy's): the system's zero pages until written, so a large
    model's moments cost neither the time to fill them nor resident memory while `job build`
    only reads them (its root, its blob). torch.zeros fills every page."""
    return torch.from_numpy(np.zeros(tuple(shape), dtype=np.float32))


def cross_entropy(logits: torch.Tensor, y: torch.Tensor, recipe: Recipe = Recipe()) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=recipe.ignore_index,
        label_smoothing=recipe.label_smoothing)  # fmt: skip


def module_logits(module: nn.Module, state: dict, x: torch.Tensor) -> torch.Tensor:
    """The module's logits on x with its parameters and buffers taken from `state` (a Hugging
    Face model's output object gives its `.logits`)."""
    from torch.func import functional_call

    out = functional_call(module, state, (x,))
    return out if isinstance(out, torch.Tensor) else out.logits


def make_step(module: nn.Module, pnames: list[str], opt: Optimizer,
              buffers: tuple[tuple[str, torch.dtype], ...] = (),
              recipe: Recipe = Recipe()) -> Callable:  # fmt: skip
    """step(params, state, hyper, x, y, step) -> (params', state', loss), all functional; state
    is the buffers the step updates (float32; BatchNorm's running statistics) then the
    optimizer's, `step` the (3,) i32 step input (random draws, the lr schedule).

    SGD: m' = mu*m + g; p' = p - lr*m'. Nesterov: the same m', p' = p - lr*(g + mu*m'). Adam /
    AdamW (bias correction carried as beta^t state so no pow): g' = g + wd*p (Adam only),
    b1t' = b1t*b1, b2t' = b2t*b2, m' = b1*m + (1-b1)*g', v' = b2*v + (1-b2)*g'*g',
    p' = p*(1 - lr*wd) (AdamW only) - (lr/(1-b1t')) * m' / (sqrt(v')/sqrt(1-b2t') + eps); with
    `no_decay_1d` the parameters of fewer than 2 dimensions skip the decay. Clipping scales every
    gradient by min(1, clip/(norm + 1e-6)), norm = sqrt of the sum, parameter by parameter in
    order, of each gradient's sum of squares. With `recipe.accumulate` = N, x and y are cut into
    N micro-batches along the batch axis; each one's loss is its mean cross-entropy / N, and the
    gradients are summed in micro-batch order (g_1 + g_2 + ...), as loss.backward() accumulates.
    """
    from torch.func import grad_and_value

    n, nb = len(pnames), len(buffers)
    N = recipe.accumulate

    def loss_fn(ps, x, y):
        logits = module_logits(module, dict(zip(pnames, ps, strict=True)), x)
        loss = cross_entropy(logits, y, recipe)
        return loss / N if N > 1 else loss

    def loss_with_buffers(ps, bufs, x, y):
        # fresh tensors of this level: the forward writes them in place (running statistics)
        live = [b.clone().to(dt) for b, (_, dt) in zip(bufs, buffers, strict=True)]
        named = dict(zip(pnames, ps, strict=True)) | dict(zip([b for b, _ in buffers], live,
                                                              strict=True))  # fmt: skip
        loss = cross_entropy(module_logits(module, named, x), y, recipe)
        return (loss / N if N > 1 else loss), [t.to(torch.float32) for t in live]

    def gradients(params, bufs, x, y):
        if not nb:
            grads, loss = grad_and_value(loss_fn)(list(params), x, y)
            return grads, loss, bufs
        grads, (loss, bufs) = grad_and_value(loss_with_buffers, has_aux=True)(
            list(params), bufs, x, y)  # fmt: skip
        return grads, loss, bufs

    def step(params, state, hyper, x, y, *step_in):
        bufs, state = list(state[:nb]), state[nb:]
        if N == 1:
            grads, loss, bufs = gradients(params, bufs, x, y)
        else:
            mb = x.shape[0] // N
            grads = loss = None
            for k in range(N):
                g, lk, bufs = gradients(params, bufs, x[k * mb : (k + 1) * mb],
                                        y[k * mb : (k + 1) * mb])  # fmt: skip
                grads = g if grads is None else [a + b for a, b in zip(grads, g, strict=True)]
                loss = lk if loss is None else loss + lk
        h = dict(zip(opt.hyper(), hyper, strict=True))
        lr = h["lr"]
        if recipe.schedule is not None:
            table = torch.tensor(recipe.schedule, dtype=torch.float32)
            t = torch.clamp(step_in[0][2:3], max=len(recipe.schedule) - 1).long()
            lr = lr * torch.gather(table, 0, t).reshape(())
        if opt.clip_norm is not None:
            total = (grads[0] * grads[0]).sum()
            for g in grads[1:]:
                total = total + (g * g).sum()
            scale = torch.clamp(h["clip_norm"] / (torch.sqrt(total) + 1e-6), max=1.0)
            grads = [g * scale for g in grads]
        decays = [not (opt.no_decay_1d and p.dim() < 2) for p in params]
        if opt.momentum_only:
            ms = [h["momentum"] * m + g for m, g in zip(state, grads, strict=True)]
            if opt.kind == "nesterov":
                d = [g + h["momentum"] * m for g, m in zip(grads, ms, strict=True)]
            else:
                d = ms
            ps = [p - lr * m for p, m in zip(params, d, strict=True)]
            return ps, bufs + ms, loss
        if opt.kind == "adam":
            grads = [g + h["weight_decay"] * p if dec else g
                     for g, p, dec in zip(grads, params, decays, strict=True)]  # fmt: skip
        b1, b2 = h["beta1"], h["beta2"]
        b1t, b2t = state[2 * n] * b1, state[2 * n + 1] * b2
        ms = [b1 * m + (1 - b1) * g for m, g in zip(state[:n], grads, strict=True)]
        vs = [b2 * v + (1 - b2) * (g * g) for v, g in zip(state[n : 2 * n], grads, strict=True)]
        step_size = lr / (1 - b1t)
        c2 = torch.sqrt(1 - b2t)
        decay = 1 - lr * h["weight_decay"] if opt.kind == "adamw" else None
        ps = [(p * decay if decay is not None and dec else p)
              - step_size * (m / (torch.sqrt(v) / c2 + h["eps"]))
              for p, m, v, dec in zip(params, ms, vs, decays, strict=True)]  # fmt: skip
        return ps, bufs + ms + vs + [b1t, b2t], loss

    return step


@functools.cache
def _decompositions() -> dict:
    """core_aten_decompositions(), built once (~0.1 s a call; every trace reads the same)."""
    from torch._decomp import core_aten_decompositions

    return dict(core_aten_decompositions())


@contextlib.contextmanager
def _quiet_fake_tensors():
    """Fake tensors log a stack trace of the user's failing op before raising it: the raised
    error is what the user is told, in one line; the log is muted for the call."""
    log = logging.getLogger("torch._subclasses.fake_tensor")
    was, log.disabled = log.disabled, True
    try:
        yield
    finally:
        log.disabled = was


_MODULE_TAG = "stage_unit"  # the key of a traced node's module in node.meta["custom"]


@contextlib.contextmanager
def module_tags(module: nn.Module, units: list[str]):
    """While tracing under it, every fx node made in the forward of one of `units` (module
    names) carries that name in node.meta["custom"], and so does every node made by the backward
    of an autograd node that forward made, and the sum of the gradients it hands on (the engine
    adds a tensor's gradients as they arrive, in the module that consumed the tensor): a
    pipeline's plan puts nodes on stages by it. A forward's autograd nodes are those its output
    reaches back to with a sequence number from its own call on; a hook before each one's
    backward sets the tag, before an autograd node of no unit's clears it, and so does the end
    of the backward. (make_fx's record_module_stack only follows a torch.compile'd module's
    calls, and its backward nodes carry no module.)"""
    from torch.fx import traceback as fx_traceback

    queued = [False]

    def set_tag(name: str | None) -> None:
        meta = fx_traceback.get_current_meta()
        if name is None:
            meta.pop("custom", None)
        else:
            meta["custom"] = {_MODULE_TAG: name}

    def end_of_backward() -> None:
        queued[0] = False
        set_tag(None)

    def in_backward(name: str | None) -> None:
        if not queued[0]:
            torch.autograd.Variable._execution_engine.queue_callback(end_of_backward)
            queued[0] = True
        set_tag(name)

    hooked: set = set()

    def tag_backward(out, name: str, first: int) -> None:
        todo = [t.grad_fn for t in torch.utils._pytree.tree_leaves(out)
                if isinstance(t, torch.Tensor) and t.grad_fn is not None]  # fmt: skip
        while todo:
            fn = todo.pop()
            if fn is None or fn in hooked:
                continue
            hooked.add(fn)
            # made before this forward began and by no earlier unit's: the model's own code
            mine = name if fn._sequence_nr() >= first else None
            fn.register_prehook(lambda grads, mine=mine: in_backward(mine))
            todo.extend(f for f, _ in fn.next_functions)

    subs = dict(module.named_modules())
    first: dict[str, int] = {}
    hooks = []
    for name in units:
        if name not in subs:  # a parameter held directly by the root or a container
            continue

        def before(mod, args, name=name):
            first[name] = torch.autograd._get_sequence_nr()
            set_tag(name)

        def after(mod, args, out, name=name):
            set_tag(None)
            tag_backward(out, name, first[name])

        hooks += [subs[name].register_forward_pre_hook(before),
                  subs[name].register_forward_hook(after)]  # fmt: skip
    try:
        with fx_traceback.preserve_node_meta():
            yield
    finally:
        for h in hooks:
            h.remove()


def _trace(fn: Callable, args: tuple) -> torch.fx.GraphModule:
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH), _quiet_fake_tensors():
        return make_fx(fn, decomposition_table=_decompositions(), tracing_mode="fake",
                       _allow_non_fake_inputs=True)(*args)  # fmt: skip


# -- the builder -----------------------------------------------------------------------------


def dtype_code(dt: torch.dtype, what: str) -> str:
    if dt == torch.float32:
        return "f32"
    if dt in (torch.int64, torch.int32, torch.bool, torch.uint8, torch.int16, torch.int8):
        return "i32"
    raise LoweringError(f"{what} has dtype {dt}: only float32 modules (and integer indices) "
                        "are supported; call .float() on the module")  # fmt: skip


def f32_word(v: float) -> int:
    return F.bits(np.float32(v))


class Vid(int):
    """A value id: an int, but never mistaken for a Python number argument."""


@dataclass(frozen=True)
class Empty:
    """An uninitialised tensor (`aten.empty*`, `new_empty`): only its shape and dtype are known
    until a write (`copy_`, `fill_`) gives it values, or a random draw (`bernoulli`) reads its
    shape. Read as a value anywhere else, it is zeros (any contents are a valid realisation)."""

    shape: Shape
    dtype: str


@dataclass(frozen=True)
class Writes:
    """A rule's result when the ATen op also writes some of its arguments in place (its `self`,
    or BatchNorm's running statistics): argument position -> the value written. The loop binds
    each written argument's traced value to it, so later readers see the write."""

    result: object
    writes: dict[int, int]


# Ops that write their first argument; lowered as the functional op, the result bound back.
_VIEW_TARGETS = {
    aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.squeeze.dims,
    aten.squeeze.dim, aten.squeeze.default, aten.unsqueeze.default, aten.permute.default,
    aten.t.default, aten.transpose.int, aten.expand.default, aten.slice.Tensor,
    aten.select.int, aten.alias.default, aten.as_strided.default, aten.split.Tensor,
    aten.split_with_sizes.default, aten.flatten.using_ints, aten.detach.default,
}  # fmt: skip
_TAKES_EMPTY = set()  # rules that accept an Empty operand (filled in by their @rule)
MAX_FOLD_ELEMENTS = 1 << 22  # constant folding evaluates tensors up to this size


class Builder:
    def __init__(self):
        self.inputs: list[Value] = []
        self.nodes: list[Node] = []
        self.sites = 0  # random draws so far: each `uniform` node's site (its stream's index)
        self._zeros: dict[int, int] = {}
        # the module (a pipeline's split unit) whose forward made each node, or whose forward it
        # differentiates (None: no unit's); `tag` is the one new nodes get (module_tags)
        self.tags: list[str | None] = []
        self.tag: str | None = None

    def value(self, a):
        """An operand as a value: an `Empty` (an uninitialised tensor) reads as zeros."""
        if isinstance(a, Empty):
            if id(a) not in self._zeros:
                self._zeros[id(a)] = self.const(0, a.shape, a.dtype)
            return self._zeros[id(a)]
        return a

    def input(self, name: str, shape: Shape, dtype: str) -> int:
        if self.nodes:
            raise RuntimeError("inputs come before nodes")
        self.inputs.append(Value(name, tuple(shape), dtype))
        return Vid(len(self.inputs) - 1)

    def info(self, vid: int) -> tuple[Shape, str]:
        if vid < len(self.inputs):
            return self.inputs[vid].shape, self.inputs[vid].dtype
        n = self.nodes[vid - len(self.inputs)]
        return n.shape, n.dtype

    def shape(self, vid: int) -> Shape:
        return self.info(vid)[0]

    def dtype(self, vid: int) -> str:
        return self.info(vid)[1]

    def add(self, op: str, ins, shape, dtype: str, attrs=()) -> int:
        n = Node(op, tuple(ins), tuple(int(a) for a in attrs), tuple(int(s) for s in shape), dtype)
        check_node(n, [self.shape(v) for v in ins], [self.dtype(v) for v in ins])
        self.nodes.append(n)
        self.tags.append(self.tag)
        return Vid(len(self.inputs) + len(self.nodes) - 1)

    def const(self, values, shape, dtype: str) -> int:
        a = np.asarray(values)
        if dtype == "f32":
            words = a.astype(np.float32).reshape(-1).view(np.uint32)
        else:
            words = a.astype(np.int64).reshape(-1).astype(np.int32).view(np.uint32)
        if words.size > 1 and np.all(words == words[0]):
            words = words[:1]
        return self.add("const", (), shape, dtype, [int(w) for w in words])

    def reshape(self, v: int, shape) -> int:
        return v if tuple(shape) == self.shape(v) else self.add("reshape", (v,), shape,
                                                                self.dtype(v))  # fmt: skip

    def permute(self, v: int, dims) -> int:
        dims = tuple(dims)
        if dims == tuple(range(len(dims))):
            return v
        s = self.shape(v)
        return self.add("permute", (v,), tuple(s[d] for d in dims), self.dtype(v), dims)

    def cast(self, v: int, dtype: str) -> int:
        if self.dtype(v) == dtype:
            return v
        return self.add("cast_f32" if dtype == "f32" else "cast_i32", (v,), self.shape(v), dtype)

    def operand(self, a, dtype: str) -> int:
        """A value id for an argument: python numbers become 0-d constants of `dtype`."""
        if isinstance(a, Vid):
            return self.cast(a, dtype)
        if isinstance(a, bool | int | float):
            return self.const(a, (), dtype)
        raise LoweringError(f"unsupported operand {a!r}")

    def binary(self, op: str, a, b, shape, dtype: str) -> int:
        return self.add(op, (self.operand(a, dtype), self.operand(b, dtype)), shape, dtype)

    def unary(self, op: str, a: int) -> int:
        return self.add(op, (a,), self.shape(a), self.dtype(a))

    def reduce(self, op: str, v: int, dims, out_shape) -> int:
        s = self.shape(v)
        nd = len(s)
        dims = sorted({d % nd for d in dims}) if dims else list(range(nd))
        keep = [d for d in range(nd) if d not in dims]
        x = self.permute(v, keep + dims)
        x = self.reshape(x, [s[d] for d in keep] + [prod(s[d] for d in dims)])
        dt = "i32" if op == "argmax_last" else self.dtype(v)
        r = self.add(op, (x,), [s[d] for d in keep], dt)
        return self.reshape(r, out_shape)

    def prune(self, outs: list) -> list:
        """Drop the nodes no output reads (after constant folding); returns `outs` renumbered."""
        n_in = len(self.inputs)
        live = {v for v in outs if isinstance(v, int)}
        for i in range(len(self.nodes) - 1, -1, -1):
            if n_in + i in live:
                live.update(self.nodes[i].inputs)
        remap = {v: v for v in range(n_in)}
        nodes, tags = [], []
        for i, node in enumerate(self.nodes):
            if n_in + i in live:
                remap[n_in + i] = n_in + len(nodes)
                nodes.append(replace(node, inputs=tuple(remap[v] for v in node.inputs)))
                tags.append(self.tags[i])
        self.nodes, self.tags = nodes, tags
        return [Vid(remap[v]) if isinstance(v, int) else v for v in outs]

    def drop_input(self, name: str, outs: list) -> list:
        """Remove the last input if it is `name` and no node reads it, renumbering the nodes'
        reads; returns `outs` renumbered."""
        k = len(self.inputs) - 1
        if not self.inputs or self.inputs[k].name != name:
            return outs
        if any(k in n.inputs for n in self.nodes) or k in outs:
            return outs
        self.inputs.pop()
        self.nodes = [replace(n, inputs=tuple(v - 1 if v > k else v for v in n.inputs))
                      for n in self.nodes]  # fmt: skip
        return [Vid(v - 1) if isinstance(v, int) and v > k else v for v in outs]

    def input_vid(self, name: str) -> int:
        for k, v in enumerate(self.inputs):
            if v.name == name:
                return Vid(k)
        raise LoweringError(f"the step graph has no input {name!r}")

    def graph(self, outputs: list[tuple[str, int]]) -> Graph:
        g = Graph(tuple(self.inputs), tuple(self.nodes), tuple(outputs))
        g.validate()
        return g


# -- ATen rules ------------------------------------------------------------------------------

Rule = Callable[[Builder, tuple, dict, object], object]
_RULES: dict[object, Rule] = {}


def rule(*targets):
    def deco(fn):
        for t in targets:
            _RULES[t] = fn
        return fn

    return deco


def _out(meta) -> tuple[Shape, str]:
    return tuple(meta.shape), dtype_code(meta.dtype, "a traced value")


@rule(aten.view.default, aten._unsafe_view.default, aten.reshape.default,
      aten.squeeze.dims, aten.squeeze.dim, aten.squeeze.default, aten.unsqueeze.default,
      aten.flatten.using_ints)  # fmt: skip
def _r_view(b, a, kw, meta):
    return b.reshape(a[0], meta.shape)


@rule(aten.clone.default, aten.alias.default, aten.detach.default, aten.lift_fresh_copy.default,
      aten.contiguous.default)  # fmt: skip
def _r_identity(b, a, kw, meta):
    return a[0]


@rule(aten._to_copy.default)
def _r_to_copy(b, a, kw, meta):
    return b.cast(a[0], _out(meta)[1])


@rule(aten.permute.default)
def _r_permute(b, a, kw, meta):
    return b.permute(a[0], [d % len(b.shape(a[0])) for d in a[1]])


@rule(aten.t.default)
def _r_t(b, a, kw, meta):
    return b.permute(a[0], (1, 0)) if len(b.shape(a[0])) == 2 else a[0]


@rule(aten.transpose.int)
def _r_transpose(b, a, kw, meta):
    nd = len(b.shape(a[0]))
    dims = list(range(nd))
    i, j = a[1] % nd, a[2] % nd
    dims[i], dims[j] = dims[j], dims[i]
    return b.permute(a[0], dims)


@rule(aten.expand.default)
def _r_expand(b, a, kw, meta):
    shape, dt = _out(meta)
    if isinstance(a[0], Empty):
        return Empty(shape, dt)
    return a[0] if b.shape(a[0]) == shape else b.add("expand", (a[0],), shape, dt)


def _binary_rule(op: str):
    def fn(b, a, kw, meta):
        shape, dt = _out(meta)
        x, y = a[0], a[1]
        alpha = kw.get("alpha", a[2] if len(a) > 2 else 1)
        if alpha != 1:
            y = b.binary("mul", y, alpha, b.shape(y) if isinstance(y, Vid) else (), dt)
        return b.binary(op, x, y, shape, dt)

    return fn


for _op, _targets in (
    ("add", (aten.add.Tensor, aten.add.Scalar)),
    ("sub", (aten.sub.Tensor, aten.sub.Scalar)),
    ("mul", (aten.mul.Tensor, aten.mul.Scalar)),
):
    rule(*_targets)(_binary_rule(_op))


@rule(aten.div.Tensor, aten.div.Scalar)
def _r_div(b, a, kw, meta):
    shape, dt = _out(meta)
    if dt != "f32":
        raise LoweringError("integer division is not supported")
    return b.binary("div", a[0], a[1], shape, dt)


@rule(aten.rsub.Scalar, aten.rsub.Tensor)
def _r_rsub(b, a, kw, meta):
    shape, dt = _out(meta)
    return b.binary("sub", a[1], a[0], shape, dt)


@rule(aten.maximum.default)
def _r_maximum(b, a, kw, meta):
    shape, dt = _out(meta)
    return b.binary("maximum", a[0], a[1], shape, dt)


@rule(aten.minimum.default)
def _r_minimum(b, a, kw, meta):
    shape, dt = _out(meta)
    return b.binary("minimum", a[0], a[1], shape, dt)


def _compare_rule(op: str):
    def fn(b, a, kw, meta):
        x, y = a[0], a[1]
        dts = [b.dtype(v) for v in (x, y) if isinstance(v, Vid)]
        common = "f32" if "f32" in dts or any(isinstance(v, float) for v in (x, y)) else "i32"
        return b.add(op, (b.operand(x, common), b.operand(y, common)), meta.shape, "i32")

    return fn


for _op in ("gt", "ge", "lt", "le", "eq", "ne"):
    _ov = getattr(aten, _op)
    rule(_ov.Scalar, _ov.Tensor)(_compare_rule(_op))


@rule(aten.logical_and.default, aten.bitwise_and.Tensor)
def _r_and(b, a, kw, meta):
    return b.binary("mul", b.cast(a[0], "i32"), b.cast(a[1], "i32"), meta.shape, "i32")


@rule(aten.logical_or.default, aten.bitwise_or.Tensor)
def _r_or(b, a, kw, meta):
    return b.binary("maximum", b.cast(a[0], "i32"), b.cast(a[1], "i32"), meta.shape, "i32")


@rule(aten.logical_not.default, aten.bitwise_not.default)
def _r_not(b, a, kw, meta):
    if meta.dtype != torch.bool:
        raise LoweringError("bitwise_not on integers is not supported")
    return b.add("logical_not", (a[0],), meta.shape, "i32")


@rule(aten.where.self)
def _r_where(b, a, kw, meta):
    shape, dt = _out(meta)
    return b.add("where", (b.cast(a[0], "i32"), b.operand(a[1], dt), b.operand(a[2], dt)),
                 shape, dt)  # fmt: skip


def _unary_rule(op: str):
    def fn(b, a, kw, meta):
        return b.unary(op, b.cast(a[0], "f32"))

    return fn


for _op, _t in (("neg", aten.neg.default), ("exp", aten.exp.default), ("log", aten.log.default),
                ("sqrt", aten.sqrt.default), ("relu", aten.relu.default),
                ("tanh", aten.tanh.default), ("erf", aten.erf.default)):  # fmt: skip
    rule(_t)(_unary_rule(_op))


@rule(aten.sigmoid.default)
def _r_sigmoid(b, a, kw, meta):
    x = b.cast(a[0], "f32")
    s = b.shape(x)
    e = b.unary("exp", b.unary("neg", x))
    return b.binary("div", 1.0, b.binary("add", e, 1.0, s, "f32"), s, "f32")


@rule(aten.rsqrt.default)
def _r_rsqrt(b, a, kw, meta):
    return b.binary("div", 1.0, b.unary("sqrt", a[0]), meta.shape, "f32")


@rule(aten.reciprocal.default)
def _r_reciprocal(b, a, kw, meta):
    return b.binary("div", 1.0, a[0], meta.shape, "f32")


@rule(aten.pow.Tensor_Scalar)
def _r_pow(b, a, kw, meta):
    """Exponents 2 and 3 as products (x*x, (x*x)*x: torch's own order for them), 0.5 as sqrt,
    1 the value, and -1, -2, -0.5 as 1 / those."""
    x, e = a[0], a[1]
    s, f = meta.shape, "f32"
    if e < 0 and -e in (0.5, 1, 2, 3):
        return b.binary("div", 1.0, _r_pow(b, (x, -e), kw, meta), s, f)
    if e == 2:
        return b.binary("mul", x, x, s, f)
    if e == 3:
        return b.binary("mul", b.binary("mul", x, x, s, f), x, s, f)
    if e == 0.5:
        return b.unary("sqrt", x)
    if e == 1:
        return x
    raise LoweringError(f"aten.pow with exponent {e} is not supported (only 0.5, 1, 2, 3 and "
                        "their negatives)")  # fmt: skip


def _clamp(b, x, lo, hi, meta):
    shape, dt = _out(meta)
    if lo is not None:
        x = b.binary("maximum", x, lo, shape, dt)
    if hi is not None:
        x = b.binary("minimum", x, hi, shape, dt)
    return x


@rule(aten.clamp.default)
def _r_clamp(b, a, kw, meta):
    lo = a[1] if len(a) > 1 else kw.get("min")
    hi = a[2] if len(a) > 2 else kw.get("max")
    return _clamp(b, a[0], lo, hi, meta)


@rule(aten.clamp_min.default)
def _r_clamp_min(b, a, kw, meta):
    return _clamp(b, a[0], a[1], None, meta)


@rule(aten.clamp_max.default)
def _r_clamp_max(b, a, kw, meta):
    return _clamp(b, a[0], None, a[1], meta)


@rule(aten.scalar_tensor.default)
def _r_scalar_tensor(b, a, kw, meta):
    shape, dt = _out(meta)
    return b.const(a[0], shape, dt)


@rule(aten.full.default, aten.full_like.default, aten.new_full.default)
def _r_full(b, a, kw, meta):
    shape, dt = _out(meta)
    return b.const(a[-1], shape, dt)


@rule(aten.zeros.default, aten.zeros_like.default, aten.new_zeros.default)
def _r_zeros(b, a, kw, meta):
    shape, dt = _out(meta)
    return b.const(0, shape, dt)


@rule(aten.ones.default, aten.ones_like.default, aten.new_ones.default)
def _r_ones(b, a, kw, meta):
    shape, dt = _out(meta)
    return b.const(1, shape, dt)


@rule(aten.arange.start_step, aten.arange.default, aten.arange.start)
def _r_arange(b, a, kw, meta):
    shape, dt = _out(meta)
    nums = [v for v in a if isinstance(v, int | float)]
    start, end, step = (0, nums[0], 1) if len(nums) == 1 else (*nums[:2], nums[2] if len(
        nums) > 2 else 1)  # fmt: skip
    return b.const(np.arange(start, end, step), shape, dt)


@rule(aten.sum.dim_IntList, aten.sum.default)
def _r_sum(b, a, kw, meta):
    dims = a[1] if len(a) > 1 and a[1] is not None else []
    return b.reduce("sum_last", a[0], dims, meta.shape)


@rule(aten.mean.dim, aten.mean.default)
def _r_mean(b, a, kw, meta):
    s = b.shape(a[0])
    dims = a[1] if len(a) > 1 and a[1] else list(range(len(s)))
    total = b.reduce("sum_last", a[0], dims, meta.shape)
    count = prod(s[d % len(s)] for d in dims)
    return b.binary("div", total, float(count), meta.shape, "f32")


@rule(aten.amax.default)
def _r_amax(b, a, kw, meta):
    return b.reduce("max_last", a[0], a[1] if len(a) > 1 else [], meta.shape)


@rule(aten.any.dim, aten.any.dims, aten.any.default)
def _r_any(b, a, kw, meta):
    dims = [a[1]] if len(a) > 1 and isinstance(a[1], int) else (a[1] if len(a) > 1 else [])
    return b.reduce("max_last", b.cast(a[0], "i32"), dims, meta.shape)


@rule(aten.argmax.default)
def _r_argmax(b, a, kw, meta):
    if len(a) < 2 or a[1] is None:
        raise LoweringError("argmax over all dimensions is not supported")
    return b.reduce("argmax_last", a[0], [a[1]], meta.shape)


@rule(aten.mm.default, aten.bmm.default)
def _r_mm(b, a, kw, meta):
    return b.add("matmul", (a[0], a[1]), meta.shape, "f32")


@rule(aten.addmm.default)
def _r_addmm(b, a, kw, meta):
    if kw.get("beta", 1) != 1 or kw.get("alpha", 1) != 1:
        raise LoweringError("addmm with beta or alpha other than 1 is not supported")
    mm = b.add("matmul", (a[1], a[2]), meta.shape, "f32")
    return b.binary("add", mm, a[0], meta.shape, "f32")


def _softmax(b: Builder, x: int, dim: int, log: bool) -> int:
    s = b.shape(x)
    nd = len(s)
    dim %= nd
    perm = [d for d in range(nd) if d != dim] + [dim]
    xp = b.permute(x, perm)
    ps = b.shape(xp)
    keep = (*ps[:-1], 1)
    m = b.reshape(b.add("max_last", (xp,), ps[:-1], "f32"), keep)
    sh = b.binary("sub", xp, m, ps, "f32")
    e = b.unary("exp", sh)
    z = b.reshape(b.add("sum_last", (e,), ps[:-1], "f32"), keep)
    out = b.binary("sub", sh, b.unary("log", z), ps, "f32") if log else b.binary(
        "div", e, z, ps, "f32")  # fmt: skip
    inv = [perm.index(d) for d in range(nd)]
    return b.permute(out, inv)


@rule(aten._softmax.default)
def _r_softmax(b, a, kw, meta):
    return _softmax(b, a[0], a[1], log=False)


@rule(aten._log_softmax.default)
def _r_log_softmax(b, a, kw, meta):
    return _softmax(b, a[0], a[1], log=True)


@rule(aten.native_layer_norm.default)
def _r_layer_norm(b, a, kw, meta):
    x, normalized, w, bias, eps = a
    s = b.shape(x)
    if len(normalized) != 1:
        raise LoweringError("LayerNorm over more than the last dimension is not supported")
    D = s[-1]
    keep = (*s[:-1], 1)
    mean = b.reshape(b.binary("div", b.add("sum_last", (x,), s[:-1], "f32"), float(D), s[:-1],
                              "f32"), keep)  # fmt: skip
    xc = b.binary("sub", x, mean, s, "f32")
    var = b.binary("div", b.add("sum_last", (b.binary("mul", xc, xc, s, "f32"),), s[:-1], "f32"),
                   float(D), s[:-1], "f32")  # fmt: skip
    rstd = b.binary("div", 1.0, b.unary("sqrt", b.binary("add", var, float(eps), s[:-1], "f32")),
                    s[:-1], "f32")  # fmt: skip
    rstd = b.reshape(rstd, keep)
    out = b.binary("mul", xc, rstd, s, "f32")
    if w is not None:
        out = b.binary("mul", out, w, s, "f32")
    if bias is not None:
        out = b.binary("add", out, bias, s, "f32")
    return (out, b.reshape(mean, meta[1].shape), b.reshape(rstd, meta[2].shape))


@rule(aten.gelu.default)
def _r_gelu(b, a, kw, meta):
    x = a[0]
    s = b.shape(x)
    approx = kw.get("approximate", a[1] if len(a) > 1 else "none")
    if approx == "tanh":
        k_beta = float(np.sqrt(2.0) * (2.0 / np.sqrt(np.pi)) * 0.5)
        cube = b.binary("mul", b.binary("mul", x, x, s, "f32"), x, s, "f32")
        inner = b.binary("add", x, b.binary("mul", cube, 0.044715, s, "f32"), s, "f32")
        t = b.unary("tanh", b.binary("mul", inner, k_beta, s, "f32"))
    else:
        t = b.unary("erf", b.binary("mul", x, float(1 / np.sqrt(2.0)), s, "f32"))
    half_x = b.binary("mul", x, 0.5, s, "f32")
    return b.binary("mul", half_x, b.binary("add", t, 1.0, s, "f32"), s, "f32")


@rule(aten.embedding.default)
def _r_embedding(b, a, kw, meta):
    return b.add("index_rows", (a[0], b.cast(a[1], "i32")), meta.shape, "f32")


@rule(aten.index_put.default)
def _r_index_put(b, a, kw, meta):
    dest, indices, values = a[0], a[1], a[2]
    accumulate = a[3] if len(a) > 3 else kw.get("accumulate", False)
    if not accumulate or len(indices) != 1 or indices[0] is None:
        raise LoweringError("index_put is supported only as a one-index accumulation "
                            "(the embedding gradient)")  # fmt: skip
    idx = b.cast(indices[0], "i32")
    want = (*b.shape(idx), *b.shape(dest)[1:])
    src = b.add("expand", (values,), want, "f32") if b.shape(values) != want else values
    return b.add("index_add_rows", (dest, idx, src), meta.shape, "f32")


@rule(aten.gather.default)
def _r_gather(b, a, kw, meta):
    nd = len(b.shape(a[0]))
    return b.add("gather", (a[0], b.cast(a[2], "i32")), meta.shape, _out(meta)[1], [a[1] % nd])


@rule(aten.scatter.value)
def _r_scatter(b, a, kw, meta):
    shape, dt = _out(meta)
    nd = len(shape)
    word = f32_word(a[3]) if dt == "f32" else int(a[3]) & 0xFFFFFFFF
    return b.add("scatter_value", (a[0], b.cast(a[2], "i32")), shape, dt, [a[1] % nd, word])


@rule(aten.slice.Tensor)
def _r_slice(b, a, kw, meta):
    x = a[0]
    s = b.shape(x)
    dim = (a[1] if len(a) > 1 else 0) % len(s)
    start = a[2] if len(a) > 2 and a[2] is not None else 0
    step = a[4] if len(a) > 4 else 1
    start = max(0, start + s[dim]) if start < 0 else min(start, s[dim])
    if tuple(meta.shape) == s:
        return x
    return b.add("slice", (x,), meta.shape, b.dtype(x), [dim, start, step])


@rule(aten.select.int)
def _r_select(b, a, kw, meta):
    x, dim, i = a
    s = b.shape(x)
    dim %= len(s)
    i %= s[dim]
    part = b.add("slice", (x,), (*s[:dim], 1, *s[dim + 1 :]), b.dtype(x), [dim, i, 1])
    return b.reshape(part, meta.shape)


def _along(b: Builder, x: int, dim: int, start: int, stop: int) -> int:
    s = b.shape(x)
    shape = (*s[:dim], stop - start, *s[dim + 1 :])
    return x if stop - start == s[dim] else b.add("slice", (x,), shape, b.dtype(x), [dim, start, 1])


@rule(aten.slice_scatter.default)
def _r_slice_scatter(b, a, kw, meta):
    """out = x with x[.., start:end:step, ..] replaced by src (the gradient of a slice): with
    step 1 the concatenation of x's parts before and after and src; else a gather from
    cat(x, src) along dim."""
    shape, dt = _out(meta)
    x, src = b.cast(a[0], dt), b.cast(a[1], dt)
    nd = len(shape)
    dim = (a[2] if len(a) > 2 else 0) % nd
    size = shape[dim]
    start = a[3] if len(a) > 3 and a[3] is not None else 0
    start = max(0, start + size) if start < 0 else min(start, size)
    step = a[5] if len(a) > 5 else 1
    n = b.shape(src)[dim]
    if step == 1:
        parts = [_along(b, x, dim, 0, start), src, _along(b, x, dim, start + n, size)]
        parts = [p for k, p in enumerate(parts) if k == 1 or b.shape(p)[dim]]
        return parts[0] if len(parts) == 1 else b.add("cat", parts, shape, dt, [dim])
    both = b.add("cat", (x, src), (*shape[:dim], size + n, *shape[dim + 1 :]), dt, [dim])
    pick = np.arange(size)
    hit = (pick >= start) & ((pick - start) % step == 0) & ((pick - start) // step < n)
    pick = np.where(hit, size + (pick - start) // step, pick)
    view = [1] * nd
    view[dim] = size
    idx = b.add("expand", (b.const(pick.reshape(view), tuple(view), "i32"),), shape, "i32")
    return b.add("gather", (both, idx), shape, dt, [dim])


@rule(aten.select_scatter.default)
def _r_select_scatter(b, a, kw, meta):
    shape, dt = _out(meta)
    dim = a[2] % len(shape)
    i = a[3] % shape[dim]
    src = b.reshape(b.cast(a[1], dt), (*shape[:dim], 1, *shape[dim + 1 :]))
    return _r_slice_scatter(b, (a[0], src, dim, i, i + 1, 1), kw, meta)


@rule(aten.split_with_sizes.default, aten.split.Tensor)
def _r_split(b, a, kw, meta):
    x = a[0]
    s = b.shape(x)
    dim = (a[2] if len(a) > 2 else 0) % len(s)
    out, start = [], 0
    for m in meta:
        size = m.shape[dim]
        out.append(b.add("slice", (x,), m.shape, b.dtype(x), [dim, start, 1]))
        start += size
    return tuple(out)


@rule(aten.cat.default)
def _r_cat(b, a, kw, meta):
    shape, dt = _out(meta)
    dim = (a[1] if len(a) > 1 else 0) % len(shape)
    ins = [b.cast(v, dt) for v in a[0] if prod(b.shape(v))]
    return ins[0] if len(ins) == 1 else b.add("cat", ins, shape, dt, [dim])


# -- uninitialised tensors, in-place writes, random draws --------------------------------------


@rule(aten.empty.memory_format, aten.empty_permuted.default, aten.empty_like.default,
      aten.new_empty.default, aten.empty_strided.default)  # fmt: skip
def _r_empty(b, a, kw, meta):
    return Empty(*_out(meta))


def _shape_dtype(b: Builder, v) -> tuple[Shape, str]:
    return (v.shape, v.dtype) if isinstance(v, Empty) else (b.shape(v), b.dtype(v))


@rule(aten.copy_.default)
def _r_copy_(b, a, kw, meta):
    shape, dt = _shape_dtype(b, a[0])
    v = b.cast(b.value(a[1]), dt)
    if b.shape(v) != shape:
        v = b.add("expand", (v,), shape, dt)
    return Writes(v, {0: v})


@rule(aten.fill_.Scalar)
def _r_fill_(b, a, kw, meta):
    v = b.const(a[1], *_shape_dtype(b, a[0]))
    return Writes(v, {0: v})


@rule(aten.zero_.default)
def _r_zero_(b, a, kw, meta):
    v = b.const(0, *_shape_dtype(b, a[0]))
    return Writes(v, {0: v})


def _uniform(b: Builder, shape: Shape) -> int:
    """A draw of the committed random stream (PROTOCOL §2.6 `uniform`): the step's next site."""
    site = b.sites
    b.sites += 1
    return b.add("uniform", (b.input_vid("step"),), shape, "f32", [site])


@rule(aten.bernoulli.p)
def _r_bernoulli(b, a, kw, meta):
    """1 where the stream's uniform draw is below p (dropout's keep mask), else 0."""
    shape, dt = _out(meta)
    hit = b.add("lt", (_uniform(b, shape), b.const(float(a[1]), (), "f32")), shape, "i32")
    return b.cast(hit, dt)


@rule(aten.bernoulli_.float)
def _r_bernoulli_(b, a, kw, meta):
    shape, dt = _shape_dtype(b, a[0])
    hit = b.add("lt", (_uniform(b, shape), b.const(float(a[1]), (), "f32")), shape, "i32")
    v = b.cast(hit, dt)
    return Writes(v, {0: v})


@rule(aten.rand.default, aten.rand_like.default)
def _r_rand(b, a, kw, meta):
    shape, dt = _out(meta)
    if dt != "f32":
        raise LoweringError("random draws are float32")
    return _uniform(b, shape)


for _t in (aten.copy_.default, aten.fill_.Scalar, aten.zero_.default, aten.bernoulli.p,
           aten.bernoulli_.float, aten.rand_like.default, aten.expand.default):  # fmt: skip
    _TAKES_EMPTY.add(_RULES[_t])


@rule(aten.native_batch_norm.default, aten._native_batch_norm_legit_no_training.default)
def _r_batch_norm(b, a, kw, meta):
    """BatchNorm over axis 1. Training: the batch's mean and biased variance over every other
    axis (sum_last / n, as var_mean), out = (x - mean) * (1 / sqrt(var + eps)) * w + bias, and
    the running statistics written in place, as torch's decomposition orders them:
    rm' = m * mean + (1 - m) * rm, rv' = m * (var * n / (n - 1)) + (1 - m) * rv. Evaluation:
    the running statistics instead of the batch's."""
    if len(a) == 7:  # _native_batch_norm_legit_no_training: (x, w, b, rm, rv, momentum, eps)
        a = (*a[:5], False, *a[5:])
    x, w, bias, rm, rv, training, momentum, eps = a
    s = b.shape(x)
    C, nd = s[1], len(s)
    red = [0, *range(2, nd)]
    bshape = (1, C, *([1] * (nd - 2)))
    n = prod(s) // C
    f = "f32"
    writes = {}
    if training:
        mean = b.binary("div", b.reduce("sum_last", x, red, (C,)), float(n), (C,), f)
        xc = b.binary("sub", x, b.reshape(mean, bshape), s, f)
        var = b.binary("div", b.reduce("sum_last", b.binary("mul", xc, xc, s, f), red, (C,)),
                       float(n), (C,), f)  # fmt: skip
    else:
        if rm is None or rv is None:
            raise LoweringError("BatchNorm in evaluation needs its running statistics")
        mean, var = rm, rv
        xc = b.binary("sub", x, b.reshape(mean, bshape), s, f)
    rstd = b.binary("div", 1.0, b.unary("sqrt", b.binary("add", var, float(eps), (C,), f)),
                    (C,), f)  # fmt: skip
    out = b.binary("mul", xc, b.reshape(rstd, bshape), s, f)
    if w is not None:
        out = b.binary("mul", out, b.reshape(w, bshape), s, f)
    if bias is not None:
        out = b.binary("add", out, b.reshape(bias, bshape), s, f)
    if training:
        keep = 1.0 - momentum  # a Python double, as torch's decomposition computes it
        if rm is not None:
            writes[3] = b.binary("add", b.binary("mul", float(momentum), mean, (C,), f),
                                 b.binary("mul", keep, rm, (C,), f), (C,), f)  # fmt: skip
        if rv is not None:
            unbiased = b.binary("mul", var, n / (n - 1) if n > 1 else float("inf"), (C,), f)
            writes[4] = b.binary("add", b.binary("mul", float(momentum), unbiased, (C,), f),
                                 b.binary("mul", keep, rv, (C,), f), (C,), f)  # fmt: skip
        return Writes((out, mean, rstd), writes)
    return (out, Empty((0,), f), Empty((0,), f))


# -- convolution and pooling: windows as gathers ---------------------------------------------


def _windows(C, H, W, KH, KW, stride, padding, dilation):
    """(OH, OW, map (OH*OW, C*KH*KW)): flat input index (c*H + h)*W + w of each window slot
    (output position major, then c, kh, kw), -1 where the slot falls in the padding."""
    sh, sw = stride
    ph, pw = padding
    dh, dw = dilation
    OH = (H + 2 * ph - dh * (KH - 1) - 1) // sh + 1
    OW = (W + 2 * pw - dw * (KW - 1) - 1) // sw + 1
    oh, ow = np.meshgrid(np.arange(OH), np.arange(OW), indexing="ij")
    c, kh, kw = np.meshgrid(np.arange(C), np.arange(KH), np.arange(KW), indexing="ij")
    h = oh.reshape(-1, 1) * sh - ph + kh.reshape(1, -1) * dh
    w = ow.reshape(-1, 1) * sw - pw + kw.reshape(1, -1) * dw
    inside = (h >= 0) & (h < H) & (w >= 0) & (w < W)
    m = np.where(inside, (c.reshape(1, -1) * H + h) * W + w, -1)
    return OH, OW, m.astype(np.int64)


def _inverse(m: np.ndarray, n_in: int) -> np.ndarray:
    """(n_in, F): for each input element, the flat map positions reading it, ascending, padded
    with m.size (the pad column)."""
    flat = m.reshape(-1)
    pos = np.nonzero(flat >= 0)[0]
    src = flat[pos]
    order = np.argsort(src, kind="stable")
    src, pos = src[order], pos[order]
    counts = np.bincount(src, minlength=n_in)
    fan = max(1, int(counts.max()) if counts.size else 1)
    out = np.full((n_in, fan), flat.size, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    rank = np.arange(src.size) - starts[src]
    out[src, rank] = pos
    return out


def _gather_rows(b: Builder, x2: int, index: np.ndarray, pad_word: int | None) -> int:
    """x2 (R, K) rows; index (M,) into a row (K = the pad column when pad_word is given) ->
    (R, M): out[r, j] = x2[r, index[j]]."""
    R, K = b.shape(x2)
    dt = b.dtype(x2)
    if pad_word is not None and (index == K).any():
        pad = b.add("const", (), (R, 1), dt, [pad_word])
        x2 = b.add("cat", (x2, pad), (R, K + 1), dt, [1])
    idx = b.const(index.reshape(1, -1), (1, index.size), "i32")
    idx = b.add("expand", (idx,), (R, index.size), "i32")
    return b.add("gather", (x2, idx), (R, index.size), dt, [1])


def _im2col(b, x, KH, KW, stride, padding, dilation):
    N, C, H, W = b.shape(x)
    OH, OW, m = _windows(C, H, W, KH, KW, stride, padding, dilation)
    m = np.where(m < 0, C * H * W, m)
    cols = _gather_rows(b, b.reshape(x, (N, C * H * W)), m.reshape(-1), 0)
    return b.reshape(cols, (N * OH * OW, C * KH * KW)), OH, OW


def _conv_args(a):
    x, w, bias, stride, padding, dilation, transposed, _out_pad, groups = a[:9]
    if transposed or groups != 1 or len(stride) != 2:
        raise LoweringError("only 2-d, ungrouped, non-transposed convolutions are supported")
    return x, w, bias, tuple(stride), tuple(padding), tuple(dilation)


@rule(aten.convolution.default)
def _r_conv(b, a, kw, meta):
    x, w, bias, stride, padding, dilation = _conv_args(a)
    N = b.shape(x)[0]
    O, C, KH, KW = b.shape(w)  # noqa: E741
    cols, OH, OW = _im2col(b, x, KH, KW, stride, padding, dilation)
    wt = b.permute(b.reshape(w, (O, C * KH * KW)), (1, 0))
    y = b.add("matmul", (cols, wt), (N * OH * OW, O), "f32")
    y = b.reshape(b.permute(b.reshape(y, (N, OH * OW, O)), (0, 2, 1)), (N, O, OH, OW))
    if bias is not None:
        y = b.binary("add", y, b.reshape(bias, (1, O, 1, 1)), (N, O, OH, OW), "f32")
    return y


@rule(aten.convolution_backward.default)
def _r_conv_bwd(b, a, kw, meta):
    g, x, w = a[0], a[1], a[2]
    stride, padding, dilation = tuple(a[4]), tuple(a[5]), tuple(a[6])
    if a[7] or a[9] != 1:
        raise LoweringError("only ungrouped, non-transposed convolutions are supported")
    mask = a[10]
    N, C, H, W = b.shape(x)
    O, _, KH, KW = b.shape(w)  # noqa: E741
    _, _, OH, OW = b.shape(g)
    L = OH * OW
    g2 = b.reshape(b.permute(b.reshape(g, (N, O, L)), (0, 2, 1)), (N * L, O))
    gx = gw = gb = None
    if mask[0]:
        gcols = b.add("matmul", (g2, b.reshape(w, (O, C * KH * KW))), (N * L, C * KH * KW),
                      "f32")  # fmt: skip
        _, _, m = _windows(C, H, W, KH, KW, stride, padding, dilation)
        inv = _inverse(m, C * H * W)  # pad column = m.size = L * C*KH*KW
        parts = _gather_rows(b, b.reshape(gcols, (N, m.size)), inv.reshape(-1), 0)
        fan = inv.shape[1]
        gx = b.reshape(b.add("sum_last", (b.reshape(parts, (N, C * H * W, fan)),),
                             (N, C * H * W), "f32"), (N, C, H, W))  # fmt: skip
    if mask[1]:
        cols, _, _ = _im2col(b, x, KH, KW, stride, padding, dilation)
        gw = b.add("matmul", (b.permute(g2, (1, 0)), cols), (O, C * KH * KW), "f32")
        gw = b.reshape(gw, (O, C, KH, KW))
    if mask[2]:
        gt = b.reshape(b.permute(b.reshape(g, (N, O, L)), (1, 0, 2)), (O, N * L))
        gb = b.add("sum_last", (gt,), (O,), "f32")
    return (gx, gw, gb)


def _defaults(given, defaults: list) -> list:
    return list(given) + defaults[len(given) :]


def _pool_args(x_shape, kernel, stride, padding, dilation=(1, 1), ceil_mode=False):
    if ceil_mode:
        raise LoweringError("pooling with ceil_mode=True is not supported")
    kernel = tuple(kernel) * (2 // len(kernel))
    stride = tuple(stride) * (2 // len(stride)) if stride else kernel
    padding = tuple(padding) * (2 // len(padding))
    dilation = tuple(dilation) * (2 // len(dilation))
    N, C, H, W = x_shape
    OH, OW, m = _windows(1, H, W, kernel[0], kernel[1], stride, padding, dilation)
    return N, C, H, W, OH, OW, m  # m: (OH*OW, KH*KW) into one H*W plane


NEG_INF = 0xFF800000


@rule(aten.max_pool2d_with_indices.default)
def _r_maxpool(b, a, kw, meta):
    x = a[0]
    kernel, stride, padding, dilation, ceil = _defaults(a[1:6], [None, [], [0], [1], False])
    N, C, H, W, OH, OW, m = _pool_args(b.shape(x), kernel, stride, padding, dilation, ceil)
    K = m.shape[1]
    win = _gather_rows(b, b.reshape(x, (N * C, H * W)), np.where(m < 0, H * W, m).reshape(-1),
                       NEG_INF)  # fmt: skip
    win = b.reshape(win, (N * C, OH * OW, K))
    out = b.reshape(b.add("max_last", (win,), (N * C, OH * OW), "f32"), (N, C, OH, OW))
    arg = b.add("argmax_last", (win,), (N * C, OH * OW), "i32")
    # the plane index (h * W + w) of the chosen slot, as max_pool2d's indices output has it
    flat = b.binary("add", arg, b.const(np.arange(OH * OW).reshape(1, -1) * K, (1, OH * OW),
                                        "i32"), (N * C, OH * OW), "i32")  # fmt: skip
    plane = _gather_rows(b, b.const(m.reshape(1, -1), (1, m.size), "i32"), np.arange(m.size),
                         None)  # fmt: skip
    idx = b.add("gather", (b.add("expand", (plane,), (N * C, m.size), "i32"), flat),
                (N * C, OH * OW), "i32", [1])  # fmt: skip
    return (out, b.reshape(idx, (N, C, OH, OW)))


@rule(aten.max_pool2d_with_indices_backward.default)
def _r_maxpool_bwd(b, a, kw, meta):
    g, x = a[0], a[1]
    indices = a[-1]
    N, C, H, W, OH, OW, m = _pool_args(b.shape(x), *a[2:7])
    inv = _inverse(m, H * W)  # windows covering each plane position, pad column = m.size
    fan = inv.shape[1]
    K = m.shape[1]
    # per covering slot: the window (output position) it belongs to, or the pad column L
    win_of = np.where(inv < m.size, inv // K, OH * OW).reshape(-1)
    gs = _gather_rows(b, b.reshape(g, (N * C, OH * OW)), win_of, 0)
    ids = _gather_rows(b, b.reshape(b.cast(indices, "i32"), (N * C, OH * OW)), win_of,
                       0xFFFFFFFF)  # fmt: skip
    pos = b.const(np.repeat(np.arange(H * W), fan).reshape(1, -1), (1, H * W * fan), "i32")
    hit = b.binary("eq", ids, pos, (N * C, H * W * fan), "i32")
    zero = b.const(0.0, (), "f32")
    picked = b.add("where", (hit, gs, zero), (N * C, H * W * fan), "f32")
    s = b.add("sum_last", (b.reshape(picked, (N * C, H * W, fan)),), (N * C, H * W), "f32")
    return b.reshape(s, (N, C, H, W))


def _avg_check(a, divisor_at):
    count_include_pad = a[divisor_at - 1] if len(a) > divisor_at - 1 else True
    divisor = a[divisor_at] if len(a) > divisor_at else None
    if divisor is not None or not count_include_pad:
        raise LoweringError("avg_pool2d supports count_include_pad=True and no divisor_override")


@rule(aten.avg_pool2d.default)
def _r_avgpool(b, a, kw, meta):
    x = a[0]
    _avg_check(a, 6)
    kernel, stride, padding, ceil = _defaults(a[1:5], [None, [], [0], False])
    N, C, H, W, OH, OW, m = _pool_args(b.shape(x), kernel, stride, padding, (1, 1), ceil)
    K = m.shape[1]
    win = _gather_rows(b, b.reshape(x, (N * C, H * W)), np.where(m < 0, H * W, m).reshape(-1), 0)
    s = b.add("sum_last", (b.reshape(win, (N * C, OH * OW, K)),), (N * C, OH * OW), "f32")
    return b.reshape(b.binary("div", s, float(K), (N * C, OH * OW), "f32"), (N, C, OH, OW))


def _sum_back_to_windows(b, gd, m: np.ndarray, shape: tuple[int, ...]):
    """A pooling's backward: each input element sums the (already divided) gradients of the
    windows that read it, in window order (the inverse of the window map m: OH*OW x K)."""
    N, C, H, W = shape
    K = m.shape[1]
    inv = _inverse(m, H * W)
    fan = inv.shape[1]
    win_of = np.where(inv < m.size, inv // K, m.shape[0]).reshape(-1)
    parts = _gather_rows(b, gd, win_of, 0)
    s = b.add("sum_last", (b.reshape(parts, (N * C, H * W, fan)),), (N * C, H * W), "f32")
    return b.reshape(s, (N, C, H, W))


@rule(aten.avg_pool2d_backward.default)
def _r_avgpool_bwd(b, a, kw, meta):
    g, x = a[0], a[1]
    _avg_check(a, 7)
    N, C, H, W, OH, OW, m = _pool_args(b.shape(x), a[2], a[3], a[4], (1, 1), a[5])
    gd = b.binary("div", b.reshape(g, (N * C, OH * OW)), float(m.shape[1]), (N * C, OH * OW), "f32")
    return _sum_back_to_windows(b, gd, m, (N, C, H, W))


def _adaptive_windows(H: int, W: int, OH: int, OW: int) -> tuple[np.ndarray, np.ndarray]:
    """AdaptiveAvgPool2d's bins (torch's: rows floor(i*H/OH) to ceil((i+1)*H/OH)): the plane
    index of each slot (OH*OW, K), -1 past a smaller window's end, and each window's size."""
    rows = [(i * H // OH, -(-(i + 1) * H // OH)) for i in range(OH)]
    cols = [(j * W // OW, -(-(j + 1) * W // OW)) for j in range(OW)]
    wins = [[h * W + w for h in range(h0, h1) for w in range(w0, w1)]
            for h0, h1 in rows for w0, w1 in cols]  # fmt: skip
    K = max(len(w) for w in wins)
    m = np.full((OH * OW, K), -1, dtype=np.int64)
    for i, w in enumerate(wins):
        m[i, : len(w)] = w
    return m, np.array([len(w) for w in wins], dtype=np.float32)


@rule(aten._adaptive_avg_pool2d.default)
def _r_adaptive_avgpool(b, a, kw, meta):
    x = a[0]
    N, C, H, W = b.shape(x)
    OH, OW = tuple(meta.shape[-2:])
    m, count = _adaptive_windows(H, W, OH, OW)
    K = m.shape[1]
    win = _gather_rows(b, b.reshape(x, (N * C, H * W)), np.where(m < 0, H * W, m).reshape(-1), 0)
    s = b.add("sum_last", (b.reshape(win, (N * C, OH * OW, K)),), (N * C, OH * OW), "f32")
    n = b.const(count.reshape(1, -1), (1, OH * OW), "f32")
    return b.reshape(b.binary("div", s, n, (N * C, OH * OW), "f32"), (N, C, OH, OW))


@rule(aten._adaptive_avg_pool2d_backward.default)
def _r_adaptive_avgpool_bwd(b, a, kw, meta):
    g, x = a[0], a[1]
    N, C, H, W = b.shape(x)
    OH, OW = b.shape(g)[-2:]
    m, count = _adaptive_windows(H, W, OH, OW)
    n = b.const(count.reshape(1, -1), (1, OH * OW), "f32")
    gd = b.binary("div", b.reshape(g, (N * C, OH * OW)), n, (N * C, OH * OW), "f32")
    return _sum_back_to_windows(b, gd, m, (N, C, H, W))


# -- the lowering loop -----------------------------------------------------------------------


def _name_of(target) -> str:
    return str(target) if not hasattr(target, "name") else f"aten.{target.name()}".replace(
        "aten::", "")  # fmt: skip


def _functional_twin(target):
    """aten.add_.Tensor -> aten.add.Tensor (None when the op writes nothing in place)."""
    schema = getattr(target, "_schema", None)
    if schema is None or not schema.is_mutable or not schema.arguments:
        return None
    if not schema.arguments[0].alias_info or not schema.arguments[0].alias_info.is_write:
        return None
    name = target.overloadpacket.__name__
    if not name.endswith("_") or name.startswith("_"):
        return None
    packet = getattr(aten, name[:-1], None)
    return getattr(packet, target._overloadname, None) if packet is not None else None


def _rule_for(target):
    """(the rule, whether it writes its first argument in place) for an ATen op."""
    fn = _RULES.get(target)
    if fn is not None:
        return fn, False
    twin = _functional_twin(target)
    if twin is not None and twin in _RULES:
        return _RULES[twin], True
    return None, False


def _foldable(n: torch.fx.Node, known: dict) -> bool:
    """Every tensor argument of n is a constant known at build time, and n is deterministic (an
    op writing its first argument in place is evaluated as its functional twin)."""
    if n.op != "call_function" or n.target is operator.getitem:
        return False
    schema = getattr(n.target, "_schema", None)
    if schema is None or (schema.is_mutable and _functional_twin(n.target) is None):
        return False
    if torch.Tag.nondeterministic_seeded in getattr(n.target, "tags", ()):
        return False
    return all(d in known for d in n.all_input_nodes)


def lower(gm: torch.fx.GraphModule, input_names: list[str], module: nn.Module,
          sample=None) -> Graph:  # fmt: skip
    """Rewrite a traced ATen graph with the registry's operators.

    An ATen op without a rule whose inputs are all constants (a RoPE table's cos and sin of the
    positions, say) is evaluated here, once, by torch, and becomes a `const`; the nodes that only
    fed such folds are then dropped. An op that writes an argument in place binds that
    argument's traced value to the written value (`Writes`)."""
    b = Builder()
    env: dict = {}
    known: dict = {}  # fx node -> its torch value, for the nodes computed from constants only
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(input_names):
        raise RuntimeError(f"{len(placeholders)} placeholders for {len(input_names)} inputs")
    for n, name in zip(placeholders, input_names, strict=True):
        v = n.meta["val"]
        env[n] = b.input(name, tuple(v.shape), dtype_code(v.dtype, f"input {name}"))

    def arg(a, empty_ok=False):
        if isinstance(a, torch.fx.Node):
            v = env[a]
            return v if empty_ok else b.value(v)
        if isinstance(a, list | tuple):
            return type(a)(arg(x, empty_ok) for x in a)
        return a

    def known_arg(a):
        if isinstance(a, torch.fx.Node):
            return known[a]
        if isinstance(a, list | tuple):
            return type(a)(known_arg(x) for x in a)
        return a

    outputs = None
    folded = False
    folds: set = set()  # the fx nodes lowered as constants of their folded values
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            continue
        b.tag = (n.meta.get("custom") or {}).get(_MODULE_TAG)
        if n.op == "get_attr":
            t = getattr(gm, n.target)
            env[n] = b.const(t.detach().cpu().numpy(), tuple(t.shape),
                             dtype_code(t.dtype, f"constant {n.target}"))  # fmt: skip
            known[n] = t.detach()
        elif n.op == "call_function":
            if n.target is operator.getitem:
                env[n] = env[n.args[0]][n.args[1]]
                if n.args[0] in known:
                    known[n] = known[n.args[0]][n.args[1]]
                continue
            fn, in_place = _rule_for(n.target)
            if _foldable(n, known):
                twin = _functional_twin(n.target) or n.target  # an in-place op on a copy
                try:
                    val = twin(*known_arg(n.args), **known_arg(dict(n.kwargs)))
                except Exception:  # noqa: BLE001 - not foldable after all: lowered below
                    val = None
                if isinstance(val, tuple | list) and all(isinstance(v, torch.Tensor) for v in val):
                    known[n] = val
                if isinstance(val, torch.Tensor) and val.numel() <= MAX_FOLD_ELEMENTS:
                    known[n] = val
                    if twin is not n.target and isinstance(n.args[0], torch.fx.Node):
                        known[n.args[0]] = val
                    # no rule, or an input already folded: the value becomes a constant
                    if fn is None or any(d in folds for d in n.all_input_nodes):
                        env[n] = b.const(val.cpu().numpy(), tuple(val.shape),
                                         dtype_code(val.dtype, _name_of(n.target)))  # fmt: skip
                        if twin is not n.target and isinstance(n.args[0], torch.fx.Node):
                            env[n.args[0]] = env[n]
                        folds.add(n)
                        folded = True
                        continue
            if fn is None:
                raise LoweringError(
                    unsupported_message(
                        f"unsupported operator {_name_of(n.target)}", module, n.target, sample
                    )
                )
            if in_place:
                _check_in_place(n)
            meta = n.meta.get("val")
            try:
                out = fn(b, arg(n.args, fn in _TAKES_EMPTY), arg(dict(n.kwargs)), meta)
            except GraphError as e:
                raise LoweringError(unsupported_message(
                    f"lowering {_name_of(n.target)}: {e}", module, n.target, sample,
                    short=True)) from None  # fmt: skip
            except LoweringError as e:
                raise LoweringError(unsupported_message(
                    f"{_name_of(n.target)}: {e}", module, n.target, sample,
                    short=True)) from None  # fmt: skip
            if in_place:
                out = Writes(out, {0: out})
            if isinstance(out, Writes):
                for pos, vid in out.writes.items():
                    env[n.args[pos]] = vid
                out = out.result
            env[n] = out
        elif n.op == "output":
            outputs = arg(n.args[0])
    flat, _ = torch.utils._pytree.tree_flatten(outputs)
    if folded:
        flat = b.prune(flat)
    return flat, b


def _check_in_place(n: torch.fx.Node) -> None:
    """An in-place write is lowered by rebinding the written value; that is exact unless the
    written tensor is a view of another, or a view of it was taken before the write."""
    target = n.args[0]
    if not isinstance(target, torch.fx.Node):
        return
    if target.op == "call_function" and target.target in _VIEW_TARGETS:
        raise LoweringError(f"{_name_of(n.target)} writes into a view ({_name_of(target.target)})"
                            ": in-place writes into views are not supported")  # fmt: skip
    for user in target.users:
        if user is n:
            break
        # a view whose users come after the write would read the old contents
        if (user.op == "call_function" and user.target in _VIEW_TARGETS
                and any(u for u in user.users if _after(u, n))):  # fmt: skip
            raise LoweringError(f"{_name_of(n.target)} writes a tensor with a live view "
                                    f"({_name_of(user.target)})")  # fmt: skip


def _after(a: torch.fx.Node, b: torch.fx.Node) -> bool:
    node = b.next
    while node is not None and node.op != "root":
        if node is a:
            return True
        node = node.next
    return False


def _checked_trace(module: nn.Module, fn: Callable, args: tuple,
                   sample: tuple | None = None) -> torch.fx.GraphModule:  # fmt: skip
    """_trace, with torch's own refusals (a layer that updates a buffer in place, as
    BatchNorm's running statistics do, data-dependent control flow, ...) as one line."""
    import re

    try:
        return _trace(fn, args)
    except Exception as e:  # torch.func / make_fx refusing the user's module
        first = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
        named = re.search(r"aten[.:]+(\w+)(?:\.(\w+))?", str(e))
        packet = getattr(aten, named.group(1), None) if named else None
        target = getattr(packet, named.group(2) or "default", None) if packet else None
        raise LoweringError(unsupported_message(f"cannot trace the training step ({first})",
                                                module, target, sample)) from None  # fmt: skip


def unsupported_message(problem: str, module: nn.Module, target=None, sample=None,
                        short: bool = False) -> str:  # fmt: skip
    """One line: the problem, the layer whose forward (or backward) issued the ATen op where it
    can be found, and (unless `short`) the layers outside the supported set."""
    layer = _layer_of(module, target, sample) if target is not None else None
    if layer:
        problem = f"{problem} (in layer {layer})"
    if short:
        return problem
    leaves = {type(m).__name__ for _, m in module.named_modules() if not any(m.children())}
    layers = sorted(leaves - _KNOWN_MODULES)
    where = f" (layers outside the supported set: {', '.join(layers)})" if layers else ""
    return (f"{problem}{where}; supported layers: "
            f"{', '.join(SUPPORTED_LAYERS)}")  # fmt: skip


def _layer_of(module: nn.Module, target, sample) -> str | None:
    """`name (Type)` of the innermost layer whose forward or backward issues `target` once
    decomposed as the front end traces, or None: each layer's first call in a forward on
    `sample` is recorded, then traced (forward and backward, the same decompositions), deepest
    layers first. Only on the error path."""
    import copy

    from torch._decomp import core_aten_decompositions
    from torch.fx.experimental.proxy_tensor import make_fx

    if sample is None or not hasattr(target, "_schema"):
        return None
    try:
        m = copy.deepcopy(module).train()
        calls: dict[str, tuple] = {}
        hooks = [sub.register_forward_pre_hook(
                     lambda mod, args, name=name: calls.setdefault(name, (mod, args)) and None)
                 for name, sub in m.named_modules()]  # fmt: skip
        with torch.no_grad():
            m(*sample)
        for h in hooks:
            h.remove()
    except Exception:  # noqa: BLE001 - attribution is best effort; the message stands without it
        return None
    decomp = core_aten_decompositions()
    for name in sorted(calls, key=lambda n: -len(n.split(".")) if n else 1):
        sub, args = calls[name]
        if not all(isinstance(a, torch.Tensor) for a in args):
            continue

        def forward_backward(*xs, sub=sub):
            xs = [x.detach().requires_grad_() if x.is_floating_point() else x for x in xs]
            out = _logits_of(sub(*xs))
            wrt = [x for x in xs if x.requires_grad] + [p for p in sub.parameters()]
            if isinstance(out, torch.Tensor) and out.is_floating_point() and wrt:
                torch.autograd.grad(out.sum(), wrt, allow_unused=True)
            return out

        try:
            gm = make_fx(forward_backward, decomposition_table=decomp)(*args)
        except Exception:  # noqa: BLE001 - this layer cannot be traced alone: try its parents
            continue
        if any(n.target == target for n in gm.graph.nodes):
            return f"{name} ({type(sub).__name__})" if name else f"{type(sub).__name__}.forward"
    return None


_KNOWN_MODULES = {
    "Linear", "Conv2d", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "Flatten", "ReLU",
    "GELU", "SiLU", "Sigmoid", "Tanh", "LayerNorm", "RMSNorm", "BatchNorm1d", "BatchNorm2d",
    "Embedding", "Dropout", "Identity", "Sequential", "ModuleList", "ModuleDict",
}  # fmt: skip


# -- the bundle ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Lowered:
    bundle: Bundle
    state: list[tuple[str, torch.Tensor]]  # S_0 in protocol order


def _logits_of(out):
    return out if isinstance(out, torch.Tensor) else getattr(out, "logits", out)


def _forward_failed(x: torch.Tensor, e: Exception) -> LoweringError:
    return LoweringError(f"the model's forward failed on a batch of shape "
                         f"{tuple(x.shape)}: {type(e).__name__}: {e}"[:400])  # fmt: skip


def _fake_logits(module: nn.Module, x: torch.Tensor):
    """What the module's evaluating forward returns on x, run on fake tensors (shapes only);
    LoweringError naming the batch's shape where it fails."""
    try:
        with torch.no_grad(), _quiet_fake_tensors(), FakeTensorMode(allow_non_fake_inputs=True):
            return _logits_of(module.eval()(x))
    except Exception as e:  # the user's forward on a batch of the dataset's shape
        raise _forward_failed(x, e) from None
    finally:
        module.train()


def _traced_output(gm: torch.fx.GraphModule):
    """The (fake) value a traced graph returns."""
    out = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    if isinstance(out, list | tuple) and len(out) == 1:
        out = out[0]
    return out.meta.get("val") if isinstance(out, torch.fx.Node) else None


def _check_logits(logits, task: str, classes: int) -> None:
    want_rank = 3 if task == "lm" else 2
    if not isinstance(logits, torch.Tensor) or logits.dim() != want_rank:
        raise LoweringError(f"the model must return logits of rank {want_rank} for this dataset "
                            f"({'(B, T, V)' if task == 'lm' else '(B, C)'})")  # fmt: skip
    if logits.shape[-1] < classes:
        raise LoweringError(f"the model has {logits.shape[-1]} outputs; the dataset has "
                            f"{classes} classes")  # fmt: skip


def written_buffers(module: nn.Module, x: torch.Tensor) -> list[str]:
    """The buffers a training forward writes in place (BatchNorm's running statistics and
    batch count), found on a copy of the module so the original keeps its values."""
    import copy

    if next(module.buffers(), None) is None:
        return []  # nothing a forward could write: no forward to run
    # the copy shares the parameters (a forward does not write them): only buffers are copied
    m = copy.deepcopy(module, {id(p): p for p in module.parameters()}).train()
    # a kernel may write a buffer without bumping its version (BatchNorm's CPU kernel does)
    before = {n: (b._version, b.clone()) for n, b in m.named_buffers()}
    with torch.no_grad():
        m(x)
    return [n for n, b in m.named_buffers()
            if b._version != before[n][0] or not torch.equal(b, before[n][1])]  # fmt: skip


def tied_names(module: nn.Module) -> dict[str, str]:
    """Every alias of a shared parameter (weight tying) -> the name `named_parameters()` gives
    it (its first)."""
    first: dict[int, str] = {}
    out = {}
    for name, p in module.named_parameters(remove_duplicate=False):
        if id(p) in first:
            out[name] = first[id(p)]
        else:
            first[id(p)] = name
    return out


def build_bundle(
    module: nn.Module,
    opt: Optimizer,
    batch: int,
    task: str,
    item_shape: Shape,
    classes: int,
    meta: dict | None = None,
    recipe: Recipe = Recipe(),
    stages: int = 1,
    stage_split: list[str] | None = None,
) -> Lowered:
    """Lower `module`'s training step for batches of `batch` examples of `item_shape`; with
    `stages` > 1, add the plan of that many pipeline stages (agents/model/stages.py), the
    micro-batches being the recipe's `accumulate`."""
    with _collected_after():
        return _build_bundle(
            module, opt, batch, task, item_shape, classes, meta, recipe, stages, stage_split
        )


@contextlib.contextmanager
def _collected_after():
    """Python's cyclic garbage collector paused for the call. Tracing makes hundreds of
    thousands of small objects that live until the trace ends: the collector's passes over them
    (every few hundred allocations, and whole-heap ones as the heap grows) find little to free
    and were a tenth of nanoGPT's lowering. The garbage left (fake tensors: no data) is the next
    automatic pass's."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _build_bundle(module: nn.Module, opt: Optimizer, batch: int, task: str, item_shape: Shape,
                  classes: int, meta: dict | None, recipe: Recipe, stages: int,
                  stage_split: list[str] | None) -> Lowered:  # fmt: skip
    for name, t in list(module.named_parameters()) + list(module.named_buffers()):
        if t.is_floating_point() and t.dtype != torch.float32:
            raise LoweringError(f"{name} has dtype {t.dtype}: only float32 modules are "
                                "supported; call .float() on the module")  # fmt: skip
    if recipe.accumulate < 1 or batch % recipe.accumulate:
        raise LoweringError(f"the batch ({batch}) must be a multiple of the micro-batches "
                            f"accumulated ({recipe.accumulate})")  # fmt: skip
    split = None
    if stages > 1:
        from agents.model import stage_plan as stg

        if opt.clip_norm is not None:
            raise LoweringError("global-norm gradient clipping couples every stage (one norm over "
                                "all gradients): not yet supported with --stages; drop "
                                "--clip-norm")  # fmt: skip
        tied = tied_names(module)
        if tied:
            alias, name = next(iter(tied.items()))
            raise LoweringError(
                f"a weight shared between modules ({alias} is {name}, a tied "
                "embedding) couples the stages: not yet supported with --stages"
            )
        try:
            split = stg.stage_modules(module, stages, stage_split)
        except stg.StageError as e:
            raise LoweringError(str(e)) from None
    module.train()
    named = [(n, p.detach()) for n, p in module.named_parameters()]
    pnames = [n for n, _ in named]
    params = [p.clone() for _, p in named]
    gen = torch.Generator().manual_seed(0)
    if task == "lm":
        x = torch.randint(0, classes, (batch, *item_shape), generator=gen)
        y = torch.randint(0, classes, (batch, *item_shape), generator=gen)
    else:
        x = torch.rand((batch, *item_shape), generator=gen)
        y = torch.randint(0, classes, (batch,), generator=gen)
    try:
        written = written_buffers(module, x)
    except Exception as e:  # the user's forward on a batch of the dataset's shape
        raise _forward_failed(x, e) from None
    all_buffers = dict(module.named_buffers())
    bufs = [(n, all_buffers[n].dtype) for n in written]
    buf0 = [all_buffers[n].detach().to(torch.float32).clone() for n in written]
    bnames = [f"b.{n}" for n in written]

    def fwd(ps, bs, xx):
        named_state = dict(zip(pnames, ps, strict=True)) | dict(zip(written, bs, strict=True))
        return module_logits(module, named_state, xx)

    # Both traces run on fake tensors (shapes and dtypes, no data): lowering never computes the
    # model, so its time and memory do not grow with the batch's arithmetic (a real-valued trace
    # of nanoGPT's configuration took minutes and GBs). The forward graph's trace comes first:
    # its output is the shape check (the logits' rank and width), no forward of its own.
    module.eval()  # the forward graph evaluates: dropout off, BatchNorm's running statistics
    try:
        fgm = _trace(fwd, (params, buf0, x))
    except Exception:  # say what the user's forward got wrong, as its own run finds it
        fgm = None
        _check_logits(_fake_logits(module, x), task, classes)
    finally:
        module.train()
    if fgm is not None:
        _check_logits(_traced_output(fgm), task, classes)
    state0 = buf0 + initial_opt_state(opt.kind, params)
    hyper = opt.hyper()
    hyper_t = [torch.tensor(v, dtype=torch.float32) for v in hyper.values()]
    step_in = torch.zeros(3, dtype=torch.int32)
    step = make_step(module, pnames, opt, tuple(bufs), recipe)
    units = [u for stage in split for u, _ in stage] if split is not None else []
    with module_tags(module, units) if units else contextlib.nullcontext():
        gm = _checked_trace(module, step, (params, state0, hyper_t, x, y, step_in), (x,))
    snames = [f"p.{n}" for n in pnames] + bnames + _opt_state_names(opt.kind, pnames)
    inames = snames + [f"hp.{h}" for h in hyper] + ["x", "y", STEP_INPUT]
    flat, b = lower(gm, inames, module, (x,))
    flat = b.drop_input(STEP_INPUT, flat)
    outs = [(name, vid) for name, vid in zip(snames, flat[:-1], strict=True)]
    outs.append(("loss", flat[-1]))
    step_graph = b.graph(outs)
    node_units = list(b.tags)

    module.eval()
    try:
        if fgm is None:  # the forward runs alone but does not trace: torch's refusal, in one line
            fgm = _checked_trace(module, fwd, (params, buf0, x), (x,))
        fflat, fb = lower(fgm, [f"p.{n}" for n in pnames] + bnames + ["x"], module, (x,))
    finally:
        module.train()
    fwd_graph = fb.graph([("logits", fflat[0])])
    all_state = params + state0
    state = [(n, t.contiguous()) for n, t in zip(snames, all_state, strict=True)]
    buffers = {}
    for name, t in module.named_buffers():
        if name in dict(module.state_dict()):
            arr = t.detach().cpu()
            dt = dtype_code(arr.dtype, f"buffer {name}")
            words = (arr.numpy().astype(np.float32).view(np.uint32) if dt == "f32"
                     else arr.to(torch.int64).numpy().astype(np.int32).view(np.uint32))  # fmt: skip
            buffers[name] = {"shape": list(arr.shape), "dtype": str(arr.dtype).removeprefix(
                "torch."), "words": [int(w) for w in words.reshape(-1)]}  # fmt: skip
    bundle = Bundle(
        step=step_graph,
        forward=fwd_graph,
        state=tuple(Value(n, tuple(t.shape), "f32") for n, t in state),
        params={f"p.{n}": n for n in pnames},
        buffers=buffers,
        hyper=tuple(hyper),
        task=task,
        item_shape=tuple(item_shape),
        meta=meta or {},
        tied=tied_names(module),
    )
    if split is not None:
        plan = _stage_plan(module, bundle, split, recipe.accumulate, node_units)
        bundle = replace(bundle, stages=plan)
    return Lowered(bundle, state)


def _stage_plan(module: nn.Module, bundle: Bundle, split, micro_batches: int,
                node_units: list[str | None]) -> dict:  # fmt: skip
    from agents.model import stage_plan as stg

    pstage, bstage = stg.module_stage_maps(module, split)
    owner = stg.state_stages(bundle.state, pstage, bstage)
    modules = [[u for u, _ in s] for s in split]
    try:
        p = stg.plan(bundle.step, bundle.state, owner, modules, micro_batches,
                     stg.node_module_table(modules, node_units))  # fmt: skip
    except stg.StageError as e:
        raise LoweringError(str(e)) from None
    return p.to_obj()
