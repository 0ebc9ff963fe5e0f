"""`python -m scripts.demo` started from another folder than the checkout: the agents run in
the checkout, so every folder the demo and its agents share is named absolutely from it (a
relative report folder meant one place to the demo and another to its agents, and the demo
ended with `build/demo/run/submitter-result.json` not found)."""

from __future__ import annotations

from pathlib import Path

from scripts import demo


def test_the_demos_folders_mean_the_same_from_any_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert demo.REPORT_DIR.is_absolute()
    assert demo.REPORT_DIR.is_relative_to(demo.REPO)
    procs = demo.Processes(demo.REPORT_DIR / "run")
    submitter = next(p for p in demo.PARTIES if p.role == "submitter")
    result = demo.REPORT_DIR / "run" / "submitter-result.json"
    cmd = procs.command(submitter, "http://127.0.0.1:8545", "0x" + "11" * 20, "--out", str(result))
    for flag in ("--data-dir", "--blob-url", "--out"):
        path = Path(cmd[cmd.index(flag) + 1])
        assert path.is_absolute(), f"{flag} {path}"
        # the agent resolves it in the checkout, the demo here: the same file either way
        assert (demo.REPO / path).resolve() == (tmp_path / path).resolve()
        assert path.is_relative_to(demo.REPO / "build" / "demo")
