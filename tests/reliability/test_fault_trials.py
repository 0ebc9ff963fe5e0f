"""A CI-sized sample of the reliability bench: one seeded trial each of a kill -9 during
training and of a faulty RPC transport, run side by side; plus a sample of the bad inputs. Each
trial must complete the job, pay the honest parties, send no transaction twice and lose no
honest tokens. `make reliability` runs the full counts (bench/reliability_bench.py), the chain
faults (reorg, rollback, Anvil restart) included; in CI those are covered by the transaction
sender's and the event follower's own tests on a live Anvil (tests/core/test_core_tx.py,
tests/core/test_core_events_chain.py).

The sample used to run four trials side by side; on a slow CI machine, with the two other test
processes beside them, the kill -9 trial once needed more than the bench's 360 s and failed.
Two trials halve the sample's load, and they get a wider deadline: a trial that finishes late
under load is not a failed recovery (the bench keeps its 360 s)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from bench import aggregator_crash_bench as ab
from bench import decomposed_faults_bench as dfb
from bench import reliability_bench as rb
from tools.faultproxy import FaultProxy, FaultRates

pytestmark = [pytest.mark.timeout(900), pytest.mark.slow]

SEED = 7
#: A sample trial's deadline; the sampled test's pytest timeout (900 s) leaves room for set-up.
SAMPLE_TIMEOUT_S = 720.0


def _plans() -> list[rb.Plan]:
    crash = rb.crash_plan(SEED, 0)  # phase "training"
    crash.target, crash.kind = "solver", "kill-solver@training"
    return [crash, rb.transport_plan(SEED + 4, 0)]


def test_sampled_fault_trials_survive(tmp_path):
    plans = _plans()
    assert [p.kind for p in plans] == ["kill-solver@training", "proxy"]
    with ThreadPoolExecutor(max_workers=len(plans)) as pool:
        rows = list(pool.map(lambda p: rb.run_trial(p, tmp_path / p.kind, SAMPLE_TIMEOUT_S), plans))
    for row in rows:
        what = f"{row['plan']}: {row.get('notes')} {row.get('error', '')}"
        assert row.get("error") is None, what
        if row["plan"]["fault"] == "transport":  # the fault really struck
            assert sum(v for k, v in row["injected"].items() if k != "forward") > 0, row
        else:
            assert row["notes"] and "had already exited" not in row["notes"][0], what
        assert row["completed"], what
        assert row["honest_paid"], what
        assert row["duplicate_transactions"] == 0, row.get("duplicates")
        assert row["tokens_lost_by_honest"] == 0, what
        assert row["tracebacks"] == [], what
        assert row["survived"]


def test_court_trials_kill_the_whistleblower_at_every_point_of_its_case():
    """The bench's court trials (run by `make reliability`, not here: each lasts a verify
    window and a court clock) cover every point of a case, seeded: the same seed, the same
    plan."""
    plans = rb.plans({"court": len(rb.COURT_POINTS)}, SEED)
    assert [p.kind for p in plans] == [f"kill-whistleblower@{x}" for x in rb.COURT_POINTS]
    assert {(p.fault, p.target) for p in plans} == {("crash", "whistleblower")}
    assert [p.row() for p in plans] == [p.row() for p in rb.plans({"court": 4}, SEED)]
    assert all(p.trigger == x for p, x in zip(plans, rb.COURT_POINTS, strict=True))
    assert rb.FULL["crash"] + rb.FULL["court"] >= 20 and rb.FULL["court"] >= len(rb.COURT_POINTS)


def test_bad_inputs_are_refused_clearly(tmp_path):
    """Every on-chain case and every 4th CLI case (the bench runs all of them)."""
    result = rb.bad_inputs(tmp_path, cli_every=4)
    unclear = [c for c in result["cases"] if not c["clear"]]
    assert unclear == []
    assert result["tried"] >= 25
    wheres = {c["where"] for c in result["cases"]}
    assert wheres == {"cli", "chain"}


def test_fault_proxy_is_seeded_and_drop_after_still_forwards():
    """Same seed, same fault sequence; a drop-after request reaches the node."""
    a = FaultProxy("http://127.0.0.1:9", seed=3, rates=FaultRates(drop_after=0.5))
    b = FaultProxy("http://127.0.0.1:9", seed=3, rates=FaultRates(drop_after=0.5))
    seq_a = [a.draw() for _ in range(200)]
    assert seq_a == [b.draw() for _ in range(200)]
    assert {"drop_after", "forward"} <= set(seq_a)
    forwarded = []
    only_drop_after = dict.fromkeys(("http_503", "http_429", "drop_before", "hang", "latency"), 0.0)
    proxy = FaultProxy("unused", seed=1, rates=FaultRates(**only_drop_after, drop_after=1.0))

    def forward(body: bytes) -> tuple[int, bytes]:
        forwarded.append(body)
        return 200, b"{}"

    proxy.forward = forward  # type: ignore[method-assign]
    url = proxy.start()
    try:
        import requests

        with pytest.raises(requests.ConnectionError):
            requests.post(url, data=b'{"id":1}', timeout=5)
    finally:
        proxy.stop()
    assert forwarded == [b'{"id":1}']


def test_aggregator_trials_kill_it_at_every_point_of_a_decomposed_job():
    """The aggregator trials (bench/aggregator_crash_bench.py, run by `make reliability`: each is
    a whole decomposed job) cover every point, seeded: the same seed, the same plan; only the
    dispute points bring the cheating aggregator."""
    plans = ab.plans(ab.FULL, SEED)
    assert [p.point for p in plans] == list(ab.POINTS)
    assert [p.row() for p in plans] == [p.row() for p in ab.plans(ab.FULL, SEED)]
    assert {p.point for p in plans if p.dispute} == set(ab.DISPUTE)
    assert all(0 <= p.delay_s <= ab.MAX_DELAY_S.get(p.point, 2.0) for p in plans)
    assert all(0.5 <= p.down_s <= 3.0 for p in plans)


def test_decomposed_trials_kill_the_aggregator_and_a_solver_of_a_version_3_job():
    """The version-3 trials (bench/decomposed_faults_bench.py, run by `make reliability`) kill
    the aggregator mid-aggregation and after its commit and a solver mid-unit, seeded."""
    plans = [dfb.plan(SEED + i, i) for i in range(2 * len(dfb.POINTS))]
    assert [p.point for p in plans] == list(dfb.POINTS) * 2
    assert [p.row() for p in plans] == [dfb.plan(SEED + i, i).row() for i in range(len(plans))]
    assert {p.target.name for p in plans} == {"aggregator", "solver-0"}
    assert all(0 <= p.delay_s <= dfb.MAX_DELAY_S[p.point] for p in plans)
    assert all(0.5 <= p.down_s <= 3.0 for p in plans)
