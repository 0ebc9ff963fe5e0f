"""The plan of a pipelined step (PROTOCOL §5.4): the step graph's nodes placed on P stages at
module boundaries, the segments' order and the boundary tensors between stages. Running it:
agents/model/stages.py. The functions take the step graph (`agents.training.ir.Graph`) untyped:
bundle.py imports this module to check a decoded bundle's plan.

The step graph stays the one graph a non-pipelined job runs; a pipelined bundle adds a plan:
which stage holds each state tensor, which stage runs each node, the order of the stages'
segments, and the values that cross stages (the boundary tensors). Everything but the state
split and each node's unit is derived from the graph (`plan`), so a loaded plan is checked by
deriving it again.

Placement of a node: a node that reads no state (transitively; constants, index maps of x and
y) is public: each segment recomputes the ones it reads. Any other node goes where its module
is: lowering tags each node with the split unit whose forward made it, or whose forward it
differentiates (`node_module`, committed in the plan), so a layer's forward and backward stay
whole on its stage and a 2-stage split crosses once each way per micro-batch (the activation
forward, its gradient back). A node of no unit (the model's own code between units, the loss,
gradient sums, the optimizer's update) goes on the latest stage among its inputs: a
parameter's update where its gradient and state are, the loss on the last stage, and what
reads the optimizer's shared scalars (Adam's beta^t, stage 0) on the stage that reads them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from torch import nn

from agents.training.registry import GraphError

PUBLIC = -1
SHARED_STAGE = 0  # state tensors of no module (Adam's beta^t scalars) live on stage 0


class StageError(ValueError):
    """A pipeline the stages cannot (yet) express: one line for the user."""


# -- modules and their partition ---------------------------------------------------------------

_CONTAINERS = (nn.ModuleList, nn.Sequential, nn.ModuleDict)


def _holds_layers(m: nn.Module) -> bool:
    """Whether a layer list (a non-empty container) lies below `m`, not inside a list's element:
    a Hugging Face model's `transformer.h` or `model.layers`."""
    for child in m.children():
        if isinstance(child, _CONTAINERS) and len(child):
            return True
        if not isinstance(child, _CONTAINERS) and _holds_layers(child):
            return True
    return False


def split_units(module: nn.Module) -> list[tuple[str, list[str]]]:
    """The modules a pipeline may split between, in definition order, with the parameters each
    owns: the module's children; containers (ModuleList, Sequential, ModuleDict) opened into
    their elements, and so is any module holding one below it (a Hugging Face GPT-2's
    `transformer`: its `wte`, `wpe`, `h.0`, ..., `ln_f`), but never a list's element (a block
    stays whole); parameters held directly by the root or an opened module each on their own.
    Units without parameters are left out (nothing to hold)."""
    owner = {id(p): n for n, p in module.named_parameters()}  # a tied parameter: first name
    units: list[tuple[str, list[str]]] = []

    def walk(m: nn.Module, prefix: str) -> None:
        in_list = isinstance(m, _CONTAINERS)
        for n, p in m.named_parameters(recurse=False):
            name = prefix + n
            if owner.get(id(p)) == name:
                units.append((name, [name]))
        for n, child in m.named_children():
            name = prefix + n
            if isinstance(child, _CONTAINERS) and len(child):
                walk(child, name + ".")
                continue
            if not in_list and not isinstance(child, _CONTAINERS) and _holds_layers(child):
                walk(child, name + ".")  # a model's trunk: open it down to its layers
                continue
            ps = [name + "." + k for k, p in child.named_parameters()
                  if owner.get(id(p)) == name + "." + k]  # fmt: skip
            if ps:
                units.append((name, ps))

    walk(module, "")
    return units


def balanced_split(sizes: list[int], p: int) -> list[int]:
    """The first unit of each stage (0 first) of the contiguous split of `sizes` into p groups
    whose largest group is smallest (ties: the earliest cut)."""
    n = len(sizes)
    pre = [0]
    for s in sizes:
        pre.append(pre[-1] + s)
    INF = float("inf")
    # best[k][i]: the smallest largest group of units[:i] in k groups; cut[k][i]: its last cut
    best = [[INF] * (n + 1) for _ in range(p + 1)]
    cut = [[0] * (n + 1) for _ in range(p + 1)]
    best[0][0] = 0
    for k in range(1, p + 1):
        for i in range(k, n + 1):
            for j in range(k - 1, i):
                v = max(best[k - 1][j], pre[i] - pre[j])
                if v < best[k][i]:
                    best[k][i], cut[k][i] = v, j
    starts, i = [], n
    for k in range(p, 0, -1):
        i = cut[k][i]
        starts.append(i)
    return starts[::-1]


