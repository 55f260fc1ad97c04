"""`looplab bench`: the shape of its tables and that what it measured is there. No timing is asserted."""

from __future__ import annotations

import json
import re
import shutil
import statistics
import subprocess
import sys
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from looplab.adapters import registry
from looplab.adapters.boundary import proxy as proxy_module
from looplab.adapters.contract.bare import BareTool
from looplab.adapters.contract.errors import ChildFailed, LooplabError
from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.trace import ModelCall, Step, Trace
from looplab.adapters.runners import _bare_child, ts_ai_sdk
from looplab.cli import main
from looplab.measure import bench, bench_probe, bench_report, bench_server, bench_stats, bench_tax, bench_timing
from looplab.records import measurements
from looplab.run import harness
from looplab.scenarios.cases import load_cases
from looplab.scenarios.scripted.probes import NeverStops
from looplab.scenarios.scripted.server import ScriptedModelServer
from looplab.shared_tools import Workspace, default_tools
from looplab.shared_tools import guard as guard_module
from looplab.shared_tools.records import ToolCallRecord
from tests.conftest import FIXTURE_REPO, SYSTEM_PROMPT, TASK
from tests.runs import ALL_RUNNERS, run_runner
from tests.tiers import by_tier

#: The runners under test that run in this process: each has a bare loop beside its adapter.
IN_PROCESS = [r for r in ALL_RUNNERS if not registry.RUNNERS[r].commands]
#: Where each wire API's requests go.
API_PATH = {"messages": "/v1/messages", "chat": "/v1/chat/completions", "responses": "/v1/responses"}


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """One short bench through the CLI: anthropic_tool_runner (handrolled is added as the baseline), one timed run."""
    path = tmp_path_factory.mktemp("bench") / "bench.json"
    code = main(
        [
            "bench",
            "--runner",
            "anthropic_tool_runner",
            "--repeat",
            "1",
            "--import-repeat",
            "1",
            "--json",
            str(path),
            "--markdown",
        ]
    )
    assert code == 0
    return {
        "result": measurements.BenchResult.model_validate_json(path.read_text()),
        "raw": json.loads(path.read_text()),
    }


@pytest.mark.full  # the bench through the CLI, with fresh interpreters and the server alone
def test_the_baseline_is_added_first_and_its_ratios_are_one(measured) -> None:
    result: measurements.BenchResult = measured["result"]
    assert [r.runner for r in result.runners] == ["handrolled", "anthropic_tool_runner"]
    base = result.runners[0]
    assert (base.ratio_overhead_median, base.ratio_overhead_p95, base.ratio_import, base.ratio_peak_rss) == (
        1.0,
        1.0,
        1.0,
        1.0,
    )
    # The baseline's ratios are its numbers over themselves; the other runner's show what they are ratios of.
    other = result.runners[1]
    for ratio, value, of_base in (
        (other.ratio_overhead_median, other.overhead_ms_median, base.overhead_ms_median),
        (other.ratio_overhead_p95, other.overhead_ms_p95, base.overhead_ms_p95),
        (other.ratio_import, other.import_s, base.import_s),
        (other.ratio_peak_rss, other.peak_rss_mb, base.peak_rss_mb),
    ):
        assert ratio == pytest.approx(value / of_base, abs=0.0051)  # rounded to two decimals
    assert result.case == "vip-compound" and result.repeat == 1 and result.cores >= 1


@pytest.mark.full  # the bench through the CLI, with fresh interpreters and the server alone
def test_every_measured_number_is_positive(measured) -> None:
    result: measurements.BenchResult = measured["result"]
    assert len(result.runners) == 2
    for r in result.runners:
        assert r.runs == 1 and r.stop_reasons == {"final_answer": 1}
        assert r.turns_median >= 2
        for value in (r.overhead_ms_median, r.overhead_ms_p95, r.first_turn_ms_median, r.model_ms_median):
            assert value > 0, r
        assert r.wall_ms_median > 0 and r.import_s > 0 and r.peak_rss_mb > 0
        assert r.ratio_overhead_median and r.ratio_import and r.ratio_peak_rss
    assert (
        result.server.requests == bench_server.SERVER_REQUESTS and 0 < result.server.median_ms <= result.server.p95_ms
    )
    assert result.recorded_model_ms_median > 0 and result.help_s_median > 0


