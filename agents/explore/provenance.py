"""Which module of the submitter's PyTorch model a step-graph node came from, for the dispute
page ("node 64: div, in blocks.0.attn").

A model bundle records no per-node provenance (the lowering keeps none), so it is inferred from
the data flow of the committed graph: the parameters nearest the node upstream (the weights its
value is computed from) and downstream (the first nodes that combine it with a weight), and the
deepest module that holds all of them. An attention softmax reads the output of `attn.c_attn`
and feeds `attn.c_proj`: it is in `attn`. A node between two blocks (a residual sum) is in the
model itself; a node of the optimizer's update of one tensor is in that tensor's module. It is
a reading aid, said as inferred on the page, never used to decide anything.
"""

from __future__ import annotations

from collections import defaultdict, deque

from agents.model.bundle import Bundle

MODEL = "(the model itself)"


def node_module(bundle: Bundle, node: int) -> str:
    """The module of step-graph node `node` (index among the nodes), as dotted `state_dict`
    path, or MODEL when its nearest parameters span the whole model."""
    g = bundle.step
    n_in = len(g.inputs)
    if not 0 <= node < len(g.nodes):
        return f"unknown: the model has {len(g.nodes)} nodes, not node {node}"
    params = {i: bundle.params[v.name] for i, v in enumerate(g.inputs) if v.name in bundle.params}
    names = _nearest_up(g, n_in + node, params) | _nearest_down(g, n_in + node, params, n_in)
    return _common_module(names) or MODEL


def _nearest_up(g, start: int, params: dict[int, str]) -> set[str]:
    """The parameters at the least distance upstream of value `start`."""
    n_in = len(g.inputs)
    seen, queue, found, best = {start}, deque([(start, 0)]), set(), None
    while queue:
        v, d = queue.popleft()
        if best is not None and d > best:
            break
        if v in params:
            found.add(params[v])
            best = d
            continue
        if v < n_in:
            continue
        for u in g.nodes[v - n_in].inputs:
            if u not in seen:
                seen.add(u)
                queue.append((u, d + 1))
    return found


def _nearest_down(g, start: int, params: dict[int, str], n_in: int) -> set[str]:
    """The parameters read by the nearest nodes downstream of value `start` that read one."""
    users: dict[int, list[int]] = defaultdict(list)
    for i, n in enumerate(g.nodes):
        for v in n.inputs:
            users[v].append(n_in + i)
    seen, queue, found, best = {start}, deque([(start, 0)]), set(), None
    while queue:
        v, d = queue.popleft()
        if best is not None and d >= best:
            break
        for w in users[v]:
            read = [params[u] for u in g.nodes[w - n_in].inputs if u in params]
            if read:
                found.update(read)
                best = d + 1
            elif w not in seen:
                seen.add(w)
                queue.append((w, d + 1))
    return found


def _common_module(names: set[str]) -> str:
    """The deepest module holding every parameter of `names` ("" for none in common)."""
    if not names:
        return ""
    paths = [n.split(".")[:-1] for n in names]
    common = []
    for parts in zip(*paths, strict=False):
        if any(p != parts[0] for p in parts):
            break
        common.append(parts[0])
    return ".".join(common)
