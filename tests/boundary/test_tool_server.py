"""The tools over MCP: the same tools, records, errors and approval as in-process; only the run's child gets in.

Every MCP exchange here goes through the official `mcp` client (streamable HTTP with the run's
token, or stdio to `looplab serve-tools --stdio`); every check compares with the same calls made
on the Guard in-process, on a fresh workspace of the same repo.
"""

from __future__ import annotations

import http.client
import inspect
import itertools
import json
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("mcp", reason="the tool server needs the `mcp` extra: pip install 'looplab[mcp]'")

from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

from looplab.adapters.boundary.loopback import LoopbackCheck  # noqa: E402
from looplab.adapters.boundary.tool_server import CALL_ID_META, ToolServer  # noqa: E402
from looplab.shared_tools import Guard, Tool, ToolCallRecord, Workspace, default_tools, tree_fingerprint  # noqa: E402
from tests.conftest import FIXTURE_REPO  # noqa: E402
from tests.paths import REPO
from tests.shared_tools.test_guard import spied  # noqa: E402

#: As in tests/testing/test_conformance.py: the scripted investigator's calls on vip-compound.
SEED_TRAJECTORY = [
    "run_tests(tests/test_invoice.py::test_invoice_total)",
    "read_file(tests/test_invoice.py)",
    "search_code(def apply_discount)",
    "read_file(billing/discount.py)",
]
SEED_CALLS = [
    ("run_tests", {"target": "tests/test_invoice.py::test_invoice_total"}),
    ("read_file", {"path": "tests/test_invoice.py"}),
    ("search_code", {"query": "def apply_discount"}),
    ("read_file", {"path": "billing/discount.py"}),
]
Calls = list[tuple[str, dict[str, Any] | None]]
#: Tokens as a client could send them in a header: printable ASCII, no spaces.
TOKEN_TEXT = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=48)


# --- an MCP client, on either major version of the SDK ----------------------------------------------


@asynccontextmanager
async def connected(url: str, token: str) -> AsyncIterator[ClientSession]:
    """An initialized `ClientSession` over streamable HTTP, sending the run's token."""
    import mcp.client.streamable_http as transport

    headers = {"Authorization": f"Bearer {token}"}
    if hasattr(transport, "streamable_http_client"):  # later 1.x and 2.x: the HTTP client is passed in
        from mcp.shared._httpx_utils import create_mcp_http_client

        async with create_mcp_http_client(headers=headers) as http:
            async with transport.streamable_http_client(url, http_client=http) as (read, write, *_):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    yield session
    else:
        async with transport.streamablehttp_client(url, headers=headers) as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


#: Whether this SDK's client can put `_meta` on a call (then the records carry the model's call ids).
SENDS_META = "meta" in inspect.signature(ClientSession.call_tool).parameters


async def call(session: ClientSession, name: str, args: dict[str, Any] | None, call_id: str) -> tuple[str, bool]:
    """One `tools/call`: the result's text and its error flag."""
    extra = {"meta": {CALL_ID_META: call_id}} if SENDS_META else {}
    result = await session.call_tool(name, args, **extra)
    result = result.model_dump(by_alias=True)
    assert [c["type"] for c in result["content"]] == ["text"]
    return result["content"][0]["text"], result["isError"]


def expected_id(call_id: str, n: int) -> str:
    """The id a call's record gets: the one sent in `_meta`, or the server's own count."""
    return call_id if SENDS_META else f"mcp-{n}"


def over_mcp(guard: Guard, calls: Calls) -> list[tuple[str, bool]]:
    """Serve `guard`, make `calls` with ids c1, c2, ... through the MCP client; each result's text and flag."""

    async def play() -> list[tuple[str, bool]]:
        with anyio.fail_after(60):
            async with connected(server.url, server.token) as session:
                return [await call(session, name, args, f"c{i}") for i, (name, args) in enumerate(calls, 1)]

    with ToolServer(guard) as server:
        return anyio.run(play)


