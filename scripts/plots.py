"""The demo's picture, drawn from its report (build/demo/report.json) with matplotlib: the loss
curve of the accepted attempt, the protocol's phases on the chain clock, and the gas spent in
each phase.

Figure and canvas objects only (no pyplot): nothing global is switched, no display is needed,
and a caller's own matplotlib backend is left alone. matplotlib comes with the `demo` extra
(and `dev`); the demo's JSON report needs none of it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: one colour per phase kind, the same in the timeline and the gas bars
PHASE_COLOURS = {
    "claim": "#4c72b0",
    "train": "#55a868",
    "verify": "#8172b2",
    "dispute": "#c44e52",
}
OTHER_COLOUR = "#999999"


def demo_figure(report: dict[str, Any], path: Path, checkpoint_every: int) -> Path:
    """Draw the report's loss curves, timeline and gas per phase into `path` (PNG)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 10), layout="constrained")
    FigureCanvasAgg(fig)
    loss_ax, time_ax, gas_ax = fig.subplots(3, 1)
    job = report.get("job", {})
    _losses(loss_ax, job, checkpoint_every)
    phases = report.get("timeline", [])
    _timeline(time_ax, phases)
    _gas(gas_ax, phases)
    title = f"job {job.get('job_id', '?')}: {job.get('status', '?')}"
    if job.get("test_accuracy") is not None:
        title += f", test accuracy {job['test_accuracy'] * 100:.2f}%"
    fig.suptitle(title)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=100)
    return path


def _losses(ax: Any, job: dict[str, Any], every: int) -> None:
    losses = job.get("checkpoint_losses", [])
    steps = [i * every for i in range(len(losses))]
    ax.plot(steps, losses, marker="o", markersize=3, label="the accepted attempt")
    ax.set_title("training loss at each checkpoint")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    if losses:
        ax.legend()
    ax.grid(alpha=0.3)


def _timeline(ax: Any, phases: list[dict[str, Any]]) -> None:
    for row, ph in enumerate(phases):
        width = max(ph["end_s"] - ph["start_s"], 0.5)  # an instant still shows
        colour = PHASE_COLOURS.get(ph["phase"], OTHER_COLOUR)
        ax.barh(row, width, left=ph["start_s"], color=colour)
    ax.set_yticks(range(len(phases)), [ph["phase"] for ph in phases])
    ax.invert_yaxis()  # first phase on top
    ax.set_title("protocol timeline (chain time after posting)")
    ax.set_xlabel("seconds")
    ax.grid(axis="x", alpha=0.3)


def _gas(ax: Any, phases: list[dict[str, Any]]) -> None:
    labels = [f"{i + 1}. {ph['phase']}" for i, ph in enumerate(phases)]
    gas = [ph.get("gas", 0) for ph in phases]
    colours = [PHASE_COLOURS.get(ph["phase"], OTHER_COLOUR) for ph in phases]
    ax.bar(range(len(phases)), gas, color=colours)
    ax.set_xticks(range(len(phases)), labels, rotation=30, ha="right")
    ax.set_title("gas per phase (every party's transactions mined in it)")
    ax.set_ylabel("gas")
    ax.grid(axis="y", alpha=0.3)
