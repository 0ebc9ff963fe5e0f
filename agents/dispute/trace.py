"""A party's account of a claim: states, op traces and the roots it commits, step by step.

`Computation` replays a claim "from S_{t0}, `steps` steps with checkpoints every `interval`"
with the engine's own `trace_step` (the step graph run by run_graph), so an honest computation
is the engine's bit for bit. A cheating party's account (tests, demos, --cheat)
is agents/adversaries/faults.py's `FaultyComputation`, which overrides the steps it lies about.
"""

from __future__ import annotations

import numpy as np
import torch

from agents.dispute import reduction
from agents.dispute.budget import DEFAULT_STATE_CACHE_BYTES, StateBudget, state_bytes
from agents.dispute.encoding import KIND_BATCH, KIND_DATA_X, KIND_DATA_Y, KIND_NODE, KIND_STATE
from agents.dispute.trace_walk import TraceRoots, trace_siblings
from agents.training import merkle
from agents.training.engine import Engine
from agents.training.registry import OPS, Node
from agents.training.state import State


def drop_computation(comps: dict, key: object) -> None:
    """Remove `comps[key]` (if any) and give its kept states back to its budget."""
    comp = comps.pop(key, None)
    if comp is not None:
        comp.release()


class Computation:
    """States, traces and claimed roots of steps t0 .. t0 + steps under `engine`'s job. The
    claim's bookkeeping (kept states under a byte budget, traces, roots, checkpoints) is every
    job's: model_trace.ModelComputation runs a version-3 step and opens its elements on it."""

    # Reductions of up to this many terms are proved in one move: a version-1 dot product reads
    # two contiguous rows (about 161k + 3,240·K gas, 369k at K = 64); longer ones are bisected
    # through their chain, whose every move is bounded whatever K (PROTOCOL §7.10).
    direct_terms = 64

    def __init__(
        self,
        engine: Engine,
        steps: int,
        interval: int,
        t0: int = 0,
        start: State | None = None,
        cache_bytes: int = DEFAULT_STATE_CACHE_BYTES,
        budget: StateBudget | None = None,
    ):
        self.engine = engine
        self.graph = engine.graph
        self.classes = engine.spec.widths[-1]
        self._claim(steps, interval, t0, start, cache_bytes, budget)

    def _claim(self, steps: int, interval: int, t0: int, start: State | None, cache_bytes: int,
               budget: StateBudget | None) -> None:  # fmt: skip
        if steps <= 0 or interval <= 0 or steps % interval:
            raise ValueError(f"bad claim: steps={steps} interval={interval}")
        self.steps, self.interval, self.t0 = steps, interval, t0
        # Kept states, within a byte budget (one state's tensors are the model and its optimizer
        # state: a claim of thousands of steps cannot keep them all). The budget is the agent's,
        # shared by all its computations (`budget`), or this one's own of `cache_bytes`; the
        # least recently used state of any computation under it goes first. A given start state
        # (a court game's, fetched, not computable here) is pinned outside the budget: every
        # recompute can fall back on it; the job's initial state is recomputed when evicted. A
        # walk forward keeps checkpoint states and its target only, so a claim's walk costs
        # memory for its checkpoints, not its steps, and a state evicted is recomputed from the
        # nearest kept state below it (bit for bit the same: the engine is deterministic).
        self.budget = budget if budget is not None else StateBudget(cache_bytes)
        self._states: dict[int, State] = {}
        self._pinned = start is not None
        if start is not None:
            self._states[t0] = start
        else:
            self._keep(t0, self.initial_state())
        self._traces: dict[int, list[torch.Tensor]] = {}
        self._roots: dict[int, bytes] = {}
        self._troots: dict[int, list[bytes]] = {}

    # -- running (what differs between jobs) -------------------------------------------------

    def initial_state(self) -> State:
        return self.engine.initial_state()

    def state_view(self, x: torch.Tensor) -> torch.Tensor:
        """How a state tensor is committed (a version-1 tensor is 2-D already)."""
        return x

    def commit_view(self, x: torch.Tensor) -> torch.Tensor:
        """How a node's output is committed."""
        return x

    def _run(self, st: State, t: int) -> tuple[State, list[torch.Tensor]]:
        return self.engine.trace_step(st, t)

    def _keep(self, t: int, st: State) -> None:
        """Keep S_t as the most recently used state under the budget (which may evict other
        states, of this computation or another, but not S_t); a pinned start is replaced in
        place."""
        with self.budget.lock:
            self._states[t] = st
            if not (self._pinned and t == self.t0):
                self.budget.keep(self._states, t, state_bytes(st))

    @property
    def kept_bytes(self) -> int:
        """The bytes of the states this computation keeps now (its pinned start included)."""
        with self.budget.lock:
            return sum(state_bytes(st) for st in self._states.values())

    def kept_steps(self) -> list[int]:
        """The steps whose states are kept now, ascending."""
        with self.budget.lock:
            return sorted(self._states)

    def release(self) -> None:
        """Give this computation's kept states back to the budget and drop its traces (it is no
        longer needed; asked again, it recomputes them, the same)."""
        self.budget.release(self._states)
        self._traces.clear()

    def seed(self, t: int, st: State) -> None:
        """Give the party's state at global step t (e.g. a checkpoint it published), so that
        states after it are computed from it rather than from the start."""
        if not self.t0 <= t <= self.t0 + self.steps:
            raise IndexError(f"step {t} outside the claim")
        self._keep(t, st)

    def state(self, t: int) -> State:
        """The party's actual state tensors at global step t."""
        if not self.t0 <= t <= self.t0 + self.steps:
            raise IndexError(f"step {t} outside the claim")
        with self.budget.lock:
            if t in self._states:
                self.budget.touch(self._states, t)
                return self._states[t]
            below = [u for u in self._states if u < t]
            if below:
                known = max(below)
                st = self._states[known]
                self.budget.touch(self._states, known)
            else:  # the initial state was evicted (a pinned start never is): recompute it
                known, st = self.t0, self.initial_state()
        for u in range(known, t):
            st = self._run(st, u)[0]
            if u + 1 == t or (u + 1 - self.t0) % self.interval == 0:
                self._keep(u + 1, st)
        return st

    def trace(self, t: int) -> list[torch.Tensor]:
        """Every node's output of step t (S_t -> S_{t+1}), as this party computes it."""
        if t not in self._traces:
            if len(self._traces) > 4:
                self._traces.pop(next(iter(self._traces)))
            self._traces[t] = self._run(self.state(t), t)[1]
        return self._traces[t]

    def trace_roots(self, t: int) -> list[bytes]:
        """Tensor roots of every node's output of step t (the op-trace list)."""
        if t not in self._troots:
            self._troots[t] = [merkle.tensor_root(self.commit_view(x)) for x in self.trace(t)]
        return self._troots[t]

    # -- what the party commits ---------------------------------------------------------------

    def entries(self, t: int) -> list[bytes]:
        """State-list values keccak(abi.encode(keccak(name), tensorRoot)) of S_t, as committed."""
        st = self.state(t)
        view = self.state_view
        return [merkle.state_entry(n, merkle.tensor_root(view(x))) for n, x in st.items()]

    def claimed_root(self, t: int) -> bytes:
        """The state root the party claims for S_t."""
        if t not in self._roots:
            self._roots[t] = merkle.root_list(merkle.STATE_DOMAIN, self.entries(t))
        return self._roots[t]

    @property
    def segments(self) -> int:
        return self.steps // self.interval

    def checkpoint_roots(self) -> list[bytes]:
        k = self.interval
        return [self.claimed_root(self.t0 + c * k) for c in range(self.segments + 1)]

    def checkpoint_commit(self) -> bytes:
        return merkle.checkpoint_root(self.checkpoint_roots())

    def final_root(self) -> bytes:
        return self.claimed_root(self.t0 + self.steps)

    def segment_roots(self, segment: int) -> list[bytes]:
        """The k + 1 claimed state roots of segment `segment` (both checkpoints included)."""
        base = self.t0 + segment * self.interval
        return [self.claimed_root(base + j) for j in range(self.interval + 1)]

    # -- tensors for proofs ------------------------------------------------------------------

    def node_output(self, t: int, node: int) -> torch.Tensor:
        """Node `node`'s output at step t as committed."""
        return self.commit_view(self.trace(t)[node])

    def batch_indices(self, t: int) -> np.ndarray:
        return self.engine.batch(t).reshape(-1).cpu().numpy()

    # -- what the last moves open (a version-1 step graph: agents/dispute/graph.py) -----------

    def reduction_terms(self, jg, node: int) -> int:
        """K of a reduction node's elements (0 for any other operator)."""
        if reduction.chain_of(jg.graph.nodes[node].op) is None:
            return 0
        return int(jg.nodes[node].inputs[0].cols)

    def element_chain(self, jg, t: int, node: int, element: int) -> np.ndarray:
        """acc_0 … acc_{K+1} of element `element` of node `node` at step t (PROTOCOL §7.10)."""
        g = jg.graph
        chain = reduction.chain_of(g.nodes[node].op)
        if chain is None:
            raise ValueError(f"node {node} ({g.nodes[node].op}) is not a reduction")
        rows = [
            self._input_tensor(jg, t, g.nodes[node].inputs[k]).reshape(-1)[elems]
            for k, elems in element_reads(jg, node, element)
        ]
        return reduction.accumulators(chain, rows)

    def _input_tensor(self, jg, t: int, ref: str) -> np.ndarray:
        st = self.state(t)
        x = st[ref] if ref in st else self.node_output(t, jg.graph.index_of(ref))
        return x.detach().cpu().contiguous().numpy()

    def element_openings(
        self, jg, node_roots: TraceRoots, t: int, i: int, element: int, term: int | None = None
    ) -> list[tuple]:
        """Openings of every input element output `element` of node i at step t depends on
        (with `term`: only those of the reduction's term `term`, 0-based)."""
        g = jg.graph
        node, desc = g.nodes[i], jg.nodes[i]
        idx = self.batch_indices(t)
        labels = self.node_output(t, g.index_of("y")).reshape(-1).cpu().numpy()
        deps = element_reads(jg, i, element, idx, labels)
        out = []
        for k, ref in enumerate(node.inputs):
            operand = desc.inputs[k]
            if operand.kind == KIND_BATCH:
                out.append((bytes(32), [], bytes(32), []))
                continue
            elems = {
                x for j, xs in deps if j == k for x in (xs if term is None else xs[term : term + 1])
            }
            out.append(self._opening(node_roots, t, operand, ref, elems))
        return out

    def _opening(self, node_roots: TraceRoots, t: int, operand, ref: str, elems) -> tuple:
        open_elements = getattr(self.engine.data, "open_elements", None)
        if operand.kind in (KIND_DATA_X, KIND_DATA_Y) and open_elements is not None:
            # a packed split: only the chunks holding the opened elements are fetched
            return open_elements(0 if operand.kind == KIND_DATA_X else 1, elems)
        tensor, list_proof = self._source(node_roots, t, operand, ref)
        return merkle_opening(tensor, list_proof, elems)

    def _source(self, node_roots: TraceRoots, t: int, operand, ref: str):
        if operand.kind == KIND_STATE:
            entries = self.entries(t)
            return self.state(t)[ref], merkle.list_proof(
                merkle.STATE_DOMAIN, entries, operand.index
            ).siblings
        if operand.kind == KIND_NODE:
            proof = trace_siblings(node_roots, operand.index)
            return self.node_output(t, operand.index), proof
        data = self.engine.data
        roots = [merkle.tensor_root(data.x), merkle.tensor_root(data.y)]
        if operand.kind not in (KIND_DATA_X, KIND_DATA_Y):
            raise ValueError(f"operand kind {operand.kind} has no tensor to open")
        k = 0 if operand.kind == KIND_DATA_X else 1
        tensor = data.x if k == 0 else data.y
        return tensor, merkle.list_proof(merkle.DATASET_DOMAIN, roots, k).siblings


