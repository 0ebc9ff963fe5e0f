"""The walk down a large step trace (PROTOCOL §7.3): a step graph of more than `POST_NODES`
nodes does not have its trace posted whole. The defender commits the trace root with the top
of the trace list's tree (`postTraceRoot`), then posts, each round, the 2^m nodes m = min(6, h)
levels below the subtree the challenger picked, the entries themselves (the nodes' output roots)
in the last round, so that no move posts more than 64 hashes whatever the node count. The
disputed S_{t+1}'s list is walked the same way (its top posted with the trace's) when the
challenger agrees with the trace root: then a producer's entry contradicts S_{t+1}.

The challenger then opens entries against the trace root it never saw whole: `WalkedTrace`
holds every tree node the defender posted (and those they determine) and falls back on the
challenger's own trace for the rest, which is right for every subtree left of the walked path
(the honest challenger walks to the first disagreement, so everything left of it agrees).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agents.training import merkle
from agents.training.keccak import keccak256

# Traces of up to this many nodes are posted whole (postTrace); Walks.POST_LEAVES on chain.
POST_NODES = 64
STRIDE = 6  # levels a round descends (Walks.STRIDE)
ZERO = bytes(32)

Round = tuple[int, int, list[bytes]]  # (height of the nodes, index of the first, the nodes)


def stride(height: int) -> int:
    return min(STRIDE, height)


def walks(num_nodes: int) -> bool:
    """Whether a trace of `num_nodes` nodes is walked rather than posted whole."""
    return num_nodes > POST_NODES


def tree_levels(values: list[bytes], domain: bytes = merkle.TRACE_DOMAIN) -> list[list[bytes]]:
    """Every level of the padded tree over a root list's leaves (the trace's by default, or
    S_{t+1}'s under the state domain), the leaves first."""
    leaves = merkle.list_leaves(domain, values)
    return [[row.tobytes() for row in level] for level in merkle.levels(leaves)]


def next_round(
    values: list[bytes], height: int, index: int, domain: bytes = merkle.TRACE_DOMAIN
) -> Round:
    """The round the defender posts under its subtree `index` of height `height` (the whole
    tree at first): the nodes `stride(height)` levels down, or, at the leaves, the entries
    (zero past the node count)."""
    s = stride(height)
    first = index << s
    if height == s:
        padded = [*values, *[ZERO] * ((first + (1 << s)) - len(values))]
        return 0, first, padded[first : first + (1 << s)]
    level = tree_levels(values, domain)[height - s]
    return height - s, first, level[first : first + (1 << s)]


def round_leaves(r: Round, n: int, domain: bytes = merkle.TRACE_DOMAIN) -> list[bytes]:
    """The tree nodes a round stands for: itself, or for the entries their list leaves."""
    height, first, nodes = r
    if height > 0:
        return list(nodes)
    return [_leaf(domain, first + j, v) if first + j < n else ZERO for j, v in enumerate(nodes)]


def _leaf(domain: bytes, i: int, value: bytes) -> bytes:
    return keccak256(domain + merkle.u256(i) + value)


@dataclass
class WalkedTrace:
    """The defender's trace list as a challenger knows it after a walk: the posted rounds and
    what they determine, and its own trace (`own`) for the rest. `siblings(i)` is the list
    proof of entry i, right for i up to the walked entry when everything left of it agrees."""

    n: int
    own: list[bytes]
    rounds: list[Round]
    domain: bytes = merkle.TRACE_DOMAIN
    _known: dict[tuple[int, int], bytes] = field(init=False, repr=False)
    _mine: list[list[bytes]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._known = {}
        for r in self.rounds:
            height, first, _ = r
            level = round_leaves(r, self.n, self.domain)
            h, start = height, first
            while True:
                for j, node in enumerate(level):
                    self._known[(h, start + j)] = node
                if len(level) == 1:
                    break
                level = [keccak256(level[k] + level[k + 1]) for k in range(0, len(level), 2)]
                h, start = h + 1, start // 2
        self._mine = tree_levels(self.own, self.domain)

    def node(self, height: int, index: int) -> bytes:
        return self._known.get((height, index), self._mine[height][index])

    def value(self, i: int) -> bytes:
        """Entry i as the defender posted it in the last round (its own value if not posted)."""
        for height, first, nodes in self.rounds:
            if height == 0 and first <= i < first + len(nodes):
                return nodes[i - first]
        return self.own[i]

    def siblings(self, i: int) -> list[bytes]:
        out, idx = [], i
        for h in range(merkle.depth_for(self.n)):
            out.append(self.node(h, idx ^ 1))
            idx //= 2
        return out


TraceRoots = list[bytes] | WalkedTrace


def trace_siblings(roots: TraceRoots, i: int) -> list[bytes]:
    """The list proof of trace entry i: from the whole list, or from what a walk showed."""
    if isinstance(roots, WalkedTrace):
        return roots.siblings(i)
    return list(merkle.list_proof(merkle.TRACE_DOMAIN, roots, i).siblings)


def first_diff(mine: list[bytes], theirs: list[bytes]) -> int | None:
    for j, (a, b) in enumerate(zip(mine, theirs, strict=True)):
        if a != b:
            return j
    return None


def pick_child(own: list[bytes], r: Round, domain: bytes = merkle.TRACE_DOMAIN) -> int | None:
    """The honest challenger's pick among a posted round of internal nodes: the leftmost child
    that differs from its own tree (None if none does)."""
    height, first, nodes = r
    if height == 0:  # the entries themselves (a list of up to 64 has them as its top)
        padded = [*own, *[ZERO] * (first + len(nodes) - len(own))]
        return first_diff(padded[first : first + len(nodes)], nodes)
    mine = tree_levels(own, domain)[height][first : first + len(nodes)]
    return first_diff(mine, nodes)


def top_round(values: list[bytes], domain: bytes = merkle.TRACE_DOMAIN) -> Round:
    """The first round of a walk: the top of the whole list's tree."""
    return next_round(values, merkle.depth_for(len(values)), 0, domain)
