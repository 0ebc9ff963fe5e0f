"""Placement of a pipeline's stages on nodes by the network (PROTOCOL §6.5): which P nodes hold
stages 0..P-1, from each node's declared capability (memory, bandwidth, zone: §6.2) and the
throughput and latency its peers measured fetching from its blob server.

The rule, in order:
1. A node may hold stage p only if its declared memory holds the stage's state (`stage_mib`).
2. Tiers: all P stages in one zone first; else in one region (zones `region << 8 | site` of one
   region are neighbours); else anywhere. The first tier with a feasible group is used.
3. Within a tier, the ordered choice of P distinct nodes whose estimated step time over the
   stage boundaries is smallest: the traffic between two stages costs its bytes over the
   link's throughput plus one round trip of its latency per boundary tensor. A link's throughput is
   the measured one if any, else the smaller declared bandwidth of its two ends; its latency
   the measured one, else a prior by zone (same site, same region, elsewhere). Ties: the
   lexicographically smallest node tuple, so every agent derives the same placement.

Pure: no chain, no clock. The agents feed it what they read and measure.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

MIB = 1 << 20
# Latency priors (one round trip, ms) for pairs never measured: conservative, so that a
# measured pair is preferred when it is good.
SAME_ZONE_MS = 2.0
SAME_REGION_MS = 20.0
ELSEWHERE_MS = 100.0
SEARCH_WIDTH = 8  # a group's nodes searched exhaustively: its best-connected `max(P, 8)`


class PlacementError(ValueError):
    """No placement: one line for the user."""


@dataclass(frozen=True)
class Candidate:
    node: str  # an address
    memory_mib: int  # declared (Capability.memoryMiB)
    bandwidth_mbps: int  # declared (Network.bandwidthMbps); 0: undeclared
    zone: int  # region << 8 | site; 0: undeclared

    @property
    def region(self) -> int:
        return self.zone >> 8


@dataclass(frozen=True)
class Link:
    """What one node measured fetching blobs from another's blob server."""

    throughput_mbps: float
    latency_ms: float  # one small request's round trip


@dataclass(frozen=True)
class Demand:
    """What a pipeline asks of its nodes and the network each step."""

    stage_mib: tuple[int, ...]  # memory each stage's holder needs (its state and buffers)
    # (stage a, stage b, bytes, messages): what moves between two stages a step, both ways; a
    # message is one boundary tensor fetched (a round trip)
    traffic: tuple[tuple[int, int, int, int], ...]

    @property
    def P(self) -> int:
        return len(self.stage_mib)

    @staticmethod
    def chain(stage_mib: tuple[int, ...], boundary_bytes: tuple[int, ...], messages: int
              ) -> Demand:  # fmt: skip
        """Neighbouring stages only: `boundary_bytes[p]` and `messages` between p and p+1."""
        if len(boundary_bytes) != len(stage_mib) - 1:
            n = len(stage_mib)
            raise PlacementError(
                f"a pipeline of {n} stages has {n - 1} boundaries, given {len(boundary_bytes)}"
            )
        return Demand(stage_mib, tuple((p, p + 1, b, messages)
                                       for p, b in enumerate(boundary_bytes)))  # fmt: skip


