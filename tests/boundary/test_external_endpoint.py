"""The conformance run through a real HTTP endpoint: `looplab serve-model` in its own process, `--base-url`."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from looplab.adapters import registry
from looplab.adapters.contract.limits import Limits, StopReason
from looplab.run.harness import Endpoint, ModelChoice
from looplab.shared_tools import Guard, Workspace
from tests.conftest import FIXTURE_REPO, SYSTEM_PROMPT, TASK
from tests.runs import ALL_RUNNERS
from tests.tiers import by_tier


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(policy: str) -> Iterator[str]:
    port = _free_port()
    cmd = [sys.executable, "-m", "looplab", "serve-model", "--port", str(port), "--policy", policy]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx2.get(url + "/v1/models", timeout=1)
                break
            except httpx2.TransportError:
                assert time.monotonic() < deadline and proc.poll() is None, "serve-model did not start"
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def never_stops_url() -> Iterator[str]:
    yield from _serve("never-stops")


@pytest.fixture(scope="module")
def investigator_url() -> Iterator[str]:
    yield from _serve("investigator")


def _provider_models(runner: str) -> list[str]:
    apis = registry.load(runner).apis
    return [p for p, fits in (("openai", {"chat", "responses"} & set(apis)), ("anthropic", "messages" in apis)) if fits]


CELLS = [(r, p) for r in ALL_RUNNERS for p in _provider_models(r)]


@pytest.mark.parametrize(("runner", "provider"), by_tier(CELLS))
def test_max_steps_through_an_external_server(runner: str, provider: str, never_stops_url: str) -> None:
    base_url = never_stops_url + ("/v1" if provider == "openai" else "")
    adapter = registry.load(runner)
    spec = Endpoint(ModelChoice(f"{provider}:scripted", base_url)).spec_for(adapter)
    with Workspace(FIXTURE_REPO) as ws:
        result = adapter.run(TASK, Guard(ws), Limits(max_steps=3), spec, system_prompt=SYSTEM_PROMPT)
    assert (result.stop_reason, result.answer) == (StopReason.MAX_STEPS, None), result.stop_detail
    assert result.totals.model_calls == 3 and len(result.trace.steps) == 3
    assert result.model == f"{provider}:scripted"


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.full  # every runner, through the command line
def test_looplab_run_with_base_url(provider: str, investigator_url: str, tmp_path: Path) -> None:
    runners = [r for r, p in CELLS if p == provider]
    base_url = investigator_url + ("/v1" if provider == "openai" else "")
    out = tmp_path / "out.json"
    argv = [
        "run",
        "--model",
        f"{provider}:scripted",
        "--base-url",
        base_url,
        "--case",
        "vip-compound",
        "--quiet",
        "--json",
        str(out),
        "--out",
        str(tmp_path),
    ]
    for r in runners:
        argv += ["--runner", r]
    proc = subprocess.run([sys.executable, "-m", "looplab", *argv], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = json.loads(out.read_text())["results"]
    assert [r["runner"] for r in records] == runners
    for record in records:
        assert record["stop_reason"] == "final_answer" and "apply_discount" in record["answer"], record["runner"]
        assert record["native_cap"]["knob"] and record["native_cap"]["value"] is not None
