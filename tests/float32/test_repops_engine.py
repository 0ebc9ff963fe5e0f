"""RepOps one-element references vs the Python training engine (agents/training), bit for bit.

For every operator, random tensors drawn by hypothesis go through the engine's own functions —
the torch ops (`ops`), the native C kernels (`fastops`, when they build here) and the scalar
reference (`reference`) — and every output element is recomputed on chain by OpHarness.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from f32_strategies import examples, value
from f32ref import np_arr, np_arr_bits
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.training import native, ops, schedule
from agents.training import reference as R
from agents.training.decompose import unit_batch_indices
from agents.training.registry import OPS

if native.available():
    from agents.training import fastops
else:  # pragma: no cover - the portable path is still checked
    fastops = None

EX = 25


def bits32(x: float) -> int:
    return int(np.array([x], dtype=np.float32).view(np.uint32)[0])


# training-like values: mostly moderate floats, with every hard class mixed in
train_value = st.one_of(
    st.floats(-8, 8, width=32).map(bits32),
    st.floats(-(2.0**-10), 2.0**-10, width=32).map(bits32),
    value,
)
exp_arg = st.one_of(
    st.floats(-110, 95, width=32).map(bits32), st.floats(-2, 2, width=32).map(bits32), value
)
log_arg = st.one_of(
    st.floats(0, 2.0**126, width=32, allow_subnormal=True).map(bits32),
    st.floats(0.5, 2, width=32).map(bits32),
    st.integers(1, 0x7FFFFF),  # positive subnormals
    value,
)


def tensor(bits: list[int], rows: int, cols: int) -> torch.Tensor:
    return torch.from_numpy(np_arr(bits).reshape(rows, cols).copy())


def tbits(t: torch.Tensor | np.ndarray) -> list[int]:
    a = t.detach().numpy() if isinstance(t, torch.Tensor) else t
    return np_arr_bits(np.ascontiguousarray(a, dtype=np.float32))


def _kernels(name: str):
    """An operator's registry kernels (portable, C) as functions of its inputs."""
    op = OPS[name]
    return (lambda *a: op.torch(list(a), None)), (lambda *a: op.native(list(a), None))


def engine_outputs(torch_fn, fast_fn, ref_fn, *args) -> list[list[int]]:
    """The operator's outputs (canonical bits) from each engine path; they must all agree."""
    outs = [tbits(torch_fn(*args))]
    if fast_fn is not None and fastops is not None:
        outs.append(tbits(fast_fn(*args)))
    if ref_fn is not None:
        outs.append(tbits(ref_fn(*[a.numpy() if isinstance(a, torch.Tensor) else a for a in args])))
    for o in outs[1:]:
        assert o == outs[0], "engine paths disagree"
    return outs


def mats(elem, max_rows: int = 4, max_cols: int = 8):
    return st.integers(1, max_rows).flatmap(
        lambda r: st.integers(1, max_cols).flatmap(
            lambda c: st.tuples(
                st.just(r), st.just(c), st.lists(elem, min_size=r * c, max_size=r * c)
            )
        )
    )


@pytest.mark.fuzz
def test_matmul_nt_dot(ops_h) -> None:
    @settings(max_examples=examples(EX))
    @given(
        st.integers(1, 3),
        st.integers(1, 3),
        st.integers(1, 40),
        st.data(),
    )
    def prop(m: int, n: int, k: int, d) -> None:
        a = d.draw(st.lists(train_value, min_size=m * k, max_size=m * k))
        b = d.draw(st.lists(train_value, min_size=n * k, max_size=n * k))
        A, B = tensor(a, m, k), tensor(b, n, k)
        (want, *_) = engine_outputs(
            ops.matmul_nt,
            fastops.matmul_nt if fastops else None,
            lambda x, y: R.matmul_nt(x, y),
            A,
            B,
        )
        assert list(ops_h.matmulNt(a, b, k)) == want
        assert ops_h.dot(a[:k], b[:k]) == want[0]

    prop()


@pytest.mark.fuzz
@pytest.mark.parametrize(
    "name,op,arg", [("exp", 0, exp_arg), ("log", 1, log_arg), ("relu", 2, train_value)]
)
def test_unary_ops(ops_h, name: str, op: int, arg) -> None:
    torch_fn = {"exp": ops.exp, "log": ops.log, "relu": ops.relu}[name]
    fast_fn = getattr(fastops, name) if fastops else None
    ref_fn = {"exp": R.exp, "log": R.log, "relu": R.relu}[name]

    @settings(max_examples=examples(80))  # x 128 = 10,240 elements per operator (ci)
    @given(st.lists(arg, min_size=128, max_size=128))
    def prop(x: list[int]) -> None:
        (want, *_) = engine_outputs(torch_fn, fast_fn, ref_fn, tensor(x, 8, 16))
        assert list(ops_h.unaryMany(op, x)) == want
        assert ops_h.exp32(x[0]) == list(ops_h.unaryMany(0, x[:1]))[0]
        assert ops_h.log32(x[0]) == list(ops_h.unaryMany(1, x[:1]))[0]

    prop()