def stage_modules(module: nn.Module, p: int, split: list[str] | None = None
                  ) -> list[list[tuple[str, list[str]]]]:  # fmt: skip
    """The units of each of p stages: balanced by parameter bytes, or cut before the modules
    `split` names (the first module of each later stage)."""
    units = split_units(module)
    names = [u for u, _ in units]
    if split is not None:
        if len(split) != p - 1:
            raise StageError(f"--stage-split names {len(split)} modules; {p} stages need {p - 1}")
        for s in split:
            if s not in names:
                raise StageError(f"--stage-split: {s!r} is not a splittable module (these are: "
                                 f"{', '.join(names)})"[:400])  # fmt: skip
        starts = [0] + [names.index(s) for s in split]
        if starts != sorted(set(starts)) or starts[1] == 0:
            raise StageError("--stage-split must name modules in order, after the first one")
    else:
        if p > len(units):
            raise StageError(f"--stages {p} exceeds the model's {len(units)} splittable modules")
        params = dict(module.named_parameters())
        starts = balanced_split([sum(4 * params[n].numel() for n in ps) for _, ps in units], p)
    ends = starts[1:] + [len(units)]
    return [units[a:b] for a, b in zip(starts, ends, strict=True)]


def state_stages(state: Iterable, param_stage: dict[str, int],
                 buffer_stage: dict[str, int]) -> dict[str, int]:  # fmt: skip
    """Each protocol state tensor's stage: a parameter's and its optimizer state's (m., v.) from
    its module; a kept buffer (b.) from its module; any other (Adam's b1t, b2t) stage 0."""
    out = {}
    for v in state:
        n = v.name
        if n.startswith(("p.", "m.", "v.")):  # a parameter, its momentum, its second moment
            out[n] = param_stage[n[2:]]
        elif n.startswith("b."):
            out[n] = buffer_stage[n[2:]]
        else:
            out[n] = SHARED_STAGE
    return out


def module_stage_maps(module: nn.Module, stages) -> tuple[dict[str, int], dict[str, int]]:
    """(parameter module name -> stage, buffer module name -> stage) of a stage split."""
    pstage = {n: s for s, units in enumerate(stages) for _, ps in units for n in ps}
    bstage = {}
    prefixes = [(u + ".", s) for s, units in enumerate(stages) for u, _ in units]
    for n, _ in module.named_buffers():
        bstage[n] = next((s for pre, s in prefixes if n.startswith(pre)), SHARED_STAGE)
    return pstage, bstage


