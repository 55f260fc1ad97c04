"""The kept measurements (`history/`, `looplab history`): one file per framework version, what changed between
versions, the drift a new release brings, and the pages the site builds from them.

The committed kept data is real measurement: LangGraph 1.0.5 and 1.0.6 were measured in environments of their own
(`looplab caps --versions`, `looplab eval --versions`) because 1.0.6 is the release that raised the default
`recursion_limit` from 25 to 10,000 (`langgraph/_internal/_config.py`'s `DEFAULT_RECURSION_LIMIT`), a change known
from the source, so the history builder has a known answer to find.
"""

from __future__ import annotations

import shutil
from datetime import date
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from looplab.adapters import registry
from looplab.cli import main
from looplab.records import history
from looplab.records.history import CaseOutcome, HistoryError, VersionRecord
from looplab.records.measurements import CapsDoc
from looplab.views import history as shown
from looplab.views import markdown as md
from tests.paths import REPO

ROOT = REPO
KEPT = ROOT / "history"
CAPS = ROOT / "docs" / "iteration-caps.json"
CHECKS = settings(deadline=None, derandomize=True, max_examples=60)


@pytest.fixture(scope="module")
def kept() -> dict[str, list[VersionRecord]]:
    return history.read(KEPT)


def langgraph(kept: dict[str, list[VersionRecord]], version: str) -> VersionRecord:
    return next(v for v in kept["langgraph"] if v.version == version)


# --- the kept data ---------------------------------------------------------------------------------------------


def test_the_kept_data_holds_every_runner_at_the_version_the_caps_doc_measured(kept) -> None:
    # Regenerating the caps doc without keeping the measurement (or the other way round) fails here.
    docs = CapsDoc.model_validate_json(CAPS.read_text(encoding="utf-8"))
    assert {r.runner for r in docs.runners} == set(registry.RUNNERS) - {"external"}
    for report in docs.runners:
        same = [v for v in kept.get(report.runner, []) if v.version == report.version]
        assert same, f"history/{report.runner}/ keeps no {report.version}: run `looplab history record`"
        assert same[0].caps == report, f"history/{report.runner}/{history.file_name(report.version)} is not the docs'"
        assert same[0].cases, f"{report.runner} {report.version}: no case outcome kept"
        assert all(c.passed == c.runs for c in same[0].cases.values()), f"{report.runner}: a kept case failed"


def test_the_date_and_looplab_every_version_shares_are_said_once_above_them(kept) -> None:
    same = {
        r: [v.model_copy(update={"measured_on": date(2026, 1, 2), "looplab": "0.1"}) for v in vs]
        for r, vs in kept.items()
    }
    text = shown.terminal(same)
    assert text.startswith("every version below measured 2026-01-02 by looplab 0.1")
    assert text.count("2026-01-02") == 1
    first, *others = list(same)
    mixed = same | {first: [v.model_copy(update={"measured_on": date(2026, 1, 3)}) for v in same[first]]}
    text = shown.terminal(mixed)
    assert not text.startswith("every version below") and "2026-01-03" in text and "2026-01-02" in text


def test_the_history_builder_finds_exactly_the_default_langgraph_1_0_6_raised(kept) -> None:
    before, after = langgraph(kept, "1.0.5"), langgraph(kept, "1.0.6")
    moved = history.changes_between(before, after)
    defaults = [c for c in moved if c.knob == "recursion_limit" and c.field == "default"]
    assert [(c.committed, c.measured) for c in defaults] == [(25, 10000)]
    # Everything else that moved is that default at work: the runs with no cap set (which now run away to looplab's
    # safety stop instead of stopping at 25 super-steps; the runner's own step counter, unset, leaves the default
    # in charge too) and the scorecard's default cap. No count at any value set, no ending at the cap, no case.
    unset = {"recursion_limit", "state step counter", "under delegation (state step counter)"}
    others = [c for c in moved if c not in defaults]
    assert others, "the unset runs must show the new default at work"
    for change in others:
        assert (change.knob in unset and change.value == "unset") or (
            change.knob == "scorecard" and change.field == "default_cap"
        ), f"not the default's doing: {change}"


def test_looplab_history_prints_each_version_and_what_moved(kept, capsys) -> None:
    assert main(["history", "--dir", str(KEPT), "--runner", "langgraph"]) == 0
    out = capsys.readouterr().out
    assert all(v.version in out for v in kept["langgraph"])
    assert "changed from 1.0.5" in out and "recursion_limit: default 25 -> 10000" in out


# --- recording, and drift ------------------------------------------------------------------------------------


