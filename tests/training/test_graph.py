"""Step graph (PROTOCOL §2.3): structure, and the element dependencies the dispute game uses —
recomputing an output element from exactly its listed inputs reproduces its bits."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_engine import tiny_spec
from training_support import examples

from agents.dispute.graph import job_graph
from agents.dispute.trace import element_reads
from agents.training import reference as R
from agents.training import spec as S
from agents.training.engine import Engine
from agents.training.graph import build_step_graph


def test_graph_shape_and_order():
    g = build_step_graph((64, 32, 16, 10), 8)
    names = [n.name for n in g.nodes]
    assert len(set(names)) == len(names)
    seen = {"X", "Y", "idx", "w0", "b0", "w1", "b1", "w2", "b2", "m.w0", "m.b0", "m.w1"}
    seen |= {"m.b1", "m.w2", "m.b2"}
    for n in g.nodes:  # topological: every input is defined before use
        assert all(r in seen for r in n.inputs), n
        seen.add(n.name)
    assert [n.op for n in g.nodes[:4]] == ["gather_rows", "gather_labels", "matmul_nt", "add_row"]
    assert list(g.next_state) == [
        "w0",
        "b0",
        "w1",
        "b1",
        "w2",
        "b2",
        "m.w0",
        "m.b0",
        "m.w1",
        "m.b1",
        "m.w2",
        "m.b2",
    ]
    assert g.node(g.next_state["w2"]).op == "sgd" and g.node(g.next_state["m.w2"]).op == "momentum"
    assert g.node("bwd0.dw").shape == (32, 64) and g.node(g.loss).shape == (1, 1)
    assert sum(n.op == "matmul_nt" for n in g.nodes) == 3 + 3 + 2
    assert build_step_graph((64, 32, 16, 10), 8) == g


def _recompute(op, node, row, col, deps, env, graph):
    """Compute one output element from only the dependency values (scalar reference)."""
    vals = [env[node.inputs[k]].reshape(-1)[elems] for k, elems in deps]
    f32 = np.float32
    if op == "matmul_nt":
        return R.dot(vals[0], vals[1])
    if op in ("row_sum", "mean"):
        s = R.row_sum(vals[0].reshape(1, -1))[0, 0]
        return s if op == "row_sum" else f32(s / f32(vals[0].size))
    if op == "row_max":
        return R.row_max(vals[0].reshape(1, -1))[0, 0]
    one = [v.reshape(1, 1) for v in vals]
    simple = {"add_row": R.add, "sub_col": R.sub, "div_col": R.div, "relu_bwd": R.relu_bwd}
    if op in simple:
        return simple[op](one[0], one[1])[0, 0]
    if op in ("relu", "exp", "log"):
        return getattr(R, op)(one[0])[0, 0]
    if op == "transpose":
        return vals[0][0]
    if op in ("gather_rows", "gather_labels"):
        return vals[1][0]
    if op == "xent_grad":
        p, y = vals[0][0], int(vals[1][0])
        return f32(f32(p - f32(1.0 if col == y else 0.0)) / f32(graph.batch))
    if op == "nll":
        return f32(vals[0][0] - vals[2][0])
    if op == "momentum":
        return f32(f32(graph_mu * vals[0][0]) + vals[1][0])
    if op == "sgd":
        return f32(vals[0][0] - f32(graph_lr * vals[1][0]))
    raise AssertionError(op)


graph_mu = graph_lr = None


@pytest.mark.fuzz
@examples(40)
@given(st.data())
def test_element_deps_suffice_to_recompute(data):
    global graph_mu, graph_lr
    sp, ds = tiny_spec()
    eng = Engine(sp, ds)
    graph_mu, graph_lr = sp.momentum, sp.lr
    st0 = eng.initial_state()
    _, trace = eng.trace_step(st0, 0)
    env = {k: v.numpy() for k, v in st0.items()}
    env["X"], env["Y"], env["idx"] = ds.x.numpy(), ds.y.numpy(), eng.batch(0).numpy()
    for n, t in zip(eng.graph.nodes, trace, strict=True):
        env[n.name] = t.contiguous().numpy()
    jg = job_graph(sp, ds.n)
    for node in eng.graph.nodes:  # one drawn element of every node
        row = data.draw(st.integers(0, node.shape[0] - 1))
        col = data.draw(st.integers(0, node.shape[1] - 1))
        e = row * node.shape[1] + col
        deps = element_reads(jg, node.index, e, env["idx"].reshape(-1), env["y"].reshape(-1))
        got = _recompute(node.op, node, row, col, deps, env, eng.graph)
        want = env[node.name][row, col]
        if node.dtype == "u32":
            assert int(got) == int(want)
        else:
            assert np.float32(got).view(np.uint32) == np.float32(want).view(np.uint32), node.name


def test_element_reads_of_matmul_are_rows():
    sp, ds = tiny_spec()
    spec = S.JobSpec((64, 32, 10), sp.dataset_name, sp.dataset_root, sp.lr_bits,
                     sp.momentum_bits, 8, sp.seed, 1, 1)  # fmt: skip
    jg = job_graph(spec, 100)
    g = jg.graph
    d = element_reads(jg, g.index_of("fwd0.mm"), 3 * 32 + 17)
    assert d == [(0, list(range(3 * 64, 4 * 64))), (1, list(range(17 * 64, 18 * 64)))]
    d = element_reads(jg, g.index_of("bwd0.dw"), 5 * 64 + 7)
    assert d == [(0, list(range(5 * 8, 6 * 8))), (1, list(range(7 * 8, 8 * 8)))]
    with pytest.raises(IndexError):
        element_reads(jg, 0, 8 * 64)
