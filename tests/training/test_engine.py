"""Engine: fast step == traced step == scalar reference; bit-identical across processes,
threads and kernels; it learns the digits task."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from training_support import assert_bits_equal

from agents.data import builtin as data
from agents.model.job import trace_root
from agents.training import merkle, native
from agents.training import spec as S
from agents.training.engine import Engine, EngineConfig
from agents.training.graph import reference_step
from agents.training.state import state_root

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "digits-mlp.json"


def tiny_spec(widths=(6, 5, 4, 3), batch=3, name="synthetic/n=40,f=6,c=3,seed=2", **kw):
    ds = data.load_dataset(name)
    obj = {
        "version": 1,
        "model": {"arch": "mlp", "widths": list(widths)},
        "dataset": {"name": name, "root": "0x" + ds.root().hex()},
        "lr": "0x3e4ccccd",  # 0.2
        "momentum": "0x3f4ccccd",  # 0.8
        "batch": batch,
        "seed": 7,
        "steps": 6,
        "checkpoint_every": 2,
    }
    obj.update(kw)
    obj["checkpoint_every"] = min(obj["checkpoint_every"], obj["steps"])
    return S.parse_spec(obj), ds


KERNEL_CFGS = [EngineConfig("torch"), EngineConfig("torch", 2)]
if native.available():
    KERNEL_CFGS += [EngineConfig("native"), EngineConfig("native", 2)]


@pytest.mark.parametrize("cfg", KERNEL_CFGS, ids=lambda c: f"{c.kernels}-t{c.threads}")
def test_traced_step_matches_scalar_reference(cfg):
    sp, ds = tiny_spec()
    eng = Engine(sp, ds, cfg)
    st = eng.initial_state()
    for t in range(3):
        nxt, trace = eng.trace_step(st, t)
        idx = eng.batch(t).numpy()
        ref_next, ref_trace = reference_step(
            eng.graph,
            eng.ir.nodes,
            {k: v.numpy() for k, v in st.items()},
            ds.x.numpy(),
            ds.y.numpy(),
            idx,
        )
        assert len(trace) == len(ref_trace) == len(eng.graph.nodes)
        for node, got, want in zip(eng.graph.nodes, trace, ref_trace, strict=True):
            assert tuple(got.shape) == node.shape, node.name
            if node.dtype == "u32":
                assert np.array_equal(got.numpy(), want), node.name
            else:
                assert_bits_equal(got.contiguous().numpy(), want)
        fast = eng.step(st, t)
        assert list(fast) == list(nxt) == list(ref_next)
        for k in nxt:
            assert_bits_equal(fast[k].numpy(), ref_next[k])
            assert_bits_equal(nxt[k].numpy(), ref_next[k])
        st = nxt


@pytest.mark.parametrize(
    ("widths", "batch", "name"),
    [
        ((6, 70, 3), 9, "synthetic/n=40,f=6,c=3,seed=2"),
        # big enough that the C matmul splits work across threads and torch goes parallel
        ((64, 600, 10), 64, "synthetic/n=300,f=64,c=10,seed=3"),
    ],
)
def test_all_kernel_options_agree_on_roots(widths, batch, name):
    sp, ds = tiny_spec(widths=widths, batch=batch, name=name, steps=4)
    runs = [[(t, r) for t, r, _ in Engine(sp, ds, c).train()] for c in KERNEL_CFGS]
    assert all(r == runs[0] for r in runs[1:])
    assert len(runs[0]) == sp.steps // sp.checkpoint_every + 1


def test_trace_commitments():
    sp, ds = tiny_spec()
    eng = Engine(sp, ds)
    st = eng.initial_state()
    _, trace = eng.trace_step(st, 0)
    roots = [merkle.tensor_root(t) for t in trace]
    root = trace_root(trace)
    assert root == merkle.root_list(merkle.TRACE_DOMAIN, roots)
    node = eng.graph.index_of("fwd0.mm")
    p = merkle.list_proof(merkle.TRACE_DOMAIN, roots, node)
    assert merkle.verify_list_proof(merkle.TRACE_DOMAIN, root, len(roots), p)
    # the state root is the root list of the named tensor roots, in protocol order
    names = list(st)
    assert names[:2] == ["w0", "b0"] and names[-1] == f"m.b{len(sp.widths) - 2}"
    vals = [merkle.state_entry(n, merkle.tensor_root(t)) for n, t in st.items()]
    assert state_root(st) == merkle.root_list(merkle.STATE_DOMAIN, vals)


def test_bit_exact_across_processes_threads_and_kernels(tmp_path):
    """Separate processes, 1 vs 2 threads, C kernels vs portable torch ops: byte-
    identical roots at every checkpoint. The model is big enough (64 x 600 per layer, batch 64)
    that the C matmul really splits across threads and torch's elementwise ops go parallel."""
    sp, _ = tiny_spec(
        widths=(64, 600, 10), batch=64, name="synthetic/n=300,f=64,c=10,seed=3", steps=12
    )
    spec_file = tmp_path / "spec.json"
    spec_file.write_bytes(sp.canonical_bytes())
    base = ["train", "--spec", str(spec_file), "--steps", "12", "--every", "3", "--json"]
    variants = [["--threads", "1"], ["--threads", "2"], ["--kernels", "torch"]]
    if native.available():
        variants += [["--threads", "2", "--kernels", "native"]]
    procs = [  # run concurrently: most of each run is interpreter and torch start-up
        subprocess.Popen(
            [sys.executable, "-m", "agents", *base, *v],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for v in variants
    ]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        lines = [json.loads(x) for x in out.splitlines()]
        outs.append([(d["step"], d["root"]) for d in lines if "root" in d])
    assert len(outs[0]) == 5 and outs[0][0][0] == 0 and outs[0][-1][0] == 12
    for o in outs[1:]:
        assert o == outs[0]


def test_learns_digits_to_90_percent():
    sp = S.load(EXAMPLE)
    ds = data.load_dataset(sp.dataset_name)
    assert "0x" + ds.root().hex() == sp.dataset_root
    eng = Engine(sp, ds)
    *_, (t, _, st) = eng.train()
    assert t == sp.steps <= 1000
    acc = eng.accuracy(st, data.test_split_for(sp.dataset_name))
    assert acc >= 0.90, acc


def test_engine_rejects_mismatched_widths():
    sp, ds = tiny_spec()
    bad = S.parse_spec({**sp.to_obj(), "model": {"arch": "mlp", "widths": [7, 3]}})
    with pytest.raises(S.JobSpecError, match="widths"):
        Engine(bad, ds)
    bad = S.parse_spec({**sp.to_obj(), "model": {"arch": "mlp", "widths": [6, 2]}})
    with pytest.raises(S.JobSpecError, match="widths"):
        Engine(bad, ds)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_matches_cpu():
    sp, ds = tiny_spec(widths=(6, 70, 3), batch=9)
    cpu = [(t, r) for t, r, _ in Engine(sp, ds, EngineConfig("torch")).train()]
    gpu = [(t, r) for t, r, _ in Engine(sp, ds, EngineConfig("torch", device="cuda")).train()]
    assert cpu == gpu


@pytest.mark.skipif(not native.available(), reason="no C compiler")
def test_baseline_isa_build_gives_the_same_bits(tmp_path):
    """The C kernels built for the compiler's baseline ISA (narrow SIMD: other matmul tiles,
    2-lane keccak) give the same roots as the -march=native build."""
    code = (
        "import json\n"
        "from test_engine import tiny_spec\n"
        "from agents.data import builtin as data\n"
        "from agents.training import native\n"
        "from agents.training.engine import Engine, EngineConfig\n"
        "sp, ds = tiny_spec(widths=(64, 600, 10), batch=64, "
        "name='synthetic/n=300,f=64,c=10,seed=3', steps=4)\n"
        "roots = [r.hex() for _, r, _ in Engine(sp, ds, EngineConfig('native', 2)).train()]\n"
        "print(json.dumps([native.FLAGS, roots, data.synthetic(5000, 64, 10, 1).root().hex()]))\n"
    )
    outs = []
    for march in ("native", ""):
        env = {**os.environ, "VTP_MARCH": march, "VTP_BUILD_DIR": str(tmp_path / (march or "b"))}
        env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent), str(ROOT)])
        res = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
        )
        assert res.returncode == 0, res.stderr
        outs.append(json.loads(res.stdout))
    assert "-march=native" in outs[0][0] and not any(f.startswith("-march") for f in outs[1][0])
    assert outs[0][1:] == outs[1][1:]