@pytest.mark.full  # the bench through the CLI, with fresh interpreters and the server alone
def test_the_harness_tax_compares_the_same_loop(measured) -> None:
    result: measurements.BenchResult = measured["result"]
    # Both runners' adapters have a bare loop beside them, so both have a row, in the runners' order.
    assert [t.runner for t in result.harness_tax] == ["handrolled", "anthropic_tool_runner"]
    assert result.no_bare_loop == []
    for tax in result.harness_tax:
        assert tax.turns_bare == tax.turns_looplab  # the same investigation, bare or not
        assert tax.bare_wall_ms > tax.bare_outside_tools_ms > 0
        assert tax.looplab_wall_ms > tax.looplab_outside_tools_ms > 0


@pytest.mark.full  # the bench through the CLI, with fresh interpreters and the server alone
def test_tables_have_one_row_a_runner(measured, capsys) -> None:
    result: measurements.BenchResult = measured["result"]
    header, rows = bench_report.runner_rows(result)
    assert len(rows) == 2 and all(len(row) == len(header) for row in rows)
    assert rows[0][header.index("median ×hand")] == "1.00×"
    header, rows = bench_report.tax_rows(result)
    assert len(rows) == 2 and all(len(row) == len(header) for row in rows)
    md = bench_report.markdown(result).splitlines()
    assert md[0].startswith("| runner | version |") and md[1].startswith("|---|")
    assert sum(line.startswith("| handrolled |") for line in md) == 2
    bench_report.print_tables(result)
    out = capsys.readouterr().out
    assert "overhead per model turn" in out and "harness tax" in out and "scripted model server" in out


@pytest.mark.full  # the bench through the CLI, with fresh interpreters and the server alone
def test_a_runner_without_a_bare_loop_says_so(measured, capsys) -> None:
    result = measured["result"].model_copy(update={"no_bare_loop": ["ts_ai_sdk"]})
    header, rows = bench_report.tax_rows(result)
    assert rows[-1][:2] == ["ts_ai_sdk", bench_report.NO_BARE_LOOP] and len(rows[-1]) == len(header)
    bench_report.print_tables(result)
    assert bench_report.NO_BARE_LOOP in capsys.readouterr().out


@pytest.mark.full  # every in-process runner, bare and through looplab
def test_every_in_process_runner_has_a_harness_tax_row(monkeypatch) -> None:
    """`run_bench` over every in-process runner: one tax row each, from the same number of turns bare or not.

    What fresh interpreters, the server alone, `--help` and the merge measure is stubbed: only the runs here.
    """
    latency = ("requests", "median_ms", "p95_ms", "long_request_chars", "long_requests", "long_request_ms_median")
    monkeypatch.setattr(bench, "server_latency", lambda url: measurements.ServerLatency(**dict.fromkeys(latency, 1)))
    monkeypatch.setattr(bench, "probe_subprocess", lambda *a: {"import_s": 1.0, "peak_rss_mb": 1.0})
    monkeypatch.setattr(bench, "help_time", lambda: 1.0)
    monkeypatch.setattr(bench, "bench_merge", lambda: None)
    result = bench.run_bench(IN_PROCESS, load_cases()["vip-compound"], repeat=1, import_repeat=1, progress=False)
    runners = [r.runner for r in result.runners]
    assert [t.runner for t in result.harness_tax] == runners and result.no_bare_loop == []
    assert set(runners) == {"handrolled", *IN_PROCESS}
    for tax in result.harness_tax:
        assert tax.turns_bare == tax.turns_looplab == 5, tax
        # Each pair speaks the runner's first wire API; only the framework-less loop's ratio has no target.
        assert tax.api == registry.load(tax.runner).apis[0] and tax.ratio_targeted == (tax.runner != "handrolled")
        assert tax.via_proxy == bench_tax.via_model_proxy(tax.runner, tax.api)


