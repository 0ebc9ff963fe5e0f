"""Aggregation on chain (PROTOCOL §6.9): what an aggregator commits to the RoundManager and what a
challenger proves against a wrong aggregate.

An aggregate G_{r+1} is committed as the data roots of its state tensors; the contract rebuilds
the state root from the job's layout (names and shapes), so only element values can be wrong. A
wrong element is proven by opening it in the S finalized unit states and in G_{r+1}: the
contract recomputes RepOps.average and slashes the aggregator's bond if it differs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from eth_abi import encode

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


def corrupt(st: State, tensor: int, element: int) -> State:
    """A copy of `st` with one element changed (a cheating aggregator's output, for tests and
    the --cheat flag)."""
    out = {k: v.clone() for k, v in st.items()}
    name = list(out)[tensor]
    flat = out[name].reshape(-1)
    flat[element] = flat[element] + torch.tensor(0.5, dtype=flat.dtype)
    return out
