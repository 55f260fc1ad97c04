"""Who may talk to a loopback server: the run's child, not whoever else can reach 127.0.0.1.

A server looplab starts for a child process (the tools over MCP, the model proxy) runs code or
spends money for whoever reaches it, and loopback is reachable by every local user and, through
DNS rebinding, by any web page a local browser opens. `LoopbackCheck` refuses every request
unless (and `LoopbackGuard` applies it to an ASGI app, answering the refusal itself):

- its `Host` is the server's own (`127.0.0.1:PORT` or `localhost:PORT`), as a rebinding page's
  (`evil.example:PORT`) is not;
- its `Origin`, if it has one, is the server's own (`http://127.0.0.1:PORT` or
  `http://localhost:PORT`): a browser sends one with every cross-origin request;
- it carries the run's token, as `Authorization: Bearer TOKEN`, `x-api-key: TOKEN` (the
  Anthropic SDK's header for its key) or `x-goog-api-key: TOKEN` (google-genai's), compared in constant time.

A foreign `Host` or `Origin` is a 403 and a missing or wrong token a 401, each with a JSON body
saying why.
"""

from __future__ import annotations

import hmac
import json

from starlette.types import ASGIApp, Receive, Scope, Send

LOOPBACK_NAMES = ("127.0.0.1", "localhost")


class LoopbackCheck:
    """Who may talk to the server on `port`: a request with the run's `token` and this server's `Host`/`Origin`."""

    def __init__(self, token: str, port: int) -> None:
        if not token:
            raise ValueError("a loopback server needs a token")
        self._token = token.encode("utf-8")
        self.port = port
        self._hosts = frozenset(f"{name}:{port}".encode() for name in LOOPBACK_NAMES)
        self._origins = frozenset(f"http://{name}:{port}".encode() for name in LOOPBACK_NAMES)

    def refusal(self, headers: list[tuple[bytes, bytes]]) -> tuple[int, str] | None:
        """`(status, why)` if a request with these headers (lower-case names, as ASGI has them) must be refused."""
        values: dict[bytes, list[bytes]] = {}
        for name, value in headers:
            values.setdefault(name, []).append(value)
        hosts = values.get(b"host", [])
        if len(hosts) != 1 or hosts[0].lower() not in self._hosts:
            return 403, f"the Host header must be 127.0.0.1:{self.port} or localhost:{self.port}"
        origins = values.get(b"origin", [])
        if any(origin.lower() not in self._origins for origin in origins):
            return 403, f"a request from another origin than http://127.0.0.1:{self.port} is refused"
        if not any(hmac.compare_digest(value, self._token) for value in _presented(values)):
            return 401, "this server needs the run's token (Authorization: Bearer TOKEN)"
        return None


class LoopbackGuard:
    """An ASGI wrapper answering, itself, every request `check` refuses."""

    def __init__(self, app: ASGIApp, check: LoopbackCheck) -> None:
        self.app = app
        self.check = check

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):  # lifespan: the app's own startup and shutdown
            await self.app(scope, receive, send)
            return
        refusal = self.check.refusal(scope["headers"])
        if refusal is None:
            await self.app(scope, receive, send)
        elif scope["type"] == "http":
            await _refuse(send, *refusal)
        else:  # a websocket handshake: closing before accepting answers it with a 403
            await send({"type": "websocket.close", "code": 1008})


def _presented(values: dict[bytes, list[bytes]]) -> list[bytes]:
    """The tokens a request presents: each `Authorization: Bearer` credential, `x-api-key` and `x-goog-api-key`."""
    tokens = [*values.get(b"x-api-key", []), *values.get(b"x-goog-api-key", [])]
    for value in values.get(b"authorization", []):
        scheme, _, credential = value.strip().partition(b" ")
        if scheme.lower() == b"bearer":
            tokens.append(credential.strip())
    return tokens


async def _refuse(send: Send, status: int, why: str) -> None:
    body = json.dumps({"error": {"type": "unauthorized" if status == 401 else "forbidden", "message": why}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
