"""Bad input on the command line: one line on stderr (`looplab: ...`), exit 2, and nothing run or written."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.model import ModelSpec
from looplab.adapters.contract.result import Finished, NativeCap
from looplab.adapters.session import Runner
from looplab.cli import _parser, main
from looplab.records.document import SCHEMA
from looplab.run import harness, matrix
from tests.paths import REPO

CHECKS = settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture], derandomize=True)
OWNER = {"messages": "anthropic", "chat": "openai", "responses": "openai"}
OWNER_NAME = {"anthropic": "Anthropic's", "openai": "OpenAI's"}
model_names = st.from_regex(r"[a-z0-9][a-z0-9.\-]{0,24}", fullmatch=True)


def exit_code(argv: list[str]) -> int:
    """`main`'s exit code, whether it returned it or argparse exited with it."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code  # type: ignore[return-value]


def one_line(err: str) -> str:
    """The single `looplab: ...` line on stderr, without its newline."""
    assert err.startswith("looplab: ") and err.endswith("\n") and err.count("\n") == 1, err
    return err[len("looplab: ") : -1]


@pytest.fixture
def nothing_runs(monkeypatch) -> None:
    """Starting a model endpoint or a run fails the test: bad input must be refused before either."""

    def started(*args, **kwargs):
        raise AssertionError("a run started")

    monkeypatch.setattr(harness, "endpoint", started)
    monkeypatch.setattr(harness, "run_one", started)
    monkeypatch.setattr(matrix, "run_matrix", started)


# 1. Counts take a whole number of 1 or more.

COUNT_OPTIONS = [("run", "--max-steps"), ("eval", "--repeat"), ("eval", "--jobs")]


@pytest.mark.parametrize(("command", "option"), COUNT_OPTIONS)
@CHECKS
@given(n=st.integers(max_value=0))
def test_a_count_below_one_is_refused(command: str, option: str, n: int, nothing_runs, capsys) -> None:
    assert exit_code([command, "--runner", "handrolled", option, str(n)]) == 2
    captured = capsys.readouterr()
    line = one_line(captured.err)
    assert option in line and "whole number of 1 or more" in line and repr(str(n)) in line
    assert captured.out == ""


@pytest.mark.parametrize(("command", "option"), COUNT_OPTIONS)
@CHECKS
@given(text=st.text(max_size=12).filter(lambda t: not _is_positive_int(t)))
def test_a_count_that_is_not_a_number_is_refused(command: str, option: str, text: str, nothing_runs, capsys) -> None:
    assert exit_code([command, f"{option}={text}"]) == 2
    line = one_line(capsys.readouterr().err)
    assert option in line and "whole number of 1 or more" in line


@pytest.mark.parametrize(("command", "option"), COUNT_OPTIONS)
@settings(deadline=None)
@given(n=st.integers(min_value=1))
def test_a_count_of_one_or_more_is_taken(command: str, option: str, n: int) -> None:
    args = _parser().parse_args([command, option, str(n)])
    assert getattr(args, option.removeprefix("--").replace("-", "_")) == n


def _is_positive_int(text: str) -> bool:
    try:
        return int(text) >= 1
    except ValueError:
        return False


# 2. --base-url belongs to a provider model.

BASE_URL_NEEDS_MODEL = "--base-url needs --model PROVIDER:NAME (the scripted model runs on its own server)"


@pytest.mark.parametrize("command", ["run", "eval"])
@CHECKS
@given(url=st.sampled_from(["http://127.0.0.1:8000/v1", "https://example.invalid"]) | st.text(min_size=1))
def test_base_url_without_a_model_is_refused(command: str, url: str, nothing_runs, capsys) -> None:
    assert exit_code([command, "--runner", "handrolled", f"--base-url={url}"]) == 2
    captured = capsys.readouterr()
    assert one_line(captured.err) == BASE_URL_NEEDS_MODEL and captured.out == ""


