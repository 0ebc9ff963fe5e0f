"""The device kernels (agents/training/triton_ops.py) on the CPU, under Triton's interpreter:
each equals the portable path bit for bit, on the registry's special values too; whole steps of
a version-3 and a version-1 job on them give the native kernels' roots. On a GPU the same
kernels run compiled (bench/gpu_check.py compares the roots there)."""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported: the kernels run in numpy

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

pytest.importorskip("triton")

from model_support import _bits, _f32  # noqa: E402

from agents.__main__ import main  # noqa: E402
from agents.training import registry as R  # noqa: E402
from agents.training.registry import Node  # noqa: E402
from agents.training.run import RunConfig, run_graph  # noqa: E402


@pytest.mark.parametrize("name", ["exp", "log", "tanh", "erf", "relu"])
def test_elementwise_kernels_equal_the_portable_path(name):
    x = _f32((8, 40), 5)
    node = Node(name, (0,), (), (8, 40), "f32")
    want = R.OPS[name].torch([x], node)
    got = R.run_node(node, [x], False, "cpu", use_gpu=True)
    assert np.array_equal(_bits(got), _bits(want))


@pytest.mark.parametrize("name", ["sum_last", "max_last"])
def test_reductions_equal_the_portable_path(name):
    x = _f32((3, 4, 33), 9)
    node = Node(name, (0,), (), (3, 4), "f32")
    got = R.run_node(node, [x], False, "cpu", use_gpu=True)
    assert np.array_equal(_bits(got), _bits(R.OPS[name].torch([x], node)))
    ints = torch.randint(0, 9, (5, 7), dtype=torch.int32)  # i32 sums fall back to portable
    inode = Node("sum_last", (0,), (), (5,), "i32")
    assert torch.equal(R.run_node(inode, [ints], False, "cpu", use_gpu=True), ints.sum(-1))


def test_matmul_and_index_add_rows_equal_the_portable_path():
    a, b = _f32((2, 37, 65), 11), _f32((2, 65, 19), 12)
    node = Node("matmul", (0, 1), (), (2, 37, 19), "f32")
    got = R.run_node(node, [a, b], False, "cpu", use_gpu=True)
    assert np.array_equal(_bits(got), _bits(R.t_matmul(a, b)))
    g = torch.Generator().manual_seed(3)
    idx = torch.randint(0, 7, (300,), generator=g, dtype=torch.int32)
    src = torch.randn(300, 9, generator=g) * 1e3
    node = Node("index_add_rows", (0, 1, 2), (), (7, 9), "f32")
    got = R.run_node(node, [torch.zeros(7, 9), idx, src], False, "cpu", use_gpu=True)
    assert np.array_equal(_bits(got), _bits(R.t_index_add_rows(torch.zeros(7, 9), idx, src)))


def test_a_version_3_step_on_the_device_kernels_gives_the_native_roots():
    from agents.model.job import state_root
    from agents.model.lower import Optimizer, build_bundle

    torch.manual_seed(0)
    module = torch.nn.Sequential(
        torch.nn.Conv2d(1, 3, 3, padding=1), torch.nn.MaxPool2d(2), torch.nn.Flatten(),
        torch.nn.Linear(48, 16), torch.nn.GELU(), torch.nn.LayerNorm(16), torch.nn.Linear(16, 4),
    )  # fmt: skip
    low = build_bundle(module, Optimizer("adamw", 1e-2), 4, "classify", (1, 8, 8), 4)
    st = [t for _, t in low.state]
    hp = [torch.tensor(v, dtype=torch.float32) for v in Optimizer("adamw", 1e-2).hyper().values()]
    x, y = torch.randn(4, 1, 8, 8), torch.randint(0, 4, (4,))
    names = [n for n, _ in low.state]
    roots = []
    for kernels in ("native", "triton"):
        out, _ = run_graph(low.bundle.step, st + hp + [x, y], RunConfig(kernels))
        roots.append(state_root({n: out[n] for n in names}))
    assert roots[0] == roots[1]


@pytest.mark.parametrize("factory", ["resnet.py:make_tiny", "llama.py:make_tiny"])
def test_the_new_examples_steps_on_the_device_kernels_give_the_native_roots(factory, tmp_path):
    """The ResNet (BatchNorm, dropout's random stream) and the LLaMA-style model (RMSNorm,
    RoPE, GQA, tied embeddings, a schedule table) on the interpreted device kernels: the same
    roots and op trace as native, so a GPU draws the same dropout masks."""
    from agents.__main__ import main
    from agents.cli.job import load_job
    from agents.model.job import state_root, trace_root

    models = os.path.join(os.path.dirname(__file__), "../../examples/models")
    lm = factory.startswith("llama")
    spec = tmp_path / "job.json"
    assert main(["job", "build", "--model", f"{models}/{factory}", "--dataset",
                 "shakespeare-char/train" if lm else "sklearn-digits/train", "--optimizer",
                 "adamw", "--lr", "0.01", "--warmup", "1", "--batch", "2", "--steps", "2",
                 "--checkpoint-every", "1", "--out", str(spec)]) == 0  # fmt: skip
    out = []
    for kernels in ("native", "triton"):
        job, st = load_job(str(spec), None, RunConfig(kernels))
        nxt, trace = job.trace_step(st, 1)
        out.append((state_root(nxt), trace_root(trace)))
    assert out[0] == out[1]


def test_a_version_1_step_on_the_device_kernels_gives_the_native_roots():
    from agents.data import builtin as data
    from agents.training import spec
    from agents.training.engine import Engine, EngineConfig
    from agents.training.state import state_root

    sp = spec.load(os.path.join(os.path.dirname(__file__), "../../examples/digits-mlp.json"))
    ds = data.load_dataset(sp.dataset_name)
    roots = []
    for kernels in ("native", "triton"):
        eng = Engine(sp, ds, EngineConfig(kernels))
        roots.append([state_root(s) for _, _, s in eng.train(3, 1)])
    assert roots[0] == roots[1]


def test_triton_without_a_gpu_or_the_interpreter_is_one_line(monkeypatch, capsys):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    spec = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "digits-mlp.json")
    assert main(["train", "--spec", spec, "--steps", "1", "--kernels", "triton"]) == 2
    err = capsys.readouterr().err
    assert "--kernels triton: Triton kernels need a CUDA device" in err and err.count("\n") == 1


def test_a_role_asked_for_cuda_without_it_says_so_once_and_runs_on_the_cpu(caplog, monkeypatch):
    import logging

    from agents.cli.main import build_parser
    from agents.roles.runner import engine_config
    from agents.training.engine import EngineConfig

    log = logging.getLogger("vtp.test.device")
    with caplog.at_level(logging.WARNING, logger="vtp.test.device"):
        assert engine_config("cuda", log) == EngineConfig()
    assert [r.getMessage() for r in caplog.records] == [
        "--device cuda: no CUDA device here; training on the CPU"
    ]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert engine_config("cuda", log) == EngineConfig("triton", device="cuda")
    assert engine_config("cpu", log) == EngineConfig()
    for role in ("solver", "verifier", "whistleblower", "submitter", "aggregator"):
        extra = ["--spec", "job.json"] if role == "submitter" else []
        assert build_parser().parse_args([role, "--device", "cuda", *extra]).device == "cuda"
