"""`looplab caps --check` tells a version that moved with the same measured behaviour (passes, naming the versions)
from a behaviour that changed (fails, naming the runner, knob and value), over the committed caps doc.

Apart from tests/measure/test_caps.py, which a runner environment of its own also runs (without Hypothesis).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from looplab.measure import caps_drift
from looplab.records import caps_changes, measurements
from tests.paths import REPO

COMMITTED = (REPO / "docs" / "iteration-caps.json").read_text()
VERSION = st.from_regex(r"[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}(rc[0-9])?", fullmatch=True)


@st.composite
def version_moves(draw: st.DrawFn) -> dict[str, str]:
    """Some runners of the committed docs, each with another version than the committed one."""
    doc = measurements.CapsDoc.model_validate_json(COMMITTED)
    chosen = draw(st.lists(st.sampled_from([r.runner for r in doc.runners]), min_size=1, unique=True))
    current = {r.runner: r.version for r in doc.runners}
    return {name: draw(VERSION.filter(lambda v, was=current[name]: v != was)) for name in chosen}


def _moved(moves: dict[str, str]) -> measurements.CapsDoc:
    doc = measurements.CapsDoc.model_validate_json(COMMITTED)
    for report in doc.runners:
        report.version = moves.get(report.runner, report.version)
    return doc


@settings(max_examples=40, deadline=None)
@given(version_moves())
def test_a_version_that_moved_with_the_same_behaviour_passes_and_names_the_versions(moves: dict[str, str]) -> None:
    found = caps_drift.drift(_moved(moves), COMMITTED)
    assert not found and str(found) == "" and found.changes == ()
    assert {m.runner: m.measured for m in found.moved} == moves
    committed = {r.runner: r.version for r in measurements.CapsDoc.model_validate_json(COMMITTED).runners}
    assert all(m.committed == committed[m.runner] for m in found.moved)
    lines = found.moved_lines()
    assert len(lines) == len(moves) and all(
        f"-> {moves[m.runner]}" in line for m, line in zip(found.moved, lines, strict=True)
    )


@settings(max_examples=40, deadline=None)
@given(version_moves(), st.data())
def test_a_changed_count_fails_naming_the_runner_knob_and_value(moves: dict[str, str], data: st.DataObject) -> None:
    doc = _moved(moves)
    report = data.draw(st.sampled_from(doc.runners))
    knob = data.draw(st.sampled_from(report.knobs))
    row = data.draw(st.sampled_from(knob.rows))
    was = row.model_calls
    row.model_calls = data.draw(st.integers(0, 100).filter(lambda n: n != was))
    found = caps_drift.drift(doc, COMMITTED)
    assert found and len(found.changes) == 1 and found.moved_lines() == []
    [change] = found.changes
    assert (change.runner, change.knob, change.value, change.field) == (
        report.runner,
        knob.knob,
        str(row.value),
        "model_calls",
    )
    assert (change.committed, change.measured) == (was, row.model_calls)
    text = str(found)
    assert f"changed: {report.runner}, {knob.knob} = {row.value}: model_calls {was} -> {row.model_calls}" in text
    assert '"version"' not in text  # the diff is the behaviour; the versions are listed apart


@given(section=st.sampled_from(["delegation", "token_budget", "streamed"]), data=st.data())
def test_a_section_one_measurement_lacks_is_one_change_not_one_a_field(section: str, data: st.DataObject) -> None:
    doc = measurements.CapsDoc.model_validate_json(COMMITTED)
    measured = [r for r in doc.runners if getattr(r, section) is not None]
    report = data.draw(st.sampled_from(measured))
    older = report.model_copy(update={section: None})  # measured by a looplab before the section, or lacking it
    assert caps_changes.changes(older, report) == [
        caps_changes.Change(report.runner, None, None, section, "not measured", "measured")
    ]
    assert caps_changes.changes(report, older)[0].measured == "not measured"