def test_model_choice_refuses_a_base_url_for_the_scripted_model() -> None:
    with pytest.raises(LooplabError, match="--base-url needs --model"):
        harness.ModelChoice(base_url="http://127.0.0.1:8000/v1")
    assert harness.ModelChoice("openai:local", "http://127.0.0.1:8000/v1").base_url  # a provider model keeps it


# 3. An API belongs to one provider.


@pytest.mark.parametrize("command", ["run", "eval"])
@CHECKS
@given(provider=st.sampled_from(["openai", "anthropic"]), api=st.sampled_from(list(OWNER)), name=model_names)
def test_an_api_of_the_other_provider_is_refused_before_a_run(
    command: str, provider: str, api: str, name: str, nothing_runs, monkeypatch, capsys
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "unused")  # so that a missing key is not what stops it
    monkeypatch.setenv("ANTHROPIC_API_KEY", "unused")
    if OWNER[api] == provider:
        harness.ModelChoice(f"{provider}:{name}", api=api)  # a matching pair is accepted
        return
    assert exit_code([command, "--runner", "handrolled", "--model", f"{provider}:{name}", "--api", api]) == 2
    captured = capsys.readouterr()
    line = one_line(captured.err)
    assert line.startswith(f"the {api} API is {OWNER_NAME[OWNER[api]]}: use an {OWNER[api]}: model")
    assert "runner" not in line and captured.out == ""


class TwoApis(Runner):
    """A runner that speaks Anthropic's messages and OpenAI's chat, as handrolled does (no framework needed)."""

    name, extra, distribution, apis, knobs = "two-apis", "none", "none", ("messages", "chat"), ("k",)

    def native_cap(self, limits: Limits) -> NativeCap:
        return NativeCap(knob="k", value=limits.max_steps)

    def loop(self, task, session) -> Finished:
        raise NotImplementedError


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("api", [None, *OWNER])
def test_api_for_says_which_provider_an_api_needs(provider: str, api: str | None) -> None:
    spec = ModelSpec(provider, "m", api=api)  # type: ignore[arg-type]
    if api is None or (OWNER[api] == provider and api in TwoApis.apis):
        assert TwoApis().api_for(spec) == (api or {"openai": "chat", "anthropic": "messages"}[provider])
        return
    with pytest.raises(LooplabError) as info:
        TwoApis().api_for(spec)
    message = str(info.value)
    assert "\n" not in message
    if OWNER[api] != provider:
        assert message.startswith(f"the {api} API is {OWNER_NAME[OWNER[api]]}: use an {OWNER[api]}: model")
    else:  # an API of the right provider that this runner does not speak: still refused, as before
        assert message == "runner 'two-apis' cannot use the responses API; it speaks messages, chat"


# 4. `looplab report` on a file that holds no runs.

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
#: JSON that is neither a list of runs nor an object with 'results': scalars, other objects, lists of non-objects.
not_results = json_values.filter(
    lambda d: (
        not (isinstance(d, dict) and "results" in d)
        and not (isinstance(d, list) and all(isinstance(x, dict) for x in d))
    )
)


def _report(tmp_path: Path, doc: object, capsys) -> str:
    """Run `looplab report` on `doc`; check it exits 2 and writes nothing; return its one line."""
    source, out = tmp_path / "results.json", tmp_path / "out" / "report.html"
    source.write_text(json.dumps(doc), encoding="utf-8")
    assert exit_code(["report", str(source), "-o", str(out)]) == 2
    captured = capsys.readouterr()
    assert not out.parent.exists() and not source.with_suffix(".html").exists()
    assert captured.out == ""
    return one_line(captured.err)


@pytest.mark.parametrize("doc", [[], {"results": []}, {"results": [], "cells": []}])
def test_a_results_file_with_no_runs_is_refused(tmp_path: Path, capsys, doc: object) -> None:
    assert _report(tmp_path, doc, capsys) == f"{tmp_path / 'results.json'}: no runs in it: nothing to report"


