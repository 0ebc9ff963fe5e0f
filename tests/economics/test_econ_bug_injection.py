"""Bug injection: break a formula on purpose and confirm the checks catch it.

Each test patches one function of the model with a plausible wrong version (monkeypatch
restores it afterwards) and asserts that the check guarding it fails. Also run once by hand on
the source itself (docs/INCENTIVES.md §7)."""

from __future__ import annotations

from test_econ_detection import agrees_with_monte_carlo

from agents.economics import analysis, detection, forced
from agents.economics.params import Protocol, reference_jobs


def test_sampling_with_replacement_is_caught(monkeypatch) -> None:
    assert agrees_with_monte_carlo(detection.detection_probability)
    monkeypatch.setattr(detection, "miss_probability", lambda n, m, b: (1 - b / n) ** m)
    assert not agrees_with_monte_carlo(detection.detection_probability)


def test_ignoring_verifiers_after_the_first_is_caught(monkeypatch) -> None:
    right = detection.detection_probability
    monkeypatch.setattr(detection, "detection_probability", lambda n, m, v, b: right(n, m, 1, b))
    assert not agrees_with_monte_carlo(detection.detection_probability)


def test_lazy_slash_without_the_2m_minus_1_factor_is_caught(monkeypatch) -> None:
    proto = Protocol()
    job, costs = reference_jobs()[1]  # m = 46: the factor matters
    assert analysis.check_dominance(job, costs, proto)["ok"]
    monkeypatch.setattr(
        forced,
        "lazy_slash",
        lambda job, proto: max(
            proto.verifier_lock_min,
            job.payout(proto) * proto.lazy_slash_factor() / job.segments,
        ),
    )
    res = analysis.check_dominance(job, costs, proto)
    assert not res["claims"]["verifier_strictly_dominant"]
    assert res["verifier"]["skip_one"] > res["verifier"]["honest"]
