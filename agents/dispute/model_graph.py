"""A version-3 job's step graph as the chain sees it (PROTOCOL §7.2): `GraphNode` descriptors,
the graph root and the dispute config from the model bundle; which input elements the one-step
proof of an output element reads (the registry's dependency rule, with the data-dependent reads
of the indexing operators resolved from the step's values); and the openings of those elements.
Pure functions of the job and of one step's values (S_t, the batch, the op trace).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np
import torch

from agents.dispute import reduction
from agents.dispute.encoding import (
    DTYPE_F32,
    DTYPE_U32,
    KIND_BATCH_X,
    KIND_BATCH_Y,
    KIND_CONST,
    KIND_NODE,
    KIND_STATE,
    KIND_STEP,
    KIND_WINDOW_X,
    KIND_WINDOW_Y,
    KIND_WORD,
    DisputeConfig,
    GraphNode,
    TensorInput,
    graph_root,
    name_hash,
)
from agents.dispute.trace import merkle_opening
from agents.dispute.trace_walk import TraceRoots, trace_siblings
from agents.model.bundle import STEP_INPUT
from agents.model.job import ModelJob, commit_view, state_root
from agents.training import merkle
from agents.training.ir import Graph
from agents.training.registry import OPS, GraphError, ravel, run_node, unravel


def _dtype(dt: str) -> int:
    return DTYPE_F32 if dt == "f32" else DTYPE_U32


@dataclass(frozen=True)
class ModelJobGraph:
    """A version-3 job's step graph with its chain encodings. Value ids are the graph's: the
    step's inputs (state, hyper-parameters, x, y) first, then one per node."""

    graph: Graph
    nodes: tuple[GraphNode, ...]
    config: DisputeConfig
    token: bool  # x and y are token windows (a language model), else dataset rows and labels

    @property
    def root(self) -> bytes:
        return self.config.graph_root

    @property
    def n_inputs(self) -> int:
        return len(self.graph.inputs)


def _input(job: ModelJob, vid: int, token: bool) -> TensorInput:
    """The descriptor operand of graph input `vid` (a state tensor, a hyper-parameter, x, y or
    the step input)."""
    b = job.bundle
    v = b.step.inputs[vid]
    n_state, n_hyper = len(b.state), len(b.hyper)
    dt, shape = _dtype(v.dtype), tuple(v.shape)
    if vid < n_state:
        return TensorInput(KIND_STATE, vid, name_hash(v.name), dt, shape)
    if vid < n_state + n_hyper:
        word = int(dict(job.spec.hyper_bits)[b.hyper[vid - n_state]])
        return TensorInput(KIND_WORD, 0, word.to_bytes(32, "big"), dt, shape)
    if v.name == STEP_INPUT:
        return TensorInput(KIND_STEP, 0, bytes(32), dt, shape)
    if v.name == "x":
        return TensorInput(KIND_WINDOW_X if token else KIND_BATCH_X, 0, bytes(32), dt, shape)
    return TensorInput(KIND_WINDOW_Y if token else KIND_BATCH_Y, 0, bytes(32), dt, shape)


def model_job_graph(job: ModelJob) -> ModelJobGraph:
    """Descriptors, graph root and dispute config of a version-3 job (N = its batch positions:
    examples, or window starts of a token stream)."""
    g, b = job.bundle.step, job.bundle
    token = b.task == "lm"
    nodes = encode_nodes(g, [_input(job, v, token) for v in range(len(g.inputs))])
    cfg = graph_config(g, nodes, [v.name for v in b.state], job.spec.batch, job.positions(),
                       job.spec.seed)  # fmt: skip
    return ModelJobGraph(g, tuple(nodes), cfg, token)