def measured_caps(tmp_path: Path, one: VersionRecord, version: str | None = None) -> Path:
    """A caps measurement of `one`'s section (its version relabelled), as `caps --measured` writes one."""
    assert one.caps is not None
    path = tmp_path / "measured-caps.json"
    report = one.caps.model_copy(update={"version": version or one.version})
    path.write_text(CapsDoc(runners=[report]).model_dump_json(), encoding="utf-8")
    return path


def test_a_release_that_moved_a_measured_behaviour_is_news_and_one_that_did_not_is_kept_quietly(
    kept, tmp_path: Path, capsys
) -> None:
    folder = tmp_path / "history"
    (folder / "langgraph").mkdir(parents=True)
    shutil.copy(KEPT / "langgraph" / "1.0.5.json", folder / "langgraph")
    drift = tmp_path / "drift"
    newer = langgraph(kept, "1.0.6")

    # 1.0.6 arrives: its default moved, so there is an issue's text naming the runner, both versions and the field.
    args = ["history", "record", "--dir", str(folder), "--drift", str(drift), "--date", "2026-12-05"]
    assert main([*args, "--caps", str(measured_caps(tmp_path, newer))]) == 0
    assert "new version: langgraph 1.0.6 (after 1.0.5)" in capsys.readouterr().out
    [issue] = drift.iterdir()
    title, blank, *body = issue.read_text(encoding="utf-8").splitlines()
    assert (title, blank) == (shown.drift_title("langgraph"), "")
    text = "\n".join(body)
    assert "langgraph 1.0.6 measures otherwise than on 1.0.5" in text
    assert "| recursion\\_limit | default | 25 | 10000 |" in text  # a knob's name is escaped Markdown
    assert (folder / "langgraph" / "1.0.6.json").is_file()

    # The same measurement again, and a release after it that changes nothing: kept, no issue.
    shutil.rmtree(drift)
    assert main([*args, "--caps", str(measured_caps(tmp_path, newer))]) == 0
    assert "unchanged: langgraph 1.0.6" in capsys.readouterr().out
    assert main([*args, "--caps", str(measured_caps(tmp_path, newer, "1.0.7"))]) == 0
    assert "new version: langgraph 1.0.7 (after 1.0.6) ->" in capsys.readouterr().out
    assert not drift.exists()
    assert [v.version for v in history.read(folder)["langgraph"]] == ["1.0.5", "1.0.6", "1.0.7"]


def test_an_older_release_measured_later_is_compared_with_the_version_before_it_not_the_newest(
    kept, tmp_path: Path
) -> None:
    folder = tmp_path / "history"
    (folder / "langgraph").mkdir(parents=True)
    shutil.copy(KEPT / "langgraph" / "1.0.6.json", folder / "langgraph")
    [done] = history.record([langgraph(kept, "1.0.5")], folder)
    assert (done.status, done.previous) == ("new version", None)
    assert not done.news


def test_a_measurement_of_only_the_eval_keeps_the_caps_already_kept(kept, tmp_path: Path) -> None:
    folder = tmp_path / "history"
    one = langgraph(kept, "1.0.6")
    history.record([one], folder)
    cases_only = one.model_copy(
        update={"caps": None, "scorecard": {}, "cases": {"new-case": one.cases["vip-compound"]}}
    )
    [done] = history.record([cases_only], folder)
    again = history.read(folder)["langgraph"][0]
    assert done.status == "measured again" and again.caps == one.caps
    assert set(again.cases) == {*one.cases, "new-case"}


# --- bad input: one line, nothing lost ------------------------------------------------------------------------


def test_a_kept_file_that_is_not_a_measurement_is_one_line_naming_it(tmp_path: Path, capsys) -> None:
    (tmp_path / "langgraph").mkdir()
    (tmp_path / "langgraph" / "1.0.0.json").write_text('{"runner": "langgraph"}', encoding="utf-8")
    assert main(["history", "--dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "1.0.0.json: not a kept measurement" in err


def test_a_kept_file_in_another_runners_folder_is_refused(kept, tmp_path: Path) -> None:
    (tmp_path / "langchain").mkdir()
    shutil.copy(KEPT / "langgraph" / "1.0.5.json", tmp_path / "langchain")
    with pytest.raises(HistoryError, match="belongs in"):
        history.read(tmp_path)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["history", "--dir", "no-such-folder"], "is not a folder of kept measurements"),
        (["history", "record"], "needs --caps PATH, --results PATH or both"),
        (["history", "record", "--caps", str(CAPS), "--date", "5/12/2026"], "--date takes YYYY-MM-DD"),
        (["history", "--dir", str(KEPT), "--runner", "nobody"], "nothing kept for nobody"),
        (["history", "record", "--caps", "missing.json"], "--caps missing.json: no such file"),
        (["history", "record", "--caps", str(ROOT / "pyproject.toml")], "not a looplab caps measurement"),
    ],
)
def test_bad_history_input_is_one_line(argv: list[str], says: str, capsys, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1


# --- generated input -----------------------------------------------------------------------------------------

versions = st.from_regex(r"[0-9]{1,3}\.[0-9]{1,3}(\.[0-9]{1,3})?", fullmatch=True)
texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=30)
outcomes = st.builds(
    CaseOutcome,
    runs=st.integers(1, 3),
    passed=st.integers(0, 1),
    stop_reason=st.sampled_from(["final_answer", "max_steps", None]),
    model_calls=st.integers(0, 60),
    tool_calls=st.integers(0, 60),
    first_request_bytes=st.integers(100, 20_000),
    largest_request_bytes=st.integers(100, 200_000),
)


