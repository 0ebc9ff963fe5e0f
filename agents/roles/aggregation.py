"""Aggregation fraud proofs (PROTOCOL §6.9), pure: an aggregate's layout and data roots (what an
aggregator commits), the element openings that prove a wrong aggregate, and the reveal request
and answer of a withheld one. No chain access: the aggregator role (agents/roles/aggregator.py)
and the submitter's decomposed-job posting (agents/roles/decomposed.py) both use it, so it lives
outside either role module.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from eth_abi import encode

from agents.dispute.player import leaf_siblings, tensor_chunk, tensor_leaves
from agents.training import merkle
from agents.training.decompose import aggregate
from agents.training.float32 import tensor_bits
from agents.training.keccak import keccak256
from agents.training.state import State

LAYOUT_ABI = "(bytes32[],uint32[],uint32[])"


@dataclass(frozen=True)
class Layout:
    """IRoundManager.StateLayout: keccak256(name), rows, cols of each state tensor, state order."""

    names: list[bytes]
    rows: list[int]
    cols: list[int]

    def as_tuple(self) -> tuple:
        return (self.names, self.rows, self.cols)

    def hash(self) -> bytes:
        """layoutHash = keccak256(abi.encode(StateLayout))."""
        return keccak256(encode([LAYOUT_ABI], [self.as_tuple()]))


def layout_of(st: State) -> Layout:
    names = [keccak256(n.encode()) for n in st]
    shapes = [tuple(t.shape) for t in st.values()]
    return Layout(names, [r for r, _ in shapes], [c for _, c in shapes])


def data_roots(st: State) -> list[bytes]:
    """What commitAggregate takes: each tensor's element-tree root, state order."""
    return [merkle.data_root(t) for t in st.values()]


def opening(st: State, tensor: int, element: int) -> tuple:
    """IRoundManager.ElementOpening of element `element` of the state's tensor `tensor`."""
    items = list(st.items())
    troots = [merkle.tensor_root(t) for _, t in items]
    entries = [merkle.state_entry(n, r) for (n, _), r in zip(items, troots, strict=True)]
    lp = merkle.list_proof(merkle.STATE_DOMAIN, entries, tensor)
    ep = merkle.element_proof(items[tensor][1], element)
    return (troots[tensor], lp.siblings, ep.chunk, ep.siblings)


def fraud_proof(
    units: list[State], claimed: State, layout: Layout, tensor: int, element: int
) -> tuple:
    """Arguments of proveAggregationFraud after the job id."""
    return (
        layout.as_tuple(),
        tensor,
        element,
        [opening(u, tensor, element) for u in units],
        opening(claimed, tensor, element),
    )


def first_wrong_element(
    units: list[State], weights: list[np.float32], claimed: State
) -> tuple[int, int] | None:
    """(tensor, element) of the first element of `claimed` that differs, bit for bit, from the
    fixed-order average of `units`; None if the aggregate is right."""
    honest = aggregate(units, weights)
    for i, name in enumerate(honest):
        want = tensor_bits(honest[name]).reshape(-1)
        got = tensor_bits(claimed[name]).reshape(-1)
        diff = np.nonzero(want != got)[0]
        if diff.size:
            return i, int(diff[0])
    return None


# --- withheld aggregates: reveal requests (PROTOCOL §6.9) -------------------------------------


def committed_list_proof(layout: Layout, roots: list[bytes], tensor: int) -> list[bytes]:
    """State-list siblings of tensor `tensor` in the aggregate committed as data roots `roots`
    (the commitAggregate arguments): no tensor data needed."""
    shapes = zip(layout.names, layout.rows, layout.cols, roots, strict=True)
    entries = [
        keccak256(name + merkle.tensor_root_from(merkle.DTYPE_F32, rows, cols, root))
        for name, rows, cols, root in shapes
    ]
    return merkle.list_proof(merkle.STATE_DOMAIN, entries, tensor).siblings


def first_disputed_tensor(roots: list[bytes], honest: State) -> int | None:
    """The first tensor whose committed data root is not the honest aggregate's."""
    mine = data_roots(honest)
    return next((i for i, (a, b) in enumerate(zip(roots, mine, strict=True)) if a != b), None)


def reveal_request(layout: Layout, roots: list[bytes], honest: State, tensor: int) -> tuple:
    """Arguments of requestAggregateReveal after the job id: the committed data root of
    `tensor` with its list proof, and my (honest) leaf hashes of it."""
    t = list(honest.values())[tensor]
    return (
        layout.as_tuple(),
        tensor,
        roots[tensor],
        committed_list_proof(layout, roots, tensor),
        tensor_leaves(t),
    )


def reveal_answer(committed: State, tensor: int, requested: list[bytes]) -> tuple:
    """Arguments of revealAggregateLeaf after the job id: my committed leaves of `tensor` and
    the chunk of the first leaf that differs from the requester's `requested`."""
    t = list(committed.values())[tensor]
    leaves = tensor_leaves(t)
    leaf = next(i for i, (a, b) in enumerate(zip(leaves, requested, strict=True)) if a != b)
    return (layout_of(committed).as_tuple(), leaves, list(requested), tensor_chunk(t, leaf))


def revealed_opening(
    layout: Layout, roots: list[bytes], tensor: int, leaves: list[bytes], leaf: int, chunk: bytes
) -> tuple:
    """The aggregate's ElementOpening of any element of leaf `leaf`, from a reveal (its leaves
    and chunk) and the committed data roots: the blob itself is not needed."""
    troot = merkle.tensor_root_from(
        merkle.DTYPE_F32, layout.rows[tensor], layout.cols[tensor], roots[tensor]
    )
    siblings = leaf_siblings(leaves, leaf)
    return (troot, committed_list_proof(layout, roots, tensor), chunk, siblings)


def wrong_element_in_chunk(honest: State, tensor: int, leaf: int, chunk: bytes) -> int | None:
    """The first element of leaf `leaf` whose revealed word differs from the honest
    aggregate's (None if none differs below the tensor's end)."""
    t = list(honest.values())[tensor]
    first = leaf * merkle.LEAF_ELEMS
    want = np.frombuffer(tensor_chunk(t, leaf), dtype=">u4")
    got = np.frombuffer(chunk, dtype=">u4")
    for j in range(min(merkle.LEAF_ELEMS, t.numel() - first)):
        if int(got[j]) != int(want[j]):
            return first + j
    return None