class _Requests:
    """ASGI middleware in front of the scripted model: the path of every model request, as the server saw it."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    def wrap(self, app: Any) -> _Requests:
        self.app = app
        return self

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            self.paths.append(scope["path"])
        await self.app(scope, receive, send)


@pytest.mark.parametrize("runner", by_tier(IN_PROCESS))
def test_a_bare_loop_makes_the_requests_its_looplab_twin_makes(runner: str) -> None:
    """Counted at the server: on vip-compound both make 5 requests; at a cap of 2 the bare loop stops.

    The bare loop speaks the runner's first wire API and says truly how many requests it made. Its cap is
    the framework's own, unnormalized: at it, some frameworks make one wrap-up call (smolagents, DSPy).
    """
    counter = _Requests()
    loop = bench_timing.bare_loop(runner)
    assert loop is not None, f"{registry.RUNNERS[runner].module} has no bare_run"
    api = registry.load(runner).apis[0]
    with ScriptedModelServer(wrap=counter.wrap) as server:
        urls = {"openai": server.openai_base_url, "anthropic": server.anthropic_base_url}
        assert run_runner(runner, server, Limits(max_steps=12)).stop_reason == "final_answer"
        twin, counter.paths = counter.paths, []
        for max_steps, made in ((12, {5}), (2, {2, 3})):
            with Workspace(FIXTURE_REPO) as ws:
                watch = bench_timing.Stopwatch()
                tools = bench_timing.bare_tools(ws, default_tools(), watch)
                reported = loop(TASK, tools, urls, "scripted", max_steps, system_prompt=SYSTEM_PROMPT)
            assert reported == len(counter.paths) and reported in made and watch.spent > 0
            assert set(counter.paths) == {API_PATH[api]}
            counter.paths.clear()
    assert twin == [API_PATH[api]] * 5


#: The runners whose loop is a Node program: their bare loop is the same program, with none of looplab's boundaries.
IN_NODE = [r for r in ALL_RUNNERS if "node" in registry.RUNNERS[r].commands]


@pytest.mark.full  # installs the Node runners' packages from npm; a Node program each
@pytest.mark.skipif(shutil.which("node") is None, reason="the Node runners need Node.js 20 or newer")
@pytest.mark.parametrize("runner", IN_NODE)
def test_a_node_runners_bare_loop_makes_exactly_max_steps_model_calls(runner: str) -> None:
    """Against a model that never stops, the program's own cap at `max_steps` ends it after that many requests.

    Counted at the server as well, so the count the program's process reports is true; the tools ran, served
    plainly over MCP; the requests went straight to the model server on the runner's first wire API.
    """
    counter = _Requests()
    loop = bench_timing.bare_loop(runner)
    assert loop is not None
    api = registry.load(runner).apis[0]
    with ScriptedModelServer(NeverStops(), wrap=counter.wrap) as server, Workspace(FIXTURE_REPO) as ws:
        watch = bench_timing.Stopwatch()
        tools = bench_timing.bare_tools(ws, default_tools(), watch)
        made = loop(TASK, tools, server.base_urls, "scripted", 3, system_prompt=SYSTEM_PROMPT)
    assert made == len(counter.paths) == 3 and set(counter.paths) == {API_PATH[api]}
    assert watch.spent > 0


#: A stand-in for a runner's program: it writes what the contract gave it, then the outcome and count it is told to.
FAKE_PROGRAM = """
import json, os, sys
seen = {k: v for k, v in os.environ.items() if k.startswith("LOOPLAB_")}
open(sys.argv[1], "w").write(json.dumps(seen))
outcome, count = json.loads(sys.argv[2]), sys.argv[3]
if outcome is not None:
    open(os.environ["LOOPLAB_RESULT"], "w").write(json.dumps(outcome))
if count:
    open(os.environ["LOOPLAB_BARE_COUNT"], "w").write(count)
