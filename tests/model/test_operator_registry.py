"""The operator registry: every kernel against the scalar reference through the dependency rule,
native against portable bit for bit, and the codes against contracts/dispute/lib/OpCodes.sol."""

from __future__ import annotations

import re
from math import prod
from pathlib import Path

import numpy as np
import pytest
import torch
from model_support import SPECIALS, _bits, _f32, _i32  # noqa: F401

from agents.training import registry as R
from agents.training.registry import Node

ROOT = Path(__file__).resolve().parents[2]


def _scalar_bits(v) -> int:
    v = np.asarray(v)
    if v.dtype == np.float32:
        return int(v.reshape(1).view(np.uint32)[0])
    return int(v)


def _canon(bits: int) -> int:
    """NaN payloads are canonical in commitments; compare NaN as NaN."""
    return 0x7FC00000 if (bits & 0x7F800000) == 0x7F800000 and bits & 0x7FFFFF else bits


# (node, inputs): one case per arithmetic operator, broadcasting where the operator allows it
def _cases():
    a, b = _f32((4, 6), 1), _f32((1, 6), 2)
    out = []
    for name in ("add", "sub", "mul", "div", "maximum", "minimum"):
        out.append((Node(name, (0, 1), (), (4, 6), "f32"), [a, b]))
    for name in ("gt", "ge", "lt", "le", "eq", "ne"):
        out.append((Node(name, (0, 1), (), (4, 6), "i32"), [a, _f32((4, 6), 3)]))
    out.append((Node("where", (0, 1, 2), (), (4, 6), "f32"), [_i32((4, 1), 4), a, b]))
    big = _f32((8, 40), 5)
    for name in ("neg", "exp", "log", "sqrt", "relu", "tanh", "erf"):
        out.append((Node(name, (0,), (), (8, 40), "f32"), [big]))
    out.append((Node("cast_f32", (0,), (), (3, 5), "f32"), [_i32((3, 5), 6, 1 << 30)]))
    out.append((Node("cast_i32", (0,), (), (3, 5), "i32"), [_f32((3, 5), 7, specials=False)]))
    out.append((Node("logical_not", (0,), (), (3, 5), "i32"), [_i32((3, 5), 8)]))
    for name, dt in (("sum_last", "f32"), ("max_last", "f32"), ("argmax_last", "i32")):
        out.append((Node(name, (0,), (), (3, 4), dt), [_f32((3, 4, 33), 9)]))
    out.append((Node("sum_last", (0,), (), (5,), "i32"), [_i32((5, 7), 10, 100)]))
    out.append((Node("matmul", (0, 1), (), (2, 3, 5), "f32"), [_f32((2, 3, 17), 11),
                                                               _f32((2, 17, 5), 12)]))  # fmt: skip
    step = torch.tensor([-7, 0x7F800000, 123456], dtype=torch.int32)
    out.append((Node("uniform", (0,), (5,), (3, 40), "f32"), [step]))
    return out


@pytest.mark.parametrize("node,inputs", _cases(), ids=lambda c: getattr(c, "op", None))
def test_kernel_equals_scalar_reference_on_every_element(node, inputs):
    op = R.OPS[node.op]
    R.check_node(node, [tuple(t.shape) for t in inputs], [])
    shapes = [tuple(t.shape) for t in inputs]
    flats = [t.reshape(-1) for t in inputs]
    for use_native in (False, True):
        out = R.run_node(node, inputs, use_native, "cpu")
        assert tuple(out.shape) == node.shape
        got = out.reshape(-1)
        for e in range(prod(node.shape)):
            deps = op.deps(node, shapes, e)
            args = [flats[k][i].numpy()[()] for k, idx in deps for i in idx]
            want = _scalar_bits(op.scalar(*((node, e) if op.positional else ()), *args))
            assert _canon(_scalar_bits(got[e].numpy()[()])) == _canon(want), (node.op, e, args)


def test_data_movement_copies_the_element_its_rule_names():
    x = _f32((2, 3, 4), 20)
    y = _f32((2, 5, 4), 21)
    cases = [
        (Node("reshape", (0,), (), (6, 4), "f32"), [x]),
        (Node("permute", (0,), (2, 0, 1), (4, 2, 3), "f32"), [x]),
        (Node("expand", (0,), (), (3, 2, 3, 4), "f32"), [x]),
        (Node("slice", (0,), (2, 1, 2), (2, 3, 2), "f32"), [x]),
        (Node("cat", (0, 1), (1,), (2, 8, 4), "f32"), [x, y]),
    ]
    for node, inputs in cases:
        shapes = [tuple(t.shape) for t in inputs]
        R.check_node(node, shapes, [])
        out = R.run_node(node, inputs, False, "cpu").reshape(-1)
        for e in range(out.numel()):
            ((k, (i,)),) = R.OPS[node.op].deps(node, shapes, e)
            assert _bits(out[e : e + 1]) == _bits(inputs[k].reshape(-1)[i : i + 1]), node.op


