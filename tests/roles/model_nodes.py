"""Build a version-3 job with `job build` and say which step-graph nodes the lowering of chosen
PyTorch operations produced, so a test can put a fault in "a layer-norm backward node" or "an
attention softmax node" without hard-coding node numbers that any lowering change would move.

Provenance is recorded while the spec is built (the spec and its blobs are the real ones):
  * an ATen op lowered by a rule of its own (`aten._softmax`): the nodes its rule added;
  * an ATen op that torch decomposes while tracing (`aten.native_layer_norm_backward`): its
    decomposition is wrapped, the traced ops it emits are marked, and the nodes their rules add
    are its nodes.
The step graph is the first graph `job build` traces (the forward graph comes second), and the
lowering visits its call nodes in order, one rule call each (agents/model/lower.py `lower`).
"""

from __future__ import annotations

import operator
from collections import defaultdict

import torch

from agents.__main__ import main

aten = torch.ops.aten
#: ATen ops torch decomposes while tracing: their decomposition's nodes are theirs.
DECOMPOSED = {aten.native_layer_norm_backward.default: "layer_norm_backward"}
#: ATen ops lowered by a rule of their own.
RULED = {aten._softmax.default: "softmax"}


def build_with_provenance(monkeypatch, argv: list[str]) -> dict[str, list[int]]:
    """Run `python -m agents job build ARGV`; return {op label: step-graph node indices}."""
    import torch._decomp as decomp
    from torch.fx.experimental import proxy_tensor

    from agents.model import lower

    marked: dict[torch.fx.Node, str] = {}
    table = decomp.core_aten_decompositions

    def marking_table():
        out = dict(table())
        for op, label in DECOMPOSED.items():
            inner = out[op]

            def wrapped(*a, _inner=inner, _label=label, **kw):
                graph = proxy_tensor.get_proxy_mode().tracer.graph
                before = set(graph.nodes)
                result = _inner(*a, **kw)
                marked.update({n: _label for n in graph.nodes if n not in before})
                return result

            out[op] = wrapped
        return out

    traced: list[torch.fx.GraphModule] = []
    checked_trace = lower._checked_trace

    def keep_trace(module, fn, args, *rest):
        traced.append(checked_trace(module, fn, args, *rest))
        return traced[-1]

    spans: list[tuple[int, int]] = []

    class SpanRules(dict):
        def get(self, key, default=None):
            rule = dict.get(self, key, default)
            if rule is None:
                return rule

            def spanning(b, *a):
                first = len(b.nodes)
                out = rule(b, *a)
                spans.append((first, len(b.nodes)))
                return out

            return spanning

    monkeypatch.setattr(decomp, "core_aten_decompositions", marking_table)
    # the front end builds its table once per process (lower._decompositions, cached): an
    # earlier build in this process would hand the trace the unmarked one
    monkeypatch.setattr(lower, "_decompositions", marking_table)
    monkeypatch.setattr(lower, "_checked_trace", keep_trace)
    monkeypatch.setattr(lower, "_RULES", SpanRules(lower._RULES))
    assert main(["job", "build", *argv]) == 0
    monkeypatch.undo()
    calls = [n for n in traced[0].graph.nodes
             if n.op == "call_function" and n.target is not operator.getitem]  # fmt: skip
    nodes: dict[str, list[int]] = defaultdict(list)
    for n, (first, end) in zip(calls, spans, strict=False):
        label = marked.get(n) or RULED.get(n.target)
        if label is not None:
            nodes[label].extend(range(first, end))
    return dict(nodes)


def first_run(nodes: list[int]) -> list[int]:
    """The first contiguous run of `nodes` (ascending): one call's nodes, e.g. the first layer
    norm's backward of the step."""
    run = nodes[:1]
    for i in nodes[1:]:
        if i != run[-1] + 1:
            break
        run.append(i)
    return run
