from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from looplab.adapters import registry
from looplab.adapters.contract.declaration import Declaration
from looplab.adapters.contract.errors import MissingExtra
from looplab.cli import main

FRAMEWORKS = (
    "anthropic",
    "openai",
    "langchain",
    "langchain_core",
    "langgraph",
    "agents",
    "pydantic_ai",
    "httpx",
    "httpx2",
)


def test_help_imports_no_framework() -> None:
    code = (
        "import sys\nfrom looplab.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        f"print('LOADED', sorted(m for m in {FRAMEWORKS!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "usage: looplab" in out
    assert out.strip().splitlines()[-1] == "LOADED []"


def test_run_prints_the_investigation_and_writes_json(tmp_path: Path) -> None:
    json_path = tmp_path / "results.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "looplab",
            "run",
            "--runner",
            "handrolled",
            "--case",
            "vip-compound",
            "--steps",
            "--json",
            str(json_path),
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    for line in (
        "run_tests(target='tests/test_invoice.py::test_invoice_total')",
        "search_code(query='def apply_discount')",
        "read_file(path='billing/discount.py')",
        "stop: final_answer",
    ):
        assert line in proc.stdout
    [record] = json.loads(json_path.read_text())["results"]
    assert (record["runner"], record["case"], record["stop_reason"]) == ("handrolled", "vip-compound", "final_answer")
    assert "apply_discount" in record["answer"] and "billing/discount.py" in record["answer"]
    traces = (tmp_path / "out" / "traces.jsonl").read_text().splitlines()
    assert len(traces) == record["totals"]["model_calls"] and json.loads(traces[0])["runner"] == "handrolled"


def test_runners_lists_state_and_extra(capsys) -> None:
    assert main(["runners"]) == 0
    out = capsys.readouterr().out
    words = " ".join(out.split())
    assert "handrolled installed anthropic" in words and "pip install 'looplab[EXTRA]'" in words
    assert "mcp + Node.js 20+" in words  # what pip cannot install, for the runners in node


#: A runner whose framework is not installed.
GHOST = Declaration(
    name="ghost",
    module="looplab.adapters.runners.ghost",
    extra="ghost-extra",
    distribution="ghost",
    requires=("no_such_framework",),
    summary="x",
)


def test_a_missing_extra_is_one_line_naming_it(monkeypatch) -> None:
    monkeypatch.setitem(registry.RUNNERS, "ghost", GHOST)
    with pytest.raises(MissingExtra) as info:
        registry.load("ghost")
    assert str(info.value) == "runner 'ghost' needs 'no_such_framework': pip install 'looplab[ghost-extra]'"


def test_a_missing_extra_in_a_run_is_a_row_not_a_crash(monkeypatch, capsys, tmp_path: Path) -> None:
    monkeypatch.setitem(registry.RUNNERS, "ghost", GHOST)
    argv = ["run", "--runner", "ghost", "--runner", "handrolled", "--case", "vip-compound", "--steps"]
    code = main([*argv, "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1 and "looplab[ghost-extra]" in out and "final_answer" in out and "Traceback" not in out


def test_a_missing_api_key_is_one_line(monkeypatch, capsys, tmp_path: Path) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)  # the default --out folder is made under the working directory, not the checkout's
    assert main(["run", "--model", "openai:gpt-4.1", "--runner", "handrolled"]) == 2
    assert (
        capsys.readouterr().err.strip()
        == "looplab: OPENAI_API_KEY is not set; export it, or pass --base-url for a local server"
    )


@pytest.mark.parametrize(
    "argv", [["run", "--model", "gpt-4.1"], ["run", "--case", "nope"], ["run", "--runner", "nope"]]
)
def test_bad_options_get_a_clear_message(argv, capsys, tmp_path: Path) -> None:
    code = main([*argv, "--out", str(tmp_path)])
    captured = capsys.readouterr()
    assert code in (1, 2) and "Traceback" not in captured.out + captured.err
    assert "provider:name" in captured.err or "unknown case" in captured.err or "unknown runner" in captured.err


def test_the_scripted_model_is_reachable_as_an_openai_compatible_base_url(model_server, tmp_path: Path) -> None:
    """A real-provider run path: --model openai:NAME --base-url URL, here pointed at the scripted server."""
    out = tmp_path / "r.json"
    code = main(
        [
            "run",
            "--runner",
            "handrolled",
            "--case",
            "vip-compound",
            "--model",
            "openai:scripted",
            "--base-url",
            model_server.openai_base_url,
            "--quiet",
            "--json",
            str(out),
            "--out",
            str(tmp_path),
        ]
    )
    [record] = json.loads(out.read_text())["results"]
    assert code == 0 and record["model"] == "openai:scripted" and record["stop_reason"] == "final_answer"
    assert record["trace"]["steps"][0]["model_call"]["endpoint"] == "chat.completions"


def test_with_a_providers_model_run_leaves_out_the_persona_case_and_a_persona_check_is_not_failed(
    model_server, tmp_path: Path
) -> None:
    """A provider's model plays no persona: `run` skips sloppy-calls by default, and a persona case named
    explicitly records its persona checks as not applicable instead of failing them (exit 0)."""
    base = ["run", "--runner", "handrolled", "--model", "openai:scripted", "--base-url", model_server.openai_base_url]
    out = tmp_path / "default.json"
    assert main([*base, "--quiet", "--json", str(out), "--out", str(tmp_path / "a")]) == 0
    assert {r["case"] for r in json.loads(out.read_text())["results"]} == {"vip-compound", "tight-budget"}
    out = tmp_path / "sloppy.json"
    code = main([*base, "--case", "sloppy-calls", "--quiet", "--json", str(out), "--out", str(tmp_path / "b")])
    doc = json.loads(out.read_text())
    [cell] = doc["cells"]
    assert code == 0 and cell["passed"] and not cell["failed_checks"]
    # The same run judged as if the scripted model had played the persona fails that check.
    from looplab.records.document import parse_result
    from looplab.scenarios.cases import check, load_cases

    result = parse_result(doc["results"][cell["result"]])
    judged = {scripted: check(load_cases()["sloppy-calls"], result, False, scripted=scripted) for scripted in (1, 0)}
    [as_played] = [c for c in judged[1] if "failed tool calls" in c.name]
    [not_played] = [c for c in judged[0] if "failed tool calls" in c.name]
    assert not as_played.passed and not_played.passed and "not applicable" in not_played.detail


def test_serve_model_answers_an_openai_client() -> None:
    import socket
    import time

    import openai

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "looplab", "serve-model", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        client = openai.OpenAI(api_key="unused", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
        deadline = time.monotonic() + 20
        while True:
            try:
                reply = client.chat.completions.create(
                    model="s", messages=[{"role": "user", "content": "Why does tests/test_a.py fail?"}]
                )
                break
            except openai.APIConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        # No tools offered, so the investigator cannot run anything and says so in its answer.
        assert reply.choices[0].finish_reason == "stop"
        assert reply.choices[0].message.content == "Cannot investigate further: the read_file tool is not available."
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_matrix_progress_says_what_is_starting_before_any_run_ends(monkeypatch) -> None:
    import io

    from rich.console import Console

    from looplab.views import render

    drawn = io.StringIO()
    monkeypatch.setattr(render, "console", lambda: Console(file=drawn, force_terminal=True, width=120))
    with render.matrix_progress(39, "starting 2 worker processes for 39 runs of 13 runners ..."):
        shown = drawn.getvalue()  # drawn when the bar is made, before any run ends
    assert "starting 2 worker processes for 39 runs of 13 runners ..." in shown and "0/39" in shown


@pytest.mark.parametrize(
    ("jobs", "concurrency", "isolated", "said"),
    [
        (
            2,
            None,
            None,
            "starting 2 worker processes for 26 runs of 2 runners (each loads the runners' frameworks) ...",
        ),
        (4, 1, None, "starting 26 runs of 2 runners in this process (loading the runners' frameworks) ..."),
        (1, None, None, "starting 26 runs of 2 runners in this process (loading the runners' frameworks) ..."),
        (2, None, object(), "starting 26 runs of 2 runners in their runner environments (2 at a time) ..."),
    ],
)
def test_eval_says_what_its_first_seconds_go_to(jobs, concurrency, isolated, said: str) -> None:
    from looplab.cli import running

    assert running.starting(26, ["handrolled", "langgraph"], jobs, concurrency, isolated) == said


def test_eval_draws_its_progress_line_with_what_is_starting(monkeypatch) -> None:
    from looplab.views import render

    shown: list[str] = []
    real = render.matrix_progress

    def progress(total: int, starting: str):  # type: ignore[no-untyped-def]
        shown.append(starting)
        return real(total, starting)

    monkeypatch.setattr(render, "matrix_progress", progress)
    assert main(["eval", "--runner", "handrolled", "--case", "vip-compound", "--jobs", "1"]) == 0
    assert shown == ["starting 1 run of 1 runner in this process (loading the runners' frameworks) ..."]


def test_run_help_says_what_json_writes(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    words = " ".join(capsys.readouterr().out.split())
    assert "--json PATH also write the results document" in words and "JSON list" not in words
    assert "in this directory" in words  # where --cmd's program runs