def pipeline_demand(g, plan, state_bytes: dict[str, int]) -> Demand:
    """The Demand of a stage plan (`agents.model.stage_plan.StagePlan`) of step graph `g`:
    each stage's state in MiB (rounded up) and every boundary tensor's bytes between its
    producer and each consumer (one message each)."""
    mib = tuple(-(-sum(state_bytes[n] for n in names) // MIB) for names in plan.state)
    pairs: dict[tuple[int, int], list[int]] = {}
    for v, producer, consumers in plan.boundaries:
        shape, _ = g.value(v)
        nbytes = 4 * math.prod(shape)  # every value is 4 bytes an element (f32, i32)
        for c in consumers:
            acc = pairs.setdefault((min(producer, c), max(producer, c)), [0, 0])
            acc[0] += nbytes
            acc[1] += 1
    return Demand(mib, tuple((a, b, n, m) for (a, b), (n, m) in sorted(pairs.items())))


@dataclass(frozen=True)
class Placement:
    nodes: tuple[str, ...]  # stage p's node
    tier: str  # "zone", "region" or "any"
    step_s: float  # the estimated seconds a step spends on its boundaries


TIERS = ("zone", "region", "any")


def link_of(a: Candidate, b: Candidate, links: dict[tuple[str, str], Link]) -> Link:
    """The link between a and b: measured (either direction; both: the slower), else estimated
    from the declared bandwidths and the zones."""
    seen = [links[k] for k in ((a.node, b.node), (b.node, a.node)) if k in links]
    if seen:
        return Link(min(x.throughput_mbps for x in seen), max(x.latency_ms for x in seen))
    bw = min(a.bandwidth_mbps, b.bandwidth_mbps)
    if a.zone and a.zone == b.zone:
        lat = SAME_ZONE_MS
    elif a.zone and b.zone and a.region == b.region:
        lat = SAME_REGION_MS
    else:
        lat = ELSEWHERE_MS
    return Link(float(bw), lat)


def step_seconds(chain: tuple[Candidate, ...], demand: Demand,
                 links: dict[tuple[str, str], Link]) -> float:  # fmt: skip
    """The estimated seconds a step spends moving boundary tensors along `chain`."""
    total = 0.0
    for a, b, nbytes, messages in demand.traffic:
        link = link_of(chain[a], chain[b], links)
        if link.throughput_mbps <= 0:
            return float("inf")  # an undeclared, unmeasured link: never chosen over a known one
        total += nbytes * 8 / (link.throughput_mbps * 1e6) + messages * link.latency_ms / 1e3
    return total


def _groups(tier: str, nodes: list[Candidate]) -> list[list[Candidate]]:
    if tier == "any":
        return [nodes]
    key = (lambda c: c.zone) if tier == "zone" else (lambda c: c.region)
    out: dict[int, list[Candidate]] = {}
    for c in nodes:
        if c.zone:  # an undeclared zone belongs to no zone or region
            out.setdefault(key(c), []).append(c)
    return [out[k] for k in sorted(out)]


def _best_in(group: list[Candidate], demand: Demand, links: dict[tuple[str, str], Link]
             ) -> tuple[float, tuple[str, ...]] | None:  # fmt: skip
    P = demand.P
    width = max(P, SEARCH_WIDTH)
    pool = sorted(group, key=lambda c: (-c.bandwidth_mbps, c.node))[:width]
    best = None
    for chain in itertools.permutations(pool, P):
        if any(c.memory_mib < need for c, need in zip(chain, demand.stage_mib, strict=True)):
            continue
        key = (step_seconds(chain, demand, links), tuple(c.node for c in chain))
        if key[0] != float("inf") and (best is None or key < best):
            best = key
    return best


def place_stages(demand: Demand, candidates: list[Candidate],
                 links: dict[tuple[str, str], Link] | None = None) -> Placement:  # fmt: skip
    """The network-aware placement of the module docstring's rule."""
    links = links or {}
    if demand.P < 1 or any(not 0 <= a < b < demand.P for a, b, _, _ in demand.traffic):
        raise PlacementError(f"a pipeline of {demand.P} stages: traffic between stages "
                             "that are not two of them")  # fmt: skip
    nodes = sorted({c.node: c for c in candidates}.values(), key=lambda c: c.node)
    for tier in TIERS:
        found = [b for g in _groups(tier, nodes) if len(g) >= demand.P
                 for b in [_best_in(g, demand, links)] if b is not None]  # fmt: skip
        if found:
            seconds, chosen = min(found)
            return Placement(chosen, tier, seconds)
    raise PlacementError(
        f"no {demand.P} distinct nodes hold the stages (largest stage "
        f"{max(demand.stage_mib)} MiB; {len(nodes)} candidates, the largest declaring "
        f"{max((c.memory_mib for c in nodes), default=0)} MiB)"
    )


def memory_refusal(stage_bytes: list[int], solver_mib: int) -> str | None:
    """Why no solver declaring at most `solver_mib` MiB can hold this job's stages (one line),
    or None when each stage's state fits. One stage: the whole model, which then can only be
    trained as a pipeline."""
    big = max(range(len(stage_bytes)), key=lambda p: stage_bytes[p])
    need = -(-stage_bytes[big] // MIB)
    if need <= solver_mib:
        return None
    if len(stage_bytes) == 1:
        p = -(-need // max(1, solver_mib))
        return (
            f"the model's state is {need} MiB, more than the {solver_mib} MiB solvers declare: "
            f"it can only be trained as a pipeline (--stages {p} or more)"
        )
    return (
        f"stage {big}'s state is {need} MiB, more than the {solver_mib} MiB solvers declare: "
        "use more --stages"
    )
