"""A results document from elsewhere is data, never a crash.

`looplab report`, `merge`, `eval --resume`, `scorecard --results` and `otel` read documents another
machine, another version or a hand wrote. Whatever such a file holds, each either reads it or
refuses it with one `ResultsError` line naming the file (and the field), and leaves the file, and
any `-o` target already there, as they were. The documents start from one real run (handrolled on
vip-compound against the scripted model) and are broken at a random place.
"""

from __future__ import annotations

import copy
import io
import json
import subprocess
import sys
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from rich.console import Console

from looplab.adapters.contract.errors import ResultsError
from looplab.cli import main
from looplab.records import results
from looplab.records.merge import merge, without
from looplab.records.validation import MAX_DEPTH
from looplab.scenarios.cases import load_cases
from looplab.views import headline, otel, report, scorecard
from tests.records.test_results import one_line, outcome, sample
from tests.tiers import scaled_examples

HOSTILE = settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture], derandomize=True)
#: Stands in for a value the JSON text gets in its place: arrays nested far past what `json` can parse.
DEEP_MARK = "\x00deep\x00"
DEEP_TEXT = "[" * 100_000 + "]" * 100_000
#: Stands in for an integer longer than Python converts from text (4300 digits).
LONG_MARK = "\x00long\x00"


@cache
def documents() -> dict[str, Any]:
    """Valid documents of every readable shape, as parsed JSON: schema 2 and the two unversioned ones."""
    run = sample().model_dump(mode="json")
    doc = results.build([outcome("handrolled", "vip-compound"), outcome("langgraph", "tight-budget", ran=False)])
    cells = [
        {"runner": "handrolled", "case": "vip-compound", "repeat": 1, "passed": False, "error": "hung"},
        {"runner": "handrolled", "case": "vip-compound", "repeat": 2, "passed": True, "stop_reason": "final_answer"},
    ]
    return {
        "schema 2": json.loads(results.to_json(doc)),
        "run --json of old": [run, run],
        "eval --json of old": {"summary": [], "cells": cells, "results": [run]},
    }


@cache
def other_document() -> str:
    """A valid document whose cells no broken one shares: what `merge` joins the broken one with."""
    return results.to_json(results.build([outcome("pydantic_ai", "vip-compound")]))


@pytest.fixture(scope="module", autouse=True)
def _one_real_run() -> None:
    """The real run the documents copy, made once before any test (it takes a few seconds)."""
    documents()
    other_document()