def test_index_add_rows_adds_in_source_order():
    # three rows into index 1: fl(fl(fl(0 + a) + b) + c) in that order, which differs from
    # any other order for these values
    dest = torch.zeros(3, 1)
    src = torch.tensor([[1e8], [1.0], [-1e8], [5.0]], dtype=torch.float32)
    idx = torch.tensor([1, 1, 1, 0], dtype=torch.int32)
    node = Node("index_add_rows", (0, 1, 2), (), (3, 1), "f32")
    want = np.float32(np.float32(np.float32(0 + np.float32(1e8)) + 1) - np.float32(1e8))
    for use_native in (False, True):
        out = R.run_node(node, [dest, idx, src], use_native, "cpu")
        assert out[1, 0].item() == want == 0.0 and out[0, 0].item() == 5.0
    # many repeats of few rows (an embedding gradient): native and portable agree bit for bit
    g = torch.Generator().manual_seed(3)
    idx = torch.randint(0, 7, (500,), generator=g, dtype=torch.int32)
    src = torch.randn(500, 9, generator=g) * 1e3
    node = Node("index_add_rows", (0, 1, 2), (), (7, 9), "f32")
    a, b = (R.run_node(node, [torch.zeros(7, 9), idx, src], nat, "cpu") for nat in (False, True))
    assert np.array_equal(_bits(a), _bits(b))


def test_native_kernels_equal_portable_on_odd_shapes_and_threads():
    for node, inputs in [
        (Node("matmul", (0, 1), (), (3, 7, 9), "f32"), [_f32((3, 7, 65), 30),
                                                         _f32((3, 65, 9), 31)]),
        (Node("sum_last", (0,), (), (5, 3), "f32"), [_f32((5, 3, 130), 32)]),
        (Node("max_last", (0,), (), (5, 3), "f32"), [_f32((5, 3, 130), 33)]),
        (Node("exp", (0,), (), (77,), "f32"), [_f32((77,), 34)]),
        (Node("log", (0,), (), (77,), "f32"), [_f32((77,), 35)]),
        (Node("relu", (0,), (), (77,), "f32"), [_f32((77,), 36)]),
    ]:  # fmt: skip
        portable = R.run_node(node, inputs, False, "cpu")
        for threads in (1, 2, 3):
            native = R.run_node(node, inputs, True, "cpu", threads)
            assert np.array_equal(_bits(native), _bits(portable)), (node.op, threads)