def element_reads(jg, i: int, e: int, idx=None, labels=None) -> list[tuple[int, list[int]]]:
    """(operand k, its flat elements) that element e of node i reads, in the order the one-step
    proof takes them: the registry's dependency rule on the node's operand shapes, then the
    data-dependent reads resolved from the step's batch indices `idx` and gathered `labels`
    when given (the gathered row of X, the gathered label of Y, the label's logit)."""
    node = jg.graph.nodes[i]
    if not 0 <= e < node.shape[0] * node.shape[1]:
        raise IndexError(f"element {e} outside {node.shape} of node {node.name}")
    shapes = [(int(o.rows), int(o.cols)) for o in jg.nodes[i].inputs]
    deps = OPS[node.op].deps(Node(node.op, (), (), node.shape, node.dtype), shapes, e)
    r, c = divmod(e, node.shape[1])
    if idx is not None and node.op == "gather_rows":
        deps.append((0, [int(idx[r]) * shapes[0][1] + c]))
    if idx is not None and node.op == "gather_labels":
        deps.append((0, [int(idx[c])]))
    if labels is not None and node.op == "nll":
        deps.append((1, [c * shapes[1][1] + int(labels[c])]))
    return deps


def merkle_opening(tensor, list_proof: list[bytes], elems) -> tuple:
    """An Opening tuple of a committed 2-D tensor: its roots, the list proof, and the leaves
    holding `elems` (row-major element indices) with their Merkle paths."""
    chunks = []
    for leaf in sorted({e // merkle.LEAF_ELEMS for e in elems}):
        ep = merkle.element_proof(tensor, leaf * merkle.LEAF_ELEMS)
        chunks.append((leaf, ep.chunk, list(ep.siblings)))
    return (merkle.tensor_root(tensor), list(list_proof), merkle.data_root(tensor), chunks)
