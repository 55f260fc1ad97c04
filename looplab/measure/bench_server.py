"""The bench's stand-in model alone: the scripted server's round trip, plain and through a run's model proxy."""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

from looplab.measure.bench_stats import median, p95
from looplab.records.measurements import ServerLatency

#: First-turn Chat Completions requests timed (after ten that warm the connection up).
SERVER_REQUESTS = 200
#: The long request: its size, and how many are timed (after one warm-up).
LONG_REQUEST_CHARS = 200_000
LONG_REQUESTS = 5


class _Client:
    """One keep-alive `http.client` connection: the number is the server's (plus loopback), not an SDK's."""

    def __init__(self, base_url: str, token: str | None = None) -> None:
        self.url = urlsplit(base_url)
        self.conn = http.client.HTTPConnection(self.url.hostname, self.url.port, timeout=60)
        self.headers = {"Content-Type": "application/json"} | ({"Authorization": f"Bearer {token}"} if token else {})

    def round_trip(self, path: str, payload: bytes) -> float:
        started = time.perf_counter()
        self.conn.request("POST", f"{self.url.path}{path}", body=payload, headers=self.headers)
        response = self.conn.getresponse()
        response.read()
        if response.status != 200:
            raise RuntimeError(f"{self.url.netloc} answered {response.status}")
        return time.perf_counter() - started

    def __enter__(self) -> _Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.close()


@contextmanager
def _proxied(openai_base_url: str) -> Iterator[tuple[str, str]]:
    """A run's recording model proxy in front of the scripted server: its base URL and token."""
    from looplab.adapters.boundary.proxy import ModelProxy
    from looplab.adapters.contract.limits import Limits
    from looplab.adapters.contract.model import ModelSpec
    from looplab.adapters.contract.runner import Probe
    from looplab.adapters.session import RunSession
    from looplab.scenarios.cases import load_cases
    from looplab.shared_tools import Guard, Workspace

    spec = ModelSpec("openai", "scripted", base_url=openai_base_url, api_key="scripted")
    limits = Limits(max_steps=10**6, max_seconds=3600)
    with Workspace(load_cases()["vip-compound"].repo_path) as ws:
        with ModelProxy(RunSession(Guard(ws), limits, spec, Probe(knob="bench", value=None))) as proxy:
            yield proxy.openai_base_url, proxy.token


def server_latency(openai_base_url: str, requests: int = SERVER_REQUESTS) -> ServerLatency:
    """Round trips of a first-turn Chat Completions request (system, task, three tools) on one keep-alive connection.

    Then the long request: a first-turn Responses request whose `input` is one string of `LONG_REQUEST_CHARS`
    characters, a run of word characters and then the task (the shape that took the policy minutes when a
    pattern retried the run from each of its positions); the median of `LONG_REQUESTS` after one warm-up.
    Plain `http.client`, so the number is the server's (plus loopback), not an SDK's.
    """
    from looplab.adapters.contract.wire_apis import WIRE_API
    from looplab.scenarios.cases import default_system_prompt, load_cases
    from looplab.shared_tools import default_tools

    (chat_path,), (responses_path,) = WIRE_API["chat"].suffixes, WIRE_API["responses"].suffixes
    body = json.dumps(
        {
            "model": "scripted",
            "messages": [
                {"role": "system", "content": default_system_prompt()},
                {"role": "user", "content": load_cases()["vip-compound"].task},
            ],
            "tools": [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                }
                for t in default_tools()
            ],
        }
    ).encode()
    task = load_cases()["vip-compound"].task
    long_body = json.dumps({"model": "scripted", "input": "x" * (LONG_REQUEST_CHARS - len(task) - 1) + " " + task})
    # The first ten (and the first long one) warm the connection and the server up.
    with _Client(openai_base_url) as client:
        times = [client.round_trip(chat_path, body) for _ in range(requests + 10)][10:]
        long_times = [client.round_trip(responses_path, long_body.encode()) for _ in range(LONG_REQUESTS + 1)][1:]
    with _proxied(openai_base_url) as (proxy_url, token), _Client(proxy_url, token) as client:
        proxied = [client.round_trip(chat_path, body) for _ in range(requests + 10)][10:]
    return ServerLatency(
        proxy_median_ms=round(median(proxied) * 1000, 3),
        requests=requests,
        median_ms=round(median(times) * 1000, 3),
        p95_ms=round(p95(times) * 1000, 3),
        long_request_chars=LONG_REQUEST_CHARS,
        long_requests=LONG_REQUESTS,
        long_request_ms_median=round(median(long_times) * 1000, 3),
    )
