"""A loopback server under abuse from other local users: the token holder is still served, and the log stays short.

Every stranger here is a plain socket without the run's token (or with it but a foreign `Host`):
idle, half a request head, a refused request kept open, pipelined requests it never reads, garbage.
The servers run as a run's child meets them (`looplab serve-tools`, or a `ToolServer`), the ones
whose descriptors matter in a subprocess with a low `RLIMIT_NOFILE`.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import resource
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("mcp", reason="the tool server needs the `mcp` extra: pip install 'looplab[mcp]'")

from looplab.adapters.boundary import serving  # noqa: E402
from looplab.adapters.boundary.tool_server import ToolServer  # noqa: E402
from looplab.shared_tools import Guard, Workspace  # noqa: E402
from tests.boundary.test_tool_server import call, connected  # noqa: E402
from tests.conftest import FIXTURE_REPO  # noqa: E402
from tests.paths import REPO
from tests.tiers import scaled_examples  # noqa: E402

ROOT = REPO
#: The servers' file-descriptor limit in the subprocess tests, and more strangers than that.
FD_LIMIT = 256
STRANGERS = 300
#: Seconds the token holder's request may take to be answered while strangers press on.
HOLDER_BOUND_S = 10.0
#: What a stranger's socket does once connected (PORT is the server's).
STRANGER_BYTES = {
    "idle": b"",
    "half a head": b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\nContent-Le",
    "no token": b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\n\r\n",
    "the token, a foreign host": b"GET /mcp HTTP/1.1\r\nHost: evil.example:PORT\r\nAuthorization: Bearer TOKEN\r\n\r\n",
    "pipelined, never read": b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\n\r\n" * 200,
    "a body that never ends": b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\nContent-Length: 1000000\r\n\r\n{",
    "garbage": b"\x00\x01 not http\r\n\r\n",
    "a websocket upgrade": (
        b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
    ),
}


@pytest.fixture(autouse=True)
def room_for_strangers() -> None:
    """This process holds the strangers' sockets: it needs more descriptors than the server it tests."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 4 * STRANGERS
    if soft != resource.RLIM_INFINITY and soft < wanted:
        if hard != resource.RLIM_INFINITY and hard < wanted:
            pytest.skip(f"RLIMIT_NOFILE's hard limit {hard} is too low to open {STRANGERS} connections")
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def limited_descriptors() -> None:
    """In the server's process, before it runs: a descriptor limit its strangers can outnumber."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))


class Output:
    """A subprocess's stdout read line by line, each wait bounded (read from its descriptor, past any buffer)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self._fd = proc.stdout.fileno()  # type: ignore[union-attr]
        self._pending = b""

    def lines(self, count: int, within_s: float = 30.0) -> list[str]:
        """The next `count` lines, all within `within_s` seconds."""
        deadline = time.monotonic() + within_s
        while self._pending.count(b"\n") < count:
            left = deadline - time.monotonic()
            assert left > 0 and select.select([self._fd], [], [], left)[0], f"no line within {within_s} s"
            chunk = os.read(self._fd, 4096)
            assert chunk, "the server exited"
            self._pending += chunk
        *lines, self._pending = self._pending.split(b"\n", count)
        return [line.decode().strip() for line in lines]


def strangers(port: int, kinds: list[str], token: str = "") -> list[socket.socket]:
    """One connection per kind, each sending its bytes and then holding on without reading."""
    opened = []
    for kind in kinds:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # so unread replies back up on the server
        sock.settimeout(5)
        sock.connect(("127.0.0.1", port))
        data = STRANGER_BYTES[kind].replace(b"PORT", str(port).encode()).replace(b"TOKEN", token.encode())
        if data:
            sock.sendall(data)
        opened.append(sock)
    return opened


def close_all(socks: list[socket.socket]) -> None:
    for sock in socks:
        sock.close()


def holder_request(port: int, token: str) -> int:
    """The token holder's MCP `initialize` as a plain POST; the status it gets (within `HOLDER_BOUND_S`)."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=HOLDER_BOUND_S)
    try:
        headers = {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        conn.request("POST", "/mcp", body=json.dumps(body), headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def held_by_server(port: int) -> int:
    """Connections the server on `port` holds open (established, or closed by the peer and not yet by it)."""
    held = 0
    for table in (Path("/proc/net/tcp"), Path("/proc/net/tcp6")):
        for line in table.read_text().splitlines()[1:] if table.exists() else []:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] in ("01", "08"):  # ESTABLISHED, CLOSE_WAIT
                held += 1
    return held


# --- more connections than the server has descriptors --------------------------------------------------


@pytest.mark.full  # a stress test: hundreds of connections
def test_serve_tools_serves_its_token_holder_past_more_idle_connections_than_it_has_descriptors(
    tmp_path: Path,
) -> None:
    records = tmp_path / "records.jsonl"
    command = [sys.executable, "-m", "looplab", "serve-tools", "--case", "vip-compound", "--records", str(records)]
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=limited_descriptors,
    )
    held: list[socket.socket] = []
    try:
        url, token = Output(proc).lines(2)
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        held = strangers(port, ["idle"] * STRANGERS)
        held += strangers(port, ["garbage", "a websocket upgrade", "no token"] * 20)  # each one a warning, once

        async def holder() -> tuple[str, bool]:
            with anyio.fail_after(HOLDER_BOUND_S):
                async with connected(url, token) as session:
                    return await call(session, "search_code", {"query": "def apply_discount"}, "h1")

        text, is_error = anyio.run(holder)
        proc.send_signal(signal.SIGTERM)
        err = proc.communicate(timeout=10)[1].decode()
    finally:
        close_all(held)
        proc.kill()
        proc.communicate(timeout=10)
    assert (text, is_error) == (
        "billing/discount.py:15: def apply_discount(amount: Decimal, tier: str) -> Decimal:",
        False,
    )
    lines = err.splitlines()
    assert len(lines) <= serving.LOG_LINES + 1, lines[:20]  # the budget, and serve-tools' own last line
    assert lines[-1].startswith("looplab: interrupted by SIGTERM")
    assert [json.loads(line)["name"] for line in records.read_text().splitlines()] == ["search_code"]


#: A tool server whose process then takes every descriptor left, until its stdin says to give them back.
DESCRIPTOR_HOG = """
import os, sys
from looplab.adapters.boundary.tool_server import ToolServer
from looplab.shared_tools import Guard, Workspace
from tests.conftest import FIXTURE_REPO