def in_process(guard: Guard, calls: Calls) -> None:
    """The same calls as an in-process runner makes them, with the ids they get over MCP."""
    for i, (name, args) in enumerate(calls, 1):
        guard.call(name, args or {}, expected_id(f"c{i}", i))


def comparable(record: ToolCallRecord) -> dict[str, Any]:
    """A record without its timings (and pytest's own timing inside a test run's output)."""
    data = record.model_dump(exclude={"started_at", "duration_s"}) | {"result": record.result}
    return json.loads(re.sub(r" in \d+\.\d+s", " in Ns", json.dumps(data)))


@contextmanager
def both_ways(calls: Calls, **guard_options: Any) -> Iterator[tuple[Guard, Guard, list[tuple[str, bool]]]]:
    """`calls` over MCP and in-process, each on a fresh workspace of the fixture repo, with equal Guards."""
    with Workspace(FIXTURE_REPO) as remote_ws, Workspace(FIXTURE_REPO) as local_ws:
        remote, local = Guard(remote_ws, **guard_options), Guard(local_ws, **guard_options)
        results = over_mcp(remote, calls)
        in_process(local, calls)
        yield remote, local, results


def assert_same(remote: Guard, local: Guard, results: list[tuple[str, bool]]) -> None:
    assert [comparable(r) for r in remote.records] == [comparable(r) for r in local.records]
    assert results == [(r.result, r.is_error) for r in remote.records]  # what the client saw is the record
    assert remote.stop == local.stop


# --- the tools and their records ---------------------------------------------------------------------


def test_tools_list_is_the_guards_tools() -> None:
    async def listed(server: ToolServer) -> list[dict[str, Any]]:
        async with connected(server.url, server.token) as session:
            return [t.model_dump(by_alias=True) for t in (await session.list_tools()).tools]

    with Workspace(FIXTURE_REPO) as ws:
        guard = Guard(ws, tools=default_tools(allow_writes=True))
        with ToolServer(guard) as server:
            tools = anyio.run(listed, server)
    assert [(t["name"], t["description"], t["inputSchema"]) for t in tools] == [
        (t.name, t.description, t.parameters) for t in guard.tools
    ]
    assert [t["name"] for t in tools] == ["run_tests", "read_file", "search_code", "write_file"]


def test_every_tool_gives_the_record_it_gives_in_process() -> None:
    calls: Calls = [
        ("run_tests", {"target": "tests/test_invoice.py::test_invoice_total"}),
        ("read_file", {"path": "billing/discount.py"}),
        ("search_code", {"query": "VIP_EXTRA_RATE"}),
        ("write_file", {"path": "notes.md", "content": "compounded\n"}),
    ]
    with both_ways(calls, tools=default_tools(allow_writes=True), approver=lambda n, a: True) as (
        remote,
        local,
        results,
    ):
        assert_same(remote, local, results)
        assert (remote.workspace.root / "notes.md").read_text() == "compounded\n"
    assert [r.outcome for r in remote.records] == ["ok"] * 4
    assert [r.call_id for r in remote.records] == [expected_id(f"c{i}", i) for i in (1, 2, 3, 4)]
    assert "exit code 1" in remote.records[0].result and "apply_discount" in remote.records[1].result


def play(call_tool: Callable[[str, dict[str, Any]], tuple[str, bool]], calls: Calls, guard: Guard) -> list[str]:
    """A small agent loop: make each call in turn until the Guard asks the run to stop; the trajectory."""
    trajectory = []
    for name, args in calls:
        call_tool(name, args or {})
        trajectory.append(f"{name}({guard.records[-1].first_arg})")
        if guard.stop:
            break
    return trajectory