# -- the plan ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class StagePlan:
    modules: tuple[tuple[str, ...], ...]  # each stage's modules (split units), in order
    state: tuple[tuple[str, ...], ...]  # each stage's state tensors, in state-root order
    micro_batches: int  # M: the step graph sums the gradients of M micro-batches in order
    node_stage: tuple[int, ...]  # each node's stage, PUBLIC (-1) for recomputed public nodes
    # each node's split unit, as its index in the stages' modules in order (-1: of no unit)
    node_module: tuple[int, ...]
    schedule: tuple[tuple[int, tuple[int, ...]], ...]  # (stage, its nodes) in run order
    boundaries: tuple[tuple[int, int, tuple[int, ...]], ...]  # (value id, producer, consumers)

    @property
    def P(self) -> int:
        return len(self.state)

    def to_obj(self) -> dict:
        return {
            "modules": [list(m) for m in self.modules],
            "state": [list(s) for s in self.state],
            "micro_batches": self.micro_batches,
            "node_stage": list(self.node_stage),
            "node_module": list(self.node_module),
            "schedule": [[s, list(ns)] for s, ns in self.schedule],
            "boundaries": [[v, p, list(c)] for v, p, c in self.boundaries],
        }

    @staticmethod
    def from_obj(o: dict) -> StagePlan:
        try:
            return StagePlan(
                tuple(tuple(str(x) for x in m) for m in o["modules"]),
                tuple(tuple(str(x) for x in s) for s in o["state"]),
                int(o["micro_batches"]),
                tuple(int(x) for x in o["node_stage"]),
                tuple(int(x) for x in o["node_module"]),
                tuple((int(s), tuple(int(x) for x in ns)) for s, ns in o["schedule"]),
                tuple((int(v), int(p), tuple(int(x) for x in c)) for v, p, c in o["boundaries"]),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise GraphError(f"malformed stage plan: {e!r}"[:300]) from None


def node_module_table(modules, node_units: list[str | None]) -> list[int]:
    """Each node's unit (a module name, or None) as its index in the stages' modules in order."""
    index = {u: k for k, u in enumerate(u for stage in modules for u in stage)}
    return [index[u] if u is not None else -1 for u in node_units]


def _place(g, owner: dict[str, int], node_module: tuple[int, ...], unit_stage: list[int]
           ) -> list[int]:  # fmt: skip
    """Each node's stage (see the module docstring)."""
    n_in = len(g.inputs)
    stage = [owner.get(v.name, PUBLIC) for v in g.inputs] + [PUBLIC] * len(g.nodes)
    for i, n in enumerate(g.nodes):
        ins = [stage[v] for v in n.inputs if stage[v] != PUBLIC]
        if not ins:
            continue  # reads no state: public
        stage[n_in + i] = unit_stage[node_module[i]] if node_module[i] >= 0 else max(ins)
    return stage[n_in:]


def _check_locality(g, owner: dict[str, int], node_stage: list[int]) -> None:
    n_in = len(g.inputs)
    for i, n in enumerate(g.nodes):
        for v in n.inputs:
            if v < n_in and g.inputs[v].name in owner and owner[g.inputs[v].name] != node_stage[i]:
                name = g.inputs[v].name
                raise StageError(
                    f"state tensor {name} of stage {owner[name]} is read by stage {node_stage[i]}"
                    " (a weight shared across stages, e.g. a tied embedding?): the stages cannot "
                    "express this yet; put both modules on one stage with --stage-split"
                )
    for name, vid in g.outputs:
        if name in owner and vid >= n_in and node_stage[vid - n_in] != owner[name]:
            raise StageError(
                f"state tensor {name} of stage {owner[name]} is computed by stage "
                f"{node_stage[vid - n_in]}: the stages cannot express this yet"
            )


def _schedule(g, node_stage: list[int], P: int) -> list[tuple[int, tuple[int, ...]]]:
    """Segments in run order: sweeps over the stages forward (0..P-1), then backward, and so
    on; each stage runs, in node order, every node of its own whose inputs exist."""
    n_in = len(g.inputs)
    done = [s == PUBLIC for s in node_stage]  # public nodes: recomputed wherever read
    left = sum(not d for d in done)
    out = []
    forward = True
    while left:
        progressed = False
        for s in range(P) if forward else range(P - 1, -1, -1):
            seg = []
            for i, n in enumerate(g.nodes):
                if done[i] or node_stage[i] != s:
                    continue
                if all(v < n_in or done[v - n_in] for v in n.inputs):
                    done[i] = True
                    seg.append(i)
            if seg:
                out.append((s, tuple(seg)))
                left -= len(seg)
                progressed = True
        if not progressed:
            raise StageError("the stage plan has no next segment")  # a cycle: cannot happen
        forward = not forward
    return out


def plan(g, state: Iterable, owner: dict[str, int], modules, micro_batches: int,
         node_module: Iterable[int]) -> StagePlan:  # fmt: skip
    """The stage plan of a step graph, from each state tensor's stage and each node's unit (an
    index in the stages' modules in order, -1 for none: `node_module_table`)."""
    state = list(state)
    P = len(modules)
    node_module = tuple(node_module)
    unit_stage = [s for s, units in enumerate(modules) for _ in units]
    if len(node_module) != len(g.nodes) or any(not -1 <= k < len(unit_stage)
                                               for k in node_module):  # fmt: skip
        raise GraphError(f"stage plan: node_module must give each of the {len(g.nodes)} nodes a "
                         f"unit in 0..{len(unit_stage) - 1} or -1")  # fmt: skip
    node_stage = _place(g, owner, node_module, unit_stage)
    _check_locality(g, owner, node_stage)
    sched = _schedule(g, node_stage, P)
    n_in = len(g.inputs)
    consumers: dict[int, set[int]] = {}
    for i, n in enumerate(g.nodes):
        s = node_stage[i]
        if s == PUBLIC:
            continue
        for v in n.inputs:
            if v >= n_in and node_stage[v - n_in] not in (PUBLIC, s):
                consumers.setdefault(v, set()).add(s)
    for name, vid in g.outputs:
        if name not in owner and vid >= n_in and node_stage[vid - n_in] not in (PUBLIC, P - 1):
            consumers.setdefault(vid, set()).add(P - 1)  # the loss is reported by the last stage
    bounds = tuple(
        (v, node_stage[v - n_in], tuple(sorted(c))) for v, c in sorted(consumers.items())
    )
    return StagePlan(
        tuple(tuple(m) for m in modules),
        tuple(tuple(v.name for v in state if owner[v.name] == s) for s in range(P)),
        micro_batches,
        tuple(node_stage),
        node_module,
        tuple(sched),
        bounds,
    )


def check_plan(g, state: Iterable, p: StagePlan) -> None:
    """A loaded plan is the one its step graph, state split and node_module table give."""
    owner = {n: s for s, names in enumerate(p.state) for n in names}
    state = list(state)
    if sorted(owner) != sorted(v.name for v in state):
        raise GraphError("stage plan must place every state tensor on exactly one stage")
    if len(p.modules) != p.P:
        raise GraphError("stage plan lists modules for another number of stages")
    try:
        again = plan(g, state, owner, p.modules, p.micro_batches, p.node_module)
    except StageError as e:  # a node_module table that puts a state tensor's reader elsewhere
        raise GraphError(f"stage plan: {e}"[:300]) from None
    if again != p:
        raise GraphError("stage plan is not the one its step graph, state split and node "
                         "modules give")  # fmt: skip