@pytest.mark.fuzz
def test_broadcast_elementwise_ops(ops_h) -> None:
    """add_row, sub_col, div_col and relu_bwd on (M, N) tensors."""

    @settings(max_examples=examples(EX))
    @given(mats(train_value), st.data())
    def prop(shape_vals, d) -> None:
        m, n, a = shape_vals
        row = d.draw(st.lists(train_value, min_size=n, max_size=n))
        col = d.draw(st.lists(train_value, min_size=m, max_size=m))
        g = d.draw(st.lists(train_value, min_size=m * n, max_size=m * n))
        A = tensor(a, m, n)
        (want,) = engine_outputs(ops.add_row, None, R.add_row, A, tensor(row, 1, n))[:1]
        b_per = [row[j] for i in range(m) for j in range(n)]
        assert list(ops_h.binaryMany(0, a, b_per)) == want
        c_per = [col[i] for i in range(m) for j in range(n)]
        (want,) = engine_outputs(ops.sub_col, None, R.sub_col, A, tensor(col, 1, m))[:1]
        assert list(ops_h.binaryMany(1, a, c_per)) == want
        (want,) = engine_outputs(ops.div_col, None, R.div_col, A, tensor(col, 1, m))[:1]
        assert list(ops_h.binaryMany(2, a, c_per)) == want
        (want, *_) = engine_outputs(
            ops.relu_bwd, fastops.relu_bwd if fastops else None, R.relu_bwd, tensor(g, m, n), A
        )
        assert list(ops_h.binaryMany(4, g, a)) == want
        assert ops_h.addRow(a[0], row[0]) == list(ops_h.binaryMany(0, a[:1], row[:1]))[0]
        assert ops_h.subCol(a[0], col[0]) == list(ops_h.binaryMany(1, a[:1], col[:1]))[0]
        assert ops_h.divCol(a[0], col[0]) == list(ops_h.binaryMany(2, a[:1], col[:1]))[0]
        assert ops_h.reluBwd(g[0], a[0]) == list(ops_h.binaryMany(4, g[:1], a[:1]))[0]
        assert ops_h.relu(a[0]) == list(ops_h.unaryMany(2, a[:1]))[0]

    prop()


@pytest.mark.fuzz
def test_row_reductions_and_mean(ops_h) -> None:
    ties = st.sampled_from([0, 0x80000000, 0x3F800000, 0x7F800000, 0xFF800000])

    @settings(max_examples=examples(EX))
    @given(mats(st.one_of(train_value, ties), 3, 40))
    def prop(shape_vals) -> None:
        m, n, a = shape_vals
        A = tensor(a, m, n)
        (sums, *_) = engine_outputs(*_kernels("row_sum"), R.row_sum, A)
        (maxs, *_) = engine_outputs(*_kernels("row_max"), R.row_max, A)
        for i in range(m):
            r = a[i * n : (i + 1) * n]
            assert ops_h.rowSum(r) == sums[i]
            assert ops_h.rowMax(r) == maxs[i]
        row = tensor(a[:n], 1, n)
        (mean, *_) = engine_outputs(*_kernels("mean"), R.mean, row)
        assert ops_h.mean(a[:n]) == mean[0]

    prop()


@pytest.mark.fuzz
def test_loss_ops_xent_grad_and_nll(ops_h) -> None:
    prob = st.one_of(st.floats(0, 1, width=32, allow_subnormal=True).map(bits32), value)

    @settings(max_examples=examples(EX))
    @given(mats(prob, 6, 10), st.data())
    def prop(shape_vals, d) -> None:
        b, c, p = shape_vals
        y = d.draw(st.lists(st.integers(0, c - 1), min_size=b, max_size=b))
        lvals = d.draw(st.lists(train_value, min_size=b, max_size=b))
        P = tensor(p, b, c)
        yt = torch.tensor(y, dtype=torch.int64)
        (want, *_) = engine_outputs(ops.xent_grad, None, R.xent_grad, P, yt)
        for r in range(b):
            got = list(ops_h.xentGradRow(p[r * c : (r + 1) * c], y[r], b))
            assert got == want[r * c : (r + 1) * c]
            assert ops_h.xentGrad(p[r * c], 0, y[r], b) == want[r * c]
        L = tensor(lvals, 1, b)
        (want, *_) = engine_outputs(ops.nll, None, R.nll, L, P, yt)
        picked = [p[r * c + y[r]] for r in range(b)]
        assert list(ops_h.binaryMany(3, lvals, picked)) == want
        assert ops_h.nll(lvals[0], picked[0]) == want[0]

    prop()


