"""Compiled plans (agents/training/plan.py): the native path's one-call runs give the interpreter's
bits and the portable path's, on strided views, data movement, i32 values, NaN and index
errors; their outputs survive the next run (never the arena's blocks); arena blocks that are
live together never share memory; every example compiles to C instructions only."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from model_support import _bits, _f32, _i32

from agents.model.lower import Builder
from agents.training import native
from agents.training import plan as P
from agents.training.run import RunConfig, run_graph

pytestmark = pytest.mark.skipif(not native.available(), reason="needs the C kernels")
ROOT = Path(__file__).resolve().parents[2]


def _views_and_copies():
    b = Builder()
    x = b.input("x", (2, 3, 4), "f32")
    y = b.input("y", (2, 5, 4), "f32")
    p = b.add("permute", (x,), (4, 2, 3), "f32", (2, 0, 1))
    r = b.add("reshape", (p,), (8, 3), "f32")  # not a view of the permuted layout: a copy
    s = b.add("sum_last", (r,), (8,), "f32")
    sl = b.add("slice", (y,), (2, 3, 4), "f32", (1, 0, 2))  # rows 0, 2, 4: a strided view
    e = b.add("exp", (sl,), (2, 3, 4), "f32")
    c = b.add("cat", (x, e, y), (2, 11, 4), "f32", (1,))
    cm = b.add("cat", (p, b.add("exp", (p,), (4, 2, 3), "f32")), (4, 2, 6), "f32", (2,))
    ex = b.add("expand", (b.add("reshape", (s,), (1, 8), "f32"),), (3, 8), "f32")
    m = b.add("max_last", (b.add("permute", (c,), (2, 4, 11), "f32", (0, 2, 1)),), (2, 4),
              "f32")  # fmt: skip
    outs = [("c", c), ("cm", cm), ("ex", ex), ("m", m), ("p", p), ("x", x)]
    return b.graph(outs), [_f32((2, 3, 4), 1), _f32((2, 5, 4), 2)]


def _indexing():
    b = Builder()
    w = b.input("w", (6, 5), "f32")
    ids = b.input("ids", (3, 4), "i32")
    lab = b.input("lab", (4, 1), "i32")
    rows = b.add("index_rows", (w, ids), (3, 4, 5), "f32")
    g = b.add("gather", (w, b.add("expand", (b.const([[4, 0, 0, 3, 1]], (1, 5), "i32"),),
                                  (4, 5), "i32")), (4, 5), "f32", (0,))  # fmt: skip
    g2 = b.add("gather", (rows, b.add("reshape", (ids,), (3, 4, 1), "i32")), (3, 4, 1), "f32",
               (2,))  # fmt: skip
    sc = b.add("scatter_value", (b.add("slice", (w,), (4, 5), "f32", (0, 1, 1)), lab), (4, 5),
               "f32", (1, 0x3F800000))  # fmt: skip
    src = b.add("reshape", (rows,), (12, 5), "f32")
    add = b.add("index_add_rows", (w, b.add("reshape", (ids,), (12,), "i32"), src), (6, 5), "f32")
    return b.graph([("rows", rows), ("g", g), ("g2", g2), ("sc", sc), ("add", add)]), [
        _f32((6, 5), 3), _i32((3, 4), 4, 5), _i32((4, 1), 5, 5)]  # fmt: skip


def _reductions_and_i32():
    b = Builder()
    x = b.input("x", (4, 9), "f32")
    k = b.input("k", (4, 9), "i32")
    am = b.add("argmax_last", (x,), (4,), "i32")
    ai = b.add("argmax_last", (k,), (4,), "i32")
    si = b.add("sum_last", (k,), (4,), "i32")
    mi = b.add("max_last", (b.add("permute", (k,), (9, 4), "i32", (1, 0)),), (9,), "i32")
    f = b.add("cast_f32", (b.add("mul", (k, b.const(3, (), "i32")), (4, 9), "i32"),), (4, 9), "f32")
    t = b.add("add", (f, x), (4, 9), "f32")
    i = b.add("cast_i32", (b.add("relu", (f,), (4, 9), "f32"),), (4, 9), "i32")
    x_ = torch.tensor([[1, 3, 3, 0, 0, 0, 0, 0, 0], [np.nan, 5, np.nan, 0, 0, 0, 0, 0, 0],
                       [2, np.nan, 9, 9, 0, 0, 0, 0, 0], [-1, -1, -1, -1, -1, -1, -1, -1, -1]],
                      dtype=torch.float32)  # fmt: skip
    outs = [("am", am), ("ai", ai), ("si", si), ("mi", mi), ("t", t), ("i", i), ("loss", b.const(
        2.5, (), "f32"))]  # fmt: skip
    g = b.graph(outs)
    return g, [x_, _i32((4, 9), 6, 1 << 20) - (1 << 19)]


def _matmuls():
    b = Builder()
    a = b.input("a", (2, 3, 4, 5), "f32")
    w = b.input("w", (5, 7), "f32")
    c = b.input("c", (2, 2, 3, 5, 4), "f32")
    m2 = b.add("matmul", (b.add("reshape", (a,), (24, 5), "f32"), w), (24, 7), "f32")
    wt = b.add("permute", (w,), (7, 5), "f32", (1, 0))
    m2t = b.add("matmul", (m2, wt), (24, 5), "f32")
    at = b.add("permute", (a,), (2, 3, 5, 4), "f32", (0, 1, 3, 2))
    m4 = b.add("matmul", (a, at), (2, 3, 4, 4), "f32")
    m3 = b.add("matmul", (b.add("reshape", (a,), (6, 4, 5), "f32"), b.add("reshape", (at,), (
        6, 5, 4), "f32")), (6, 4, 4), "f32")  # fmt: skip
    ct = b.add("permute", (c,), (2, 2, 3, 4, 5), "f32", (0, 1, 2, 4, 3))
    m5 = b.add("matmul", (ct, c), (2, 2, 3, 4, 4), "f32")
    return b.graph([("m2t", m2t), ("m4", m4), ("m3", m3), ("m5", m5)]), [
        _f32((2, 3, 4, 5), 7), _f32((5, 7), 8), _f32((2, 2, 3, 5, 4), 9)]  # fmt: skip


def _random_stream():
    """`uniform` (the committed random stream) in C: key words with the sign bit set, a step t
    past 2^31, several sites and shapes, one draw read through a permuted view."""
    b = Builder()
    step = b.input("step", (3,), "i32")
    u = b.add("uniform", (step,), (4, 33), "f32", (7,))
    u0 = b.add("uniform", (step,), (5,), "f32", (0,))
    big = b.add("uniform", (step,), (2, 3, 1000), "f32", (0xFFFFFFFF,))
    keep = b.add("cast_f32", (b.add("lt", (u, b.const(0.9, (), "f32")), (4, 33), "i32"),),
                 (4, 33), "f32")  # fmt: skip
    pu = b.add("exp", (b.add("permute", (u,), (33, 4), "f32", (1, 0)),), (33, 4), "f32")
    words = np.array([0xDEADBEEF, 0x80000001, 0x9000000F], dtype=np.uint32).view(np.int32)
    g = b.graph([("u", u), ("u0", u0), ("big", big), ("keep", keep), ("pu", pu)])
    return g, [torch.from_numpy(words.copy())]


def _version_1_step():
    """A version-1 step (graph.step_ir): its element-wise, row, gather and loss nodes run as the
    plan's general operators (plan.general_form). Momenta with NaN, infinities and signed
    zeros; zero pre-activations; repeated batch rows; a momentum and learning rate with odd bits."""
    from agents.training.graph import build_step_graph, step_ir

    g = step_ir(build_step_graph((5, 7, 4), 6), 0x3D4CCCCD, 0x3F666667, 9, 5)
    # a NaN in a parameter or a batch row reaches every gradient: the specials go in momenta
    state = [_f32(v.shape, 20 + k, v.name.startswith("m.")) for k, v in enumerate(g.inputs[:-3])]
    state[0][0], state[1][0, 0] = 0.0, -0.0  # a hidden unit's pre-activation is 0: relu_bwd's edge
    idx = torch.tensor([[8, 0, 3, 3, 5, 1]], dtype=torch.int32)
    return g, [*state, _f32((9, 5), 30, False), _i32((1, 9), 31, 4), idx]


CASES = {"views": _views_and_copies, "indexing": _indexing, "reductions": _reductions_and_i32,
         "matmul": _matmuls, "random": _random_stream, "version_1": _version_1_step}  # fmt: skip


def _words(t: torch.Tensor, canonical: bool) -> np.ndarray:
    w = _bits(t)
    if canonical and t.dtype == torch.float32:  # as commitments hash them (merkle.py)
        w = np.where((w & 0x7FFFFFFF) > 0x7F800000, 0x7FC00000, w)
    return w


def _same(a: dict, b: dict, canonical: bool = False) -> None:
    """Equal words; `canonical`: NaNs compared as the commitments hash them (the portable
    kernels may give a NaN another sign or payload than the native ones)."""
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].shape == b[k].shape and a[k].dtype == b[k].dtype, k
        assert np.array_equal(_words(a[k], canonical), _words(b[k], canonical)), k


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_plan_gives_the_interpreters_bits_and_its_outputs_outlive_the_next_run(case):
    g, inputs = CASES[case]()
    portable, _ = run_graph(g, inputs, RunConfig("torch"))
    interpreted, _ = run_graph(g, inputs, RunConfig("native"), keep_trace=True)
    _same(interpreted, portable, canonical=True)
    plan = P.build(g)
    first = plan.run(inputs, 1)
    kept = {k: v.clone() for k, v in first.items()}
    _same(first, interpreted)
    other = [t + 1 if t.dtype == torch.float32 else t for t in inputs]
    for threads in (1, 2):
        plan.run(other, threads)  # reuses the arena: the first run's outputs must not change
        _same(plan.run(inputs, threads), interpreted)
    _same(first, kept)
    _same(run_graph(g, inputs, RunConfig("native", threads=2))[0], interpreted)  # the plan's path


@pytest.mark.parametrize("bad", ["rows", "gather", "scatter", "add"])
def test_an_index_outside_its_axis_is_an_error_not_a_read(bad):
    g, (w, ids, lab) = _indexing()
    ids, lab = ids.clone(), lab.clone()
    if bad in ("rows", "add"):
        ids[1, 2] = 6 if bad == "rows" else -1
    elif bad == "gather":  # the gather along axis 2 reads ids as positions in rows of 5
        ids[0, 0] = 5
    else:
        lab[3, 0] = 5
    with pytest.raises((IndexError, RuntimeError)):
        run_graph(g, [w, ids, lab], RunConfig("native"), keep_trace=True)
    with pytest.raises(IndexError):
        P.build(g).run([w, ids, lab], 1)


@pytest.mark.parametrize("label", [4, -1])
def test_a_version_1_label_outside_the_classes_is_an_error(label):
    g, inputs = _version_1_step()
    inputs[-2] = inputs[-2].clone()
    inputs[-2][0, 3] = label  # a batch row's label; the last layer has 4 classes
    with pytest.raises((IndexError, RuntimeError)):
        run_graph(g, inputs, RunConfig("native"), keep_trace=True)
    with pytest.raises(IndexError):
        P.build(g).run(inputs, 1)


def test_the_random_stream_in_c_is_the_registrys_scalar_reference():
    from agents.training.registry import uniform_word

    g, (step,) = _random_stream()
    out = P.build(g).run([step], 2)
    k0, k1, t = (int(w) & 0xFFFFFFFF for w in step.tolist())
    for name, site in (("u", 7), ("u0", 0), ("big", 0xFFFFFFFF)):
        flat = _bits(out[name]).reshape(-1)
        for e in (0, 1, len(flat) // 2, len(flat) - 1):
            assert int(flat[e]) == uniform_word(k0, k1, t, site, e), (name, e)


def _no_overlap(plan: P.Plan) -> None:
    """Arena blocks live at one instruction (from their writer to their last reader) are apart,
    and inside the arena."""
    arena = [b for b in plan.bufs if b.kind == "arena"]
    for i, x in enumerate(arena):
        for y in arena[i + 1 :]:
            live = x.first <= max(y.last, y.first) and y.first <= max(x.last, x.first)
            apart = x.off + x.size <= y.off or y.off + y.size <= x.off
            assert apart or not live, (x, y)
    assert plan.slot_tensors[P.ARENA].numel() >= max((b.off + b.size for b in arena), default=0)


def test_arena_blocks_live_together_never_overlap():
    for make in CASES.values():
        _no_overlap(P.build(make()[0]))


def test_a_version_1_step_and_forward_compile_to_c_instructions_only():
    from agents.training.graph import forward_ir

    for g in (_version_1_step()[0], forward_ir((5, 7, 4), 3)):
        assert [s[0] for s in P.build(g).segments] == ["c"]


def test_a_graph_with_an_empty_value_runs_on_the_interpreter():
    b = Builder()
    x = b.input("x", (3, 0), "f32")
    g = b.graph([("y", b.add("exp", (x,), (3, 0), "f32"))])
    with pytest.raises(P.NotPlannable):
        P.build(g)
    out, _ = run_graph(g, [torch.empty(3, 0)], RunConfig("native"))
    assert out["y"].shape == (3, 0)


def _example_step(file: str, factory: str, item, classes: int, opt):
    from agents.cli.job import load_factory
    from agents.model.lower import build_bundle

    torch.manual_seed(0)
    module = load_factory(f"{ROOT}/examples/models/{file}:{factory}")()
    lm = len(item) == 1
    low = build_bundle(module, opt, 4, "lm" if lm else "classify", item, classes)
    g = torch.Generator().manual_seed(1)
    x = (
        torch.randint(0, classes, (4, *item), generator=g)
        if lm
        else torch.rand(4, *item, generator=g)
    )
    y = torch.randint(0, classes, (4, *item) if lm else (4,), generator=g)
    hyper = [torch.tensor(v, dtype=torch.float32) for v in opt.hyper().values()]
    return low.bundle, [t for _, t in low.state] + hyper + [x, y]


def _with_step(bundle, inputs: list, t: int) -> list:
    """The step graph's inputs at step t: the step input last when the graph reads one
    (dropout's draws)."""
    from agents.model.job import has_step_input, step_input

    return inputs + [step_input(5, t)] if has_step_input(bundle.step) else inputs


@pytest.mark.parametrize("example", ["cnn", "gpt_masked", "mlp_adamw", "llama", "resnet"])
def test_every_example_compiles_to_c_instructions_only(example):
    """The examples' steps and forwards run as one C call each (no Python operator between),
    with the interpreter's bits over two steps; their arena blocks never overlap while live."""
    from agents.model.lower import Optimizer

    file, factory, item, classes, opt = {
        "cnn": ("digits_cnn.py", "make_model", (1, 8, 8), 10, Optimizer("sgd", 0.05,
                                                                         momentum=0.9)),
        "gpt_masked": ("char_gpt.py", "make_model_masked", (32,), 84, Optimizer(
            "adamw", 0.003, betas=(0.9, 0.99), weight_decay=0.1, clip_norm=1.0)),
        "mlp_adamw": ("digits_mlp.py", "make_model", (1, 8, 8), 10, Optimizer(
            "adamw", 0.003, weight_decay=0.01)),
        "llama": ("llama.py", "make_model", (32,), 84, Optimizer(
            "adamw", 0.003, weight_decay=0.1, no_decay_1d=True)),
        "resnet": ("resnet.py", "make_model", (1, 8, 8), 10, Optimizer("nesterov", 0.05,
                                                                      momentum=0.9)),
    }[example]  # fmt: skip
    bundle, inputs = _example_step(file, factory, item, classes, opt)
    g = bundle.step
    for graph in (g, bundle.forward):
        plan = P.build(graph)
        assert [s[0] for s in plan.segments] == ["c"], graph is g
        _no_overlap(plan)
    n = len(bundle.state)
    a = b = inputs
    for t in range(2):
        out_a = P.build(g).run(_with_step(bundle, a, t), 1)
        out_b, _ = run_graph(g, _with_step(bundle, b, t), RunConfig("native"), keep_trace=True)
        _same(out_a, out_b)
        a = [out_a[v.name] for v in bundle.state] + a[n:]
        b = [out_b[v.name] for v in bundle.state] + b[n:]
