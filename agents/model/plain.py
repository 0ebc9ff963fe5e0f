"""Plain PyTorch training of a job's module, to compare the protocol's training with.

The same module from the same initial weights, PyTorch's own autograd, optimizer (parameter
groups included), gradient clipping and `torch.optim.lr_scheduler.LambdaLR` over the job's
schedule, on the job's batches; gradient accumulation as `(loss / N).backward()` per
micro-batch; dropout drawing the masks the committed stream draws (`stream_dropout`), so both
train on the same masks. Not part of the protocol: the benches and tests measure the engine
against it.
"""

from __future__ import annotations

import contextlib
import itertools

import numpy as np
import torch
from torch.nn import functional as F

from agents.model.job import step_input
from agents.model.lower import Optimizer, Recipe, cross_entropy
from agents.training.registry import Node, t_uniform


def _f32(v: float) -> float:
    return float(np.float32(v))


@contextlib.contextmanager
def stream_dropout(seed: int, t: int):
    """While it is open, dropout keeps an element where the job's stream draws below 1 - p: the
    k-th dropout call of the step reads site k, the lowered graph's order of its draws."""
    sites = itertools.count()
    original = F.dropout
    key = step_input(seed, t)

    def dropout(input, p=0.5, training=True, inplace=False):
        if not training or p == 0:
            return original(input, p, training, inplace)
        node = Node("uniform", (0,), (next(sites),), tuple(input.shape), "f32")
        keep = t_uniform(key, node) < torch.tensor(1.0 - p, dtype=torch.float32)
        return input * (keep.to(input.dtype) / (1.0 - p))

    F.dropout = dropout
    try:
        yield
    finally:
        F.dropout = original


def torch_optimizer(opt: Optimizer, module: torch.nn.Module) -> torch.optim.Optimizer:
    params = list(module.parameters())
    if opt.no_decay_1d:
        groups = [{"params": [p for p in params if p.dim() >= 2]},
                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]  # fmt: skip
    else:
        groups = [{"params": params}]
    lr = _f32(opt.lr)
    if opt.kind in ("sgd", "nesterov"):
        return torch.optim.SGD(groups, lr=lr, momentum=_f32(opt.momentum),
                               nesterov=opt.kind == "nesterov")  # fmt: skip
    cls = torch.optim.AdamW if opt.kind == "adamw" else torch.optim.Adam
    return cls(groups, lr=lr, betas=tuple(map(_f32, opt.betas)), eps=_f32(opt.eps),
               weight_decay=_f32(opt.weight_decay))  # fmt: skip


class PlainTrainer:
    """One plain PyTorch step per call: `step(x, y, t)` returns the step's loss (the sum of the
    micro-batches' loss / N)."""

    def __init__(self, module: torch.nn.Module, opt: Optimizer, recipe: Recipe, seed: int):
        self.module, self.opt, self.recipe, self.seed = module.train(), opt, recipe, seed
        self.optim = torch_optimizer(opt, module)
        sched = recipe.schedule
        self.sched = None if sched is None else torch.optim.lr_scheduler.LambdaLR(
            self.optim, lambda t: sched[min(t, len(sched) - 1)])  # fmt: skip

    def step(self, x: torch.Tensor, y: torch.Tensor, t: int) -> float:
        N = self.recipe.accumulate
        mb = x.shape[0] // N
        self.optim.zero_grad(set_to_none=True)
        total = 0.0
        with stream_dropout(self.seed, t):
            for k in range(N):
                out = self.module(x[k * mb : (k + 1) * mb])
                logits = out if isinstance(out, torch.Tensor) else out.logits
                loss = cross_entropy(logits, y[k * mb : (k + 1) * mb], self.recipe) / N
                loss.backward()
                total += loss.item()
        if self.opt.clip_norm is not None:
            torch.nn.utils.clip_grad_norm_(self.module.parameters(), _f32(self.opt.clip_norm))
        self.optim.step()
        if self.sched is not None:
            self.sched.step()
        return total


def protocol_state(bundle, trainer: PlainTrainer) -> dict[str, torch.Tensor]:
    """The plain trainer's current module and optimizer as a protocol state (S_t of the
    bundle's state order): parameters, kept buffers, momentum or Adam moments, and beta^t as the
    graph computes it (binary32 products), so one engine step can start where PyTorch stands."""
    module, optim = trainer.module, trainer.optim
    named = dict(module.named_parameters())
    sd = module.state_dict()
    steps = {int(optim.state[p]["step"]) for p in named.values()
             if "step" in optim.state.get(p, {})}  # fmt: skip
    out = {}
    for v in bundle.state:
        n = v.name
        if n.startswith("p."):
            out[n] = sd[bundle.params[n]].detach().clone()
        elif n.startswith("b."):
            out[n] = sd[n[2:]].detach().to(torch.float32).clone()
        elif n.startswith(("m.", "v.")):
            st = optim.state.get(named[n[2:]], {})
            key = "momentum_buffer" if trainer.opt.momentum_only else (
                "exp_avg" if n.startswith("m.") else "exp_avg_sq")  # fmt: skip
            buf = st.get(key)
            out[n] = torch.zeros(v.shape) if buf is None else buf.detach().clone()
        else:  # adam.b1t, adam.b2t: beta^t as fl(fl(1 * beta) * beta) ...
            beta = np.float32(trainer.opt.betas[0 if n.endswith("b1t") else 1])
            acc = np.float32(1.0)
            for _ in range(max(steps, default=0)):
                acc = np.float32(acc * beta)
            out[n] = torch.tensor(acc)
    return out


def load_state(module: torch.nn.Module, bundle, st: dict) -> torch.nn.Module:
    """The module with a job state's parameters and buffers (job.module_state_dict), strict."""
    from agents.model.job import module_state_dict

    module.load_state_dict(module_state_dict(bundle, st), strict=True)
    return module