"""


def _fake_bare_run(tmp_path: Any, outcome: dict[str, Any] | None, count: str) -> tuple[int, dict[str, str]]:
    """`_bare_child.bare_run` of the AI SDK runner on `FAKE_PROGRAM`: what it returned and what the program saw."""
    seen = tmp_path / "seen.json"
    command = [sys.executable, "-c", FAKE_PROGRAM, str(seen), json.dumps(outcome), count]
    urls = {"openai": "http://127.0.0.1:9/v1", "anthropic": "http://127.0.0.1:9", "google": "http://127.0.0.1:9"}
    with Workspace(FIXTURE_REPO) as ws:
        tools = bench_timing.bare_tools(ws, default_tools(), bench_timing.Stopwatch())
        made = _bare_child.bare_run(ts_ai_sdk.RUNNER, lambda: command, TASK, tools, urls, "m", 4, system_prompt="p")
    return made, json.loads(seen.read_text())


def test_a_child_bare_loop_gets_the_contract_pointed_at_the_model_and_plain_tools(tmp_path) -> None:
    made, seen = _fake_bare_run(tmp_path, {"ended": "returned", "text": "done"}, "3")
    assert made == 3
    # the model server's own URLs (no proxy); the tool server's token and URL; the runner's first knob at max_steps
    assert seen["LOOPLAB_OPENAI_BASE_URL"] == "http://127.0.0.1:9/v1"
    assert seen["LOOPLAB_ANTHROPIC_BASE_URL"] == seen["LOOPLAB_GEMINI_BASE_URL"] == "http://127.0.0.1:9"
    assert seen["LOOPLAB_API"] == ts_ai_sdk.RUNNER.apis[0] and seen["LOOPLAB_MODEL"] == "m"
    assert (seen["LOOPLAB_CAP_KNOB"], seen["LOOPLAB_CAP"]) == (ts_ai_sdk.RUNNER.knobs[0], "4")
    assert len(seen["LOOPLAB_TOKEN"]) > 20 and seen["LOOPLAB_TOOLS_URL"].endswith("/mcp")
    assert (seen["LOOPLAB_TASK"], seen["LOOPLAB_SYSTEM_PROMPT"]) == (TASK, "p")


@pytest.mark.parametrize(
    ("outcome", "count", "error"),
    [
        ({"ended": "returned", "text": "done"}, "", "without a count of its model requests"),
        (None, "2", "without an outcome"),
        ({"ended": "raised", "exception": "ai.AI_APICallError", "message": "boom"}, "1", "ai.AI_APICallError: boom"),
    ],
)
def test_a_child_bare_loop_that_failed_says_so(tmp_path, outcome: Any, count: str, error: str) -> None:
    with pytest.raises(ChildFailed, match=re.escape(error)):
        _fake_bare_run(tmp_path, outcome, count)


def test_raising_at_the_cap_is_the_cap_not_a_failure(tmp_path) -> None:
    """The Agents SDK throws when its max turns are used up: with the count at the cap, the loop ended there."""
    raised = {"ended": "raised", "exception": "@openai/agents.MaxTurnsExceededError", "message": "max turns"}
    assert _fake_bare_run(tmp_path, raised, "4")[0] == 4


def test_the_plain_tool_stand_in_calls_the_function_and_answers_an_unknown_name_as_an_error() -> None:
    tools = _bare_child.PlainTools([BareTool("echo", "says it back", {"type": "object"}, lambda **kw: kw["text"])])
    assert tools.call("echo", {"text": "hi"}, "c1") == ("hi", False)
    answer = tools.call("nope", {}, "c2")
    assert answer.is_error and "nope" in answer.result


def test_external_has_no_bare_loop() -> None:
    """Its command is anyone's program: nothing of looplab's in it can count its model requests without a recorder."""
    assert bench_timing.bare_loop("external") is None


def test_the_guards_own_time_is_looplab_time_not_tool_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tax compares time outside the tool functions: the Guard's checks around a call are looplab's cost.

    A Guard made slow by 50 ms a call must show in the looplab run's time outside the tools (a bare loop has no
    Guard); were the Guard's time counted as tool time, it would vanish from the tax.
    """
    slow_s, parse = 0.05, guard_module.parse_arguments

    def slow_parse(*args: Any) -> Any:
        time.sleep(slow_s)
        return parse(*args)

    monkeypatch.setattr(guard_module, "parse_arguments", slow_parse)
    with harness.endpoint(harness.ModelChoice()) as where:
        sample = bench_timing.timed_run("handrolled", load_cases()["vip-compound"], where)
    assert sample.stop_reason == "final_answer" and sample.turns == 5  # one tool call in each of four turns
    assert sample.wall_s - sample.tools_s >= 4 * slow_s
    assert sample.tools_s > 0


