"""RepOps on the digits MLP's real step tensors: the on-chain one-element reference of every node
of the engine's op trace equals the engine's committed element, bit for bit.

The engine (agents/training/engine.py, native kernels when available) traces steps of
examples/digits-mlp.json; for every node a few output elements (first, last, and random ones) are
recomputed by OpHarness from exactly the input elements `trace.element_reads` names.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch
from f32_strategies import on_pyevm
from f32ref import np_arr_bits

from agents.data import builtin as data
from agents.dispute.graph import job_graph
from agents.dispute.trace import element_reads
from agents.training import spec as S
from agents.training.engine import Engine

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "digits-mlp.json"
SAMPLES_PER_NODE = 8  # 3 on py-evm (see f32_strategies.PYEVM_FACTOR)


def _bits(t: torch.Tensor) -> np.ndarray:
    a = t.detach().contiguous()
    if a.dtype == torch.float32:
        return np.array(np_arr_bits(a.numpy()), dtype=np.uint64).reshape(a.shape)
    return a.to(torch.int64).numpy()


@pytest.fixture(scope="module")
def digits_engine() -> Engine:
    sp = S.load(EXAMPLE)
    return Engine(sp, data.load_dataset(sp.dataset_name))


@pytest.mark.parametrize("t", [0, 5])
def test_every_trace_node_matches_onchain_reference(ops_h, digits_engine: Engine, t: int) -> None:
    eng = digits_engine
    st = eng.initial_state()
    for s in range(t):
        st = eng.step(st, s)
    _, trace = eng.trace_step(st, t)
    g = eng.graph
    jg = job_graph(eng.spec, eng.data.n)
    env: dict[str, np.ndarray] = {k: _bits(v) for k, v in st.items()}
    env["X"], env["Y"] = _bits(eng.x), _bits(eng.y)
    idx = eng.batch(t).numpy().reshape(-1)
    env["idx"] = idx.reshape(1, -1)
    for node, out in zip(g.nodes, trace, strict=True):
        env[node.name] = _bits(out)
    labels = env["y"].reshape(-1)
    mu, lr = eng.spec.momentum_bits, eng.spec.lr_bits
    rng = random.Random(1000 + t)
    checked = {}
    for node in g.nodes:
        out = env[node.name]
        rows, cols = node.shape
        picks = {(0, 0), (rows - 1, cols - 1)}
        while len(picks) < min(3 if on_pyevm() else SAMPLES_PER_NODE, rows * cols):
            picks.add((rng.randrange(rows), rng.randrange(cols)))
        for r, c in sorted(picks):
            deps = element_reads(jg, node.index, r * cols + c, idx=idx, labels=labels)
            vals = [[int(v) for v in env[node.inputs[k]].reshape(-1)[e]] for k, e in deps]
            one = [v[0] for v in vals]
            op = node.op
            if op == "matmul_nt":
                got = ops_h.dot(vals[0], vals[1])
            elif op == "add_row":
                got = ops_h.addRow(*one)
            elif op == "sub_col":
                got = ops_h.subCol(*one)
            elif op == "div_col":
                got = ops_h.divCol(*one)
            elif op == "relu":
                got = ops_h.relu(one[0])
            elif op == "relu_bwd":
                got = ops_h.reluBwd(*one)
            elif op == "exp":
                got = ops_h.exp32(one[0])
            elif op == "log":
                got = ops_h.log32(one[0])
            elif op == "row_sum":
                got = ops_h.rowSum(vals[0])
            elif op == "row_max":
                got = ops_h.rowMax(vals[0])
            elif op == "mean":
                got = ops_h.mean(vals[0])
            elif op == "xent_grad":
                got = ops_h.xentGrad(one[0], c, one[1], eng.spec.batch)
            elif op == "nll":
                got = ops_h.nll(one[0], one[2])  # deps: L[0,b], y[0,b], S[b, y[b]]
            elif op == "momentum":
                got = ops_h.momentum(mu, *one)
            elif op == "sgd":
                got = ops_h.sgd(lr, *one)
            elif op == "transpose":
                got = one[0]  # bit copy
            elif op in ("gather_rows", "gather_labels"):
                # the chain derives the dataset row from the batch schedule; then a bit copy
                j = r if op == "gather_rows" else c
                assert ops_h.batchIndex(eng.spec.seed, t, j, eng.data.n) == one[0] == idx[j]
                got = one[1]
            else:
                raise AssertionError(f"no on-chain reference for op {op}")
            assert got == int(out[r, c]), f"node {node.name} ({op}) element ({r},{c})"
            checked[op] = checked.get(op, 0) + 1
    every_op = {
        "gather_rows", "gather_labels", "matmul_nt", "add_row", "relu", "row_max", "sub_col",
        "exp", "row_sum", "div_col", "log", "nll", "mean", "xent_grad", "transpose", "relu_bwd",
        "momentum", "sgd",
    }  # fmt: skip
    assert set(checked) == every_op
