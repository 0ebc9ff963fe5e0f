"""Each version-3 reference on chain is exact (issue #25, PROTOCOL §7.11): for every operator of
the registry, on inputs over the whole float32 range (±0, subnormals, ±inf, NaN, huge and tiny
values; i32 words of both signs) and with broadcasting, every output element the GraphProver
recomputes equals the element the engine's kernel committed (NaN canonical), bit for bit.

One single-node graph per case, its inputs state tensors of an S_t made of them: the proof
opens them against that state root exactly as in a game. Hypothesis draws the data (5 seeds
per case in CI, 50 under `make fuzz`)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from dispute_fixtures import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.dispute.encoding import KIND_STATE, GraphNode, TensorInput, name_hash
from agents.dispute.model_graph import node_reads
from agents.dispute.trace import merkle_opening
from agents.model.job import commit_view
from agents.training import merkle
from agents.training.ir import Graph, Value
from agents.training.registry import OPS, Node, op_codes, run_node

SPECIALS = np.array(
    [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.17e-38, -2.3e-39, 3.4e38,
     -3.4e38, 88.7, -103.9, 0.5, 2.0, 9.0, 9.5, 3.99, 4.0, 1e-7, 7.0, -7.0],
    dtype=np.float32,
)  # fmt: skip

FLT, INT = "f32", "i32"
A, B = (3, 4), (1, 4)  # a shape and one that broadcasts to it
# (operator, input (shape, dtype) list, attrs, output shape, output dtype)
CASES = [
    *[
        (op, [(A, FLT), (B, FLT)], (), A, FLT)
        for op in ("add", "sub", "mul", "div", "maximum", "minimum")
    ],
    *[(op, [(A, INT), (B, INT)], (), A, INT) for op in ("add", "sub", "mul", "maximum", "minimum")],
    *[(op, [(A, FLT), (A, FLT)], (), A, INT) for op in ("gt", "ge", "lt", "le", "eq", "ne")],
    *[(op, [(A, INT), (B, INT)], (), A, INT) for op in ("gt", "ge", "lt", "le", "eq", "ne")],
    ("where", [(A, INT), (A, FLT), (B, FLT)], (), A, FLT),
    *[(op, [(A, FLT)], (), A, FLT) for op in ("neg", "exp", "log", "sqrt", "relu", "tanh", "erf")],
    ("neg", [(A, INT)], (), A, INT),
    ("cast_f32", [(A, INT)], (), A, FLT),
    ("cast_i32", [(A, FLT)], (), A, INT),
    ("logical_not", [(A, INT)], (), A, INT),
    ("sum_last", [(A, FLT)], (), (3,), FLT),
    ("sum_last", [(A, INT)], (), (3,), INT),
    ("max_last", [(A, FLT)], (), (3,), FLT),
    ("max_last", [(A, INT)], (), (3,), INT),
    ("argmax_last", [(A, FLT)], (), (3,), INT),
    ("argmax_last", [(A, INT)], (), (3,), INT),
    ("matmul", [((2, 3, 4), FLT), ((2, 4, 2), FLT)], (), (2, 3, 2), FLT),
    ("reshape", [(A, FLT)], (), (2, 6), FLT),
    ("permute", [((2, 3, 4), FLT)], (2, 0, 1), (4, 2, 3), FLT),
    ("expand", [(B, FLT)], (), (2, 3, 4), FLT),
    ("slice", [((3, 7), FLT)], (1, 1, 2), (3, 3), FLT),
    ("cat", [(A, FLT), ((3, 2), FLT)], (1,), (3, 6), FLT),
    ("index_rows", [((5, 3), FLT), ((2, 2), INT)], (), (2, 2, 3), FLT),
    ("index_add_rows", [((5, 3), FLT), ((4,), INT), ((4, 3), FLT)], (), (5, 3), FLT),
    ("gather", [(A, FLT), ((3, 2), INT)], (1,), (3, 2), FLT),
    ("scatter_value", [(A, FLT), ((3, 1), INT)], (1, 0xBF800000), A, FLT),
    ("uniform", [((3,), INT)], (7,), (3, 5), FLT),
    ("uniform", [((3,), INT)], (0xFFFFFFFF,), (2, 70), FLT),
]
CASE_IDS = [f"{c[0]}-{'-'.join(d for _, d in c[1])}" for c in CASES]
# index inputs must name rows / positions that exist
INDEX_RANGE = {"index_rows": 5, "index_add_rows": 5, "gather": 4, "scatter_value": 4}


def _f32(shape, rng) -> torch.Tensor:
    n = int(np.prod(shape))
    scale = rng.choice(np.array([1e-38, 1e-3, 1.0, 50.0, 1e30], np.float32), n)
    a = (rng.standard_normal(n).astype(np.float32) * scale).astype(np.float32)
    special = rng.random(n) < 0.5
    a[special] = rng.choice(SPECIALS, int(special.sum()))
    return torch.from_numpy(a.reshape(shape))


def _i32(shape, rng, hi: int | None) -> torch.Tensor:
    n = int(np.prod(shape))
    if hi is not None:
        a = rng.integers(0, hi, n)
    else:
        # edge words, binary32 special patterns (±0, ±inf, NaN, subnormal) and any word
        edges = np.array(
            [
                0,
                1,
                -1,
                2,
                7,
                -7,
                2**31 - 1,
                -(2**31),
                65536,
                0x7F800000,
                -0x00800000,
                0x7FC00000,
                1,
                -(2**31) + 1,
                0x3F800000,
            ],
            dtype=np.int64,
        )
        a = np.where(rng.random(n) < 0.5, rng.choice(edges, n),
                     rng.integers(-(2**31), 2**31, n))  # fmt: skip
    return torch.from_numpy(a.astype(np.int32).reshape(shape))


def _words(t: torch.Tensor) -> np.ndarray:
    """The words a tensor is committed with: NaNs canonical (merkle.encode_chunk)."""
    w, code, _, _ = merkle.words(commit_view(t))
    if code == merkle.DTYPE_F32:
        w = w.copy()
        w[(w & 0x7FFFFFFF) > 0x7F800000] = 0x7FC00000
    return w


def _prove_all(prover, op, ins, attrs, shape, dtype) -> None:
    names = [f"in{k}" for k in range(len(ins))]
    dts = ["f32" if t.dtype == torch.float32 else "i32" for t in ins]
    node = Node(op, tuple(range(len(ins))), tuple(attrs), tuple(shape), dtype)
    out = run_node(node, ins, False, "cpu")
    g = Graph(tuple(Value(n, tuple(t.shape), d) for n, t, d in zip(names, ins, dts, strict=True)),
              (node,), ())  # fmt: skip
    desc = GraphNode(
        OPS[op].code, 1 if dtype == "f32" else 2, tuple(shape), tuple(attrs),
        tuple(TensorInput(KIND_STATE, k, name_hash(n), 1 if d == "f32" else 2, tuple(t.shape))
              for k, (n, t, d) in enumerate(zip(names, ins, dts, strict=True))),
    )  # fmt: skip
    entries = [merkle.state_entry(n, merkle.tensor_root(commit_view(t)))
               for n, t in zip(names, ins, strict=True)]  # fmt: skip
    state_root = merkle.root_list(merkle.STATE_DOMAIN, entries)
    ctx = (state_root, bytes(32), bytes(32), len(ins), 1, 0, 0, 0, 1, 1, 1, 0)
    want = _words(out)
    for e in range(desc.numel):
        reads = node_reads(g, 0, e, [*ins, out])
        openings = [
            merkle_opening(commit_view(t), merkle.list_proof(merkle.STATE_DOMAIN, entries, k)
                           .siblings, reads[k])
            for k, t in enumerate(ins)
        ]  # fmt: skip
        r, c = divmod(e, desc.cols)
        got = prover.functions.evaluate(ctx, desc.encode(), r, c, openings).call()
        assert got == int(want[e]), (op, e, [t.reshape(-1).tolist() for t in ins], hex(got),
                                     hex(int(want[e])))  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_every_operator_is_exact_over_the_float32_range(dep, case):
    op, inputs, attrs, shape, dtype = case

    @settings(max_examples=examples(5), deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(seed=st.integers(0, 2**32 - 1))
    def check(seed):
        rng = np.random.default_rng(seed)
        ins = []
        for k, (s, d) in enumerate(inputs):
            hi = INDEX_RANGE.get(op) if k == 1 and d == INT else None
            if op == "where" and k == 0:
                hi = 2
            ins.append(_f32(s, rng) if d == FLT else _i32(s, rng, hi))
        if op == "cast_i32":  # the value must be finite and in range (registry order)
            ins[0] = torch.clamp(torch.nan_to_num(ins[0]), -2e9, 2e9)
        _prove_all(dep.prover, op, ins, attrs, shape, dtype)

    check()


@settings(max_examples=examples(10), deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))  # fmt: skip
@given(seed=st.integers(0, 2**256 - 1), step=st.integers(0, 2**32 - 1))
def test_the_step_input_is_derived_on_chain(dep, seed, step):
    """A node reading the step input (kind 12) gets (k0, k1, t) from the proof's seed and step,
    as the engine's `step_input`; a `uniform` element over it equals the engine's."""
    from agents.dispute.encoding import KIND_STEP
    from agents.model.job import step_input

    node = Node("uniform", (0,), (3,), (2, 3), "f32")
    key = step_input(seed, step)
    want = _words(run_node(node, [key], False, "cpu"))
    empty = (bytes(32), [], bytes(32), [])
    ctx = (bytes(32), bytes(32), bytes(32), 0, 1, 0, step, seed, 1, 1, 1, 0)
    for op, shape, attrs, words in (("neg", (3,), (), key.numpy().view(np.uint32) ^ 0),
                                    ("uniform", (2, 3), (3,), want)):  # fmt: skip
        desc = GraphNode(OPS[op].code, 2 if op == "neg" else 1, shape, attrs,
                         (TensorInput(KIND_STEP, 0, bytes(32), 2, (3,)),))  # fmt: skip
        for e in range(int(np.prod(shape))):
            r, c = divmod(e, desc.cols)
            got = dep.prover.functions.evaluate(ctx, desc.encode(), r, c, [empty]).call()
            if op == "neg":
                assert got == (-int(np.int32(words[e].view(np.int32)))) & 0xFFFFFFFF
            else:
                assert got == int(words[e]), (seed, step, e)


def test_the_cases_cover_every_operator():
    # every operator a version-3 graph may use (the GraphProver's); the version-1 operators in the
    # same table are proven by the OneStepProver (tests/dispute/test_game.py)
    assert {c[0] for c in CASES} | {"const"} == set(op_codes())


@pytest.mark.parametrize("op", ["div", "exp", "log", "sqrt", "relu", "tanh", "erf"])
def test_float_only_operators_refuse_i32_words(dep, op):
    from dispute_fixtures import reverts

    ins = [torch.tensor([[3, -2]], dtype=torch.int32)] * OPS[op].arity
    names = [f"in{k}" for k in range(len(ins))]
    desc = GraphNode(
        OPS[op].code,
        2,
        (1, 2),
        (),
        tuple(TensorInput(KIND_STATE, k, name_hash(n), 2, (1, 2)) for k, n in enumerate(names)),
    )
    entries = [merkle.state_entry(n, merkle.tensor_root(commit_view(t)))
               for n, t in zip(names, ins, strict=True)]  # fmt: skip
    ctx = (merkle.root_list(merkle.STATE_DOMAIN, entries), bytes(32), bytes(32), len(ins), 1, 0,
           0, 0, 1, 1, 1, 0)  # fmt: skip
    openings = [merkle_opening(commit_view(t), merkle.list_proof(merkle.STATE_DOMAIN, entries, k)
                               .siblings, [0]) for k, t in enumerate(ins)]  # fmt: skip
    with reverts(dep.prover, "UnsupportedDtype", op=OPS[op].code, dtype=2):
        dep.prover.functions.evaluate(ctx, desc.encode(), 0, 0, openings).call()


def test_a_batch_input_of_another_size_or_a_word_of_a_shape_is_refused(dep):
    from dispute_fixtures import reverts

    from agents.dispute.encoding import KIND_BATCH_X, KIND_WORD

    ctx = (bytes(32), bytes(32), bytes(32), 0, 1, 0, 0, 0, 4, 10, 1, 0)  # B = 4
    empty = (bytes(32), [], bytes(32), [])
    batch = GraphNode(OPS["neg"].code, 1, (3, 2), (),
                      (TensorInput(KIND_BATCH_X, 0, bytes(32), 1, (3, 2)),))  # fmt: skip
    with reverts(dep.prover, "BadHeader", operand=0):
        dep.prover.functions.evaluate(ctx, batch.encode(), 0, 0, [empty]).call()
    one = (0x3F800000).to_bytes(32, "big")
    word = GraphNode(OPS["neg"].code, 1, (2,), (), (TensorInput(KIND_WORD, 0, one, 1, (2,)),))
    with reverts(dep.prover, "BadHeader", operand=0):
        dep.prover.functions.evaluate(ctx, word.encode(), 0, 0, [empty]).call()
    word = GraphNode(OPS["neg"].code, 1, (), (), (TensorInput(KIND_WORD, 0, one, 1, ()),))
    assert dep.prover.functions.evaluate(ctx, word.encode(), 0, 0, [empty]).call() == 0xBF800000