def test_turn_overheads_subtract_the_model_call_and_the_turns_tools() -> None:
    """Windows run request to request (from 0 and to the end); the model call and the step's tool calls come off."""

    def call(i: int, started: float, latency: float) -> ModelCall:
        return ModelCall(
            index=i,
            endpoint="messages",
            url="u",
            status=200,
            streamed=False,
            request_bytes=1,
            response_bytes=1,
            input_tokens=1,
            output_tokens=1,
            finish_reason="tool_use",
            tool_calls_requested=[],
            started_at=started,
            latency_s=latency,
            cost_usd=0.0,
        )

    def tool(started: float, duration: float) -> ToolCallRecord:
        return ToolCallRecord(
            name="t",
            args={},
            outcome="ok",
            is_error=False,
            result="",
            result_preview="",
            result_chars=0,
            started_at=started,
            duration_s=duration,
        )

    trace = Trace(
        steps=[
            Step(index=1, model_call=call(1, 0.010, 0.002), tool_calls=[tool(0.013, 0.100)]),
            Step(index=2, model_call=call(2, 0.120, 0.003), tool_calls=[]),
        ]
    )
    first, second = bench_timing.turn_overheads(trace, end=0.130)
    assert first == pytest.approx(0.120 - 0.002 - 0.100)
    assert second == pytest.approx(0.130 - 0.120 - 0.003)


def test_bench_refuses_a_repeat_below_one(capsys) -> None:
    assert main(["bench", "--repeat", "0"]) == 2
    assert "--repeat" in capsys.readouterr().err


def test_peak_rss_reads_this_process() -> None:
    assert 10 < bench_probe.peak_rss_mb() < 100_000


def test_help_is_timed_without_a_console_script(tmp_path) -> None:
    """Where the interpreter has no `looplab` script beside it (a runner environment), `-m looplab` answers."""
    cmd = bench_probe.help_command(tmp_path / "python")
    assert cmd == [str(tmp_path / "python"), "-m", "looplab", "--help"]
    proc = subprocess.run([sys.executable, *cmd[1:]], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0 and "bench" in proc.stdout, proc.stderr[-500:]


def test_help_lists_report_and_bench(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "report" in out and "bench" in out


@pytest.mark.full  # the bench through the CLI, with fresh interpreters and the server alone
def test_bench_json_is_the_whole_record(measured) -> None:
    raw = measured["raw"]
    assert set(raw) >= {"runners", "harness_tax", "server", "help_s_median", "date", "python"}
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", raw["date"])


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(min_value=-0.5, max_value=0.5, allow_nan=False), min_size=2, max_size=40))
def test_the_tax_interval_holds_the_median_and_decides_only_when_it_clears_the_target(taxes: list[float]) -> None:
    low, high = bench_stats.median_interval(taxes)
    assert min(taxes) <= low <= statistics.median(taxes) <= high <= max(taxes)
    tax = measurements.HarnessTax(
        runner="r", turns_bare=1, turns_looplab=1, bare_wall_ms=1, looplab_wall_ms=1, tax_wall=0,
        bare_outside_tools_ms=1, looplab_outside_tools_ms=1, tax_outside_tools=statistics.median(taxes),
        added_ms_per_turn=0, tax_interval=(low, high), pairs=len(taxes), added_ms_interval=(0.0, 0.0),
    )  # fmt: skip
    if len(taxes) < measurements.MIN_VERDICT_PAIRS:  # however the few pairs fell
        assert tax.ratio_decision == "undecided"
        assert tax.verdict.startswith("undecided") and str(measurements.MIN_VERDICT_PAIRS) in tax.verdict
    elif high < measurements.TAX_TARGET:
        assert tax.ratio_decision == "under" and tax.verdict == "passes"
    elif low > measurements.TAX_TARGET:
        assert tax.ratio_decision == "over" and tax.verdict == "fails: over 5%"
    else:
        assert tax.ratio_decision == "undecided" and tax.verdict == "undecided: more pairs needed (5%)"
    assert bench_stats.median_interval(taxes[:1]) is None


# --- the verdict against the targets, from constructed pairs --------------------------------------------------