@CHECKS
@given(doc=st.just({}) | not_results)
def test_json_that_is_not_a_results_file_is_refused_once(tmp_path: Path, capsys, doc: object) -> None:
    line = _report(tmp_path, doc, capsys)
    assert line.startswith(f"{tmp_path / 'results.json'}: not a looplab results file: expected ")
    assert line.count("not a looplab results file") == 1


# 5. Files: what looplab reads or writes is a regular file (`adapters.files`); anything else is one line at once.


def _results_file(path: Path) -> Path:
    """A schema-2 results document of one cell (a run that crashed: nothing to run to make it)."""
    from looplab.records import results

    doc = results.build([harness.RunOutcome("handrolled", "vip-compound", error="crashed")], runners=["handrolled"])
    return results.write(doc, path)


@pytest.mark.parametrize("where", ["input", "output"])
def test_report_on_a_fifo_is_one_line_within_seconds(tmp_path: Path, where: str) -> None:
    import subprocess
    import sys

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)  # nobody writes or reads it: an open that waits would wait forever
    source = fifo if where == "input" else _results_file(tmp_path / "results.json")
    argv = [sys.executable, "-m", "looplab", "report", str(source)] + (["-o", str(fifo)] if where == "output" else [])
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, cwd=REPO)
    assert proc.returncode == 2
    assert (
        one_line(proc.stderr)
        == f"{fifo}: a FIFO, not a regular file: looplab {'reads' if where == 'input' else 'writes'} only regular files"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == (["pipe"] if where == "input" else ["pipe", "results.json"])


def test_report_to_a_symlink_replaces_the_link_and_leaves_its_target(tmp_path: Path, capsys, monkeypatch) -> None:
    from looplab.views import report

    # The page itself is another test's: drawing it first imports every framework the scorecard names (seconds).
    monkeypatch.setattr(report, "render_html", lambda doc, **_: "<!DOCTYPE html>")
    source = _results_file(tmp_path / "results.json")
    (tmp_path / "kept.html").write_text("kept", encoding="utf-8")
    (tmp_path / "link.html").symlink_to("kept.html")
    assert exit_code(["report", str(source), "-o", str(tmp_path / "link.html")]) == 0
    assert not (tmp_path / "link.html").is_symlink()
    assert (tmp_path / "link.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert (tmp_path / "kept.html").read_text(encoding="utf-8") == "kept"


@pytest.mark.parametrize("mode", [0o644, 0o640])
def test_merge_into_an_existing_file_keeps_its_mode(tmp_path: Path, mode: int, capsys) -> None:
    source = _results_file(tmp_path / "results.json")
    merged = tmp_path / "merged.json"
    merged.write_text("{}", encoding="utf-8")
    merged.chmod(mode)
    assert exit_code(["merge", str(source), "-o", str(merged)]) == 0
    assert json.loads(merged.read_text(encoding="utf-8"))["looplab_schema"] == SCHEMA
    assert stat.S_IMODE(merged.stat().st_mode) == mode


@pytest.mark.parametrize("option", ["--json", "--html", "--otel"])
def test_an_eval_output_that_is_a_fifo_or_folder_is_refused_before_anything_runs(
    tmp_path: Path, option: str, nothing_runs, capsys
) -> None:
    if option == "--otel":
        pytest.importorskip("opentelemetry.sdk")
    fifo, folder = tmp_path / "pipe", tmp_path / "folder"
    os.mkfifo(fifo)
    folder.mkdir()
    for target, kind in ((fifo, "a FIFO"), (folder, "a folder")):
        assert exit_code(["eval", "--runner", "handrolled", "--case", "vip-compound", option, str(target)]) == 2
        line = one_line(capsys.readouterr().err)
        assert line == f"{option} {target}: {kind}, not a regular file: looplab writes only regular files"