with Workspace(FIXTURE_REPO) as ws, ToolServer(Guard(ws)) as server:
    print(server.port, server.token, sep="\\n", flush=True)
    taken = []
    try:
        while True:
            taken.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        pass
    print("full", flush=True)
    sys.stdin.readline()
    for fd in taken:
        os.close(fd)
    print("freed", flush=True)
    sys.stdin.readline()
"""


@pytest.mark.full  # a stress test: a server out of descriptors for seconds
def test_accept_errors_neither_spin_nor_flood_the_log_and_the_server_recovers() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", DESCRIPTOR_HOG],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=limited_descriptors,
    )
    held: list[socket.socket] = []
    try:
        output = Output(proc)
        port_text, token, full = output.lines(3)
        assert full == "full"
        port = int(port_text)
        held = strangers(port, ["idle"] * 40)  # queued by the kernel; every accept() fails with EMFILE
        time.sleep(1.2)  # asyncio retries accept() once a second
        cpu_before = _cpu_seconds(proc.pid)
        time.sleep(1.0)
        spent = _cpu_seconds(proc.pid) - cpu_before
        proc.stdin.write(b"\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        assert output.lines(1) == ["freed"]
        status = holder_request(port, token)
        proc.stdin.write(b"\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        err = proc.communicate(timeout=15)[1].decode()
    finally:
        close_all(held)
        proc.kill()
        proc.communicate(timeout=10)
    assert status == 200  # once descriptors are back, asyncio's next accept takes the queue, the holder's included
    assert spent < 0.5, f"the server spent {spent:.2f} s of CPU in a second of failing accepts"
    lines = err.splitlines()
    assert len(lines) <= serving.LOG_LINES, lines[:20]
    assert any("Too many open files" in line for line in lines)


def _cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of process `pid`, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --- the rules, on a server in this process ------------------------------------------------------------


@pytest.fixture(scope="module")
def small_server() -> Iterator[tuple[ToolServer, int]]:
    """A tool server that keeps 8 connections (accepting 4 a turn), and that limit."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(serving, "MAX_CONNECTIONS", 8)
        patch.setattr(serving, "ACCEPT_BATCH", 4)
        with Workspace(FIXTURE_REPO) as ws, ToolServer(Guard(ws)) as server:
            yield server, serving.connection_limit()


@settings(max_examples=scaled_examples(0.3), deadline=None)  # each example opens a dozen sockets: a third
@given(kinds=st.lists(st.sampled_from(sorted(STRANGER_BYTES)), min_size=9, max_size=20))
def test_strangers_beyond_the_limit_are_closed_and_the_holder_gets_in(
    small_server: tuple[ToolServer, int], kinds: list[str]
) -> None:
    server, limit = small_server
    held = strangers(server.port, kinds, token=server.token)
    try:
        deadline = time.monotonic() + 3.0
        while held_by_server(server.port) > limit and time.monotonic() < deadline:
            time.sleep(0.01)
        assert held_by_server(server.port) <= limit
        assert holder_request(server.port, server.token) == 200
    finally:
        close_all(held)


def test_a_request_head_that_never_completes_is_cut_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(serving, "HEAD_TIMEOUT_S", 1.0)
    with Workspace(FIXTURE_REPO) as ws, ToolServer(Guard(ws)) as server:
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        started = time.monotonic()
        cut_off = None
        try:
            sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            for _ in range(40):  # a header line every 0.1 s: data keeps arriving, the head never ends
                time.sleep(0.1)
                sock.sendall(b"X-Slow: 1\r\n")
        except OSError:  # reset by the server
            cut_off = time.monotonic() - started
        finally:
            sock.close()
        assert cut_off is not None and 0.9 <= cut_off <= 2.5
        assert holder_request(server.port, server.token) == 200


# --- the log budget ------------------------------------------------------------------------------------


@given(burst=st.integers(min_value=0, max_value=200), lines=st.integers(min_value=1, max_value=10))
def test_the_log_budget_passes_at_most_its_lines_a_window_and_counts_the_rest(burst: int, lines: int) -> None:
    now = [0.0]
    budget = serving.LogBudget(lines=lines, window_s=10.0, clock=lambda: now[0])

    def record(n: int) -> logging.LogRecord:
        return logging.LogRecord("x", logging.WARNING, __file__, 1, "warning %d", (n,), None)

    passed = [r.getMessage() for r in map(record, range(burst)) if budget.filter(r)]
    assert passed == [f"warning {n}" for n in range(min(burst, lines))]
    now[0] = 10.0  # the next window
    after = record(burst)
    assert budget.filter(after)
    left_out = burst - lines
    assert after.getMessage() == f"warning {burst}" + (
        f" ({left_out} more lines left out before this one)" if left_out > 0 else ""
    )