def encode_nodes(g: Graph, inputs: list[TensorInput]) -> list[GraphNode]:
    """Each node of `g` as the chain sees it (PROTOCOL §7.2), `inputs` the descriptor operand of
    each graph input (by value id)."""
    n_in = len(g.inputs)
    nodes = []
    for node in g.nodes:
        if node.op == "const":
            # A constant's words are committed by their tensor root: the descriptor stays small
            # whatever the constant's size (an index map of a convolution has thousands).
            root = merkle.tensor_root(commit_view(run_node(node, [], False, "cpu")))
            ins = (TensorInput(KIND_CONST, 0, root, _dtype(node.dtype), tuple(node.shape)),)
            attrs: tuple[int, ...] = ()
        else:
            ins = tuple(
                inputs[v]
                if v < n_in
                else TensorInput(
                    KIND_NODE, v - n_in, bytes(32), _dtype(g.value(v)[1]), tuple(g.value(v)[0])
                )  # fmt: skip
                for v in node.inputs
            )
            attrs = tuple(int(a) & ((1 << 256) - 1) for a in node.attrs)
            if any(a < 0 for a in node.attrs):
                raise GraphError(f"node {node.op} has a negative attribute {node.attrs}")
        nodes.append(
            GraphNode(OPS[node.op].code, _dtype(node.dtype), tuple(node.shape), attrs, ins)
        )
    return nodes


def graph_config(g: Graph, nodes: list[GraphNode], state: list[str], batch: int,
                 num_examples: int, seed: int) -> DisputeConfig:  # fmt: skip
    """The dispute config of a graph whose outputs include every tensor of `state` (in order),
    each produced by a node."""
    n_in = len(g.inputs)
    outputs = dict(g.outputs)
    producers = []
    for name in state:
        vid = outputs[name]
        if vid < n_in:
            raise GraphError(f"state tensor {name} is not produced by a node of the graph")
        producers.append(vid - n_in)
    return DisputeConfig(
        graph_root=graph_root(nodes),
        num_nodes=len(nodes),
        batch_size=batch,
        num_examples=num_examples,
        seed=seed,
        state_names=tuple(name_hash(n) for n in state),
        state_producers=tuple(producers),
    )


# -- what the one-step proof reads ---------------------------------------------------------------


def node_reads(g: Graph, i: int, e: int, values: list[torch.Tensor]) -> list[list[int]]:
    """For each input of node i, the flat elements (of that input's own shape) the proof of
    output element e reads: the registry's dependency rule, plus the element an index selects
    where the read depends on data (`values`: every value of the step, by value id)."""
    node = g.nodes[i]
    shapes = [tuple(g.value(v)[0]) for v in node.inputs]
    reads: list[set[int]] = [set() for _ in node.inputs]
    if node.op == "const":
        return [[e]]
    if node.op in ("index_rows", "gather", "scatter_value", "index_add_rows"):
        for k, elems in _indexing_reads(node, shapes, e, [values[v] for v in node.inputs]):
            reads[k].update(elems)
    else:
        for k, elems in OPS[node.op].deps(node, shapes, e):
            reads[k].update(elems)
    return [sorted(r) for r in reads]


def _flat_ints(t: torch.Tensor) -> np.ndarray:
    return t.reshape(-1).to(torch.int64).numpy()


def _indexing_reads(node, shapes, e, ins) -> list[tuple[int, list[int]]]:
    if node.op == "index_rows":
        row_size = prod(shapes[0][1:])
        i = e // row_size
        r = int(_flat_ints(ins[1])[i])
        return [(1, [i]), (0, [r * row_size + e % row_size])]
    if node.op == "gather":
        p = unravel(e, node.shape)
        p[node.attrs[0]] = int(_flat_ints(ins[1])[e])
        return [(1, [e]), (0, [ravel(p, shapes[0])])]
    if node.op == "scatter_value":
        dim, ishape = node.attrs[0], shapes[1]
        c = unravel(e, node.shape)
        line = []
        if all(c[d] < ishape[d] for d in range(len(c)) if d != dim):
            for q in range(ishape[dim]):
                line.append(ravel([q if d == dim else c[d] for d in range(len(c))], ishape))
        return [(0, [e]), (1, line)]
    # index_add_rows: dest[e], every index, and the source rows that land on e's row
    row_size = prod(shapes[0][1:])
    idx = _flat_ints(ins[1])
    r, c = divmod(e, row_size)
    hits = [j * row_size + c for j in np.flatnonzero(idx == r).tolist()]
    return [(0, [e]), (1, list(range(idx.size))), (2, hits)]


