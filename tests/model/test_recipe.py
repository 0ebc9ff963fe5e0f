"""The training recipe of `job build` (issue #41 item 3): a learning-rate schedule is a table of
per-step multipliers in the graph (nanoGPT's warmup and cosine / linear decay, or any
torch.optim.lr_scheduler sampled at build time), read at the step's t; `--accumulate N` sums the
gradients of N micro-batches; both train as plain PyTorch does with the same scheduler and
accumulation."""

from __future__ import annotations

import math

import pytest
import torch

from agents.__main__ import main
from agents.cli.job import load_factory, load_job
from agents.model.lower import Optimizer, Recipe
from agents.model.plain import PlainTrainer, load_state
from agents.model.schedule import ScheduleError, warmup_decay

MLP = """
import torch
from torch import nn


def make():
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.ReLU(), nn.Dropout(0.2),
                         nn.Linear(16, 10))


def step_lr(optimizer):
    return torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
"""


def test_warmup_and_decay_are_nanogpts():
    m = warmup_decay(10, 0.01, 3, "cosine", 0.001)
    assert m[:3] == (0.25, 0.5, 0.75)  # (t + 1) / (warmup + 1)
    assert m[3] == 1.0 and math.isclose(m[-1], 0.1)  # from lr down to min_lr at the last step
    mid = 3 + 3  # r = 0.5: halfway between lr and min_lr
    assert math.isclose(m[mid], 0.1 + 0.5 * 0.9)
    lin = warmup_decay(5, 1.0, 0, "linear", 0.0)
    assert lin == (1.0, 0.75, 0.5, 0.25, 0.0)
    for bad in ((5, 1.0, 5, "cosine", 0.0), (5, 1.0, 0, "cosine", 2.0), (5, 1.0, 0, "exp", 0)):
        with pytest.raises(ScheduleError):
            warmup_decay(*bad)


def _build(tmp, *flags):
    (tmp / "mlp.py").write_text(MLP)
    spec = tmp / "job.json"
    code = main(["job", "build", "--model", f"{tmp / 'mlp.py'}:make", "--dataset",
                 "sklearn-digits/train", "--optimizer", "sgd", "--lr", "0.1", "--momentum",
                 "0.9", "--batch", "8", "--steps", "6", "--checkpoint-every", "2", "--seed", "2",
                 "--out", str(spec), *flags])  # fmt: skip
    return code, spec


@pytest.mark.parametrize(
    "flags,recipe",
    [
        (["--lr-scheduler", "MLP:step_lr"], None),
        (["--accumulate", "4"], Recipe(accumulate=4)),
        (["--warmup", "2", "--decay", "linear", "--accumulate", "2"], None),
    ],
    ids=["torch_step_lr", "accumulate", "warmup_linear_accumulate"],
)
def test_the_recipe_trains_as_plain_pytorch(tmp_path, capsys, flags, recipe):
    flags = [f.replace("MLP", str(tmp_path / "mlp.py")) for f in flags]
    code, spec = _build(tmp_path, *flags)
    assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    job, st = load_job(str(spec), None)
    module = load_state(load_factory(f"{tmp_path / 'mlp.py'}:make")(), job.bundle, st)
    opt = Optimizer("sgd", 0.1, momentum=0.9)
    if recipe is None:  # the same schedule for plain PyTorch's LambdaLR
        if "--lr-scheduler" in flags:
            schedule = (1.0, 1.0, 0.5, 0.5, 0.25, 0.25)  # StepLR(2, 0.5)
        else:
            schedule = warmup_decay(6, 0.1, 2, "linear", 0.0)
        recipe = Recipe(accumulate=2 if "--accumulate" in flags else 1, schedule=schedule)
    plain = PlainTrainer(module, opt, recipe, seed=job.spec.seed)
    for t in range(6):
        x, y = job.batch(t)
        st, loss = job.step(st, t)
        want = plain.step(x, y, t)
        assert abs(loss - want) <= 1e-5 * abs(want), (flags, t, loss, want)
    for name, p in module.named_parameters():
        assert torch.allclose(st[f"p.{name}"], p.detach(), rtol=1e-4, atol=1e-6), (flags, name)


def test_bad_recipes_are_one_line(tmp_path, capsys):
    for flags, needle in (
        (["--accumulate", "3"], "--accumulate must divide --batch (8)"),
        (["--warmup", "6"], "--warmup must be in [0, steps)"),
        (["--lr-scheduler", "nope.py:f"], "--lr-scheduler: no file nope.py"),
        (["--lr-scheduler", "x.py:f", "--warmup", "1"], "--lr-scheduler replaces --warmup"),
        (["--label-smoothing", "1.5"], "--label-smoothing must be in [0, 1]"),
    ):
        code, spec = _build(tmp_path, *flags)
        err = capsys.readouterr().err
        assert code == 2 and needle in err and err.count("\n") == 1, (flags, err)
        assert not spec.exists()
