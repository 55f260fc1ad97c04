"""`looplab eval --shard I/N` and `--resume PATH` against the scripted model, joined by `looplab merge`.

One small matrix (two runners x two cases x two repeats) runs once whole and once as two shards for the module.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from looplab.adapters import registry
from looplab.cli import main
from looplab.records import results
from looplab.records.identity import CellKey
from looplab.records.merge import without
from looplab.run import schedule

MATRIX = ["--runner", "handrolled", "--runner", "langgraph", "--case", "vip-compound", "--case", "tight-budget"]
MATRIX += ["--repeat", "2", "--jobs", "1"]
#: What differs between two runs of the same cell: clocks, durations, and the scripted server's loopback port.
TIMINGS = {"wall_s", "latency_s", "started_at", "duration_s", "url", "wall_s_median", "wall_s_interval"}


def eval_(*extra: str) -> int:
    return main(["eval", *MATRIX, *extra])


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The whole matrix, and its two shards, each as `looplab eval --json` writes it."""
    out = tmp_path_factory.mktemp("shards")
    paths = {"full": out / "full.json", "1": out / "s1.json", "2": out / "s2.json"}
    assert eval_("--json", str(paths["full"])) == 0
    for i in ("1", "2"):
        assert eval_("--shard", f"{i}/2", "--json", str(paths[i])) == 0
    return paths


def minus_timings(value: Any) -> Any:
    """`value` without the fields that vary from run to run (and numbers of seconds inside text)."""
    if isinstance(value, dict):
        return {k: minus_timings(v) for k, v in value.items() if k not in TIMINGS}
    if isinstance(value, list):
        return [minus_timings(v) for v in value]
    if isinstance(value, str):
        return re.sub(r"\d+\.\d+s\b", "<s>", value)
    return value


def keys(path: Path) -> list[CellKey]:
    return [c.key for c in results.read(path).cells]


@pytest.fixture
def ran(monkeypatch) -> list[tuple[str, str]]:
    """The (runner, case) of every cell the next eval runs (with --jobs 1 each runs through `schedule.run_one`)."""
    seen: list[tuple[str, str]] = []
    real = schedule.run_one

    def counted(runner, case, *args, **kwargs):
        seen.append((runner, case.id))
        return real(runner, case, *args, **kwargs)

    monkeypatch.setattr(schedule, "run_one", counted)
    return seen


@pytest.mark.full  # evals of a matrix, whole and in shards
def test_the_two_shards_split_the_matrix(runs) -> None:
    one, two, full = keys(runs["1"]), keys(runs["2"]), keys(runs["full"])
    assert one and two, "a shard is empty: the test would prove nothing"
    assert sorted(one + two) == sorted(full) and not set(one) & set(two)
    # Each shard records the whole matrix it is a slice of: runners and cases with their hashes.
    for path in (runs["1"], runs["2"]):
        doc = results.read(path)
        assert doc.runners == ["handrolled", "langgraph"] and list(doc.cases) == ["vip-compound", "tight-budget"]


@pytest.mark.full  # evals of a matrix, whole and in shards
def test_merging_the_shards_equals_the_unsharded_eval_cell_for_cell_minus_timings(runs, tmp_path: Path) -> None:
    merged = tmp_path / "all.json"
    assert main(["merge", str(runs["1"]), str(runs["2"]), "-o", str(merged)]) == 0
    whole = json.loads(runs["full"].read_text())
    joined = json.loads(merged.read_text())
    assert [c["repeat"] for c in joined["cells"]] == [1, 1, 1, 1, 2, 2, 2, 2]  # the full matrix's repeat indices
    assert minus_timings(joined) == minus_timings(whole)