def term_reads(g: Graph, i: int, e: int, j: int, values: list[torch.Tensor]) -> list[list[int]]:
    """The input elements accumulation step j (0-based term) of output element e reads (the
    chain of PROTOCOL §7.10 as GraphOps.chain defines it for version-3 reductions)."""
    node = g.nodes[i]
    shapes = [tuple(g.value(v)[0]) for v in node.inputs]
    reads: list[list[int]] = [[] for _ in node.inputs]
    if node.op == "matmul":
        a, b = OPS["matmul"].deps(node, shapes, e)
        reads[0], reads[1] = [a[1][j]], [b[1][j]]
    elif node.op == "index_add_rows":
        if j == 0:
            reads[0] = [e]
        else:
            row_size = prod(shapes[0][1:])
            reads[1] = [j - 1]
            if int(_flat_ints(values[node.inputs[1]])[j - 1]) == e // row_size:
                reads[2] = [(j - 1) * row_size + e % row_size]
    else:
        reads[0] = [e * shapes[0][-1] + j]
    return reads


def chain_terms(g: Graph, i: int) -> int:
    """K of node i's accumulator chain (GraphOps.chain); 0 when it has none (not a reduction,
    argmax_last, or an i32 one: those are proved directly)."""
    node = g.nodes[i]
    chain = reduction.chain_of(node.op)
    if chain is None or node.dtype != "f32":
        return 0
    shapes = [tuple(g.value(v)[0]) for v in node.inputs]
    return prod(shapes[1]) + 1 if chain.indexed else shapes[0][-1]


def element_chain(g: Graph, i: int, e: int, values: list[torch.Tensor]) -> np.ndarray:
    """acc_0 … acc_{K+1} (uint32 bits) of output element e of reduction node i (its registry
    `Chain`, float32), from the step's values."""
    node = g.nodes[i]
    chain = reduction.chain_of(node.op)
    if chain is None or node.dtype != "f32":
        raise ValueError(f"node {i} ({node.op}, {node.dtype}) has no float32 chain")
    flat = [_f32_flat(values[v]) for v in node.inputs]
    if chain.indexed:
        # term 1 is dest[e]; a source row that does not land on e's row adds -0 (an identity of
        # fl(+): x + -0 = x for every x, ±0 included), which is the prover's skipped step.
        row_size = prod(tuple(g.value(node.inputs[0])[0])[1:])
        r, c = divmod(e, row_size)
        idx = _flat_ints(values[node.inputs[1]])
        src = flat[2].reshape(-1, row_size)[:, c]
        terms = np.where(idx == r, src, np.float32(-0.0)).astype(np.float32)
        return reduction.accumulators(chain, [np.concatenate([flat[0][e : e + 1], terms])])
    shapes = [tuple(g.value(v)[0]) for v in node.inputs]
    rows = [flat[k][elems] for k, elems in OPS[node.op].deps(node, shapes, e)]
    return reduction.accumulators(chain, rows)


