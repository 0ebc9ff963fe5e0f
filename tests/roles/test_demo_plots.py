"""The demo's picture is drawn with matplotlib from its JSON report (scripts/plots.py), and the
report's timeline carries the gas spent in each phase (scripts/demo.phase_gas)."""

from __future__ import annotations

import json

from scripts import demo

REPORT = {
    "job": {
        "job_id": 1,
        "status": "completed",
        "test_accuracy": 0.9417,
        "checkpoint_losses": [2.31, 1.2, 0.71, 0.52, 0.44],
    },
    "timeline": [
        {"phase": "claim", "start_s": 0, "end_s": 15},
        {"phase": "train", "start_s": 15, "end_s": 22},
        {"phase": "verify", "start_s": 22, "end_s": 30},
        {"phase": "dispute", "start_s": 30, "end_s": 61},
        {"phase": "claim", "start_s": 61, "end_s": 75},
    ],
}


def test_each_phase_carries_the_gas_mined_in_it() -> None:
    spent = [(-40, 150_000), (0, 212_683), (15, 56_061), (16, 104_315), (45, 90_000), (99, 1)]
    phases = demo.phase_gas(REPORT["timeline"], spent)
    assert [p["gas"] for p in phases] == [212_683 + 56_061, 104_315, 0, 90_000, 0]
    # registration before the posting and a withdrawal after the last phase count nowhere
    assert [p["phase"] for p in phases] == [p["phase"] for p in REPORT["timeline"]]


def test_the_figure_is_drawn_from_a_small_report(tmp_path) -> None:
    from scripts.plots import demo_figure

    report = json.loads(json.dumps(REPORT))  # as read back from report.json
    report["timeline"] = demo.phase_gas(report["timeline"], [(0, 212_683), (16, 104_315)])
    out = demo_figure(report, tmp_path / "out" / "demo.png", checkpoint_every=40)
    png = out.read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(png) > 10_000  # three panels with text, not an empty canvas


def test_a_report_without_losses_or_phases_still_draws(tmp_path) -> None:
    from scripts.plots import demo_figure

    out = demo_figure({"job": {"job_id": 2, "status": "open"}}, tmp_path / "empty.png", 40)
    assert out.read_bytes().startswith(b"\x89PNG")
