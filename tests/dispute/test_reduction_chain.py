"""The accumulator chains of PROTOCOL §7.10 (agents/dispute/reduction.py), off chain: the
vectorised chain equals the one-scalar-at-a-time loop over the whole float32 range, its end is
the operator's reference and the engine's output bit for bit, and the span cuts shrink every
span to one step in ceil(log_16(K + 1)) rounds."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dispute_fixtures import make_job
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.dispute import reduction
from agents.dispute.player import element_chain
from agents.training.float32 import CANONICAL_NAN
from agents.training.registry import OPS, Node

REDUCTIONS = [name for name, op in OPS.items() if op.v1_code and op.chain is not None]
SPECIAL = [0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000,
           0xFFC00001, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000, 0xBF800000]  # fmt: skip
words = st.one_of(st.sampled_from(SPECIAL), st.integers(0, 2**32 - 1))


def f32(bits: list[int]) -> np.ndarray:
    return np.array(bits, dtype=np.uint32).view(np.float32)


def canon(bits: int) -> int:
    return CANONICAL_NAN if (bits & 0x7FFFFFFF) > 0x7F800000 else bits


def test_the_reductions_are_the_provers():
    # The one-step prover's _reduction names exactly these four operators.
    assert sorted(REDUCTIONS) == ["matmul_nt", "mean", "row_max", "row_sum"]


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(op=st.sampled_from(REDUCTIONS), a=st.lists(words, min_size=1, max_size=40), data=st.data())
def test_vectorised_chain_is_the_scalar_loop(op, a, data):
    chain = OPS[op].chain
    rows = [f32(a)]
    if chain.product:
        rows.append(f32(data.draw(st.lists(words, min_size=len(a), max_size=len(a)))))
    fast = reduction.accumulators(chain, rows)
    assert [int(x) for x in fast] == reduction.scalar_accumulators(chain, rows)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(op=st.sampled_from(REDUCTIONS), a=st.lists(words, min_size=1, max_size=40), data=st.data())
def test_chain_end_is_the_operator_reference(op, a, data):
    chain = OPS[op].chain
    row = f32(a).reshape(1, -1)
    if chain.product:
        b = f32(data.draw(st.lists(words, min_size=len(a), max_size=len(a)))).reshape(1, -1)
        rows, ref = [row, b], OPS[op].reference([row, b], Node(op, (), (), (1, 1), "f32"))
    else:
        rows, ref = [row], OPS[op].reference([row], Node(op, (), (), (1, 1), "f32"))
    with np.errstate(all="ignore"):
        end = int(reduction.accumulators(chain, rows)[-1])
    assert end == canon(int(np.asarray(ref, np.float32).reshape(-1)[0:1].view(np.uint32)[0]))


def test_chain_end_is_the_engine_output():
    job = make_job((9, 7, 3), batch=5, n=20, seed=11, steps=2, interval=1)
    comp = job.honest(2, 1)
    for node in job.jg.graph.nodes:
        if node.op not in REDUCTIONS:
            continue
        out = comp.node_output(1, node.index).contiguous().reshape(-1).numpy().view(np.uint32)
        for e in range(out.size):
            acc = element_chain(comp, job.jg, 1, node.index, e)
            assert int(acc[-1]) == canon(int(out[e])), (node.name, e)
            assert acc[0] == OPS[node.op].chain.init


@pytest.mark.parametrize("terms", [1, 2, 15, 16, 17, 255, 256, 4096, 65536, 1 << 20])
def test_spans_shrink_in_log16_rounds(terms):
    lo, hi, rounds = 0, terms + 1, 0
    while hi - lo > 1:
        points = [lo, *reduction.cuts(lo, hi), hi]
        assert all(x < y for x, y in zip(points, points[1:], strict=False))  # no empty part
        assert len(points) - 1 == min(16, hi - lo)
        # the worst case: the longest part
        i = max(range(len(points) - 1), key=lambda j: points[j + 1] - points[j])
        lo, hi, rounds = points[i], points[i + 1], rounds + 1
    assert rounds == reduction.rounds(terms) == math.ceil(math.log(terms + 1, 16) - 1e-12)