@pytest.mark.full  # evals of a matrix, whole and in shards
def test_resume_runs_only_the_cells_missing_and_keeps_the_others(runs, tmp_path: Path, ran) -> None:
    target = tmp_path / "resumed.json"
    shutil.copy(runs["1"], target)
    before = results.read(target)
    assert eval_("--resume", str(target)) == 0
    assert sorted(ran) == sorted((k.runner, k.case) for k in keys(runs["2"]))  # shard 1's cells did not run again
    after = results.read(target)
    kept = {c.key: after.results[c.result] for c in after.cells if c.result is not None}
    for cell in before.cells:  # kept as they were, timings and all: not run again
        assert kept[cell.key] == before.results[cell.result]
    assert minus_timings(json.loads(target.read_text())) == minus_timings(json.loads(runs["full"].read_text()))
    ran.clear()
    assert eval_("--resume", str(target)) == 0 and ran == []  # nothing left to run
    assert results.read(target).cells == after.cells


@pytest.mark.full  # evals of a matrix, whole and in shards
def test_resume_runs_a_cell_that_errored_again_and_replaces_it(runs, tmp_path: Path, ran) -> None:
    doc = results.read(runs["1"])
    lost = doc.cells[0]
    doc = without(doc, {lost.key})
    errored = lost.model_copy(update={"result": None, "passed": False, "stop_reason": None, "error": "hung"})
    doc.cells.append(errored)
    source = results.write(doc, tmp_path / "errored.json")
    out = tmp_path / "out.json"
    assert eval_("--shard", "1/2", "--resume", str(source), "--json", str(out)) == 0
    assert ran == [(lost.runner, lost.case)]
    again = [c for c in results.read(out).cells if c.key == lost.key]
    assert len(again) == 1 and again[0].error is None and again[0].result is not None
    assert json.loads(source.read_text()) == json.loads(results.to_json(doc))  # --json given: the source stays


@pytest.mark.full  # evals of a matrix, whole and in shards
def test_resume_refuses_a_case_that_changed_before_running_anything(runs, tmp_path: Path, ran, capsys) -> None:
    data = json.loads(runs["1"].read_text())
    data["cases"]["tight-budget"]["hash"] = "sha256:" + "0" * 64
    target = tmp_path / "changed.json"
    target.write_text(json.dumps(data), encoding="utf-8")
    assert eval_("--resume", str(target)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"looplab: {target}: case 'tight-budget' changed since"), err
    assert ran == []


def test_the_terminal_matrix_marks_the_cells_another_shard_runs(capsys) -> None:
    from looplab.records import summary
    from looplab.views import eval_tables

    ran = summary.Cell(
        runner="handrolled", case="vip-compound", repeat=1, passed=True, stop_reason="final_answer", failed_checks=[]
    )
    eval_tables.matrix_table([ran], ["handrolled", "langgraph"], ["vip-compound"])
    row = next(line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("vip-compound"))
    assert row.count("✓") == 1 and "–" in row  # langgraph's cell is another shard's: neither passed nor failed


@pytest.mark.full  # evals of a matrix, whole and in shards
def test_resume_refuses_a_broken_document_before_running_anything_and_leaves_it(runs, tmp_path, ran, capsys) -> None:
    data = json.loads(runs["1"].read_text())
    data["results"][0]["trace"]["steps"][0]["tool_calls"] = [3]  # a tool call that is a number
    target = tmp_path / "broken.json"
    target.write_text(json.dumps(data), encoding="utf-8")
    before = target.read_bytes()
    assert eval_("--resume", str(target)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"looplab: {target}: not a valid looplab results document: results[0].trace.steps[0]")
    assert ran == [] and target.read_bytes() == before


@given(
    runner=st.sampled_from(sorted(registry.RUNNERS)),
    case=st.text(min_size=1, max_size=12),
    repeat=st.integers(1, 5),
    api=st.sampled_from([None, "chat", "messages"]),
)
def test_a_cell_asked_for_without_stream_keeps_its_identity_and_shard(
    runner: str, case: str, repeat: int, api: str | None
) -> None:
    key = CellKey(runner, case, repeat, "scripted", api)
    assert key.canonical() == json.dumps([runner, case, repeat, "scripted", api], separators=(",", ":"))
    on, off = key._replace(stream=True), key._replace(stream=False)
    assert len({key.canonical(), on.canonical(), off.canonical()}) == 3  # each choice a cell of its own