def test_the_seed_trajectory_is_the_same_over_mcp_and_in_process() -> None:
    with Workspace(FIXTURE_REPO) as remote_ws, Workspace(FIXTURE_REPO) as local_ws:
        remote, local = Guard(remote_ws), Guard(local_ws)
        remote_ids, local_ids = itertools.count(1), itertools.count(1)
        # One session held open by a portal, so the loop below calls tools one at a time, as a runner does.
        with ToolServer(remote) as server, anyio.from_thread.start_blocking_portal() as portal:
            with portal.wrap_async_context_manager(connected(server.url, server.token)) as session:

                def remote_call(name: str, args: dict[str, Any]) -> tuple[str, bool]:
                    return portal.call(call, session, name, args, f"c{next(remote_ids)}")

                remote_trajectory = play(remote_call, SEED_CALLS, remote)

        def local_call(name: str, args: dict[str, Any]) -> tuple[str, bool]:
            n = next(local_ids)
            record = local.call(name, args, expected_id(f"c{n}", n))
            return record.result, record.is_error

        local_trajectory = play(local_call, SEED_CALLS, local)
    assert remote_trajectory == local_trajectory == SEED_TRAJECTORY
    assert [comparable(r) for r in remote.records] == [comparable(r) for r in local.records]


# --- failures: error results with the Guard's text, never a protocol error -----------------------------


def test_failures_are_error_results_with_the_in_process_text() -> None:
    calls: Calls = [
        ("delete_repo", {}),  # no such tool
        ("read_file", {"path": 7}),  # a wrong type
        ("read_file", None),  # a missing argument (no arguments at all)
        ("read_file", {"path": "a", "mode": "w"}),  # an argument the tool does not take
        ("read_file", {"path": "../../etc/passwd"}),  # out of the workspace
        ("read_file", {"path": "/etc/passwd"}),
        ("read_file", {"path": ".env"}),  # a secret
        ("read_file", {"path": "tests/test_invoce.py"}),  # not there
        ("search_code", {"query": "x" * 1_001}),  # over the query limit
        ("write_file", {"path": "x.py", "content": ""}),  # not offered: writes are off
    ]
    with both_ways(calls) as (remote, local, results):
        assert_same(remote, local, results)
    assert all(is_error for _, is_error in results)
    outcomes = ["refused", "error", "error", "error", "refused", "refused", "refused", "error", "error", "refused"]
    assert [r.outcome for r in remote.records] == outcomes
    assert results[0][0].startswith("UnknownTool: no tool named 'delete_repo'")
    assert "path: Input should be a valid string" in results[1][0]


@pytest.mark.parametrize(
    ("calls", "reason"),
    [
        ([("write_file", {"path": "tests/test_invoice.py", "content": "def test_ok(): pass\n"})], "rejected"),
        ([("read_file", {"path": "billing/money.py"})] * 3, "repetition"),
    ],
    ids=["an-effect-with-no-approver", "repetition"],
)
def test_a_call_that_ends_the_run_ends_it_the_same_way(calls: Calls, reason: str) -> None:
    with both_ways(calls, tools=default_tools(allow_writes=True)) as (remote, local, results):
        assert_same(remote, local, results)
        assert tree_fingerprint(remote.workspace.root) == tree_fingerprint(FIXTURE_REPO)
    assert remote.stop is not None and remote.stop.reason == reason
    assert results[-1][1] and remote.records[-1].outcome == reason


#: Calls a client might make after the run ended: any tool name (one of the tools or not), any object as arguments.
LATER_CALLS = st.lists(
    st.tuples(
        st.one_of(
            st.sampled_from(["run_tests", "read_file", "search_code", "write_file"]),
            st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=12),
        ),
        st.one_of(
            st.fixed_dictionaries({"target": st.just("tests/test_invoice.py")}),
            st.fixed_dictionaries({"path": st.sampled_from(["README.md", "billing/discount.py", "../x"])}),
            st.fixed_dictionaries({"query": st.text(max_size=20)}),
            st.fixed_dictionaries({"path": st.just("notes.md"), "content": st.text(max_size=20)}),
            st.dictionaries(st.text(max_size=8), st.integers() | st.text(max_size=8), max_size=3),
        ),
    ),
    min_size=1,
    max_size=4,
)