@pytest.mark.fuzz
def test_update_ops_momentum_sgd_average(ops_h) -> None:
    hyper = st.one_of(
        st.sampled_from([0x3F666666, 0x3D4CCCCD, 0x3E4CCCCD, 0x3F4CCCCD, 0, 0x3F800000]),
        st.floats(0, 1, width=32).map(bits32),
        value,
    )

    @settings(max_examples=examples(EX))
    @given(mats(train_value, 4, 16), hyper, hyper, st.data())
    def prop(shape_vals, mu: int, lr: int, d) -> None:
        m, n, v = shape_vals
        g = d.draw(st.lists(train_value, min_size=m * n, max_size=m * n))
        V, G = tensor(v, m, n), tensor(g, m, n)
        mu_t = torch.from_numpy(np_arr([mu]).copy()).reshape(())
        lr_t = torch.from_numpy(np_arr([lr]).copy()).reshape(())
        want_m = tbits(ops.momentum(V, G, mu_t))
        assert want_m == tbits(R.momentum(V.numpy(), G.numpy(), np_arr([mu])[0]))
        assert list(ops_h.momentumMany(mu, v, g)) == want_m
        assert ops_h.momentum(mu, v[0], g[0]) == want_m[0]
        want_s = tbits(ops.sgd(V, G, lr_t))  # W = V here, V' = G
        assert want_s == tbits(R.sgd(V.numpy(), G.numpy(), np_arr([lr])[0]))
        assert list(ops_h.sgdMany(lr, v, g)) == want_s
        assert ops_h.sgd(lr, v[0], g[0]) == want_s[0]
        # average over S shards
        s = d.draw(st.integers(1, 5))
        shards = [d.draw(st.lists(train_value, min_size=m * n, max_size=m * n)) for _ in range(s)]
        w = d.draw(st.lists(hyper, min_size=s, max_size=s))
        Ps = [tensor(p, m, n) for p in shards]
        ws = [torch.from_numpy(np_arr([x]).copy()).reshape(()) for x in w]
        want_a = tbits(ops.average(Ps, ws))
        assert want_a == tbits(R.average([p.numpy() for p in Ps], list(np_arr(w))))
        for e in range(m * n):
            assert ops_h.average([p[e] for p in shards], w) == want_a[e]

    prop()


@pytest.mark.fuzz
def test_batch_index_schedule(ops_h) -> None:
    @settings(max_examples=examples(EX))
    @given(
        st.one_of(st.integers(0, 2**256 - 1), st.integers(0, 1000)),
        st.one_of(st.integers(0, 2**32), st.integers(0, 2**256 - 1)),
        st.integers(1, 64),
        st.one_of(st.integers(1, 2000), st.integers(1, 2**62)),
    )
    def prop(seed: int, t: int, batch: int, n: int) -> None:
        want = [int(v) for v in schedule.batch_indices(seed, t, batch, n)]
        assert list(ops_h.batchIndices(seed, t, batch, n)) == want
        assert ops_h.batchIndex(seed, t, batch - 1, n) == want[-1]

    prop()


@pytest.mark.fuzz
def test_shard_batch_index_schedule(ops_h) -> None:
    """RepOps.shardBatchIndex (the one-step proof's batch of a unit, PROTOCOL §4) is the unit
    engine's schedule; with one shard it is the version-1 idx."""

    @settings(max_examples=examples(EX))
    @given(
        st.one_of(st.integers(0, 2**256 - 1), st.integers(0, 1000)),
        st.one_of(st.integers(0, 2**32), st.integers(0, 2**63)),
        st.integers(1, 32),
        st.integers(1, 64),
        st.data(),
    )
    def prop(seed: int, g: int, batch: int, shards: int, draw: st.DataObject) -> None:
        n = draw.draw(st.one_of(st.integers(shards, 3000), st.integers(shards, 2**62)))
        s = draw.draw(st.integers(0, shards - 1))
        want = [int(v) for v in unit_batch_indices(seed, g, batch, n, shards, s)]
        got = list(ops_h.shardBatchIndices(seed, g, batch, n, shards, s))
        assert got == want
        assert all(i % shards == s and i < n for i in got)
        if shards == 1:
            assert got == list(ops_h.batchIndices(seed, g, batch, n))

    prop()
