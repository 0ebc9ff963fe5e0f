"""Learning-rate schedules as one multiplier per step, sampled at build time.

The step graph holds the multipliers as a constant table and reads entry min(t, len - 1) with the
step input, so the lr of step t is fl(hp.lr x m_t) (PROTOCOL §2.8, §5.3): a schedule is part of
the committed graph and a dispute opens its entry like any constant's.
"""

from __future__ import annotations

import math
from collections.abc import Callable

MAX_SCHEDULE_STEPS = 1 << 22  # a table of 16 MiB of words in the bundle


class ScheduleError(ValueError):
    """A schedule that cannot be built: one line for the user."""


def _check_steps(steps: int) -> None:
    if not 1 <= steps <= MAX_SCHEDULE_STEPS:
        raise ScheduleError(f"a learning-rate schedule covers 1 to {MAX_SCHEDULE_STEPS} steps, "
                            f"got {steps}")  # fmt: skip


def warmup_decay(steps: int, lr: float, warmup: int, decay: str, min_lr: float) -> tuple:
    """nanoGPT's schedule as multipliers of lr: (t + 1) / (warmup + 1) for t < warmup, then
    from 1 down to min_lr / lr at the last step, `cosine` (0.5 (1 + cos(pi r))) or `linear`
    (1 - r) in r = (t - warmup) / (steps - 1 - warmup), or `constant`. Float64 here; the
    graph's table rounds each to binary32."""
    _check_steps(steps)
    if not 0 <= warmup < steps:
        raise ScheduleError(f"--warmup must be in [0, steps) = [0, {steps}), got {warmup}")
    if lr <= 0 or not 0 <= min_lr <= lr:
        raise ScheduleError(f"--min-lr must be in [0, lr] = [0, {lr}], got {min_lr}")
    if decay not in ("constant", "cosine", "linear"):
        raise ScheduleError(f"--decay must be constant, cosine or linear, got {decay!r}")
    floor = min_lr / lr
    span = max(1, steps - 1 - warmup)
    out = []
    for t in range(steps):
        if t < warmup:
            out.append((t + 1) / (warmup + 1))
            continue
        r = (t - warmup) / span
        coeff = {"constant": 1.0, "cosine": 0.5 * (1.0 + math.cos(math.pi * r)),
                 "linear": 1.0 - r}[decay]  # fmt: skip
        out.append(floor + coeff * (1.0 - floor) if decay != "constant" else 1.0)
    return tuple(out)


def scheduler_multipliers(factory: Callable, lr: float, steps: int) -> tuple:
    """Any torch.optim.lr_scheduler, sampled: FACTORY(optimizer) builds it on an optimizer of
    lr `lr`; the multiplier of step t is the optimizer's lr during step t over `lr` (the
    scheduler stepped once after each step, as a training loop does)."""
    import torch

    _check_steps(steps)
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=lr)
    try:
        sched = factory(opt)
    except Exception as e:  # the user's code
        raise ScheduleError(f"--lr-scheduler raised {type(e).__name__}: {e}"[:300]) from None
    if not hasattr(sched, "step"):
        raise ScheduleError("--lr-scheduler must return a torch.optim.lr_scheduler")
    out = []
    for _ in range(steps):
        out.append(opt.param_groups[0]["lr"] / lr)
        opt.step()
        sched.step()
    if any(not math.isfinite(m) or m < 0 for m in out):
        raise ScheduleError("--lr-scheduler gave a negative or non-finite learning rate")
    return tuple(out)