def test_once_the_run_has_ended_no_call_over_mcp_runs() -> None:
    """An effect denied ends the run; whatever a client calls next over MCP runs nothing, as in-process."""
    denied = ("write_file", {"path": "tests/test_invoice.py", "content": "def test_ok(): pass\n"})
    ran: list[str] = []
    with Workspace(FIXTURE_REPO) as remote_ws, Workspace(FIXTURE_REPO) as local_ws:
        remote = Guard(remote_ws, tools=spied(default_tools(allow_writes=True), ran))
        local = Guard(local_ws, tools=default_tools(allow_writes=True))
        local.call(*denied)
        with ToolServer(remote) as server, anyio.from_thread.start_blocking_portal() as portal:
            with portal.wrap_async_context_manager(connected(server.url, server.token)) as session:
                assert portal.call(call, session, *denied, "c0")[1]
                assert remote.stop == local.stop and remote.stop is not None and remote.stop.reason == "rejected"
                records = list(remote.records)

                @settings(deadline=None)
                @given(later=LATER_CALLS)
                def calls_after_the_end(later: Calls) -> None:
                    for name, args in later:
                        text, is_error = portal.call(call, session, name, args, "later")
                        in_process = local.call(name, args)
                        assert (text, is_error) == (in_process.result, True)
                        assert text.startswith("NotRun: the run has ended (rejected: write_file was not approved")
                    assert ran == [] and remote.records == records and len(local.records) == 1

                calls_after_the_end()
        assert tree_fingerprint(remote_ws.root) == tree_fingerprint(FIXTURE_REPO)
    assert ran == []  # not even the denied write: the Guard refused it before calling the tool
    assert [r.outcome for r in remote.records] == ["rejected"]


# --- who may talk to it --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def served() -> Any:
    with Workspace(FIXTURE_REPO) as ws:
        guard = Guard(ws)
        with ToolServer(guard) as server:
            yield server, guard


def post(server: ToolServer, headers: dict[str, str], host: str | None = None) -> tuple[int, dict[str, Any]]:
    """A raw `tools/call` POST with exactly these headers (and this `Host`); the status and the JSON body."""
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "read_file", "arguments": {}}}
    )
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.putrequest("POST", "/mcp", skip_host=True, skip_accept_encoding=True)
        all_headers = {
            "Host": host or f"127.0.0.1:{server.port}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Content-Length": str(len(body)),
            **headers,
        }
        for name, value in all_headers.items():
            conn.putheader(name, value)
        conn.endheaders(body.encode())
        response = conn.getresponse()
        raw = response.read()
        return response.status, json.loads(raw) if response.getheader("content-type") == "application/json" else {}
    finally:
        conn.close()


def test_a_request_without_the_token_is_refused_before_mcp(served: Any) -> None:
    server, guard = served
    status, body = post(server, {})
    assert status == 401 and "token" in body["error"]["message"]
    assert post(server, {"Authorization": f"Basic {server.token}"})[0] == 401
    assert post(server, {"Authorization": "Bearer"})[0] == 401
    assert guard.records == []


@settings(deadline=None)
@given(wrong=TOKEN_TEXT)
def test_a_wrong_token_is_refused(served: Any, wrong: str) -> None:
    server, guard = served
    if wrong == server.token:
        return
    assert post(server, {"Authorization": f"Bearer {wrong}"})[0] == 401
    assert post(server, {"x-api-key": wrong})[0] == 401
    assert post(server, {"Authorization": f"Bearer {server.token[:-1]}"})[0] == 401
    assert guard.records == []


def test_the_token_lets_a_request_through(served: Any) -> None:
    server, _ = served
    # Past the guard the MCP transport answers: a call before `initialize` is its own 400, not a refusal.
    for headers in ({"Authorization": f"Bearer {server.token}"}, {"x-api-key": server.token}):
        assert post(server, headers)[0] not in (401, 403)
    assert post(server, {"Authorization": f"Bearer {server.token}"}, host=f"localhost:{server.port}")[0] not in (
        401,
        403,
    )


HOSTS = st.one_of(
    st.sampled_from(["evil.example", "localhost.evil.example", "127.0.0.1.evil.example", "[::1]", "0.0.0.0"]),
    st.from_regex(r"[a-z][a-z0-9-]{0,20}(\.[a-z]{2,6}){1,2}", fullmatch=True),
)


