"""The network placement rule of a pipeline's stages (PROTOCOL §6.5,
agents/model/stage_placement.py): memory first, one zone, then neighbours, then anywhere; the
fastest chain by measured throughput and latency within the tier; deterministic."""

from __future__ import annotations

import itertools
import random

import pytest

from agents.model.stage_placement import (
    MIB,
    Candidate,
    Demand,
    Link,
    PlacementError,
    link_of,
    memory_refusal,
    place_stages,
    step_seconds,
)

DEMAND2 = Demand.chain((100, 100), (8 * MIB,), 8)
DEMAND4 = Demand.chain((100,) * 4, (8 * MIB,) * 3, 8)


def node(name: str, zone: int, bw: int = 1000, mib: int = 4096) -> Candidate:
    return Candidate(name, mib, bw, zone)


def test_one_zone_first_even_if_another_zone_declares_more_bandwidth():
    nodes = [node("a", 0x0101, 100), node("b", 0x0101, 100), node("c", 0x0102, 10_000),
             node("d", 0x0201, 10_000)]  # fmt: skip
    p = place_stages(DEMAND2, nodes)
    assert p.tier == "zone" and set(p.nodes) == {"a", "b"}


def test_then_neighbours_of_one_region_then_anywhere():
    nodes = [node("a", 0x0101), node("b", 0x0102), node("c", 0x0201), node("d", 0x0301)]
    p = place_stages(DEMAND2, nodes)
    assert p.tier == "region" and set(p.nodes) == {"a", "b"}
    p4 = place_stages(DEMAND4, nodes)
    assert p4.tier == "any" and sorted(p4.nodes) == ["a", "b", "c", "d"]
    # the two neighbours are adjacent in the chain: one far link less
    i, j = p4.nodes.index("a"), p4.nodes.index("b")
    assert abs(i - j) == 1


def test_memory_decides_who_may_hold_a_stage():
    demand = Demand.chain((3000, 100), (MIB,), 2)
    nodes = [node("big", 0x0101, mib=4096), node("small", 0x0101, mib=512),
             node("small2", 0x0101, mib=512)]  # fmt: skip
    assert place_stages(demand, nodes).nodes[0] == "big"
    with pytest.raises(PlacementError, match="largest stage 3000 MiB"):
        place_stages(demand, [node("small", 0x0101, mib=512), node("s2", 0x0101, mib=512)])


def test_measured_links_override_declared_values():
    # all in one zone; b declares 10 Gbit/s but its peers measure 20 Mbit/s and 80 ms from it
    nodes = [node("a", 0x0101), node("b", 0x0101, 10_000), node("c", 0x0101)]
    slow = Link(20.0, 80.0)
    links = {("a", "b"): slow, ("c", "b"): slow, ("a", "c"): Link(1000.0, 5.0)}
    p = place_stages(DEMAND2, nodes, links)
    assert set(p.nodes) == {"a", "c"}
    assert p.step_s == pytest.approx(8 * MIB * 8 / 1e9 + 8 * 5e-3)
    # a link measured both ways counts as the slower direction
    both = link_of(nodes[0], nodes[2], {("a", "c"): Link(900.0, 5.0), ("c", "a"): Link(50.0, 9)})
    assert (both.throughput_mbps, both.latency_ms) == (50.0, 9)


def test_the_placement_beats_every_other_chain_and_is_deterministic():
    rng = random.Random(7)
    nodes = [node(f"n{i}", rng.choice([0x0101, 0x0102, 0x0201]), rng.choice([20, 100, 1000]))
             for i in range(7)]  # fmt: skip
    links = {(a.node, b.node): Link(rng.choice([20.0, 1000.0]), rng.choice([5.0, 80.0]))
             for a in nodes for b in nodes if a.node < b.node}  # fmt: skip
    p = place_stages(DEMAND4, nodes, links)
    assert p == place_stages(DEMAND4, list(reversed(nodes)), links)
    same_tier = {"zone": lambda c: (c.zone,), "region": lambda c: (c.region,),
                 "any": lambda c: ()}[p.tier]  # fmt: skip
    by = {c.node: c for c in nodes}
    for chain in itertools.permutations(nodes, 4):
        if len({same_tier(c) for c in chain}) == 1:
            assert p.step_s <= step_seconds(chain, DEMAND4, links) + 1e-12
    assert p.step_s == pytest.approx(step_seconds(tuple(by[n] for n in p.nodes), DEMAND4, links))


def test_bad_demands_and_too_few_nodes_are_refused():
    with pytest.raises(PlacementError, match="has 1 boundaries, given 2"):
        Demand.chain((1, 1), (1, 1), 2)
    with pytest.raises(PlacementError, match="not two of them"):
        place_stages(Demand((1, 1), ((0, 2, 5, 1),)), [node("a", 0x0101), node("b", 0x0101)])
    with pytest.raises(PlacementError, match="no 4 distinct nodes"):
        place_stages(DEMAND4, [node("a", 0x0101), node("b", 0x0101), node("a", 0x0101)])


def test_memory_refusal_says_when_only_a_pipeline_can_hold_the_model():
    assert memory_refusal([100 * MIB], 100) is None
    one = memory_refusal([300 * MIB + 1], 100)
    assert one == ("the model's state is 301 MiB, more than the 100 MiB solvers declare: it can "
                   "only be trained as a pipeline (--stages 4 or more)")  # fmt: skip
    assert memory_refusal([90 * MIB, 95 * MIB], 100) is None
    assert memory_refusal([90 * MIB, 120 * MIB], 100).startswith("stage 1's state is 120 MiB")


def test_the_demand_of_a_stage_plan_counts_every_boundary_tensor():
    import torch

    from agents.model.lower import Optimizer, Recipe, build_bundle
    from agents.model.stage_placement import pipeline_demand
    from agents.model.stage_plan import StagePlan
    from examples.models.char_gpt import GPT

    torch.manual_seed(0)
    low = build_bundle(GPT(vocab=16, d=16, heads=2, layers=2, block_size=4),
                       Optimizer("adamw", 1e-2), 4, "lm", (4,), 16, recipe=Recipe(2),
                       stages=2)  # fmt: skip
    g, plan = low.bundle.step, StagePlan.from_obj(low.bundle.stages)
    d = pipeline_demand(g, plan, {n: t.nbytes for n, t in dict(low.state).items()})
    assert d.P == 2 and [(a, b) for a, b, _, _ in d.traffic] == [(0, 1)]
    _, _, nbytes, messages = d.traffic[0]
    assert messages == sum(len(c) for _, _, c in plan.boundaries) and messages >= 4  # 2 fwd, 2 bwd
    # the forward activations of each micro-batch: 2 examples x 4 tokens x 16 features, f32
    assert nbytes >= 2 * 2 * (2 * 4 * 16 * 4)
    assert sum(d.stage_mib) >= 2 and place_stages(d, [node("a", 1), node("b", 1)]).tier == "zone"
