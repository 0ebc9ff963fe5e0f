"""The one-step proof of version-3 graph nodes (GraphProver, PROTOCOL §7.2, §7.5) on the CNN and
char-GPT examples: for output elements drawn from every operator type of each graph, the prover,
given the openings the dependency rule names, returns exactly the word the engine committed —
and rejects forged or missing openings. Also the descriptor header and the accumulator chains of
the version-3 reductions (each step of a chain, and its end, is the committed element).
"""

from __future__ import annotations

import random
from collections import defaultdict

import numpy as np
import pytest
from dispute_fixtures import MODEL_JOBS, build_model_job, examples, reverts

from agents.dispute.model_graph import (
    StepValues,
    element_chain,
    model_job_graph,
    node_reads,
    openings,
    proof_context,
    term_reads,
)
from agents.model.job import commit_view, state_root
from agents.training import merkle
from agents.training.registry import OPS

OP_NAMES = {op.code: name for name, op in OPS.items()}


@pytest.fixture(scope="module", params=sorted(MODEL_JOBS))
def step(request, tmp_path_factory):
    """(name, the values of step 1 from S_1, S_1) of a small example job."""
    job, st = build_model_job(tmp_path_factory.mktemp(request.param), request.param)
    st, _ = job.step(st, 0)  # step 1: AdamW's moments are no longer zero
    jg = model_job_graph(job)
    _, trace = job.trace_step(st, 1)
    sv = StepValues.of(job, jg, st, 1, trace)
    return request.param, sv, st


def _ctx(sv: StepValues, st, node: int, roots: list[bytes]) -> tuple:
    ctx = proof_context(sv, 1, node, roots)
    assert ctx[0] == state_root(st)  # S_1, committed as the state root is
    return ctx


def _committed(sv: StepValues, i: int) -> np.ndarray:
    """Node i's output words as committed: NaNs canonical (merkle.encode_chunk)."""
    w, code, _, _ = merkle.words(commit_view(sv.values[sv.jg.n_inputs + i]))
    if code == merkle.DTYPE_F32:
        w = w.copy()
        w[(w & 0x7FFFFFFF) > 0x7F800000] = 0x7FC00000
    return w


def _draws(sv: StepValues, per_op: int, seed: int) -> list[tuple[int, int]]:
    """(node, element) pairs: `per_op` from every operator type of the graph."""
    rng = random.Random(seed)
    by_op = defaultdict(list)
    for i, n in enumerate(sv.jg.graph.nodes):
        by_op[n.op].append(i)
    out = []
    for op in sorted(by_op):
        for _ in range(per_op):
            i = rng.choice(by_op[op])
            out.append((i, rng.randrange(sv.jg.nodes[i].numel)))
    return out


def test_every_operator_of_the_graph_is_proved_exactly(dep, step):
    name, sv, st = step
    roots = sv.node_roots()
    draws = _draws(sv, examples(3), seed=len(name))
    ops_seen = set()
    for i, e in draws:
        desc = sv.jg.nodes[i]
        reads = node_reads(sv.jg.graph, i, e, sv.values)
        op = openings(sv, i, reads, roots)
        r, c = divmod(e, desc.cols)
        got = dep.prover.functions.evaluate(_ctx(sv, st, i, roots), desc.encode(), r, c, op).call()
        want = int(_committed(sv, i)[e])
        assert got == want, f"{name} node {i} ({OP_NAMES[desc.op]}) element {e}"
        ops_seen.add(OP_NAMES[desc.op])
    # the draw covers every operator type the graph uses
    assert ops_seen == {n.op for n in sv.jg.graph.nodes}


def test_the_header_is_the_committed_view(dep, step):
    _, sv, _ = step
    for i in random.Random(1).sample(range(len(sv.jg.nodes)), 20):
        desc = sv.jg.nodes[i]
        w, code, rows, cols = merkle.words(commit_view(sv.values[sv.jg.n_inputs + i]))
        assert tuple(dep.prover.functions.header(desc.encode()).call()) == (code, rows, cols)


def test_a_forged_input_word_or_a_missing_chunk_is_rejected(dep, step):
    _, sv, st = step
    roots = sv.node_roots()
    g = sv.jg.graph
    i = next(k for k, n in enumerate(g.nodes) if n.op == "matmul")
    desc = sv.jg.nodes[i]
    ctx = _ctx(sv, st, i, roots)
    op = openings(sv, i, node_reads(g, i, 0, sv.values), roots)
    leaf, data, sib = op[0][3][0]
    forged = [(op[0][0], op[0][1], op[0][2], [(leaf, bytes([data[0] ^ 1]) + data[1:], sib)]),
              op[1]]  # fmt: skip
    with reverts(dep.prover, "BadOpening", operand=0):
        dep.prover.functions.evaluate(ctx, desc.encode(), 0, 0, forged).call()
    missing = [(op[0][0], op[0][1], op[0][2], []), op[1]]
    with reverts(dep.prover, "ElementNotOpened"):
        dep.prover.functions.evaluate(ctx, desc.encode(), 0, 0, missing).call()
    with reverts(dep.prover, "BadOperand"):
        dep.prover.functions.evaluate(ctx, desc.encode(), 0, 0, op[:1]).call()


def test_each_chain_step_of_the_v3_reductions_is_the_committed_chain(dep, step):
    """For matmul, sum_last, max_last and index_add_rows: the chain the agents compute
    (`element_chain`) ends at the committed element, and `accumulate` from any of its
    accumulators over the next term gives the next one (first terms, random ones, the finish)."""
    name, sv, st = step
    roots = sv.node_roots()
    g = sv.jg.graph
    rng = random.Random(7)
    for opname in ("matmul", "sum_last", "max_last", "index_add_rows"):
        nodes = [k for k, n in enumerate(g.nodes) if n.op == opname and n.dtype == "f32"]
        if not nodes:
            continue
        i = rng.choice(nodes)
        desc = sv.jg.nodes[i]
        e = rng.randrange(desc.numel)
        r, c = divmod(e, desc.cols)
        ctx = _ctx(sv, st, i, roots)
        chain = element_chain(g, i, e, sv.values)
        terms, init = dep.prover.functions.reduction(desc.encode()).call()
        assert (terms, init) == (len(chain) - 2, int(chain[0]))
        assert int(chain[-1]) == int(_committed(sv, i)[e]), f"{name} {opname}"
        for j in sorted({0, 1, terms, *rng.sample(range(terms + 1), min(terms + 1, 4))}):
            op = openings(sv, i, term_reads(g, i, e, j, sv.values), roots) if j < terms else []
            got = dep.prover.functions.accumulate(
                ctx, desc.encode(), r, c, j + 1, int(chain[j]), op
            ).call()
            assert got == int(chain[j + 1]), f"{name} {opname} step {j + 1} of {terms + 1}"