def pairs(
    bare_ms: float, added_ms_per_turn: float, *, n: int = 40, spread_ms: float = 0.05, turns: int = 5
) -> tuple[list[bench_timing.BareSample], list[bench_timing.Sample]]:
    """`n` pairs whose bare runs take `bare_ms` outside 100 ms of tools and whose looplab runs add
    `added_ms_per_turn` a turn, each pair's difference off by up to `spread_ms` a turn (evenly spread, so the
    median is the given one and the interval about as wide as the spread)."""
    bare, looplab = [], []
    for i in range(n):
        jitter = spread_ms * (2 * i / (n - 1) - 1) if n > 1 else 0.0
        added_s = (added_ms_per_turn + jitter) * turns / 1000
        bare.append(bench_timing.BareSample(wall_s=0.1 + bare_ms / 1000, tools_s=0.1, turns=turns))
        wall = 0.1 + bare_ms / 1000 + added_s
        looplab.append(
            bench_timing.Sample(
                wall_s=wall, tools_s=0.1, model_s=0.01, turns=turns, turn_overheads_s=[], stop_reason="ok"
            )
        )
    return bare, looplab


@pytest.mark.parametrize(
    ("runner", "api", "bare_ms", "added", "verdict"),
    [
        # 0.1 ms a turn on 20 ms: 2.5 %; both targets met.
        ("langchain", "chat", 20.0, 0.10, "passes"),
        # 0.4 ms a turn on 100 ms: 2 %, but over the in-process 0.25 ms.
        ("langchain", "chat", 100.0, 0.40, "fails: over 0.25 ms/turn"),
        # The same through the model proxy: within its 0.5 ms.
        ("openai_agents", "messages", 100.0, 0.40, "passes"),
        ("openai_agents", "messages", 100.0, 0.70, "fails: over 0.5 ms/turn"),
        # 0.1 ms a turn on 4 ms: 12.5 %: the ratio fails a framework's loop ...
        ("langchain", "chat", 4.0, 0.10, "fails: over 5%"),
        # ... and is only reported for the framework-less loop.
        ("handrolled", "messages", 4.0, 0.10, "passes"),
        ("handrolled", "messages", 4.0, 0.40, "fails: over 0.25 ms/turn"),
        ("langchain", "chat", 4.0, 0.40, "fails: over 0.25 ms/turn and 5%"),
        # The interval (0.20 .. 0.30) spans the target: more pairs needed, and which target says so.
        ("langchain", "chat", 100.0, 0.25 + 0.001, "undecided: more pairs needed (0.25 ms/turn)"),
    ],
)
def test_the_verdict_names_the_target_a_runner_misses(
    runner: str, api: str, bare_ms: float, added: float, verdict: str
) -> None:
    tax = bench_tax.harness_tax(runner, api, *pairs(bare_ms, added))
    assert tax.verdict == verdict, tax
    assert tax.added_ms_per_turn == pytest.approx(added, abs=0.002)
    low, high = tax.added_ms_interval
    assert low <= tax.added_ms_per_turn <= high
    assert tax.via_proxy == (runner == "openai_agents") and tax.turn_target_ms == (0.5 if tax.via_proxy else 0.25)
    assert tax.ratio_targeted == (runner != "handrolled")
    assert (tax.ratio_decision is None) == (runner == "handrolled")


def test_a_target_exactly_met_passes_and_few_pairs_decide_nothing() -> None:
    """At most 0.25 ms: an interval whose top is the target meets it; under MIN_VERDICT_PAIRS nothing is decided,
    however clear the pairs."""
    tax = bench_tax.harness_tax("langchain", "chat", *pairs(100.0, 0.25, spread_ms=0.0))
    assert tax.added_ms_interval == (0.25, 0.25) and tax.verdict == "passes"
    few = measurements.MIN_VERDICT_PAIRS - 1
    for added in (0.1, 5.0):
        tax = bench_tax.harness_tax("langchain", "chat", *pairs(100.0, added, n=few))
        assert tax.turn_decision == "undecided" and tax.ratio_decision == "undecided"
        assert tax.verdict == f"undecided: {few} pairs, a verdict needs {measurements.MIN_VERDICT_PAIRS}"