def test_philox_matches_random123s_known_answers():
    # Random123's kat_vectors for Philox4x32-10 (counter, key -> output)
    assert R.philox4x32_10((0, 0, 0, 0), (0, 0)) == (0x6627E8D5, 0xE169C58D, 0xBC57AC4C,
                                                      0x9B00DBD8)  # fmt: skip
    assert R.philox4x32_10((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2) == (
        0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)  # fmt: skip
    assert R.philox4x32_10((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
                           (0xA4093822, 0x299F31D0)) == (0xD16CFE09, 0x94FDCCEB, 0x5001E420,
                                                         0x24126EA1)  # fmt: skip


def test_uniform_draws_are_uniform_and_the_same_on_every_path_and_thread_count():
    """The stream is one function of (key, t, site, element): the portable kernel on 1 and 2
    threads, the native path (the portable kernel: integer arithmetic is exact everywhere) and
    the scalar reference give the same words; draws of another site or step differ; the mean and
    the keep rate of a dropout of p = 0.1 are what a uniform [0, 1) gives."""
    step = torch.tensor([11, -3, 5], dtype=torch.int32)
    node = Node("uniform", (0,), (2,), (200, 500), "f32")
    outs = []
    for use_native, threads in ((False, 1), (True, 1), (False, 2), (True, 2)):
        torch.set_num_threads(threads)
        outs.append(_bits(R.run_node(node, [step], use_native, "cpu", threads)))
    torch.set_num_threads(1)
    assert all(np.array_equal(o, outs[0]) for o in outs)
    u = outs[0].view(np.float32)
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.005
    assert abs((u < np.float32(0.9)).mean() - 0.9) < 0.005
    other = _bits(R.run_node(Node("uniform", (0,), (3,), (200, 500), "f32"), [step], True, "cpu"))
    later = _bits(R.run_node(node, [step + torch.tensor([0, 0, 1], dtype=torch.int32)], True,
                             "cpu"))  # fmt: skip
    assert (other != outs[0]).mean() > 0.99 and (later != outs[0]).mean() > 0.99


def test_tanh_and_erf_are_accurate():
    x = torch.linspace(-6, 6, 20001, dtype=torch.float32)
    xd = x.double()
    tanh = R.OPS["tanh"].torch([x], Node("tanh", (0,), (), (20001,), "f32")).double()
    erf = R.OPS["erf"].torch([x], Node("erf", (0,), (), (20001,), "f32")).double()
    assert (tanh - torch.tanh(xd)).abs().max() < 3e-7
    assert (erf - torch.erf(xd)).abs().max() < 5e-7  # A&S 7.1.26: 1.5e-7, plus binary32 rounding


def test_shape_rules_refuse_bad_nodes():
    bad = [
        (Node("matmul", (0, 1), (), (2, 2), "f32"), [(2, 3), (4, 2)]),
        (Node("add", (0, 1), (), (2, 3), "f32"), [(2, 3), (3, 2)]),
        (Node("reshape", (0,), (), (5,), "f32"), [(2, 3)]),
        (Node("permute", (0,), (0, 0), (2, 2), "f32"), [(2, 2)]),
        (Node("slice", (0,), (0, 1, 1), (3, 2), "f32"), [(3, 2)]),
        (Node("nope", (), (), (1,), "f32"), []),
        (Node("add", (0,), (), (1,), "f32"), [(1,)]),
        (Node("add", (0, 1), (), (1,), "f64"), [(1,), (1,)]),
    ]
    for node, shapes in bad:
        with pytest.raises(R.GraphError):
            R.check_node(node, shapes, [])


def test_codes_are_unique_and_match_the_solidity_op_codes():
    codes = R.op_codes()
    assert len(set(codes.values())) == len(codes)
    sol = (ROOT / "contracts/dispute/lib/OpCodes.sol").read_text()
    declared = {m[0].lower(): int(m[1]) for m in re.findall(r"V3_(\w+) = (\d+);", sol)}
    assert declared == codes
    v1 = {int(c) for c in re.findall(r"constant (?!V3_|KIND_|DTYPE_|FIRST_)\w+ = (\d+);", sol)}
    assert not v1 & set(codes.values()), "version-3 codes must not reuse version-1 codes"


def test_every_operator_states_its_order_and_rules():
    for name, op in R.OPS.items():
        assert op.order and op.shape and op.torch and op.deps, name


def test_a_node_may_not_declare_a_huge_tensor():
    with pytest.raises(R.GraphError, match="elements"):
        R.check_node(Node("const", (), (0,), (1 << 20, 1 << 20), "f32"), [], [])


def test_a_version_3_graph_may_not_use_an_operator_of_version_1_graphs_only():
    # the GraphProver evaluates codes >= 64 only: such a node could never be proved
    for name in ("matmul_nt", "row_sum", "momentum"):
        with pytest.raises(R.GraphError, match="version-1 MLP graphs only"):
            R.check_node(Node(name, (0, 0), (0,), (2, 2), "f32"), [(2, 2), (2, 2)], [])
    R.check_node(Node("relu", (0,), (), (2, 2), "f32"), [(2, 2)], [])  # shared with version 3


def test_version_1_codes_match_the_solidity_op_codes_and_the_dispute_encoding():
    from agents.dispute.encoding import OPS as ENCODED

    sol = (ROOT / "contracts/dispute/lib/OpCodes.sol").read_text()
    v1_constant = r"constant (?!V3_|KIND_|DTYPE_|FIRST_)(\w+) = (\d+);"
    declared = {m[0].lower(): int(m[1]) for m in re.findall(v1_constant, sol)}
    assert declared == R.v1_codes() == ENCODED
    assert all(R.OPS[name].order and R.OPS[name].reference for name in R.v1_codes())


def test_operand_kinds_and_dtypes_match_the_solidity_op_codes():
    from agents.dispute import encoding as E

    sol = (ROOT / "contracts/dispute/lib/OpCodes.sol").read_text()
    declared = dict(re.findall(r"constant ((?:KIND|DTYPE|FIRST)_\w+) = (\d+);", sol))
    assert {k: int(v) for k, v in declared.items()} == {k: getattr(E, k) for k in declared}