@st.composite
def records(draw: st.DrawFn) -> VersionRecord:
    return VersionRecord(
        runner="langgraph",
        distribution="langgraph",
        version=draw(versions),
        measured_on=draw(st.dates(date(2025, 1, 1), date(2027, 1, 1))),
        looplab="0.1.0",
        cases=draw(st.dictionaries(st.sampled_from(["vip-compound", "tight-budget", "slow-tests"]), outcomes)),
        scorecard=draw(st.dictionaries(st.sampled_from(shown.KEPT_ROWS), texts, max_size=3)),
    )


@CHECKS
@given(st.lists(records(), min_size=1, max_size=6))
def test_keeping_any_measurements_reads_back_in_release_order_and_again_changes_nothing(
    tmp_path_factory, measured
) -> None:
    folder = tmp_path_factory.mktemp("history")
    history.record(measured, folder)
    # A version measured twice keeps the later measurement, the parts it lacks (cases, cells) from the earlier.
    expected: dict[str, VersionRecord] = {}
    for one in measured:
        was = expected.get(one.version)
        expected[one.version] = (
            one
            if was is None
            else one.model_copy(
                update={"cases": {**was.cases, **one.cases}, "scorecard": {**was.scorecard, **one.scorecard}}
            )
        )
    back = history.read(folder)["langgraph"]
    assert [v.version for v in back] == sorted(expected, key=lambda v: [int(p) for p in v.split(".")])
    left_out = {"measured_on", "looplab"}  # an unchanged measurement keeps the file, and so its first date
    assert [v.model_dump(exclude=left_out) for v in back] == [
        expected[v.version].model_dump(exclude=left_out) for v in back
    ]
    assert all(r.status == "unchanged" for r in history.record(back, folder))


@CHECKS
@given(records(), texts)
def test_a_version_compared_with_itself_moved_nothing_and_its_file_name_is_one_safe_name(one, label) -> None:
    assert history.changes_between(one, one) == []
    name = history.file_name(f"{label} {one.version}")
    assert name.endswith(".json") and "/" not in name and not name.startswith(".")


@CHECKS
@given(outcomes, st.integers(-100_000, 100_000))
def test_a_request_size_moves_only_past_the_tolerance(outcome, delta) -> None:
    bigger = outcome.model_copy(update={"largest_request_bytes": max(1, outcome.largest_request_bytes + delta)})
    moved = history.case_changes("r", {"c": outcome}, {"c": bigger})
    size = outcome.largest_request_bytes
    beyond = abs(bigger.largest_request_bytes - size) > history.REQUEST_SIZE_TOLERANCE * size
    assert bool(moved) == beyond


@CHECKS
@given(outcomes, outcomes, st.sampled_from(["before", "after", "both"]))
def test_a_case_left_to_timing_on_either_side_is_kept_but_never_filed_as_a_change(was, now, side) -> None:
    race = "a reply's two calls of one agent run at once, on the one agent object"
    before = was.model_copy(update={"race": race}) if side != "after" else was
    after = now.model_copy(update={"race": race}) if side != "before" else now
    assert history.case_changes("r", {"c": before}, {"c": after}) == []
    # The same two outcomes, neither left to timing, are compared as any case is.
    plain = history.case_changes("r", {"c": was}, {"c": now})
    if (was.model_calls, was.stop_reason, was.passed) != (now.model_calls, now.stop_reason, now.passed):
        assert plain


