"""The engine's step graph as the chain sees it: node descriptors, graph root and the dispute
config of a job (PROTOCOL §7.2). Pure functions of the job spec and the dataset size.
"""

from __future__ import annotations

from dataclasses import dataclass

from agents.dispute.encoding import (
    DTYPE_F32,
    DTYPE_U32,
    KIND_BATCH,
    KIND_DATA_X,
    KIND_DATA_Y,
    KIND_NODE,
    KIND_STATE,
    OPS,
    DisputeConfig,
    NodeDesc,
    Operand,
    graph_root,
    name_hash,
)
from agents.training.graph import StepGraph, build_step_graph
from agents.training.spec import JobSpec
from agents.training.state import param_shape, state_names


@dataclass(frozen=True)
class JobGraph:
    """A job's step graph with its chain encodings."""

    graph: StepGraph
    nodes: tuple[NodeDesc, ...]
    config: DisputeConfig

    @property
    def root(self) -> bytes:
        return self.config.graph_root


def _operand(ref: str, g: StepGraph, names: list[str], n_examples: int) -> Operand:
    if ref in names:
        rows, cols = param_shape(g.widths, ref.removeprefix("m."))
        return Operand(KIND_STATE, names.index(ref), name_hash(ref), DTYPE_F32, rows, cols)
    if ref == "X":
        return Operand(KIND_DATA_X, 0, bytes(32), DTYPE_F32, n_examples, g.widths[0])
    if ref == "Y":
        return Operand(KIND_DATA_Y, 0, bytes(32), DTYPE_U32, 1, n_examples)
    if ref == "idx":
        return Operand(KIND_BATCH, 0, bytes(32), DTYPE_U32, 1, g.batch)
    src = g.node(ref)
    dtype = DTYPE_U32 if src.dtype == "u32" else DTYPE_F32
    return Operand(KIND_NODE, src.index, bytes(32), dtype, src.shape[0], src.shape[1])


def node_descriptors(spec: JobSpec, n_examples: int) -> tuple[StepGraph, list[NodeDesc]]:
    g = build_step_graph(spec.widths, spec.batch)
    names = state_names(spec.widths)
    out = []
    for node in g.nodes:
        param = {"momentum": spec.momentum_bits, "sgd": spec.lr_bits}.get(node.op, 0)
        dtype = DTYPE_U32 if node.dtype == "u32" else DTYPE_F32
        ins = tuple(_operand(r, g, names, n_examples) for r in node.inputs)
        out.append(NodeDesc(OPS[node.op], dtype, node.shape[0], node.shape[1], param, ins))
    return g, out


def job_graph(spec: JobSpec, n_examples: int) -> JobGraph:
    """Node descriptors, graph root and dispute config of a job over N = n_examples examples."""
    g, nodes = node_descriptors(spec, n_examples)
    names = state_names(spec.widths)
    cfg = DisputeConfig(
        graph_root=graph_root(nodes),
        num_nodes=len(nodes),
        batch_size=spec.batch,
        num_examples=n_examples,
        seed=spec.seed,
        state_names=tuple(name_hash(n) for n in names),
        state_producers=tuple(g.index_of(g.next_state[n]) for n in names),
    )
    return JobGraph(g, tuple(nodes), cfg)
