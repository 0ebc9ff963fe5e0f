"""Existing jobs keep verifying (issue #39): the roots of the examples, recorded on main before
the MLP stack was folded into the general graph, as literal hex.

Version 1 (examples/digits-mlp.json): the spec hash, the dispute graph root, the checkpoint root
of steps 0, 40, 80 and the op-trace root of step 3, on the native and the portable kernels.
Version 2 (examples/digits-2x3.json, shortened to 2 rounds of 10 local steps): every unit's
checkpoint root and every round's aggregation root, in run order. Version 3 (the digits MLP and
CNN of examples/models, built by `job build`): the spec hash (it binds the bundle's hash and the
initial state root), the checkpoint root of steps 0, 2, 4 and the op-trace root of step 3.
A change to any operator's evaluation order, a node's order, an encoding or a root's domain
breaks one of these.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from agents.__main__ import main
from agents.cli.job import load_job
from agents.data import datasets
from agents.dispute.graph import job_graph
from agents.model.job import trace_root
from agents.training import merkle
from agents.training import spec as sp
from agents.training.decompose import RoundResult, run_job
from agents.training.engine import Engine, EngineConfig
from agents.training.run import RunConfig

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ("native", "torch")

V1_SPEC_HASH = "0xa6ba2a75f9465cf6bd86e3f00411e69ed46d83b039d58027197a3c1a56507385"
V1_GRAPH_ROOT = "0xcb43150a966461d921dbcb327139ae57ca1a8c9e5bddcd78e7565140f6f021bf"
V1_CHECKPOINT_ROOT = "0xe3185d566e817a1d320e9ef01ac331378edce829849706c97f544f1c9bf061c1"
V1_TRACE_ROOT_STEP3 = "0xa034c7efedcfd61e482ca87bbb192230efc15d1d5d31a0a5cc368e043c6e7081"
V2_SPEC_HASH = "0x04d943baa2a6f318aaed731300722d244fe0ccb69d5d0d38136de99644874e99"
# units (0,0) (0,1) (0,2), round 0's aggregation, units (1,0) (1,1) (1,2), round 1's
V2_ROOTS = [
    "0xa59d81b961882158b454ffc14fa9edde8a6da7e9bca193b773b9c98a17575e2b",
    "0x1a468fcf2875dda6b64a2bbaf3cd9116a0bffb6764f342014f730e112985d8b7",
    "0x51ac281699a39a57a382df4260f233e5e8a5038a7e6c4d7daf5e5f758ec11994",
    "0xb0787da07585644bf8c2bce55610cc2c7bffd69a65f7ca32d8d7429632fa5fc4",
    "0xf0cff7c0b3ad1869ed152fb5524dc982356d69b4a3048c866c6b70089fac18f3",
    "0x67c16364f4111f01f2f39a97aa15c45b3e067388315fae910f4fcf49e28f8832",
    "0xfbe660b3f83e58927bc575b110348b21a4893db02547995e4f57f552a839086d",
    "0xaef0c635debd18ba101e34b085d9c82dfcea4fee4f215707674a0ca85ec50c56",
]
# name: (factory, dataset, recipe flags, (spec hash, checkpoint root, step-3 trace root))
V3 = {
    "digits_mlp": (
        "digits_mlp.py:make_model",
        ["--optimizer", "adamw", "--lr", "0.003", "--weight-decay", "0.01"],
        (
            "0x6a5c7c35329ef36fdc96e384d10285adc038f0b0aa4abaa45d24dd0fb7b3f2c3",
            "0x893e0aeda3f1a5cd661de992558539758acab4c05a138e3b68dfc01163682f2c",
            "0xd93a8ef89f497f5e578d22a894fa140e60edb9630bd3f50f346961ff311141e1",
        ),
    ),
    "digits_cnn": (
        "digits_cnn.py:make_model",
        ["--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9"],
        (
            "0xb73f26279110672b84be93965743bacb8ce7e2e65049944b587762ad2ee76eb7",
            "0xdd0a602b4a2b4eab7e24a12693814174676d97efabb143020430feb23a2201f6",
            "0x70265a2b5c98ab708039133b38443233d72830146f87fc9fbb6e6cda12f15dfe",
        ),
    ),
}


def _hex(b: bytes) -> str:
    return "0x" + b.hex()


@pytest.fixture(scope="module")
def digits():
    return datasets.load_dataset("sklearn-digits/train")


def test_version_1_spec_hash_and_graph_root(digits):
    spec = sp.load(ROOT / "examples/digits-mlp.json")
    assert _hex(spec.spec_hash()) == V1_SPEC_HASH
    assert _hex(job_graph(spec, digits.n).root) == V1_GRAPH_ROOT


@pytest.mark.parametrize("kernels", KERNELS)
def test_version_1_checkpoint_and_trace_roots(digits, kernels):
    spec = sp.load(ROOT / "examples/digits-mlp.json")
    eng = Engine(spec, digits, EngineConfig(kernels))
    roots = [r for _t, r, _s in eng.train(steps=80, every=40)]
    assert _hex(merkle.checkpoint_root(roots)) == V1_CHECKPOINT_ROOT
    st = eng.initial_state()
    for t in range(3):
        st = eng.step(st, t)
    assert _hex(trace_root(eng.trace_step(st, 3)[1])) == V1_TRACE_ROOT_STEP3


def test_version_2_unit_and_aggregation_roots(digits):
    spec = sp.load(ROOT / "examples/digits-2x3.json")
    assert _hex(spec.spec_hash()) == V2_SPEC_HASH
    short = dataclasses.replace(spec, steps=20, local_steps=10, checkpoint_every=5)
    got = [
        _hex(ev.aggregation_root if isinstance(ev, RoundResult) else ev.checkpoint_root)
        for ev in run_job(short, digits)
    ]
    assert got == V2_ROOTS


@pytest.fixture(scope="module")
def v3_specs(tmp_path_factory):
    out = {}
    for name, (factory, flags, _) in V3.items():
        path = tmp_path_factory.mktemp(name) / "job.json"
        argv = ["job", "build", "--model", f"{ROOT}/examples/models/{factory}", "--dataset",
                "sklearn-digits/train", *flags, "--batch", "16", "--steps", "20",
                "--checkpoint-every", "5", "--seed", "1", "--out", str(path)]  # fmt: skip
        assert main(argv) == 0
        out[name] = path
    return out


@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("name", sorted(V3))
def test_version_3_example_roots(v3_specs, name, kernels, capsys):
    job, st = load_job(str(v3_specs[name]), None, RunConfig(kernels, 1))
    roots = [r for _t, r, _s, _l in job.train(st, steps=4, every=2)]
    got = (
        _hex(job.spec.spec_hash()),
        _hex(merkle.checkpoint_root(roots)),
        _hex(trace_root(job.trace_step(st, 3)[1])),
    )
    assert got == V3[name][2]
