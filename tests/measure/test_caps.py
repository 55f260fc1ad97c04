"""`looplab caps`: the measurement, the generated docs, and the drift check that guards them."""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path

import pytest

from looplab.adapters import registry
from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.runner import Probe
from looplab.cli import main
from looplab.measure import caps, caps_drift
from looplab.records import measurements
from looplab.scenarios.scripted.probes import REPORT, NeverStops
from looplab.scenarios.scripted.server import ScriptedModelServer
from tests.paths import REPO

DOCS = REPO / "docs"
COMMITTED = (DOCS / "iteration-caps.json").read_text()


@pytest.fixture(scope="module")
def handrolled() -> measurements.CapsDoc:
    return caps.measure(["handrolled"])


def test_the_hand_rolled_cap_counts_model_calls(handrolled: measurements.CapsDoc) -> None:
    [report] = handrolled.runners
    [knob] = report.knobs
    assert knob.counts == "model calls"
    assert [(r.value, r.model_calls) for r in knob.rows] == [(1, 1), (2, 2), (3, 3), (5, 5)]
    assert knob.unset.model_calls == measurements.SAFETY_STOP and "safety stop" in knob.unset.ending.how
    assert knob.smallest_value_to_answer_on_call_3 == caps.ANSWER_ON
    assert "range(session.cap)" in report.code


def test_a_runner_taking_whole_and_streamed_replies_is_measured_at_the_cap_with_each(
    handrolled: measurements.CapsDoc,
) -> None:
    [report] = handrolled.runners
    streamed = report.streamed
    assert streamed is not None and (streamed.knob, streamed.value) == (report.knobs[0].knob, caps.STREAMED_VALUE)
    assert streamed.whole.model_calls == streamed.streamed.model_calls == caps.STREAMED_VALUE and streamed.same
    section = caps.to_markdown(handrolled).split("### Streamed at the cap")[1]
    assert "the same either way" in section and "| whole | 3 |" in section and "| streamed | 3 |" in section


