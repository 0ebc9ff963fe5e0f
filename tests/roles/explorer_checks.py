"""The explorer (`python -m agents explore`) in a real browser, on the chain the GPT demo ran on
(tests/roles/test_demo_gpt_e2e.py runs the scenario once and calls `check_explorer`).

Debian's chromium, driven by Playwright (tools/browser.py), as a user would: the jobs page, the
job (its loss curve drawn, the cheater slashed, the retrain), the dispute (the node's operator
and the element the game ended at, each equal to what the chain's events and the committed
model say), a new job appearing without a reload; then, on a fresh explorer, a tampered blob,
unknown ids, and the server still serving. Screenshots under build/explorer/.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from web3 import Web3

from agents.cli.job import load_job
from agents.core.blobs import open_blob_store
from agents.core.deploy import load_artifact
from agents.model.job import n_params
from agents.roles.artifacts import parse_locator
from scripts import demo_gpt
from tools.browser import BrowserMissing, chromium, explorer
from tools.devnet import post_job_like

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "build" / "explorer"
#: How many of the loss chart's canvas pixels are painted (not transparent).
PAINTED = """(() => {
  const c = document.getElementById('loss-chart');
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
  return n;
})()"""
POINTS = "Chart.getChart(document.getElementById('loss-chart')).data.datasets.map(d => d.data)"


def _page_or_skip():
    """A browser page; without Debian's chromium the test is skipped, except under CI, whose
    set-up (`make test` -> `make browser`) installs it: there it fails."""
    try:
        return chromium()
    except BrowserMissing as exc:
        if os.environ.get("CI"):
            pytest.fail(str(exc))
        pytest.skip(str(exc))


def _chain_facts(w3: Web3, report: dict) -> dict:
    """What the chain says the game ended at, and what the committed model says that node is."""
    game = w3.eth.contract(
        address=report["contracts"]["DisputeGame"], abi=load_artifact("DisputeGame")["abi"]
    )
    first = report["block"]
    (node,) = [int(e["args"]["node"]) for e in game.events.NodePicked().get_logs(from_block=first)]
    (element,) = [
        int(e["args"]["element"]) for e in game.events.ElementProved().get_logs(from_block=first)
    ]
    job, _ = load_job(str(demo_gpt.REPORT_DIR / "gpt.json"), None)
    return {
        "node": node,
        "element": element,
        "operator": job.bundle.step.nodes[node].op,
        "params": n_params(job.bundle),
    }


def check_explorer(url: str, report: dict) -> None:
    from playwright.sync_api import expect

    OUT.mkdir(parents=True, exist_ok=True)
    w3 = Web3(Web3.HTTPProvider(url))
    chain = _chain_facts(w3, report)
    # the demo's own account of the cheat agrees with the chain (the explorer is checked
    # against the chain below)
    assert (chain["node"], chain["element"]) == (
        report["cheat"]["node"],
        report["cheat"]["element"],
    )
    job_id = report["job"]["job_id"]
    cheater = report["outcomes"]["solver-cheat"]["address"]
    honest = report["outcomes"]["solver"]["address"]
    deployment = demo_gpt.REPORT_DIR / "deployment.json"
    args = ("--allow-local-locators", "--poll-interval", "0.5")
    with explorer(url, deployment, OUT / "explorer.log", *args) as e, _page_or_skip() as page:
        # the jobs page: the demo's job, completed, its model a version-3 module of that size
        page.goto(e.url + "/")
        row = page.locator(f'tr[data-job="{job_id}"]')
        expect(row).to_contain_text("completed")
        expect(row.locator(".kind")).to_have_text(
            f"v3 · {chain['params']:,} parameters", timeout=30_000
        )
        page.screenshot(path=str(OUT / "jobs.png"), full_page=True)

        # the job: its loss curves drawn, the cheater slashed, the honest solver's retrain
        row.locator("a").first.click()
        page.wait_for_url(f"**/job/{job_id}")
        expect(page.locator("#loss-chart")).to_be_visible()
        series = page.evaluate(POINTS)
        checkpoints = report["config"]["steps"] // report["config"]["checkpoint_every"] + 1
        assert [len(s) for s in series] == [checkpoints, checkpoints], series
        assert all(isinstance(p["y"], float) and p["y"] > 0 for s in series for p in s)
        assert page.evaluate(PAINTED) > 1_000, "the loss chart's canvas is blank"
        slash = page.locator("#slashes tr.slash")
        expect(slash).to_have_count(1)
        expect(slash).to_contain_text(cheater)
        expect(slash).to_contain_text("100")
        expect(slash).to_contain_text("lost dispute game")
        unit = page.locator("#units tbody tr").first
        expect(unit).to_contain_text("finalized")
        expect(unit.locator("td").nth(2)).to_have_text("2")  # the second attempt: the retrain
        expect(unit.locator("td").nth(3).locator("a")).to_have_attribute("href", f"/node/{honest}")
        expect(page.locator('#history tr[data-event="CheckpointsCommitted"]')).to_have_count(2)
        expect(page.locator('#history tr[data-event="UnitAssigned"]')).to_contain_text(
            [cheater, honest]
        )
        expect(page.locator("#metric")).to_contain_text(
            f"val loss {report['job']['val_loss']:.4f}", timeout=120_000
        )
        page.screenshot(path=str(OUT / "job.png"), full_page=True)

        # the dispute: down to the node's operator and the element, as the chain has them
        page.locator("#disputes a", has_text="game").click()
        page.wait_for_url("**/dispute/*")
        expect(page.locator("#node-index")).to_have_text(str(chain["node"]))
        expect(page.locator("#node-operator")).to_have_text(chain["operator"])
        expect(page.locator("#element-index")).to_have_text(str(chain["element"]))
        expect(page.locator("#proof-operator")).to_have_text(chain["operator"])
        expect(page.locator("#winner")).to_contain_text("challenger won")
        expect(page.locator("#node-module")).to_contain_text("attn", timeout=30_000)
        claimed, correct = (
            page.locator("#claimed").inner_text(),
            page.locator("#correct").inner_text(),
        )
        assert claimed != correct
        moves = page.locator("#moves tbody tr")
        assert moves.count() >= 5
        expect(moves.first).to_contain_text("challenger")
        expect(moves.last).to_contain_text(f"recomputed element {chain['element']}")
        assert page.locator("#bisection .mark").count() == 4  # segment, step, node, element
        page.screenshot(path=str(OUT / "dispute.png"), full_page=True)

        # a new job appears on the open jobs page, without a reload
        page.goto(e.url + "/")
        expect(row).to_be_visible()
        page.evaluate("window.__no_reload = true")
        new_id = post_job_like(w3, report["contracts"], 1, job_id)
        fresh = page.locator(f'tr[data-job="{new_id}"]')
        expect(fresh).to_be_visible(timeout=30_000)
        expect(fresh).to_contain_text("open")
        assert page.evaluate("window.__no_reload === true"), "the page reloaded"
        page.screenshot(path=str(OUT / "jobs-live.png"), full_page=True)
    assert "Traceback" not in e.output(), e.output()[-3000:]
    check_bad_input(url, report)


def check_bad_input(url: str, report: dict) -> None:
    """A tampered blob, unknown ids: a clear message in the page, no trace, still serving."""
    from playwright.sync_api import expect

    job_id = report["job"]["job_id"]
    manifest = _manifest_file(report)
    good = manifest.read_bytes()
    deployment = demo_gpt.REPORT_DIR / "deployment.json"
    try:
        # the cheater's manifest, one loss changed: its bytes no longer have its address
        obj = json.loads(good)
        obj["losses"][0] += 1.0
        manifest.write_bytes(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode())
        log = OUT / "explorer-bad-input.log"
        with explorer(url, deployment, log, "--allow-local-locators") as e, _page_or_skip() as page:
            res = page.goto(f"{e.url}/job/{job_id}")
            assert res is not None and res.status == 200
            expect(page.locator(".blob-error")).to_contain_text("do not check")
            assert len(page.evaluate(POINTS)) == 1  # the honest commitment's curve still drawn
            page.screenshot(path=str(OUT / "tampered.png"), full_page=True)
            for path, status, words in (
                ("/job/99999", 404, "no job 99999"),
                ("/job/nine", 404, "is not a number"),
                ("/node/0x000000000000000000000000000000000000dEaD", 404, "no node"),
                ("/node/not-an-address", 404, "is not an address"),
                ("/dispute/77", 404, "no dispute game 77"),
                ("/?status=lost", 400, "one of open"),
            ):
                res = page.goto(e.url + path)
                assert res is not None and res.status == status, path
                expect(page.locator(".message")).to_contain_text(words)
                assert "Traceback" not in page.content()
            res = page.goto(e.url + "/")
            assert res is not None and res.status == 200  # still serving
        assert "Traceback" not in e.output(), e.output()[-3000:]
    finally:
        manifest.write_bytes(good)


def _manifest_file(report: dict) -> Path:
    """The local file of the cheater's (first) commitment's manifest."""
    w3 = Web3(Web3.HTTPProvider(report["rpc_url"]))
    manager = w3.eth.contract(
        address=report["contracts"]["JobManager"], abi=load_artifact("JobManager")["abi"]
    )
    first = manager.events.CheckpointsCommitted().get_logs(from_block=report["block"])[0]
    base, address = parse_locator(first["args"]["blobLocator"])
    return open_blob_store(base).backend.path(address)