@settings(deadline=None)
@given(host=HOSTS, with_port=st.booleans())
def test_a_foreign_host_is_refused_even_with_the_token(served: Any, host: str, with_port: bool) -> None:
    """A page that rebinds its own name to 127.0.0.1 still sends its own name as `Host`."""
    server, guard = served
    if host in ("localhost", "127.0.0.1"):
        return
    status, body = post(
        server, {"Authorization": f"Bearer {server.token}"}, host=f"{host}:{server.port}" if with_port else host
    )
    assert status == 403 and "Host" in body["error"]["message"]
    assert guard.records == []


@pytest.mark.parametrize(
    "origin",
    ["http://evil.example", "null", "https://127.0.0.1:{port}", "http://127.0.0.1:1", "http://localhost:{port}.evil"],
)
def test_a_foreign_origin_is_refused_even_with_the_token(served: Any, origin: str) -> None:
    server, guard = served
    status, body = post(server, {"Authorization": f"Bearer {server.token}", "Origin": origin.format(port=server.port)})
    assert status == 403 and "origin" in body["error"]["message"]
    assert (
        post(server, {"Authorization": f"Bearer {server.token}", "Origin": f"http://127.0.0.1:{server.port}"})[0] != 403
    )
    assert guard.records == []


def test_it_listens_on_127_0_0_1_only(served: Any) -> None:
    server, _ = served
    tables = [Path("/proc/net/tcp"), Path("/proc/net/tcp6")]
    if not tables[0].exists():
        pytest.skip("no /proc/net/tcp on this system to read the listening sockets from")
    listening = []
    for table in tables:
        for line in table.read_text().splitlines()[1:] if table.exists() else []:
            local, state = line.split()[1], line.split()[3]
            address, port = local.rsplit(":", 1)
            if int(port, 16) == server.port and state == "0A":  # LISTEN
                listening.append(address)
    assert listening == ["0100007F"]  # 127.0.0.1, little-endian; nothing on 0.0.0.0 or ::
    assert server.url == f"http://127.0.0.1:{server.port}/mcp"


@given(token=TOKEN_TEXT, presented=TOKEN_TEXT)
def test_the_check_lets_through_exactly_the_token_on_its_own_host(token: str, presented: str) -> None:
    guard = LoopbackCheck(token, 8000)
    host = [(b"host", b"127.0.0.1:8000")]
    bearer = [(b"authorization", b"Bearer " + presented.encode())]
    assert (guard.refusal(host + bearer) is None) == (presented == token)
    assert (guard.refusal(host + [(b"x-api-key", presented.encode())]) is None) == (presented == token)
    assert guard.refusal([(b"host", b"127.0.0.1:8001")] + bearer)[0] == 403  # type: ignore[index]
    assert guard.refusal(host * 2 + bearer)[0] == 403  # type: ignore[index]
    assert guard.refusal(bearer)[0] == 403  # type: ignore[index]


# --- stopping ------------------------------------------------------------------------------------------


def test_leaving_is_bounded_with_a_call_still_running() -> None:
    entered = threading.Event()

    def nap(ws: Workspace, seconds: float) -> str:
        """Sleep."""
        entered.set()
        time.sleep(seconds)
        return "rested"

    with Workspace(FIXTURE_REPO) as ws:
        guard = Guard(ws, tools=[Tool.from_function(nap)])
        server = ToolServer(guard).__enter__()

        ended: list[BaseException | str] = []

        async def call_nap() -> None:
            try:
                async with connected(server.url, server.token) as session:
                    await session.call_tool("nap", {"seconds": 30})
                ended.append("answered")
            except BaseException as exc:  # what a client sees of a server that went away mid-call
                ended.append(exc)

        client = threading.Thread(target=lambda: anyio.run(call_nap), daemon=True)
        client.start()
        assert entered.wait(10), "the call never reached the Guard"
        started = time.monotonic()
        server.__exit__(None, None, None)
        assert time.monotonic() - started < 4.0  # uvicorn's 1 s graceful bound, then the call is abandoned
    client.join(5)  # mcp 2's client raises at once; mcp 1's waits out its read timeout (a daemon thread)
    assert "answered" not in ended


