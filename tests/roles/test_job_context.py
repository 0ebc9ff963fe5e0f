"""What a role checks on chain before it takes part in a job (RoleAgent.job_context).

No chain: the job manager's and the game's views are small fakes over the digits example job,
whose spec, dataset root, initial state and dispute config are the real ones.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rolefakes import decoded, role_config

from agents.core.blobs import BlobBackendError, open_blob_store
from agents.core.bounded import BoundedCache, SaidOnce
from agents.data import builtin as datasets
from agents.dispute.graph import job_graph
from agents.roles.jobs import JobRejected, LoadedJobs
from agents.roles.runner import RoleAgent
from agents.roles.verifier import Verifier
from agents.training import spec as specs
from agents.training.engine import Engine
from agents.training.state import state_root

REPO = Path(__file__).resolve().parents[2]
DIGITS = specs.load(REPO / "examples" / "digits-mlp.json")


class _View:
    def __init__(self, value):
        self.value = value

    async def call(self):
        return self.value


def _returning(value) -> object:
    return lambda *args: _View(value)


def fake(**views) -> SimpleNamespace:
    """`await contract.functions.<name>(*args).call()` returns `views[name]`."""
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
    return decoded("getJob", tuple(job)), job_graph(DIGITS, data.n).config.hash()


def role(
    tmp_path: Path,
    job: tuple,
    config: bytes,
    placement: tuple[int, int, int],
    spec_store: str | None = None,
    max_loaded_jobs: int = 8,
) -> RoleAgent:
    """A role whose blob store holds the digits spec, or, with `spec_store`, one that finds it
    only in that --spec-store (as a solver does that reads its submitter's store)."""
    blobs = open_blob_store(str(tmp_path / "blobs"))
    if spec_store is None:
        blobs.put(DIGITS.canonical_bytes())
    r = object.__new__(RoleAgent)
    r.agent = SimpleNamespace(blobs=blobs)
    r.config = role_config(
        RoleAgent, tmp_path, spec_store=(spec_store,) if spec_store else (),
        max_loaded_jobs=max_loaded_jobs,
    )  # fmt: skip
    r.log = logging.getLogger("test.job_context")
    r.jobs, r.rounds = LoadedJobs(max_loaded_jobs), None
    r.manager = fake(getJob=job)
    r.game = fake(configOf=config, placementOf=placement)
    return r


def test_job_with_its_spec_config_and_no_placement_is_taken(tmp_path, digits_job):
    job, config = digits_job
    ctx = asyncio.run(role(tmp_path, job, config, (0, 0, 0)).job_context(7))
    assert ctx.spec.spec_hash() == DIGITS.spec_hash()


def test_job_that_is_no_units_but_has_a_placement_is_refused(tmp_path, digits_job):
    """A submitter may register its job's right config through registerUnitConfig with a
    placement of its choosing: the one-step proof would then draw another step's batch, and the
    honest solver of the job as posted would lose its dispute (audit finding, rounds 8)."""
    job, config = digits_job
    r = role(tmp_path, job, config, (4, 3, 2))
    with pytest.raises(JobRejected, match=r"placement \(4, 3, 2\)"):
        asyncio.run(r.job_context(7))
    assert 7 not in r.jobs


# --- what stays loaded (--max-loaded-jobs) ----------------------------------------------------


def test_at_most_max_loaded_jobs_stay_loaded_least_recently_used_out(tmp_path, digits_job):
    """A long-running agent used to keep every job's dataset and engine for as long as it ran;
    now at most --max-loaded-jobs of them, and the one used least recently goes first."""
    job, config = digits_job
    r = role(tmp_path, job, config, (0, 0, 0), max_loaded_jobs=2)
    first = asyncio.run(r.job_context(1))
    asyncio.run(r.job_context(2))
    assert asyncio.run(r.job_context(1)) is first  # a hit: job 1 is now the most recently used
    asyncio.run(r.job_context(3))
    assert r.jobs.keys() == [1, 3]
    assert (len(r.jobs), r.jobs.evictions) == (2, 1)
    for job_id in range(4, 40):
        asyncio.run(r.job_context(job_id))
        assert len(r.jobs) <= 2


def test_an_evicted_job_loads_again_the_same(tmp_path, digits_job):
    job, config = digits_job
    r = role(tmp_path, job, config, (0, 0, 0), max_loaded_jobs=1)
    before = asyncio.run(r.job_context(1))
    asyncio.run(r.job_context(2))
    assert 1 not in r.jobs
    again = asyncio.run(r.job_context(1))
    assert again is not before
    assert again.spec == before.spec
    assert again.jg.config.hash() == before.jg.config.hash()
    assert state_root(again.engine.initial_state()) == state_root(before.engine.initial_state())
    assert again.engine.batch(3).tolist() == before.engine.batch(3).tolist()


def test_an_evicted_job_loads_again_after_its_spec_store_is_gone(tmp_path, digits_job):
    """The spec came from the submitter's store (--spec-store), which may go away while the job
    can still be disputed or its attestations taken to court: the first load keeps a copy in
    my own store, and the reload reads it there."""
    job, config = digits_job
    theirs = open_blob_store(str(tmp_path / "submitter"))
    address = theirs.put(DIGITS.canonical_bytes())
    r = role(
        tmp_path, job, config, (0, 0, 0), spec_store=str(tmp_path / "submitter"), max_loaded_jobs=1
    )
    asyncio.run(r.job_context(1))
    assert r.agent.blobs.has(address)
    (tmp_path / "submitter").rename(tmp_path / "gone")
    asyncio.run(r.job_context(2))  # evicts job 1
    assert asyncio.run(r.job_context(1)).spec.spec_hash() == DIGITS.spec_hash()


def test_a_store_i_cannot_write_to_does_not_stop_the_job(tmp_path, digits_job, caplog):
    """keep_spec is best effort: an agent whose own store refuses writes still takes the job,
    and says why a reload may need the other stores."""
    job, config = digits_job
    theirs = open_blob_store(str(tmp_path / "submitter"))
    theirs.put(DIGITS.canonical_bytes())
    r = role(tmp_path, job, config, (0, 0, 0), spec_store=str(tmp_path / "submitter"))

    def refuse(data: bytes) -> str:
        raise BlobBackendError("read-only store")

    r.agent.blobs.put = refuse
    with caplog.at_level(logging.WARNING, logger="test.job_context"):
        assert asyncio.run(r.job_context(1)).spec.spec_hash() == DIGITS.spec_hash()
    assert "could not keep a copy of spec" in caplog.text


def test_a_bounded_cache_refuses_a_non_positive_capacity():
    with pytest.raises(ValueError, match="capacity must be > 0"):
        BoundedCache(0)


@settings(max_examples=200, deadline=None)
@given(
    capacity=st.integers(1, 4),
    ops=st.lists(st.tuples(st.sampled_from(["get", "put", "pop"]), st.integers(0, 6)), max_size=60),
)
def test_a_bounded_cache_is_an_lru_of_its_capacity(capacity, ops):
    """Against a list model of least-recently-used order: same answers, same keys in the same
    order, never more than `capacity`, and every value dropped beyond it is counted."""
    cache: BoundedCache[int, str] = BoundedCache(capacity)
    model: list[tuple[int, str]] = []  # least recently used first
    evicted = 0
    for n, (op, key) in enumerate(ops):
        held = [i for i, (k, _) in enumerate(model) if k == key]
        if op == "get":
            want = model[held[0]][1] if held else None
            if held:
                model.append(model.pop(held[0]))
            assert cache.get(key) == want
        elif op == "put":
            if held:
                model.pop(held[0])
            model.append((key, f"v{n}"))
            if len(model) > capacity:
                model.pop(0)
                evicted += 1
            cache.put(key, f"v{n}")
        else:
            want = model.pop(held[0])[1] if held else None
            assert cache.pop(key) == want
        assert cache.keys() == [k for k, _ in model]
        assert len(cache) == len(model) <= capacity
        assert cache.evictions == evicted


def a_verifier(r: RoleAgent) -> Verifier:
    """`r`'s parts as a verifier's (its replay cache next to `jobs`)."""
    v = object.__new__(Verifier)
    v.__dict__.update(r.__dict__)
    v._replay_jobs, v._no_game = LoadedJobs(r.jobs.capacity), SaidOnce()
    return v


def test_a_verifiers_replays_are_bounded_and_a_checked_job_is_kept_once(tmp_path, digits_job):
    """A drawn verifier loads a job without its dispute config (replay_context) and checks the
    config only when it would challenge (game_context): the context then moves from the replay
    cache to `jobs` (one copy, not one in each), and each cache keeps --max-loaded-jobs."""
    job, config = digits_job
    v = a_verifier(role(tmp_path, job, config, (0, 0, 0), max_loaded_jobs=2))
    replayed = asyncio.run(v.replay_context(1))
    assert (v._replay_jobs.keys(), v.jobs.keys()) == ([1], [])
    assert asyncio.run(v.game_context(1)) is replayed
    assert (v._replay_jobs.keys(), v.jobs.keys()) == ([], [1])
    assert asyncio.run(v.replay_context(1)) is replayed  # found among the checked ones
    for job_id in range(2, 9):
        asyncio.run(v.replay_context(job_id))
    assert (v._replay_jobs.keys(), v.jobs.keys()) == ([7, 8], [1])


def test_a_verifiers_replays_from_step_0_are_bounded_and_give_their_states_back(
    tmp_path, digits_job
):
    """A verifier's account of a whole job (challenger_comp: its replay from step 0, its
    challenges, court defences without a kept start) held that job's engine and states for as
    long as the agent ran; now --max-loaded-jobs of them, and an evicted one releases its
    states to the budget and, asked again, computes the same roots."""
    job, config = digits_job
    v = a_verifier(role(tmp_path, job, config, (0, 0, 0), max_loaded_jobs=1))
    one, two = asyncio.run(v.replay_context(1)), asyncio.run(v.replay_context(2))
    k = DIGITS.checkpoint_every
    first = v.challenger_comp(one)
    root = state_root(first.state(2 * k))
    assert v.state_budget.entries() > 1
    assert v.challenger_comp(one) is first
    v.challenger_comp(two)  # evicts job 1's account
    assert first.kept_bytes == 0
    assert v.state_budget.entries() == 1  # job 2's initial state, all that is left
    again = v.challenger_comp(asyncio.run(v.replay_context(1)))
    assert again is not first
    assert state_root(again.state(2 * k)) == root
