"""The JavaScript integrator's journey (tests/js/journey.test.mjs, issue 28): `node --test` deploys
the protocol from build/abi/, posts the example job and follows it with no Python in its path;
this wrapper runs it under `make test` and checks the hashes the JavaScript client computed from
the spec alone (spec hash, S_0 root, graph root, dispute config hash: clients/js/vtp.mjs)
against the Python agents'."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from agents.dispute.graph import job_graph
from agents.training import spec as specs
from agents.training.state import init_state, state_root

ROOT = Path(__file__).resolve().parents[2]
NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(
    NODE is None, reason="node not on PATH: the JavaScript client test needs Node 20+ (npm ci)"
)
DIGITS_TRAIN_EXAMPLES = 1438  # PROTOCOL §4.2
KEYS = ("specHash", "initialStateRoot", "graphRoot", "configHash")


def _python_hashes(spec: specs.JobSpec, n_examples: int) -> dict[str, str]:
    graph = job_graph(spec, n_examples)
    hashes = {
        "specHash": "0x" + spec.spec_hash().hex(),
        "initialStateRoot": "0x" + state_root(init_state(spec.widths, spec.seed)).hex(),
        "graphRoot": "0x" + graph.root.hex(),
        "configHash": "0x" + graph.config.hash().hex(),
    }
    assert tuple(hashes) == KEYS
    return hashes


def _node(args: list[str], env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [NODE, *args], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return done.stdout


def test_the_javascript_client_deploys_posts_decodes_errors_and_follows_the_job(tmp_path):
    out = tmp_path / "hashes.json"
    env = {"PATH": str(Path(NODE).parent), "VTP_JS_OUT": str(out)}
    _node(["--test", "tests/js/journey.test.mjs"], env)
    got = json.loads(out.read_text())
    spec = specs.load(ROOT / got["spec"])
    assert got["numExamples"] == DIGITS_TRAIN_EXAMPLES
    assert {k: got[k] for k in KEYS} == _python_hashes(spec, got["numExamples"])


SCRIPT = """
import * as vtp from "./clients/js/vtp.mjs";
const [spec, n] = JSON.parse(process.argv[1]);
console.log(JSON.stringify({specHash: vtp.specHash(spec), initialStateRoot:
  vtp.initialStateRoot(spec), ...vtp.disputeConfig(spec, n), config: undefined}));
"""


@pytest.mark.parametrize(
    ("widths", "batch", "seed", "n_examples"),
    [((64, 10), 1, 0, 1438), ((64, 33, 17, 10), 5, 12345, 1000), ((64, 7, 7, 7, 12), 64, 3, 77)],
)
def test_the_javascript_recipes_agree_with_the_python_agents(widths, batch, seed, n_examples):
    obj = json.loads((ROOT / "examples/digits-mlp.json").read_text())
    obj |= {"model": {"arch": "mlp", "widths": list(widths)}, "batch": batch, "seed": seed}
    obj |= {"lr": "0x3c23d70a", "steps": 12, "checkpoint_every": 4}
    spec = specs.parse_spec(obj)
    arg = json.dumps([obj, n_examples])
    got = json.loads(_node(["--input-type=module", "-e", SCRIPT, arg]))
    assert got == _python_hashes(spec, n_examples)