def test_serve_tools_over_stdio_lists_and_calls_the_tools(tmp_path: Path) -> None:
    records = tmp_path / "records.jsonl"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "looplab", "serve-tools", "--case", "vip-compound", "--stdio", "--records", str(records)],
        cwd=str(REPO),
    )

    async def session() -> tuple[list[str], tuple[str, bool]]:
        with anyio.fail_after(60):
            async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
                await client.initialize()
                names = [t.name for t in (await client.list_tools()).tools]
                return names, await call(client, "search_code", {"query": "def apply_discount"}, "s1")

    names, (text, is_error) = anyio.run(session)
    assert names == ["run_tests", "read_file", "search_code"]
    assert (text, is_error) == (
        "billing/discount.py:15: def apply_discount(amount: Decimal, tier: str) -> Decimal:",
        False,
    )
    for _ in range(100):  # written as the server exits, however the client ended it (closed stdin, or SIGTERM)
        if records.exists() and records.read_text():
            break
        time.sleep(0.05)
    [record] = [json.loads(line) for line in records.read_text().splitlines()]
    assert (record["name"], record["outcome"], record["call_id"]) == ("search_code", "ok", expected_id("s1", 1))


def test_serve_tools_serves_a_teams_own_tool_from_cases(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    (suite / "repo").mkdir(parents=True)
    (suite / "repo" / "stock.txt").write_text("A1 4\n", encoding="utf-8")
    (suite / "cases").mkdir()
    (suite / "tools.py").write_text(
        "from looplab.shared_tools import Workspace\n\n\n"
        "def shelf_count(ws: Workspace, sku: str) -> str:\n"
        '    """Units of a product on the shelf."""\n'
        "    return dict(line.split() for line in (ws.root / 'stock.txt').read_text().splitlines())[sku]\n",
        encoding="utf-8",
    )
    (suite / "cases" / "shelf.toml").write_text(
        'id = "shelf"\nrepo = "../repo"\ntarget = "t.py"\ntask = "Count."\ntools = ["read_file", "shelf_count"]\n',
        encoding="utf-8",
    )
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "looplab", "serve-tools", "--cases", str(suite), "--stdio"],
        cwd=str(tmp_path),
    )

    async def session() -> tuple[list[str], tuple[str, bool]]:
        with anyio.fail_after(60):
            async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
                await client.initialize()
                names = [t.name for t in (await client.list_tools()).tools]
                return names, await call(client, "shelf_count", {"sku": "A1"}, "c1")

    names, answer = anyio.run(session)
    assert names == ["read_file", "shelf_count"] and answer == ("4", False)


@pytest.mark.full  # the stdio test above keeps `serve-tools` in the fast tier
def test_serve_tools_over_http_prints_its_url_and_token_and_keeps_the_records(tmp_path: Path) -> None:
    records = tmp_path / "records.jsonl"
    command = [sys.executable, "-m", "looplab", "serve-tools", "--case", "already-green", "--records", str(records)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert select.select([proc.stdout], [], [], 30)[0], "serve-tools printed nothing within 30 s"
        url, token = proc.stdout.readline().strip(), proc.stdout.readline().strip()  # type: ignore[union-attr]
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/mcp", url) and len(token) >= 40

        async def read() -> tuple[str, bool]:
            with anyio.fail_after(30):
                async with connected(url, token) as session:
                    return await call(session, "run_tests", {"target": "tests/test_invoice.py"}, "h1")

        text, is_error = anyio.run(read)
        assert text.startswith("exit code 0") and not is_error  # already-green: the overlay's fixed module
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM
    assert "interrupted by SIGTERM" in err and "1 tool record in" in err
    [record] = [json.loads(line) for line in records.read_text().splitlines()]
    assert (record["name"], record["outcome"]) == ("run_tests", "ok")
