"""What a role checks on chain before it takes part in a job (RoleAgent.job_context).

No chain: the job manager's and the game's views are small fakes over the digits example job,
whose spec, dataset root, initial state and dispute config are the real ones.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

from agents.core.blobs import open_blob_store
from agents.dispute.graph import job_graph
from agents.roles.jobs import JobRejected
from agents.roles.runner import RoleAgent
from agents.training import data as datasets
from agents.training import spec as specs
from agents.training.engine import Engine
from agents.training.state import state_root

REPO = Path(__file__).resolve().parents[2]
DIGITS = specs.load(REPO / "examples" / "digits-mlp.json")


class _View:
    def __init__(self, value):
        self.value = value

    def call(self):
        return self.value


def _returning(value) -> object:
    return lambda *args: _View(value)


def fake(**views) -> SimpleNamespace:
    """`contract.functions.<name>(*args).call()` returns `views[name]`."""
    return SimpleNamespace(
        functions=SimpleNamespace(**{k: _returning(v) for k, v in views.items()})
    )


@pytest.fixture(scope="module")
def digits_job() -> tuple[tuple, bytes]:
    """getJob's tuple for the digits job, and its dispute config hash."""
    data = datasets.load_dataset(DIGITS.dataset_name)
    job = [0] * 17
    job[1], job[10] = DIGITS.steps, DIGITS.checkpoint_every
    job[13] = DIGITS.spec_hash()
    job[14] = data.root()
    job[15] = state_root(Engine(DIGITS, data).initial_state())
    return tuple(job), job_graph(DIGITS, data.n).config.hash()


def role(tmp_path: Path, job: tuple, config: bytes, placement: tuple[int, int, int]) -> RoleAgent:
    blobs = open_blob_store(str(tmp_path / "blobs"))
    blobs.put(DIGITS.canonical_bytes())
    r = object.__new__(RoleAgent)
    r.agent = SimpleNamespace(blobs=blobs)
    r.args = argparse.Namespace(spec_store=None)
    r.log = logging.getLogger("test.job_context")
    r.jobs, r.rounds = {}, None
    r.manager = fake(getJob=job)
    r.game = fake(configOf=config, placementOf=placement)
    return r


def test_job_with_its_spec_config_and_no_placement_is_taken(tmp_path, digits_job):
    job, config = digits_job
    ctx = role(tmp_path, job, config, (0, 0, 0)).job_context(7)
    assert ctx.spec.spec_hash() == DIGITS.spec_hash()


def test_job_that_is_no_units_but_has_a_placement_is_refused(tmp_path, digits_job):
    """A submitter may register its job's right config through registerUnitConfig with a
    placement of its choosing: the one-step proof would then draw another step's batch, and the
    honest solver of the job as posted would lose its dispute (audit finding, rounds 8)."""
    job, config = digits_job
    r = role(tmp_path, job, config, (4, 3, 2))
    with pytest.raises(JobRejected, match=r"placement \(4, 3, 2\)"):
        r.job_context(7)
    assert 7 not in r.jobs
