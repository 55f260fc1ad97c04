"""A runner's numbers over repeats on its runs' root spans: its pass rate and medians with their 95 % intervals, as
the results document's summary holds them; without repeats, none."""

from __future__ import annotations

from pathlib import Path

import pytest

from looplab.records.summary import RunnerSummary
from looplab.views import otel
from tests.views.test_report_intervals import document

#: The attributes only repeats give a root span.
RUNNER_KEYS = (
    "looplab.runner.repeats",
    "looplab.runner.runs",
    "looplab.runner.passed",
    "looplab.runner.pass_rate",
    "looplab.runner.pass_rate_ci95.low",
    "looplab.runner.pass_rate_ci95.high",
    *(
        f"looplab.runner.{name}{end}"
        for name in ("model_calls", "tokens", "cost_usd", "wall_s")
        for end in ("_median", "_median_ci95.low", "_median_ci95.high")
    ),
)


def roots(span_list: list) -> list:
    return [s for s in span_list if s.parent is None]


def test_with_repeats_each_root_span_carries_its_runners_summary_and_intervals() -> None:
    doc = document(3)
    span_list = otel.spans(doc.run_results(), summary=doc.runner_summaries())
    summaries = {s.runner: s for s in map(RunnerSummary.model_validate, doc.summary)}
    assert len(roots(span_list)) == len(doc.cells) == 12
    for root in roots(span_list):
        s, got = summaries[root.attributes["gen_ai.agent.name"]], root.attributes
        assert set(RUNNER_KEYS) <= set(got)
        assert got["looplab.runner.repeats"] == 3 and got["looplab.runner.runs"] == 6
        assert got["looplab.runner.passed"] == s.passed and got["looplab.runner.pass_rate"] == s.completion_rate
        ci = "looplab.runner.pass_rate_ci95"
        assert (got[f"{ci}.low"], got[f"{ci}.high"]) == s.completion_interval
        for name in ("model_calls", "tokens", "cost_usd", "wall_s"):
            prefix = f"looplab.runner.{name}_median"
            assert got[prefix] == getattr(s, f"{name}_median")
            assert (got[f"{prefix}_ci95.low"], got[f"{prefix}_ci95.high"]) == getattr(s, f"{name}_interval")
    # Only the root spans: a model call's span says nothing of the runner's other runs.
    assert not any(set(RUNNER_KEYS) & set(s.attributes) for s in span_list if s.parent is not None)


def test_alpha_over_three_repeats_reads_as_the_report_shows_it() -> None:
    doc = document(3)
    alpha = next(
        r for r in roots(otel.spans(doc.run_results(), summary=doc.runner_summaries())) if r.name.endswith(" alpha")
    )
    got = alpha.attributes
    assert got["looplab.runner.passed"] == 5 and got["looplab.runner.pass_rate"] == pytest.approx(5 / 6, abs=1e-4)
    ci = "looplab.runner.pass_rate_ci95"
    assert (round(got[f"{ci}.low"], 2), round(got[f"{ci}.high"], 2)) == (0.44, 0.97)  # the report's [44%–97%]
    assert (got["looplab.runner.model_calls_median"], got["looplab.runner.model_calls_median_ci95.high"]) == (4, 9)


@pytest.mark.parametrize("summary", ["document", "none"])
def test_without_repeats_or_a_summary_no_runner_attributes(summary: str) -> None:
    doc = document(1)
    given = doc.runner_summaries() if summary == "document" else ()
    for root in roots(otel.spans(doc.run_results(), summary=given)):
        assert not set(RUNNER_KEYS) & set(root.attributes)
        assert root.attributes["looplab.runner.version"] == "1.0"  # what every run carries stays


def test_a_model_without_a_price_has_no_cost_median_and_the_rest_stays() -> None:
    doc = document(2)
    entry = RunnerSummary.model_validate(doc.summary[0])
    doc.summary[0] = entry.model_copy(update={"cost_usd_median": None, "cost_usd_interval": None}).model_dump()
    root = next(
        r for r in roots(otel.spans(doc.run_results(), summary=doc.runner_summaries())) if r.name.endswith("alpha")
    )
    assert not any("cost_usd_median" in k for k in root.attributes)
    assert root.attributes["looplab.runner.wall_s_median"] == entry.wall_s_median


def test_the_otlp_file_holds_them(tmp_path: Path, monkeypatch) -> None:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    doc = document(2)
    otel.export(doc.run_results(), tmp_path / "otel.json", summary=doc.runner_summaries())
    spans = [s for rs in otel.read(tmp_path / "otel.json").resource_spans for ss in rs.scope_spans for s in ss.spans]
    rates = {
        a.value.double_value
        for s in spans
        if not s.parent_span_id
        for a in s.attributes
        if a.key == "looplab.runner.pass_rate"
    }
    assert rates == {s["completion_rate"] for s in doc.summary}
