"""A decomposed version-3 job's outer optimizer (PROTOCOL §5.2): the aggregation graph that
`job build` binds by hash; Nesterov's H_{r+1} is SGD with Nesterov momentum on the
pseudo-gradient Δ = G_r − Σ_s w_s·θ_{r,s}: bit for bit the binary32 formula of §5.2 (each
product rounded), and torch's SGD(nesterov=True) within its fused multiply-adds; `average` is
the units' weighted average; the momentum buffers are round state; `train` ends in G_R; bad
outer settings are refused in one line before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from agents.__main__ import main
from agents.cli.job import load_job
from agents.model.aggregate import OUTER_PREFIX, Outer, aggregation_graph, graph_hash
from agents.model.job import UnitRun, state_root
from agents.training import decompose

MODELS = Path(__file__).resolve().parents[2] / "examples" / "models"


def build(tmp: Path, name: str, *extra: str) -> Path:
    out = tmp / f"{name}.json"
    argv = ["job", "build", "--model", f"{MODELS}/digits_mlp.py:make_model", "--dataset",
            "sklearn-digits/train", "--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9",
            "--batch", "8", "--checkpoint-every", "2", "--seed", "3", "--steps", "4",
            "--rounds", "2", "--shards", "3", "--out", str(out), *extra]  # fmt: skip
    assert main(argv) == 0
    return out


def _bits(t: torch.Tensor) -> np.ndarray:
    return t.detach().contiguous().numpy().view(np.uint32)


def test_nesterov_is_torch_sgd_nesterov_on_the_pseudo_gradient(tmp_path, capsys):
    spec = build(tmp_path, "nesterov", "--outer", "nesterov", "--outer-lr", "0.7",
                 "--outer-momentum", "0.9")  # fmt: skip
    capsys.readouterr()
    obj = json.loads(spec.read_text())
    assert obj["outer"] == {"kind": "nesterov", "lr": "0x3f333333", "momentum": "0x3f666666"}
    job, st = load_job(str(spec), None)
    agg = job.aggregation
    assert obj["aggregate"] == graph_hash(agg.graph)
    params = [v.name for v in job.bundle.state if v.name in job.bundle.params]
    assert agg.round_names[len(agg.step_names) :] == tuple(OUTER_PREFIX + p for p in params)
    # the same units averaged (the `average` graph over the same step state)
    weights = decompose.aggregation_weights(job.positions(), job.spec.shards)
    avg_graph = aggregation_graph(job.bundle.state, params, weights, Outer())
    from agents.model.aggregate import Aggregation

    average = Aggregation.of(avg_graph)
    h = agg.initial(st)
    lr, mu = np.float32(0.7), np.float32(0.9)
    ref = {p: torch.nn.Parameter(st[p].clone()) for p in params}
    opt = torch.optim.SGD(list(ref.values()), lr=np.float32(0.7).item(),
                          momentum=np.float32(0.9).item(), nesterov=True)  # fmt: skip
    units, rounds = [], 0
    for ev in job.run_rounds(st):
        if isinstance(ev, UnitRun):
            units.append(ev.final)
            continue
        avg, _ = average.run(agg.unit_start(h), units)
        opt.zero_grad()
        for p in params:
            ref[p].grad = (ref[p].detach() - avg[p]).clone()
        opt.step()
        for p in params:
            g, b = h[p].numpy(), h[OUTER_PREFIX + p].numpy()
            delta = g - avg[p].numpy()
            new_b = (mu * b) + delta
            want = g - lr * (delta + mu * new_b)
            assert (_bits(ev.state[p]) == _bits(torch.from_numpy(want))).all(), (ev.round, p)
            got_b = ev.state[OUTER_PREFIX + p]
            assert (_bits(got_b) == _bits(torch.from_numpy(new_b))).all(), (ev.round, p)
            buf = opt.state[ref[p]]["momentum_buffer"]
            torch.testing.assert_close(ev.state[p], ref[p].detach(), rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(got_b, buf, rtol=1e-5, atol=1e-6)
            ref[p].data.copy_(ev.state[p])  # torch's next round from the committed state
            buf.copy_(got_b)
        for n in agg.step_names:  # the inner optimizer's state is averaged
            if n not in params:
                assert (_bits(ev.state[n]) == _bits(avg[n])).all(), (ev.round, n)
        h, units, rounds = ev.state, [], rounds + 1
    assert rounds == 2
    # train's result is G_R: H_R without its outer buffers
    assert main(["train", "--spec", str(spec), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert summary["outer"] == "nesterov"
    assert summary["final_root"] == "0x" + state_root(agg.unit_start(h)).hex()


def test_average_is_the_weighted_average_of_the_units(tmp_path, capsys):
    spec = build(tmp_path, "average")
    capsys.readouterr()
    assert json.loads(spec.read_text())["outer"] == {"kind": "average"}
    job, st = load_job(str(spec), None)
    weights = decompose.aggregation_weights(job.positions(), job.spec.shards)
    units = []
    for ev in job.run_rounds(st):
        if isinstance(ev, UnitRun):
            units.append(ev.final)
            continue
        want = decompose.aggregate(units, weights)
        assert set(ev.state) == set(want)
        for n, t in want.items():
            assert (_bits(ev.state[n]) == _bits(t)).all(), (ev.round, n)
        units = []


def test_a_spec_whose_aggregate_hash_is_not_its_graphs_is_refused(tmp_path, capsys):
    from agents.training.spec import JobSpecError

    spec = build(tmp_path, "bound", "--outer", "nesterov")
    capsys.readouterr()
    obj = json.loads(spec.read_text())
    obj["outer"]["lr"] = "0x3f000000"  # 0.5: another graph than the one bound by hash
    spec.write_text(json.dumps(obj))
    with pytest.raises(JobSpecError, match="aggregate"):
        load_job(str(spec), None)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--outer", "nesterov", "--outer-lr", "3"), "outer.lr"),
        (("--outer", "nesterov", "--outer-momentum", "1"), "outer.momentum"),
        (("--outer-lr", "0.5"), "--outer-lr applies to --outer nesterov"),
        (("--shards", "65"), "shards"),
        (("--shards", "2000"), "shards"),
        (("--steps", "5"), "--rounds must divide --steps (5), got 2"),
        (("--rounds", "8"), "--rounds must divide --steps (4), got 8"),
        # 0 is not "not given": it once became one round (one shard) and a spec was written
        (("--rounds", "0"), "--rounds must be >= 1, got 0"),
        (("--shards", "0"), "--shards must be >= 1, got 0"),
        (("--rounds", "-2"), "--rounds must be >= 1, got -2"),
        (("--outer", "nesterov", "--outer-lr", "0"), "'outer.lr': must be in (0, 2], got 0.0"),
        (("--outer", "nesterov", "--outer-lr", "-0.5"), "'outer.lr': must be in (0, 2]"),
        (("--outer", "nesterov", "--outer-lr", "nan"), "'outer.lr': must be a finite float"),
        (("--outer", "nesterov", "--outer-lr", "inf"), "'outer.lr': must be a finite float"),
        (("--outer", "nesterov", "--outer-momentum", "-0.1"), "'outer.momentum': must be in"),
        (("--outer", "adam"), "argument --outer: invalid choice: 'adam'"),
        # more shards than the dataset has examples (40 here; the spec's own limit is 64)
        (
            ("--dataset", "synthetic/n=40,f=64,c=10,seed=3", "--shards", "41"),
            "--shards 41 is more than the dataset's 40 examples",
        ),
    ],
)
def test_bad_outer_settings_are_refused_in_one_line(tmp_path, capsys, extra, message):
    out = tmp_path / "bad.json"
    argv = ["job", "build", "--model", f"{MODELS}/digits_mlp.py:make_model", "--dataset",
            "sklearn-digits/train", "--optimizer", "sgd", "--lr", "0.05", "--batch", "8",
            "--checkpoint-every", "1", "--steps", "4", "--rounds", "2", "--shards", "2",
            "--out", str(out), *extra]  # fmt: skip
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's own refusals (a choice not offered) exit in it
        code = e.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert not out.exists() and not list(tmp_path.iterdir())


def test_a_bad_decomposed_spec_is_one_line_on_the_real_stderr(tmp_path):
    """`python -m agents` in its own process: its real stderr is the one line (no traceback),
    its exit status 2, and nothing is written."""
    import subprocess
    import sys

    out = tmp_path / "bad.json"
    argv = [sys.executable, "-m", "agents", "job", "build", "--model",
            f"{MODELS}/digits_mlp.py:make_model", "--dataset", "sklearn-digits/train",
            "--optimizer", "sgd", "--lr", "0.05", "--batch", "8", "--checkpoint-every", "1",
            "--steps", "6", "--rounds", "4", "--shards", "2", "--outer", "nesterov",
            "--out", str(out)]  # fmt: skip
    p = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2, p
    assert p.stderr.splitlines() == ["error: --rounds must divide --steps (6), got 4"], p.stderr
    assert p.stdout == "" and not list(tmp_path.iterdir())


def test_outer_flags_need_a_decomposed_job(tmp_path, capsys):
    out = tmp_path / "plain.json"
    argv = ["job", "build", "--model", f"{MODELS}/digits_mlp.py:make_model", "--dataset",
            "sklearn-digits/train", "--optimizer", "sgd", "--lr", "0.05", "--batch", "8",
            "--checkpoint-every", "1", "--steps", "4", "--outer", "nesterov",
            "--out", str(out)]  # fmt: skip
    assert main(argv) == 2
    assert "--outer applies to a decomposed job" in capsys.readouterr().err
    assert not out.exists()