def places(value: Any, at: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """The path of every value in `value`, its own included."""
    found = [at]
    if isinstance(value, dict):
        for key, item in value.items():
            found += places(item, (*at, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += places(item, (*at, i))
    return found


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)


def nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


replacements = st.one_of(
    st.text(max_size=20).map(lambda t: ("string", t)),
    (st.integers() | st.floats() | st.integers(min_value=10**30)).map(lambda n: ("number", n)),
    st.just(("null", None)),
    st.booleans().map(lambda b: ("boolean", b)),
    json_values.map(lambda v: ("value", v)),
    st.just(("list", [])),
    st.just(("dict", {})),
    st.sampled_from([150, MAX_DEPTH, MAX_DEPTH + 1, 400]).map(lambda d: ("nested list", nested(d))),
    st.just(("nested 100000 deep", DEEP_MARK)),
    st.just(("5000 digits", LONG_MARK)),
    st.just(("delete", None)),
    st.just(("wrap in a list", None)),
)


@st.composite
def broken(draw: st.DrawFn) -> tuple[str, str]:
    """A valid document broken at one random place: (what was done, the file's text)."""
    shape = draw(st.sampled_from(sorted(documents())))
    doc = copy.deepcopy(documents()[shape])
    path = draw(st.sampled_from(places(doc)))
    how, value = draw(replacements)
    if not path:
        doc = [doc] if how == "wrap in a list" else value
    else:
        parent = doc
        for part in path[:-1]:
            parent = parent[part]
        if how == "delete":
            del parent[path[-1]]
        elif how == "wrap in a list":
            parent[path[-1]] = [parent[path[-1]]]
        else:
            parent[path[-1]] = value
    return f"{shape}: {how} at {list(path)}", as_text(doc)


#: Values of each JSON type a reader may well never have met: they still have the type the field wants.
odd_values = {
    str: st.sampled_from(["", "\ud800", "a\nb\r", "<script>&amp;", "x" * 5000, "🙂" * 50]) | st.text(max_size=10),
    int: st.sampled_from([0, 1, -1, 2**63 - 1, -(2**63)]) | st.integers(-5, 10**6),
    float: st.sampled_from([0.0, 5e-324, 1e9, 1e300, -0.0]) | st.floats(0, 1e9),
    bool: st.booleans(),
}


@st.composite
def odd_but_typed(draw: st.DrawFn) -> tuple[str, str]:
    """A valid document with one value replaced by an odd one of the same type, a list emptied or an item doubled."""
    shape = draw(st.sampled_from(sorted(documents())))
    doc = copy.deepcopy(documents()[shape])
    path = draw(st.sampled_from([p for p in places(doc) if p]))
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    old = parent[path[-1]]
    if isinstance(old, list):
        how = draw(st.sampled_from(["empty", "double"]))
        parent[path[-1]] = [] if how == "empty" or not old else [*old, *old]
    elif type(old) in odd_values:
        how = "odd value"
        parent[path[-1]] = draw(odd_values[type(old)])
    else:
        how = "unchanged"
    return f"{shape}: {how} at {list(path)}", as_text(doc)


def as_text(doc: Any) -> str:
    """`doc` as JSON, each mark replaced by the text it stands for."""
    return json.dumps(doc).replace(json.dumps(DEEP_MARK), DEEP_TEXT).replace(json.dumps(LONG_MARK), "1" * 5000)


def plotted_only(kind: str, case: str, series: Sequence[Any], *args: Any, **kwargs: Any) -> str:
    """A chart not drawn: only its values read as matplotlib reads them, as floats."""
    for line in series:
        [float(y) for y in line.ys]
    return ""


def refused_in_one_line(exc: ResultsError, source: Path) -> None:
    message = str(exc)
    assert "\n" not in message and "\r" not in message, message
    assert message.startswith(f"{source}: "), message


def every_reader(source: Path, tmp: Path, *, charts: bool = True) -> list[str]:
    """Each command's reading of `source`, through the functions the CLI calls; the commands that refused it.

    `charts=False` builds the report's content without drawing it (matplotlib and the template take over a second
    a report), but still reads every value a chart plots.
    """
    cases = list(load_cases().values())
    other = tmp / "other.json"
    other.write_text(other_document(), encoding="utf-8")
    quiet = Console(file=io.StringIO(), width=120)

    def report_() -> None:  # `looplab report`; `looplab otel` reads the document the same way
        doc = report.read_document(source)
        if charts:
            report.render_html(doc, source=str(source))
        else:  # the page's content without its drawing: the template compiles for a third of a second a call
            with mock.patch.object(report, "_chart", plotted_only):
                report.build(doc, source=str(source))
        headline.print_headline(doc, out=quiet)
        otel.export(doc.run_results(), tmp / "otel.json")

    def merge_() -> None:
        results.to_json(results.merge_files([source, other]))

    def resume() -> None:  # `eval --resume`: read, then the cells run again replaced, as `_eval` does
        earlier = results.read_for_resume(source, cases)
        now = results.build([outcome("pydantic_ai", "vip-compound")], cases=[load_cases()["vip-compound"]])
        rerun = {c.key for c in now.cells}
        results.to_json(merge([(str(source), without(earlier, rerun)), ("this run", now)]))

    def scorecard_() -> None:
        doc = results.read(source)
        runners = [r for r in ("handrolled", "langgraph", "pydantic_ai") if r in doc.runners] or ["handrolled"]
        scorecard.build(runners, scorecard.observed(doc), None, sources={})

    refused = []
    for name, read in {"report": report_, "merge": merge_, "resume": resume, "scorecard": scorecard_}.items():
        try:
            read()
        except ResultsError as exc:
            refused_in_one_line(exc, source)
            refused.append(name)
    return refused


@HOSTILE
@given(case=broken())
def test_every_reader_reads_a_broken_document_or_refuses_it_in_one_line(tmp_path: Path, case: tuple[str, str]) -> None:
    _, text = case
    source = tmp_path / "broken.json"
    source.write_text(text, encoding="utf-8")
    before = source.read_bytes()
    refused = every_reader(source, tmp_path, charts=False)
    event("refused" if refused else "read")
    assert source.read_bytes() == before


@settings(HOSTILE)
@given(case=odd_but_typed())
def test_every_reader_reads_odd_values_of_the_right_type_or_refuses_them_in_one_line(
    tmp_path: Path, case: tuple[str, str]
) -> None:
    _, text = case
    source = tmp_path / "odd.json"
    source.write_text(text, encoding="utf-8")
    refused = every_reader(source, tmp_path, charts=False)
    event("refused" if refused else "read")
    assert source.read_text(encoding="utf-8") == text


@pytest.mark.full  # draws a report's charts per example
@settings(HOSTILE, max_examples=scaled_examples(0.1))  # each example draws the charts: a tenth of the profile's
@given(case=odd_but_typed())
def test_the_report_draws_odd_values_of_the_right_type(tmp_path: Path, case: tuple[str, str]) -> None:
    source = tmp_path / "odd.json"
    source.write_text(case[1], encoding="utf-8")
    every_reader(source, tmp_path, charts=True)


def test_nesting_up_to_the_bound_is_read_merged_and_drawn_and_one_more_level_is_refused(tmp_path: Path) -> None:
    doc = _schema2()
    # The arguments sit 9 levels down (document, results, a run, trace, steps, a step, tool_calls, a call, args).
    doc["results"][0]["trace"]["steps"][0]["tool_calls"][0]["args"] = nested(MAX_DEPTH - 8)
    source = tmp_path / "deepest.json"
    source.write_text(as_text(doc), encoding="utf-8")
    assert every_reader(source, tmp_path) == []
    out = tmp_path / "merged.json"
    assert main(["merge", str(source), str(tmp_path / "other.json"), "-o", str(out)]) == 0  # written back: pydantic
    assert results.read(out).cells  # serializes it, json reads it again
    doc["results"][0]["trace"]["steps"][0]["tool_calls"][0]["args"] = nested(MAX_DEPTH - 7)
    source.write_text(as_text(doc), encoding="utf-8")
    with pytest.raises(ResultsError, match=r"\.args(\[0\])+…: arrays and objects nested more than 200 deep"):
        results.read(source)


@settings(HOSTILE)
@given(case=broken())
def test_merge_leaves_its_inputs_and_an_existing_target_as_they_were(
    tmp_path: Path, capsys, case: tuple[str, str]
) -> None:
    _, text = case
    source, other, out = tmp_path / "broken.json", tmp_path / "other.json", tmp_path / "merged.json"
    source.write_text(text, encoding="utf-8")
    other.write_text(other_document(), encoding="utf-8")
    out.write_bytes(b"the merge before\n")
    capsys.readouterr()
    code = main(["merge", str(source), str(other), "-o", str(out)])
    assert source.read_text(encoding="utf-8") == text and other.read_text(encoding="utf-8") == other_document()
    if code == 2:
        assert one_line(capsys.readouterr().err).startswith(f"{source}: ")
        assert out.read_bytes() == b"the merge before\n"
    else:
        assert code == 0 and results.read(out).cells


# --- the issue's files, named -----------------------------------------------------------------------


def _schema2() -> dict[str, Any]:
    return copy.deepcopy(documents()["schema 2"])


def _breaks() -> dict[str, tuple[Any, str]]:
    """Each file of the issue, and the field its refusal names."""
    run = sample().model_dump(mode="json")
    trace_x = _schema2()
    trace_x["results"][0]["trace"] = "x"
    step = _schema2()
    step["results"][0]["trace"]["steps"][0] = 7
    call = _schema2()
    call["results"][0]["trace"]["steps"][0]["tool_calls"] = [7]
    orphan = _schema2()
    orphan["results"][0]["trace"]["orphan_tool_calls"] = ["x"]
    deep_args = _schema2()
    deep_args["results"][0]["trace"]["steps"][0]["tool_calls"][0]["args"] = DEEP_MARK
    long = _schema2()
    long["results"][0]["totals"]["model_calls"] = LONG_MARK
    return {
        "trace is a string": (trace_x, "results[0].trace: "),
        "a step is a number": (step, "results[0].trace.steps[0]: "),
        "a tool call is a number": (call, "results[0].trace.steps[0].tool_calls[0]: "),
        "an orphan tool call is a string": (orphan, "results[0].trace.orphan_tool_calls[0]: "),
        "an old list of runs with a string trace": ([run, {**run, "trace": "x"}], "[1].trace: "),
        "an old list of runs with a numeric step": ([{**run, "trace": {"steps": [1]}}], "[0].trace.steps[0]: "),
        "an old eval document with a numeric cell": ({"results": [run], "cells": [3]}, "cells[0]: "),
        "an old list holding a number": ([run, 5], "([1] is a number, not a run)"),
        "arrays 100000 deep": (DEEP_MARK, ": [0][0][0][0][0][0][0][0][0][0][0][0]…: arrays and objects nested"),
        "arguments 100000 deep": (deep_args, "results[0].trace.steps[0].tool_calls[0].args[0][0][0][0]…: arrays"),
        "an integer of 5000 digits": (long, "not JSON (Exceeds the limit (4300 digits)"),
    }


ISSUE = (
    "trace is a string",
    "a step is a number",
    "a tool call is a number",
    "an orphan tool call is a string",
    "an old list of runs with a string trace",
    "an old list of runs with a numeric step",
    "an old eval document with a numeric cell",
    "an old list holding a number",
    "arrays 100000 deep",
    "arguments 100000 deep",
    "an integer of 5000 digits",
)


def _argv(command: str, source: Path, tmp: Path) -> list[str]:
    """`command` reading `source`, as a user types it; any file it would write already holds `kept`."""
    other, out = tmp / "other.json", tmp / f"{source.stem}.out"
    other.write_text(other_document(), encoding="utf-8")
    out.write_bytes(b"kept\n")
    return {
        "report": ["report", str(source), "-o", str(out)],
        "merge": ["merge", str(other), str(source), "-o", str(out)],
        "eval": ["eval", "--runner", "handrolled", "--case", "vip-compound", "--resume", str(source)],
        "scorecard": ["scorecard", "--results", str(source), "--caps", str(tmp / "no-caps.json")],
    }[command]


COMMANDS = ("report", "merge", "eval", "scorecard")


@pytest.mark.parametrize("name", ISSUE)
def test_each_file_of_the_issue_is_refused_in_one_line_naming_the_field(tmp_path: Path, capsys, name: str) -> None:
    doc, field = _breaks()[name]
    source = tmp_path / "results.json"
    source.write_text(as_text(doc), encoding="utf-8")
    before = source.read_bytes()
    assert sorted(every_reader(source, tmp_path)) == ["merge", "report", "resume", "scorecard"]
    with pytest.raises(ResultsError) as info:
        results.read(source)
    assert field in str(info.value), str(info.value)
    for command in COMMANDS:
        capsys.readouterr()
        assert main(_argv(command, source, tmp_path)) == 2
        assert one_line(capsys.readouterr().err) == str(info.value)
        assert source.read_bytes() == before and (tmp_path / "results.out").read_bytes() == b"kept\n"


@pytest.mark.parametrize(
    ("command", "name"),
    [
        ("report", "trace is a string"),
        ("merge", "an old list of runs with a numeric step"),
        ("eval", "arrays 100000 deep"),
        ("scorecard", "a tool call is a number"),
    ],
)
def test_the_looplab_command_refuses_it_in_one_line(tmp_path: Path, command: str, name: str) -> None:
    doc, field = _breaks()[name]
    source = tmp_path / "results.json"
    source.write_text(as_text(doc), encoding="utf-8")
    before = source.read_bytes()
    looplab = Path(sys.executable).with_name("looplab")
    done = subprocess.run(
        [str(looplab), *_argv(command, source, tmp_path)], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert done.returncode == 2 and done.stdout == "", done
    line = one_line(done.stderr)
    assert line.startswith(f"{source}: ") and field in line, line
    assert source.read_bytes() == before and (tmp_path / "results.out").read_bytes() == b"kept\n"


def _set(doc: Any, path: tuple[str | int, ...], value: Any) -> Any:
    for part in path[:-1]:
        doc = doc[part]
    doc[path[-1]] = value
    return doc


CALL = ("results", 0, "trace", "steps", 0, "tool_calls", 0)
MODEL_CALL = ("results", 0, "trace", "steps", 0, "model_call")


@pytest.mark.parametrize(
    ("path", "value", "says"),
    [
        ((*MODEL_CALL, "cost_usd"), "NaN", "results[0].trace.steps[0].model_call.cost_usd: nan is not a finite number"),
        (("results", 0, "totals", "wall_s"), "Infinity", "results[0].totals.wall_s: inf is not a finite number"),
        ((*MODEL_CALL, "input_tokens"), "1" + "0" * 400, "input_tokens: the integer is outside the 64-bit range"),
        ((*CALL, "duration_s"), "1e12", "tool_calls[0].duration_s: 1e+12 s is not a time on a run's clock"),
        ((*MODEL_CALL, "started_at"), "-1", "model_call.started_at: -1 s is not a time on a run's clock"),
        (("results", 0, "started_at"), '"9999-12-31T00:00:00Z"', "results[0].started_at: 9999-12-31T00:00:00+00:00 is"),
    ],
)
def test_a_number_no_run_can_hold_is_refused_naming_it(tmp_path: Path, path: tuple, value: str, says: str) -> None:
    # Each once crashed a reader: the report's charts (an integer past a float), `looplab otel` (nanoseconds past 64
    # bits), or read as nonsense (NaN dollars).
    doc = _schema2()
    _set(doc, path, "\x00value\x00")
    source = tmp_path / "results.json"
    source.write_text(json.dumps(doc).replace(json.dumps("\x00value\x00"), value), encoding="utf-8")
    assert sorted(every_reader(source, tmp_path)) == ["merge", "report", "resume", "scorecard"]
    with pytest.raises(ResultsError) as info:
        results.read(source)
    assert says in str(info.value), str(info.value)


def test_arguments_the_model_sent_may_hold_any_number(tmp_path: Path) -> None:
    doc = _schema2()
    _set(doc, (*CALL, "args"), {"target": "\x00value\x00"})
    source = tmp_path / "results.json"
    source.write_text(
        json.dumps(doc).replace(json.dumps("\x00value\x00"), "[NaN, -Infinity, 1e999, 1" + "0" * 400 + "]")
    )
    assert every_reader(source, tmp_path, charts=False) == []