def test_a_runner_that_takes_one_mode_only_has_no_streamed_measurement(monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = registry.load("handrolled")
    monkeypatch.setattr(type(adapter), "streams", (True,))
    with ScriptedModelServer(NeverStops()) as server:
        assert caps.Prober({"never-stops": server}).streamed(adapter) is None
    assert "Not measured: it takes one of whole or streamed replies only." in caps._streamed_markdown(None)


def test_a_streamed_ending_that_changed_is_drift_named_by_its_mode() -> None:
    doc = measurements.CapsDoc.model_validate_json(COMMITTED)
    report = next(r for r in doc.runners if r.streamed)
    assert report.streamed is not None
    report.streamed.streamed.ending.how = "raises"
    [change] = caps_drift.drift(doc, COMMITTED).changes
    assert (change.runner, change.value, change.field) == (report.runner, str(caps.STREAMED_VALUE), "ending.how")
    assert change.knob == f"streamed replies at the cap ({report.streamed.knob})"


def test_across_wire_apis_a_runner_that_takes_one_mode_there_is_no_drift() -> None:
    doc = measurements.CapsDoc.model_validate_json(COMMITTED)
    report = next(r for r in doc.runners if r.streamed)
    report.streamed = None  # as Strands measures on an API where it streams every reply
    assert not caps_drift.drift(doc, COMMITTED, across_apis=True).changes
    assert caps_drift.drift(doc, COMMITTED).changes  # on the docs' own API it is one


#: The framework runners the caps doc covers (`external` runs whatever command it is given: no cap of its own).
FRAMEWORKS = [name for name, info in registry.RUNNERS.items() if info.by_default]


def test_every_adapter_marks_the_code_that_sets_its_cap() -> None:
    # The runners that live in their own environment run this there (tests/run/test_own_environments.py).
    for name in os.environ.get("LOOPLAB_RUNNERS", ",".join(FRAMEWORKS)).split(","):
        if registry.RUNNERS[name].elsewhere():
            continue
        adapter = registry.load(name)
        assert adapter.cap_code().strip(), name
        assert set(adapter.knob_defaults()) == set(adapter.knobs) | {adapter.token_knob} - {None}, name


def test_the_committed_docs_cover_every_runner_and_the_markdown_comes_from_the_json() -> None:
    doc = measurements.CapsDoc.model_validate_json((DOCS / "iteration-caps.json").read_text())
    assert [r.runner for r in doc.runners] == FRAMEWORKS
    for r in doc.runners:
        assert r.version and r.code and r.mapping_rows and r.knobs
        assert [row.model_calls for row in r.mapping_rows] == [row.value for row in r.mapping_rows]  # max_steps=N -> N
        for k in r.knobs:
            assert k.default_source and k.counts and len(k.rows) == len(caps.UNIT_VALUES)
    committed_md = (DOCS / "iteration-caps.md").read_text()
    assert caps.to_markdown(doc, committed_md) == committed_md


def test_prose_between_the_markers_survives_regeneration(handrolled: measurements.CapsDoc) -> None:
    first = caps.to_markdown(handrolled)
    edited = first.replace(caps.DEFAULT_PROSE, "A note a person wrote.\n", 1)
    assert "A note a person wrote." in caps.to_markdown(handrolled, edited)


def _write(docs: Path, doc: measurements.CapsDoc) -> None:
    docs.mkdir(parents=True, exist_ok=True)
    (docs / "iteration-caps.json").write_text(caps.to_json(doc))
    (docs / "iteration-caps.md").write_text(caps.to_markdown(doc))


def test_check_passes_on_fresh_docs_and_fails_with_a_diff_when_a_count_is_edited(
    handrolled: measurements.CapsDoc, tmp_path: Path, capsys
) -> None:
    _write(tmp_path, handrolled)
    assert main(["caps", "--runner", "handrolled", "--check", "--docs", str(tmp_path)]) == 0

    data = json.loads((tmp_path / "iteration-caps.json").read_text())
    data["runners"][0]["knobs"][0]["rows"][2]["model_calls"] = 4  # claim max 3 allows 4 model calls
    (tmp_path / "iteration-caps.json").write_text(json.dumps(data, indent=2) + "\n")
    capsys.readouterr()
    assert main(["caps", "--runner", "handrolled", "--check", "--docs", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert re.search(r'^-\s+"model_calls": 4,$', out, re.M) and re.search(r'^\+\s+"model_calls": 3,$', out, re.M)


# --- versions that moved against behaviour that changed (generated cases: tests/measure/test_caps_drift.py) -----------


def test_an_ending_that_changed_at_the_unset_value_is_named_as_unset() -> None:
    doc = measurements.CapsDoc.model_validate_json(COMMITTED)
    knob = doc.runners[0].knobs[0]
    knob.unset.ending.how = "returns silently (no exception, no answer)"
    [change] = caps_drift.drift(doc, COMMITTED).changes
    assert (change.runner, change.knob, change.value, change.field) == (
        doc.runners[0].runner,
        knob.knob,
        "unset",
        "ending.how",
    )


def test_a_runner_missing_from_the_committed_docs_is_a_change() -> None:
    doc = measurements.CapsDoc.model_validate_json(COMMITTED)
    committed = doc.model_copy(update={"runners": doc.runners[1:]})
    found = caps_drift.drift(doc, caps.to_json(committed))
    assert found and found.changes[0].runner == doc.runners[0].runner and found.changes[0].field == "runner"


def test_check_passes_when_only_the_library_version_moved(
    handrolled: measurements.CapsDoc, tmp_path: Path, capsys
) -> None:
    older = handrolled.model_copy(deep=True)
    older.runners[0].version = "anthropic 0.0.1"  # as committed on another machine: a patch release later, same caps
    _write(tmp_path, older)
    assert main(["caps", "--runner", "handrolled", "--check", "--docs", str(tmp_path)]) == 0
    assert "a library changed" not in capsys.readouterr().out


def test_measuring_some_runners_rewrites_their_sections_and_keeps_the_others(
    handrolled: measurements.CapsDoc, tmp_path: Path
) -> None:
    committed = measurements.CapsDoc.model_validate_json(COMMITTED)
    stale = committed.model_copy(deep=True)
    [mine] = [r for r in stale.runners if r.runner == "handrolled"]
    mine.version = "anthropic 0.0.1"
    (tmp_path / "iteration-caps.json").write_text(caps.to_json(stale))
    (tmp_path / "iteration-caps.md").write_text(caps.to_markdown(stale, (DOCS / "iteration-caps.md").read_text()))
    assert main(["caps", "--runner", "handrolled", "--docs", str(tmp_path)]) == 0
    written = measurements.CapsDoc.model_validate_json((tmp_path / "iteration-caps.json").read_text())
    assert [r.runner for r in written.runners] == [r.runner for r in committed.runners]
    assert [r for r in written.runners if r.runner != "handrolled"] == [
        r for r in committed.runners if r.runner != "handrolled"
    ]
    [fresh] = [r for r in written.runners if r.runner == "handrolled"]
    assert fresh.version != "anthropic 0.0.1"
    text = (tmp_path / "iteration-caps.md").read_text()
    assert all(f"## `{r.runner}`" in text for r in committed.runners)  # every section, its prose kept
    assert text.count(caps.DEFAULT_PROSE.strip()) == (DOCS / "iteration-caps.md").read_text().count(
        caps.DEFAULT_PROSE.strip()
    )


def test_api_is_a_check_of_the_docs_on_another_wire_api(capsys) -> None:
    # The docs are measured on each runner's first wire API; `--api` measures on another and compares, so a cap that
    # behaves otherwise there fails the check. Writing the docs from another API would mislabel every section.
    assert main(["caps", "--api", "gemini"]) == 2
    assert "--api needs --check" in capsys.readouterr().err
    assert main(["caps", "--check", "--api", "gemini", "--runner", "handrolled"]) == 2
    assert "handrolled cannot use the gemini API" in capsys.readouterr().err


@pytest.mark.skipif(not registry.RUNNERS["pydantic_ai"].installed(), reason="the pydantic-ai extra is not installed")
def test_the_prober_speaks_the_api_it_is_given() -> None:
    with ScriptedModelServer(NeverStops()) as server:
        result = caps.Prober({"never-stops": server}, api="gemini").run(
            registry.load("pydantic_ai"), "never-stops", None, 2
        )
    assert {s.model_call.endpoint for s in result.trace.steps} == {"generateContent"}


@pytest.mark.full  # one runner's whole measurement each
@pytest.mark.parametrize("runner", [r for r, info in registry.RUNNERS.items() if info.installed() and r != "external"])
def test_each_installed_runners_caps_measure_as_the_committed_docs_say(runner: str, capsys) -> None:
    # The docs are committed measurements; a change to the probes or to how a row is read must come with the docs
    # regenerated. (The runners in their own environments are checked there, by test_own_environments; `external`
    # is whatever program it is given, so the docs have no section for it.)
    assert main(["caps", "--check", "--runner", runner]) == 0, capsys.readouterr().out


#: The runners installed here that speak Gemini's API beside the one their docs were measured on.
GEMINI_TOO = [r for r, info in registry.RUNNERS.items() if "gemini" in info.apis[1:] and info.installed()]


#: The runners whose framework ends an unstopped run with another exception on Gemini's API (the docs' intro says
#: which): CrewAI's Gemini provider raises a `ValueError` of its own where its OpenAI one raises a `ValidationError`.
ENDS_OTHERWISE_ON_GEMINI = {"crewai"}


@pytest.mark.full  # one runner's whole measurement each
@pytest.mark.parametrize("runner", GEMINI_TOO)
def test_each_runners_caps_measure_the_same_on_gemini(runner: str, capsys) -> None:
    code = main(["caps", "--check", "--api", "gemini", "--runner", runner])
    out = capsys.readouterr().out
    if runner not in ENDS_OTHERWISE_ON_GEMINI:
        assert code == 0, out
        return
    # Every count, stop and tool of the last call the same; only the exception ending an unstopped run differs (and
    # so what a delegating parent is handed when its child hits the cap: that error's text).
    changed = re.findall(r"changed: \S+, [^:]+: (\S+)", out)
    assert code == 1 and changed and set(changed) <= {"ending.exception", "ending.message", "parent_saw"}, out


def test_versions_names_one_version_a_runner_and_never_writes_the_docs(capsys) -> None:
    assert main(["caps", "--versions", "langgraph=1.0.5", "--versions", "langgraph=1.0.6", "--measured", "x.json"]) == 2
    assert "--versions names langgraph more than once" in capsys.readouterr().err
    assert main(["caps", "--versions", "langgraph=1.0.5"]) == 2
    assert "--versions needs --measured PATH" in capsys.readouterr().err


@pytest.mark.full  # builds an environment holding LangGraph 1.0.6 (about half a minute, once)
def test_an_older_release_measured_in_its_own_environment_is_what_the_kept_data_holds(tmp_path: Path) -> None:
    # The kept LangGraph 1.0.6 was measured this way; measuring it again must give it back, looplab's own fields
    # (its cap code) aside, so the history compares releases, not runs.
    from looplab.records import history

    out = tmp_path / "older.json"
    pin = "langgraph=1.0.6;langgraph-prebuilt==1.0.7"
    assert main(["caps", "--versions", pin, "--measured", str(out), "--docs", str(tmp_path)]) == 0
    assert not (tmp_path / "iteration-caps.json").exists(), "--measured leaves the docs alone"
    [report] = measurements.CapsDoc.model_validate_json(out.read_text(encoding="utf-8")).runners
    kept = next(v for v in history.read(REPO / "history")["langgraph"] if v.version == "1.0.6")
    assert report.version == "1.0.6" and kept.caps is not None
    assert history.changes_between(kept, kept.model_copy(update={"caps": report})) == []


def _streamed_at_the_cap(whole: dict[str, int], streamed: dict[str, int]) -> measurements.StreamedCap:
    def row(counters: dict[str, int]) -> measurements.Row:
        ending = measurements.Ending(how="raises", exception="x.MaxTurns", counters=counters)
        return measurements.Row(value=3, model_calls=3, tool_calls=3, ending=ending)

    return measurements.StreamedCap(knob="max_turns", value=3, whole=row(whole), streamed=row(streamed))


def test_the_frameworks_counters_at_the_cap_are_compared_where_both_modes_read_them() -> None:
    alike = _streamed_at_the_cap({"usage.requests": 3}, {"usage.requests": 3, "result.current_turn": 0})
    assert alike.same and alike.counters_only("streamed") == {"result.current_turn": 0}
    assert not alike.counters_only("whole")
    section = "\n".join(caps._streamed_markdown(alike))
    assert "the same either way" in section and "| `usage.requests` 3, `result.current_turn` 0 |" in section
    assert "Read only streamed: `result.current_turn` = 0, after 3 model calls." in section
    differ = _streamed_at_the_cap({"usage.requests": 3}, {"usage.requests": 0})
    assert not differ.same and differ.ends_alike and differ.counters_differ == {"usage.requests": (3, 0)}
    section = "\n".join(caps._streamed_markdown(differ))
    assert "the same ending, but its own counters read differently" in section
    assert "Read differently: `usage.requests` is 3 whole and 0 streamed." in section
    none_read = "\n".join(caps._streamed_markdown(_streamed_at_the_cap({}, {})))
    assert "| none read |" in none_read and "Read " not in none_read


def test_a_changed_counter_is_drift_and_one_a_doc_never_read_is_not() -> None:
    doc = measurements.CapsDoc.model_validate_json(COMMITTED)
    report = next(r for r in doc.runners if r.streamed and r.streamed.streamed.ending.counters)
    assert report.streamed is not None
    where, n = next(iter(report.streamed.streamed.ending.counters.items()))
    report.streamed.streamed.ending.counters[where] = n + 1
    [change] = caps_drift.drift(doc, COMMITTED).changes
    assert (change.runner, change.field, change.committed, change.measured) == (
        report.runner,
        f"ending.counters.{where}",
        n,
        n + 1,
    )
    # Against a doc measured before the counters were read, a counter is no change.
    before = json.dumps(_without_counters(json.loads(COMMITTED)))
    assert not caps_drift.drift(measurements.CapsDoc.model_validate_json(COMMITTED), before).changes


def _without_counters(value: object) -> object:
    if isinstance(value, dict):
        return {k: _without_counters(v) for k, v in value.items() if k != "counters"}
    return [_without_counters(v) for v in value] if isinstance(value, list) else value


#: A framework's own count of its model requests, where its runner reads one, and where a streamed run reads more.
REQUEST_COUNTERS = {
    "openai_agents": "context_wrapper.usage.requests",
    "pydantic_ai": "RunUsage.requests",
    "langchain": "ModelCallLimitExceededError.run_count",
    "strands": "AgentResult.metrics.cycle_count",
}


@pytest.mark.full  # a framework's runs, whole and streamed
@pytest.mark.parametrize("runner", sorted(REQUEST_COUNTERS))
def test_a_frameworks_own_request_count_at_the_cap_agrees_with_the_model_boundary(runner: str) -> None:
    with ScriptedModelServer(NeverStops()) as server:
        report = caps.Prober({"never-stops": server}).streamed(registry.load(runner))
    assert report is not None
    for row in (report.whole, report.streamed):
        assert row.ending.counters[REQUEST_COUNTERS[runner]] == row.model_calls == caps.STREAMED_VALUE
    if runner == "openai_agents":  # only a streamed result has a public turn counter
        assert "RunResultStreaming.current_turn" in report.counters_only("streamed")


def test_a_streamed_turn_counter_left_at_zero_names_the_issue_it_reproduces() -> None:
    at_zero = _streamed_at_the_cap({}, {caps._TS_TURN: 0})
    assert "- reproduces openai-agents-js #1480" in "\n".join(caps._streamed_markdown(at_zero, "ts_openai_agents"))
    counted = _streamed_at_the_cap({}, {caps._TS_TURN: 3})
    assert "reproduces" not in "\n".join(caps._streamed_markdown(counted, "ts_openai_agents"))
    assert "reproduces" not in "\n".join(caps._streamed_markdown(at_zero, "openai_agents"))


def test_a_runner_without_a_way_to_end_by_a_tool_refuses_the_probe_in_one_line() -> None:
    adapter = registry.load("handrolled")
    assert adapter.ending_tool is None
    with ScriptedModelServer(NeverStops()) as server, pytest.raises(LooplabError) as refused:
        caps.Prober({"never-stops": server}).run(adapter, "never-stops", Probe(knob="x", value=3, ending_tool="report"))
    assert "cannot end a run by a tool here" in str(refused.value) and "\n" not in str(refused.value)
    with ScriptedModelServer(NeverStops()) as server:
        assert caps.Prober({"never-stops": server}).ending_by_tool(adapter, adapter.knobs[0]) is None


def _knob_ending(smallest: int | None, below: measurements.Row | None) -> measurements.KnobReport:
    doc = measurements.CapsDoc.model_validate_json(COMMITTED)
    knob = next(k for r in doc.runners for k in r.knobs)
    ending = measurements.EndingByTool(mark="Tool(ends=True)", smallest_value=smallest, one_less=below)
    return knob.model_copy(update={"knob": "recursion_limit", "ending_by_tool": ending})


def test_an_ending_tool_whose_result_is_lost_at_one_less_is_said_and_names_the_issue_it_reproduces() -> None:
    raised = measurements.Ending(how="raises", exception="langgraph.errors.GraphRecursionError", message="limit")
    lost = measurements.Row(value=6, model_calls=3, tool_calls=3, ending=raised, last_call_tools="ran")
    [line, cited] = caps._ending_by_tool_lines(_knob_ending(7, lost), "langchain")
    assert line.endswith("(the tool ran; its result did not come back)") and ": 7; at 6: 3 model calls" in line
    assert cited.startswith("- reproduces langgraph #8204")
    not_asked = lost.model_copy(update={"model_calls": 2, "last_call_tools": "ran"})  # the cap came before call 3
    [line] = caps._ending_by_tool_lines(_knob_ending(3, not_asked), "langchain")
    assert "did not come back" not in line
    [line] = caps._ending_by_tool_lines(_knob_ending(None, None), "langchain")
    assert line.endswith("end with that tool's result: none")
    assert caps._ending_by_tool_lines(_knob_ending(3, None).model_copy(update={"ending_by_tool": None}), "x") == []


def test_an_ending_tools_measurement_that_moved_is_drift_and_one_a_doc_never_made_is_not() -> None:
    doc = measurements.CapsDoc.model_validate_json(COMMITTED)
    report, knob = next((r, k) for r in doc.runners for k in r.knobs if k.ending_by_tool)
    assert knob.ending_by_tool is not None and knob.ending_by_tool.smallest_value is not None
    knob.ending_by_tool.smallest_value += 1
    [change] = caps_drift.drift(doc, COMMITTED).changes
    assert (change.runner, change.knob, change.field) == (report.runner, knob.knob, "ending_by_tool.smallest_value")
    before = json.loads(COMMITTED)
    for r in before["runners"]:  # as a doc measured before the ending tool was
        for k in r["knobs"]:
            k.pop("ending_by_tool", None)
    assert not caps_drift.drift(measurements.CapsDoc.model_validate_json(COMMITTED), json.dumps(before)).changes


@pytest.mark.full  # a framework's runs
def test_the_smallest_value_for_an_ending_tool_ends_by_it_and_one_less_does_not() -> None:
    adapter = registry.load("langchain")
    with contextlib.ExitStack() as stack:
        prober = caps.Prober(caps.probe_servers(stack))
        for knob in adapter.knobs:
            found = prober.ending_by_tool(adapter, knob)
            assert found is not None and found.smallest_value is not None, knob
            probe = Probe(knob=knob, value=found.smallest_value, ending_tool=REPORT.name)
            at = caps._row_of(prober.run(adapter, caps.ENDS_BY_TOOL, probe), found.smallest_value)
            assert at.ending.how == caps.ENDED_BY_THE_TOOL and at.model_calls == caps.ANSWER_ON
            assert found.one_less is None or found.one_less.ending.how != caps.ENDED_BY_THE_TOOL