def test_the_tables_show_both_targets_and_which_one_failed() -> None:
    result = bench_result_with(
        [
            bench_tax.harness_tax("handrolled", "messages", *pairs(4.0, 0.1)),
            bench_tax.harness_tax("openai_agents", "messages", *pairs(100.0, 0.7)),
        ]
    )
    header, rows = bench_report.tax_rows(result)
    row = dict(zip(header, rows[0], strict=True))
    assert row["tax target"] == "not targeted" and row["target ms/turn"] == "0.25" and row["verdict"] == "passes"
    assert row["api"] == "messages" and row["added ms/turn"] == "+0.10"
    row = dict(zip(header, rows[1], strict=True))
    assert row["tax target"] == "5%" and row["target ms/turn"] == "0.5 (proxy)"
    assert row["verdict"] == "fails: over 0.5 ms/turn"
    assert "fails: over 0.5 ms/turn" in bench_report.markdown(result)
    # What a runner's looplab run does beyond its bare loop, and its cost, is said where that runner is measured.
    assert not any("include_usage" in line for line in bench_report.footer(result))
    result.harness_tax.append(bench_tax.harness_tax("llamaindex", "chat", *pairs(60.0, 0.6)))
    assert any("include_usage" in line and "0.35 ms a reply" in line for line in bench_report.footer(result))


def test_a_bench_json_keeps_its_verdict_and_an_older_one_still_reads() -> None:
    """The targets and verdict are written with the numbers; a document written before them still validates."""
    tax = bench_tax.harness_tax("openai_agents", "messages", *pairs(100.0, 0.7))
    raw = json.loads(tax.model_dump_json())
    assert raw["verdict"] == "fails: over 0.5 ms/turn" and raw["turn_target_ms"] == 0.5
    assert measurements.HarnessTax.model_validate(raw) == tax
    older = {k: v for k, v in raw.items() if k not in ("added_ms_interval", "api", "via_proxy", "ratio_targeted")}
    older = measurements.HarnessTax.model_validate({k: v for k, v in older.items() if k not in ("verdict",)})
    assert older.turn_target_ms == 0.25 and older.verdict.startswith("undecided")  # no interval for the ms: open


def bench_result_with(taxes: list[measurements.HarnessTax]) -> measurements.BenchResult:
    """A bench result holding `taxes` and placeholder numbers for the rest."""
    latency = ("requests", "median_ms", "p95_ms", "long_request_chars", "long_requests", "long_request_ms_median")
    return measurements.BenchResult(
        date="2026-01-01", case="vip-compound", repeat=40, import_repeat=1, python="3.11", platform="p", cores=2,
        runners=[], harness_tax=taxes, server=measurements.ServerLatency(**dict.fromkeys(latency, 1)),
        recorded_model_ms_median=1.0, help_s_median=0.1,
    )  # fmt: skip


class _ProxyCount:
    """How many times a run entered a `ModelProxy`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entered = 0
        enter = proxy_module.ModelProxy.__enter__

        def counting(proxy: proxy_module.ModelProxy) -> proxy_module.ModelProxy:
            self.entered += 1
            return enter(proxy)

        monkeypatch.setattr(proxy_module.ModelProxy, "__enter__", counting)


@pytest.mark.full  # every runner on every wire API it speaks (LiteLLM's import alone takes seconds)
@pytest.mark.parametrize("runner", [r for r in ALL_RUNNERS if r != "external"])
def test_the_model_proxy_declaration_is_what_the_runs_do(runner: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`VIA_MODEL_PROXY` against the runs: on every wire API the runner speaks, one model call, counted proxies."""
    count = _ProxyCount(monkeypatch)
    with ScriptedModelServer() as server:
        for api in registry.load(runner).apis:
            count.entered = 0
            result = run_runner(runner, server, Limits(max_steps=1), api=api)
            assert result.totals.model_calls == 1, (api, result.stop_reason)
            assert (count.entered > 0) == bench_tax.via_model_proxy(runner, api), api


def test_bench_refuses_a_case_its_bare_loops_cannot_run_alike() -> None:
    for case_id in ("sloppy-calls", "parallel-reads"):  # a persona header; faults on the tools
        with pytest.raises(LooplabError, match=case_id):
            bench.run_bench(["handrolled"], load_cases()[case_id], repeat=1, import_repeat=1, progress=False)
