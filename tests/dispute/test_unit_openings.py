"""A unit stack's opening (operand kind 13, PROTOCOL §7.2): each accumulation step of an
aggregation's matmul over the S units, proved with unit s's true opening, is the committed chain;
an opening of another unit's row, one whose shard word is changed, one of a state that is not in
the units list, or one whose unit root is not entry s of it, is refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from dispute_fixtures import reverts

from agents.core.deploy import load_artifact
from agents.dispute.aggregation import AggregationComputation, aggregation_job_graph
from agents.dispute.model_graph import element_chain, term_reads
from agents.model.aggregate import Aggregation, Outer, aggregation_graph
from agents.model.job import state_root
from agents.training import merkle
from agents.training.ir import Value

SHARDS = 5


@pytest.fixture(scope="module")
def agg():
    """A Nesterov aggregation of a two-tensor state over five units, with random states."""
    state = [Value("p.w", (3, 70), "f32"), Value("o.m.w", (3, 70), "f32")]
    weights = [np.float32(0.2)] * SHARDS
    a = Aggregation.of(aggregation_graph(state, ["p.w"], weights, Outer.nesterov(0.7, 0.9)))
    gen = torch.Generator().manual_seed(3)
    h = {n: torch.randn(3, 70, generator=gen) for n in a.round_names}
    units = [{n: torch.randn(3, 70, generator=gen) for n in a.step_names} for _ in range(SHARDS)]
    jg = aggregation_job_graph(a)
    return jg, AggregationComputation(a, jg, h, units)


def _ctx(comp: AggregationComputation, jg, node: int) -> tuple:
    cfg = jg.config
    return (state_root(comp.h), merkle.trace_root(comp.trace_roots(0)), comp.units_root(),
            len(cfg.state_names), cfg.num_nodes, node, 0, 0, 0, 0, 1, 0)  # fmt: skip


def _matmul(jg, tensor: int) -> int:
    return [i for i, n in enumerate(jg.graph.nodes) if n.op == "matmul"][tensor]


@pytest.mark.parametrize("tensor", [0, 1])
def test_each_step_of_the_units_chain_is_proved_with_that_units_opening(dep, agg, tensor):
    jg, comp = agg
    i = _matmul(jg, tensor)
    desc, e = jg.nodes[i], 137
    r, c = divmod(e, desc.cols)
    ctx = _ctx(comp, jg, i)
    chain = element_chain(jg.graph, i, e, comp.values())
    terms, init = dep.prover.functions.reduction(desc.encode()).call()
    assert (terms, init) == (SHARDS, int(chain[0]))
    for j in range(terms + 1):
        op = (comp.element_openings(jg, comp.trace_roots(0), 0, i, e, term=j)
              if j < terms else [])  # fmt: skip
        got = dep.prover.functions.accumulate(ctx, desc.encode(), r, c, j + 1, int(chain[j]), op)
        assert got.call() == int(chain[j + 1]), (tensor, j)


def test_a_wrong_units_opening_is_refused(dep, agg):
    jg, comp = agg
    i, e, j = _matmul(jg, 0), 137, 2
    desc = jg.nodes[i]
    r, c = divmod(e, desc.cols)
    ctx, acc = _ctx(comp, jg, i), int(element_chain(jg.graph, i, e, comp.values())[j])
    k = [n for n, inp in enumerate(desc.inputs) if inp.kind == 13][0]
    numel = desc.inputs[k].shape[1]
    reads = term_reads(jg.graph, i, e, j, comp.values())
    true = comp.element_openings(jg, comp.trace_roots(0), 0, i, e, term=j)

    def prove(opening):
        ops = list(true)
        ops[k] = opening
        return dep.prover.functions.accumulate(ctx, desc.encode(), r, c, j + 1, acc, ops).call()

    # unit j+1's true opening of the same element, for unit j's term
    other = comp.unit_opening(desc.inputs[k], [x + numel for x in reads[k]])
    with reverts(dep.prover, "ElementNotOpened"):
        prove(other)
    # unit j's opening with its shard word set to j + 1
    troot, proof, droot, chunks = true[k]
    forged = (troot, [*proof[:3], merkle.u256(j + 1), *proof[4:]], droot, chunks)
    with reverts(dep.prover, "BadOpening", operand=k):
        prove(forged)
    # the same tensor in a state that is not in the units list: unit j with another moment
    fake = dict(comp.units[j])
    fake["o.m.w"] = torch.zeros(3, 70)
    liar = AggregationComputation(comp.agg, jg, comp.h,
                                  [*comp.units[:j], fake, *comp.units[j + 1:]])  # fmt: skip
    fake_op = liar.element_openings(jg, comp.trace_roots(0), 0, i, e, term=j)[k]
    assert fake_op[0] == troot and fake_op[1][0] != proof[0]  # the true tensor, another F
    with reverts(dep.prover, "BadOpening", operand=k):
        prove(fake_op)


def test_graph_inputs_verifyAll_opens_every_input_and_refuses_a_missing_opening(dep, agg):
    """GraphInputs.verifyAll, the prover's first call in every proof (PROTOCOL §7.11), called
    directly: the true openings give one operand per input of the node; one opening short is
    refused with the count it was given."""
    jg, comp = agg
    i = _matmul(jg, 0)
    desc, ctx = jg.nodes[i], _ctx(comp, jg, i)
    graph_prover = dep.w3.eth.contract(
        address=dep.prover.functions.graphProver().call(), abi=load_artifact("GraphProver")["abi"]
    )
    inputs = dep.w3.eth.contract(
        address=graph_prover.functions.graphInputs().call(), abi=load_artifact("GraphInputs")["abi"]
    )
    true = comp.element_openings(jg, comp.trace_roots(0), 0, i, 137, term=0)
    assert len(inputs.functions.verifyAll(ctx, desc.encode(), true).call()) == len(desc.inputs)
    with reverts(dep.prover, "BadOperand", operand=len(true) - 1):
        inputs.functions.verifyAll(ctx, desc.encode(), true[:-1]).call()
