"""The results document (`looplab.records.results`): round trip, validation, case hashes, shards, merge, refusals.

The documents here are built from one real run (handrolled on vip-compound against the scripted
model) copied into generated cells, so nothing but that one run touches a model.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from looplab.adapters.contract.errors import ResultsError
from looplab.adapters.contract.limits import StopReason
from looplab.adapters.contract.result import RunResult
from looplab.cli import main
from looplab.measure import bench_merge
from looplab.records import results
from looplab.records.document import SCHEMA, UNVERSIONED, CaseRecord
from looplab.records.environment import Environment
from looplab.records.identity import CellKey, case_hash, shard_of
from looplab.records.outcome import RunOutcome
from looplab.run import matrix
from looplab.scenarios.cases import CheckResult, load_cases
from looplab.scenarios.scripted.server import ScriptedModelServer
from looplab.views.runs import runs_from
from tests.runs import run_runner

CHECKS = settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture], derandomize=True)
RUNNERS = ("handrolled", "langgraph", "pydantic_ai")
CASES = ("vip-compound", "tight-budget", "slow-tests")


@cache
def sample() -> RunResult:
    """One real run, copied into every generated cell."""
    with ScriptedModelServer() as server:
        result = run_runner("handrolled", server)
    result.case = "vip-compound"
    return result


def outcome(runner: str, case: str, ran: bool = True, answer: str = "", failed: tuple[str, ...] = ()) -> RunOutcome:
    """An outcome of `runner` on `case`: a copy of the sample run, or an error without a result."""
    if not ran:
        return RunOutcome(runner, case, error="hung: abandoned")
    result = sample().model_copy(update={"runner": runner, "case": case, "answer": answer})
    return RunOutcome(runner, case, result, [CheckResult(name=n, passed=False, detail="") for n in failed])


outcomes_st = st.lists(
    st.builds(
        outcome,
        st.sampled_from(RUNNERS),
        st.sampled_from(CASES),
        st.booleans(),
        st.text(max_size=30),
        st.lists(st.text(min_size=1, max_size=10), max_size=2).map(tuple),
    ),
    max_size=8,
)
models_st = st.sampled_from([("scripted", None), ("openai:gpt-4.1", "responses"), ("anthropic:claude-x", "messages")])


def one_line(err: str) -> str:
    """The single `looplab: ...` line on stderr, without its prefix and newline."""
    assert err.startswith("looplab: ") and err.endswith("\n") and err.count("\n") == 1, err
    return err[len("looplab: ") : -1]


def write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


# --- round trip and validation ---------------------------------------------------------------------


@CHECKS
@given(outcomes=outcomes_st, model=models_st)
def test_a_document_round_trips_through_write_read_and_validate(tmp_path: Path, outcomes, model) -> None:
    doc = results.build(outcomes, model=model[0], api=model[1])
    path = results.write(doc, tmp_path / "doc.json")
    back = results.read(path)
    assert json.loads(path.read_text())["looplab_schema"] == SCHEMA
    assert back.model_dump() == doc.model_dump()
    assert results.to_json(back) == results.to_json(doc)
    # Every cell finds its own run again, in order, with its checks.
    assert [(c.runner, c.case, c.passed, c.failed_checks) for c in back.cells] == [
        (o.runner, o.case, o.passed, [ch.name for ch in o.checks]) for o in outcomes
    ]
    for cell, o in zip(back.cells, outcomes, strict=True):
        run = back.result_of(cell)
        assert (run is None) == (o.result is None)
        assert run is None or (run.runner, run.case, run.answer) == (o.runner, o.case, o.result.answer)
        assert (cell.model, cell.api) == model


def test_a_document_records_its_environment_and_each_case_hash() -> None:
    doc = results.build([outcome("handrolled", "vip-compound"), outcome("langgraph", "tight-budget", ran=False)])
    (env,) = doc.environments.values()
    assert env.python.count(".") == 2 and env.platform
    assert env.packages.get("anthropic") and env.packages.get("langgraph")  # the frameworks, with their versions
    assert all(c.environment == env.id for c in doc.cells)
    suite = load_cases()
    assert doc.cases == {
        cid: CaseRecord(hash=case_hash(suite[cid]), description=suite[cid].description)
        for cid in ("vip-compound", "tight-budget")
    }
    assert doc.cells[0].runner_version == sample().runner_version and doc.cells[1].runner_version is None


def _corrupt(data: dict[str, Any], how: str) -> None:
    if how == "result out of range":
        data["cells"][0]["result"] = 99
    elif how == "unknown case":
        data["cells"][0]["case"] = "no-such-case"
    elif how == "unknown environment":
        data["cells"][0]["environment"] = "0123456789abcdef"
    elif how == "result without a cell":
        data["results"].append(data["results"][0])
    elif how == "result of another cell":
        data["cells"][0]["runner"] = "langgraph"
    elif how == "not a run":
        data["results"][0]["stop_reason"] = "bored"
    elif how == "another schema":
        data["looplab_schema"] = SCHEMA + 1


@pytest.mark.parametrize(
    ("how", "says"),
    [
        ("result out of range", "cells[0].result: 99 is out of range"),
        ("unknown case", "cells[0].case: \"no-such-case\" is not in 'cases'"),
        ("unknown environment", "cells[0].environment: \"0123456789abcdef\" is not in 'environments'"),
        ("result without a cell", "results[1]: 1 result(s) belong to no cell"),
        (
            "result of another cell",
            'cells[0].result: results[0] is "handrolled" on "vip-compound", the cell "langgraph"',
        ),
        ("not a run", "results[0].stop_reason: Input should be 'final_answer'"),
        ("another schema", f"results schema {SCHEMA + 1}: this looplab reads schema {SCHEMA} (and 2,"),
    ],
)
def test_an_inconsistent_document_is_refused_with_one_line_naming_it(tmp_path: Path, how: str, says: str) -> None:
    data = json.loads(results.to_json(results.build([outcome("handrolled", "vip-compound")])))
    _corrupt(data, how)
    path = write_json(tmp_path / "bad.json", data)
    with pytest.raises(ResultsError) as info:
        results.read(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{path}: ") and says in message, message


def test_an_unversioned_eval_document_reads_as_schema_1_with_its_cells_paired() -> None:
    run = sample().model_dump(mode="json")
    old = {
        "summary": [],
        "cells": [
            {"runner": "handrolled", "case": "vip-compound", "repeat": 1, "passed": False, "stop_reason": None,
             "failed_checks": [], "error": "hung"},
            {"runner": "handrolled", "case": "vip-compound", "repeat": 2, "passed": True,
             "stop_reason": "final_answer", "failed_checks": []},
        ],
        "results": [run],
    }  # fmt: skip
    doc = results.load(old)
    assert doc.looplab_schema == UNVERSIONED
    assert [(c.repeat, c.result, c.error) for c in doc.cells] == [(1, None, "hung"), (2, 0, None)]
    assert [v.result is not None for v in runs_from(old)] == [False, True]
    listed = results.load([run, run])  # `looplab run --json` of old: no checks, repeats counted
    assert [(c.repeat, c.passed) for c in listed.cells] == [(1, None), (2, None)]


# --- case hashes -----------------------------------------------------------------------------------


@CHECKS
@given(extra=st.binary(min_size=1, max_size=50))
def test_a_case_hash_changes_with_any_fixture_byte_and_ignores_caches(tmp_path: Path, extra: bytes) -> None:
    base = load_cases()["vip-compound"]
    repo = tmp_path / "repo"
    shutil.rmtree(repo, ignore_errors=True)
    shutil.copytree(base.repo_path, repo)
    case = base.model_copy(update={"repo": str(repo)})  # an absolute repo path wins the join
    before = case_hash(case)
    (repo / "__pycache__").mkdir(exist_ok=True)
    (repo / "__pycache__" / "x.pyc").write_bytes(extra)  # not a file a run sees
    assert case_hash(case) == before
    target = repo / "billing" / "discount.py"
    target.write_bytes(target.read_bytes() + extra)
    assert case_hash(case) != before
    assert case_hash(case.model_copy(update={"task": case.task + "!"})) != before


# --- shards ----------------------------------------------------------------------------------------


names_st = st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=4, unique=True)


@CHECKS
@given(runners=names_st, case_ids=names_st, repeat=st.integers(1, 3), shards=st.integers(1, 12), model=models_st)
def test_shards_partition_the_matrix(runners, case_ids, repeat, shards, model) -> None:
    cases = [SimpleNamespace(id=c, runs_on=lambda runner: True) for c in case_ids]  # a name may be a real runner's
    full = matrix.plan(runners, cases, repeat)

    def shard(i: int):
        return lambda r, c, k: shard_of(CellKey(r, c, k, *model), shards, runners) == i

    slices = [matrix.plan(runners, cases, repeat, shard(i)) for i in range(1, shards + 1)]
    seen = Counter((r, c.id, k) for part in slices for r, c, k in part)
    assert seen == Counter((r, c.id, k) for r, c, k in full)  # every cell once: none lost, none twice
    assert all(n == 1 for n in seen.values())
    for part in slices:  # each slice keeps the matrix order
        assert part == [cell for cell in full if cell in part]


def test_a_cells_shard_is_pinned_so_every_machine_agrees() -> None:
    # From sha256 of identities only: these values must not change between releases or machines.
    assert CellKey("handrolled", "vip-compound", 1, "scripted", None).canonical() == (
        '["handrolled","vip-compound",1,"scripted",null]'
    )
    key = CellKey("handrolled", "vip-compound", 1, "scripted", None)
    assert shard_of(key, 1000, ["handrolled", "langgraph"]) == 601
    key = CellKey("langgraph", "tight-budget", 2, "openai:gpt-4.1", "responses")
    assert shard_of(key, 7, ["handrolled", "langgraph", "pydantic_ai"]) == 5


@CHECKS
@given(runners=names_st, case_ids=names_st, repeat=st.integers(1, 3), shards=st.integers(1, 12), model=models_st)
def test_every_shard_gets_its_share_of_each_case_within_one_cell(runners, case_ids, repeat, shards, model) -> None:
    # A case's cells cost about the same whatever the runner: dealt evenly, the shards take about as long.
    for case in case_ids:
        for k in range(1, repeat + 1):
            counts = Counter(shard_of(CellKey(r, case, k, *model), shards, runners) for r in runners)
            share = [counts.get(i, 0) for i in range(1, shards + 1)]
            assert max(share) - min(share) <= 1


@pytest.mark.parametrize("value", ["0/2", "3/2", "1/0", "a/b", "2", "-1/3", "1/2/3"])
def test_a_bad_shard_is_refused_in_one_line(value: str, capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["eval", "--runner", "handrolled", f"--shard={value}"])  # = : a leading minus stays the value
    assert stop.value.code == 2
    line = one_line(capsys.readouterr().err)
    assert "--shard" in line and "1 <= I <= N" in line and repr(value) in line


# --- merge -----------------------------------------------------------------------------------------


def _docs(tmp_path: Path) -> tuple[Path, Path]:
    """Two documents with disjoint cells: handrolled in a, langgraph in b."""
    a = results.write(results.build([outcome("handrolled", "vip-compound")]), tmp_path / "a.json")
    b = results.write(
        results.build([outcome("langgraph", "vip-compound"), outcome("langgraph", "tight-budget", ran=False)]),
        tmp_path / "b.json",
    )
    return a, b


def test_merge_joins_documents_and_writes_its_report(tmp_path: Path, capsys) -> None:
    a, b = _docs(tmp_path)
    out, html = tmp_path / "all.json", tmp_path / "all.html"
    assert main(["merge", str(b), str(a), "-o", str(out), "--html", str(html)]) == 0
    merged = results.read(out)
    # Matrix order whatever the files' order: repeat, then case (as the documents list them), then runner.
    assert [(c.runner, c.case) for c in merged.cells] == [
        ("langgraph", "vip-compound"),
        ("handrolled", "vip-compound"),
        ("langgraph", "tight-budget"),
    ]
    assert [r["runner"] for r in merged.results] == ["langgraph", "handrolled"]
    assert {s["runner"]: s["runs"] for s in merged.summary} == {"langgraph": 2, "handrolled": 1}
    assert "<html" in html.read_text(encoding="utf-8")


def test_merge_keeps_two_versions_of_a_runner_and_both_environments(tmp_path: Path) -> None:
    a, _ = _docs(tmp_path)
    other = json.loads(a.read_text())
    (env_id, env), = other["environments"].items()  # fmt: skip
    env = {**env, "python": "3.99.0", "packages": {**env["packages"], "anthropic": "9.9.9"}}
    new_id = Environment.model_validate(env).id
    other["environments"] = {new_id: env}
    other["cells"][0].update(environment=new_id, runner_version="anthropic 9.9.9")
    other["results"][0]["runner_version"] = "anthropic 9.9.9"
    b = write_json(tmp_path / "other-version.json", other)
    merged = results.merge_files([a, b])
    assert [c.runner_version for c in merged.cells] == [sample().runner_version, "anthropic 9.9.9"]
    assert set(merged.environments) == {env_id, new_id}
    assert [merged.environments[c.environment].python for c in merged.cells][1] == "3.99.0"


@CHECKS
@given(digest=st.text("0123456789abcdef", min_size=64, max_size=64))
def test_merge_refuses_one_case_id_with_two_contents_in_one_line(tmp_path: Path, capsys, digest: str) -> None:
    a, b = _docs(tmp_path)
    changed = json.loads(b.read_text())
    changed["cases"]["vip-compound"]["hash"] = "sha256:" + digest
    write_json(b, changed)
    out = tmp_path / "all.json"
    out.unlink(missing_ok=True)
    assert main(["merge", str(a), str(b), "-o", str(out)]) == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith(f"{b}: case 'vip-compound' is not the one in {a} (content hash {digest[:12]}")
    assert not out.exists()


@pytest.mark.parametrize("old", [[], {"results": []}, {"summary": [], "cells": [], "results": []}])
def test_merge_refuses_another_schema_in_one_line(tmp_path: Path, capsys, old: Any) -> None:
    a, _ = _docs(tmp_path)
    legacy = write_json(tmp_path / "legacy.json", old)
    future = write_json(tmp_path / "future.json", {**json.loads(a.read_text()), "looplab_schema": SCHEMA + 1})
    out = tmp_path / "all.json"
    assert main(["merge", str(a), str(legacy), "-o", str(out)]) == 2
    assert one_line(capsys.readouterr().err).startswith(f"{legacy}: results schema 1 (unversioned")
    assert main(["merge", str(future), str(a), "-o", str(out)]) == 2
    assert one_line(capsys.readouterr().err).startswith(f"{future}: results schema {SCHEMA + 1}: ")
    assert not out.exists()


def test_merge_refuses_a_cell_twice_in_one_line(tmp_path: Path, capsys) -> None:
    a, _ = _docs(tmp_path)
    again = tmp_path / "again.json"
    shutil.copy(a, again)
    assert main(["merge", str(a), str(again), "-o", str(tmp_path / "all.json")]) == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith(f"{again}: cell handrolled on vip-compound, repeat 1, model scripted")
    assert line.endswith(f"is also in {a}: merge each document once")


def test_merge_without_an_output_is_refused_in_one_line(tmp_path: Path, capsys) -> None:
    a, b = _docs(tmp_path)
    assert main(["merge", str(a), str(b)]) == 2
    assert one_line(capsys.readouterr().err).startswith("merge needs -o PATH")


def test_the_merge_benchmark_merges_the_full_matrix() -> None:
    bench = bench_merge.bench_merge(shards=3, sample=sample(), repeat=1)
    assert bench.cells == bench.runners * bench.cases == bench.runners * len(load_cases())
    assert bench.seconds > 0 and "3 shard documents of the full matrix" in bench_merge.bench_line(bench)


@pytest.mark.parametrize("old", [2, 3])
def test_an_older_versioned_document_reads_and_merges_as_the_current_schema(tmp_path: Path, old: int) -> None:
    # Schema 3 only adds values (the `cancelled` stop and tool outcome, `limits.max_tokens`) and 4 the summary's
    # intervals over repeats: an older file reads as it is, its summary derived again, and is written back as 4.
    data = json.loads(results.to_json(results.build([outcome("handrolled", "vip-compound")])))
    earlier = write_json(tmp_path / "earlier.json", {**data, "looplab_schema": old})
    doc = results.read(earlier)
    assert doc.looplab_schema == SCHEMA == 4 and len(doc.results) == 1
    other = write_json(
        tmp_path / "other.json", json.loads(results.to_json(results.build([outcome("langgraph", "vip-compound")])))
    )
    merged = tmp_path / "merged.json"
    assert main(["merge", str(earlier), str(other), "-o", str(merged)]) == 0
    assert json.loads(merged.read_text())["looplab_schema"] == 4


def test_a_schema_3_document_with_repeats_gets_its_intervals_on_reading(tmp_path: Path) -> None:
    """A summary written before the intervals is derived again from the cells: the repeats it holds give them."""
    runs = [outcome("handrolled", "vip-compound", failed=("answer names the bug",) * (k % 2)) for k in range(4)]
    for k, run in enumerate(runs, 1):
        run.repeat = k
    data = json.loads(results.to_json(results.build(runs)))
    old_summary = [
        {k: v for k, v in s.items() if not k.endswith("_interval") and k not in ("repeats",)} for s in data["summary"]
    ]
    three = write_json(tmp_path / "three.json", {**data, "looplab_schema": 3, "summary": old_summary})
    [summary] = results.read(three).summary
    assert summary["repeats"] == 4 and summary["passed"] == 2
    assert summary["completion_interval"] == pytest.approx([0.15, 0.85], abs=0.01)  # Wilson, 2 of 4


def test_a_cancelled_run_with_a_token_budget_round_trips() -> None:
    run = sample().model_copy(update={"stop_reason": StopReason.CANCELLED, "answer": None})
    run.limits = run.limits.model_copy(update={"max_tokens": 3000}) if run.limits else None
    doc = results.build([RunOutcome(run.runner, run.case, run)])
    [again] = results.load(json.loads(results.to_json(doc))).run_results()
    assert (again.stop_reason, again.limits) == ("cancelled", run.limits)