def test_the_races_kept_are_those_the_runners_declare_on_the_cases_of_that_shape(kept) -> None:
    from looplab.run import matrix
    from looplab.scenarios.cases import load_cases

    cases = load_cases()
    found = matrix.races([*registry.RUNNERS, "smolagents@1.0.0"], cases.values())
    assert found[("smolagents", "delegation-parallel")] == registry.RUNNERS["smolagents"].delegation_races["parallel"]
    assert found[("smolagents@1.0.0", "delegation-parallel")] == found[("smolagents", "delegation-parallel")]
    # Only a case of a shape a runner declares a race in: one child at a time, or three levels, is never one.
    assert {cases[case].delegation_shape for _, case in found} == {"parallel"}
    assert {runner for runner, _ in found} == {
        name for name, info in registry.RUNNERS.items() if "parallel" in info.delegation_races
    } | {"smolagents@1.0.0"}
    # Its scorecard cell is not kept either: a race going the other way would read as a new release's change.
    from looplab.records import results
    from looplab.records.outcome import RunOutcome
    from tests.records.test_results import sample

    raced = sample().model_copy(update={"runner": "smolagents"})
    document = results.build([RunOutcome("smolagents", "delegation-parallel", raced)])
    assert "delegation_parallel" in shown.scorecard_cells(None, document)["smolagents"]
    assert "delegation_parallel" not in shown.scorecard_cells(None, document, found)["smolagents"]
    # The kept data holds each race with its case's outcome, and the results page says those cells are left to
    # timing (and, once, what that means).
    raced_cells = [(r, c) for r, c in found if "@" not in r]
    assert all(kept[r][-1].cases[c].race == found[r, c] for r, c in raced_cells)
    page = shown.results_markdown(kept)
    assert page.count("left to timing") == 1 + len(raced_cells)


# --- the site's pages ----------------------------------------------------------------------------------------


def test_the_sites_pages_show_every_kept_version_and_the_newest_results(kept) -> None:
    page = shown.markdown(kept)
    for runner, versions in kept.items():
        assert f"## {md.text(runner)}" in page and all(f"| {md.text(v.version)} |" in page for v in versions)
    assert "### 1.0.5 → 1.0.6" in page
    results = shown.results_markdown(kept)
    assert "`vip-compound`" in results and "**fail**" not in results
    card = shown.scorecard_markdown(kept)
    assert all(f"| `{runner}` |" in card for runner in kept)


def test_a_runners_cells_are_kept_at_the_version_they_ran_a_pinned_label_under_its_runner(kept) -> None:
    # An eval that ran another release than the caps measurement (one published between the two jobs), and a pinned
    # version's cells (`langgraph@1.0.0`): each is kept under its runner, at the version the cell names.
    from looplab.records import results
    from looplab.records.outcome import RunOutcome
    from tests.records.test_results import sample

    run = sample()  # handrolled on vip-compound, run here
    pinned = run.model_copy(update={"runner": "langgraph@1.0.0", "runner_version": "1.0.0"})
    document = results.build(
        [RunOutcome(run.runner, "vip-compound", run), RunOutcome(pinned.runner, "vip-compound", pinned)]
    )
    newest = kept["handrolled"][-1]
    assert newest.caps is not None
    caps = CapsDoc(runners=[newest.caps.model_copy(update={"version": "anthropic 0.0.1"})])
    made = history.records_from(caps, document, measured_on=date(2026, 12, 5), looplab="0.1.0")
    by = {(r.runner, r.version): r for r in made}
    assert set(by) == {("handrolled", "anthropic 0.0.1"), ("handrolled", run.runner_version), ("langgraph", "1.0.0")}
    assert by["handrolled", "anthropic 0.0.1"].cases == {} and by["handrolled", "anthropic 0.0.1"].caps is not None
    ran = by["handrolled", run.runner_version].cases["vip-compound"]
    steps = run.trace.steps
    assert (ran.model_calls, ran.first_request_bytes) == (run.totals.model_calls, steps[0].model_call.request_bytes)
    assert ran.largest_request_bytes == max(s.model_call.request_bytes for s in steps)
    assert by["langgraph", "1.0.0"].cases["vip-compound"].passed == 1


@CHECKS
@given(name=st.text(min_size=1, max_size=20), version=texts.filter(str.strip))
def test_a_name_or_version_read_from_a_document_is_kept_inside_the_folder_or_refused_in_one_line(
    kept, tmp_path_factory, name: str, version: str
) -> None:
    folder = tmp_path_factory.mktemp("history")
    report = langgraph(kept, "1.0.5").caps.model_copy(update={"runner": name, "version": version})
    try:
        made = history.records_from(CapsDoc(runners=[report]), None, measured_on=date(2026, 12, 5), looplab="0.1.0")
    except HistoryError as refused:
        assert "\n" not in str(refused)
        return
    # What is kept is PEP 440 text: no character HTML or Markdown could read as markup.
    assert not set(version) & set("<>&\"'`[](){}|*#\\\n"), version
    [done] = history.record(made, folder)
    assert done.path.resolve().is_relative_to(folder.resolve()) and done.path.is_file()
    assert history.read(folder)[name][0].version == version