def _f32_flat(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().contiguous().reshape(-1).numpy()


# -- openings ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepValues:
    """One step's values as a party holds them: every value by id (inputs, then node outputs),
    the batch positions drawn at the step, and the job (its dataset)."""

    job: ModelJob
    jg: ModelJobGraph
    values: list[torch.Tensor]
    picks: np.ndarray  # dataset position of each batch row

    @classmethod
    def of(cls, job: ModelJob, jg: ModelJobGraph, st, t: int, trace, shard: int = 0):
        ins = job.step_inputs(st, t, shard)
        # the batch the step read: a unit's local step t draws at global step step_offset + t
        return cls(job, jg, ins + list(trace), np.asarray(job.picks(t, shard), dtype=np.int64))

    def node_roots(self) -> list[bytes]:
        n_in = self.jg.n_inputs
        return [merkle.tensor_root(commit_view(t)) for t in self.values[n_in:]]


def _dataset_tensors(job: ModelJob, token: bool) -> list[torch.Tensor]:
    if token:
        return [job.data.tokens.reshape(1, -1)]
    return [job.data.x, job.data.y]


def _source(sv: StepValues, inp: TensorInput, vid: int, i: int, node_roots: TraceRoots):
    """(the committed 2-D tensor an input is opened in, its list proof)."""
    jg, job = sv.jg, sv.job
    if inp.kind == KIND_STATE:
        entries = [merkle.state_entry(v.name, merkle.tensor_root(commit_view(sv.values[p])))
                   for p, v in enumerate(job.bundle.state)]  # fmt: skip
        return commit_view(sv.values[vid]), _list_proof(merkle.STATE_DOMAIN, entries, inp.index)
    if inp.kind == KIND_NODE:
        return commit_view(sv.values[vid]), trace_siblings(node_roots, inp.index)
    if inp.kind == KIND_CONST:
        return commit_view(sv.values[jg.n_inputs + i]), []
    tensors = _dataset_tensors(job, jg.token)
    k = 1 if inp.kind == KIND_BATCH_Y else 0
    roots = [merkle.tensor_root(t) for t in tensors]
    return tensors[k], _list_proof(merkle.DATASET_DOMAIN, roots, k)


DATA_KINDS = (KIND_BATCH_X, KIND_BATCH_Y, KIND_WINDOW_X, KIND_WINDOW_Y)


def _list_proof(domain: bytes, values: list[bytes], index: int) -> list[bytes]:
    return list(merkle.list_proof(domain, values, index).siblings)


def source_elements(picks: np.ndarray, inp: TensorInput, elems: list[int]) -> list[int]:
    """Elements of an input mapped to the elements of the tensor it is opened in: a batch
    input's to the dataset tensor's (§4, `picks` the step's batch positions), any other's are
    its own. What a one-step proof opens (here) and what a reader of one shows (the explorer)."""
    if inp.kind == KIND_BATCH_X:
        f = prod(inp.shape[1:])
        return [int(picks[e // f]) * f + e % f for e in elems]
    if inp.kind == KIND_BATCH_Y:
        return [int(picks[e]) for e in elems]
    if inp.kind in (KIND_WINDOW_X, KIND_WINDOW_Y):
        T = inp.shape[1]
        shift = 1 if inp.kind == KIND_WINDOW_Y else 0
        return [int(picks[e // T]) + e % T + shift for e in elems]
    return elems


def openings(sv: StepValues, i: int, reads: list[list[int]], node_roots: TraceRoots) -> list:
    """The Opening tuples of node i's inputs covering `reads` (node_roots: the trace's tensor
    roots the defender committed, for the list proofs of node inputs)."""
    g, desc = sv.jg.graph, sv.jg.nodes[i]
    out = []
    for k, inp in enumerate(desc.inputs):
        if inp.kind in (KIND_WORD, KIND_STEP):  # no tensor to open: the word is the value
            out.append((bytes(32), [], bytes(32), []))
            continue
        elems = source_elements(sv.picks, inp, reads[k])
        open_elements = getattr(sv.job.data, "open_elements", None)
        if inp.kind in DATA_KINDS and open_elements is not None:
            # a packed split: only the chunks holding the opened elements are fetched
            out.append(open_elements(1 if inp.kind == KIND_BATCH_Y else 0, elems))
            continue
        vid = g.nodes[i].inputs[k] if k < len(g.nodes[i].inputs) else -1
        tensor, proof = _source(sv, inp, vid, i, node_roots)
        out.append(merkle_opening(tensor, proof, elems))
    return out


def proof_context(sv: StepValues, t: int, node: int, node_roots: list[bytes], shard: int = 0):
    """The ProofContext tuple of a proof over node `node` at global step t (one shard of
    `sv.job.spec.shards`), S_t the state among `sv.values`."""
    job, cfg = sv.job, sv.jg.config
    st = {v.name: sv.values[p] for p, v in enumerate(job.bundle.state)}
    return (
        state_root(st),
        merkle.trace_root(node_roots),
        job.data.root(),
        len(cfg.state_names),
        cfg.num_nodes,
        node,
        t,
        cfg.seed,
        cfg.batch_size,
        cfg.num_examples,
        job.spec.shards,
        shard,
    )
