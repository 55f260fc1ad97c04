"""A whole agent in plain Python, stdlib only: `looplab run --runner external --cmd 'python stdlib_agent.py'`.

It reads the contract from its environment (adapters/runners/_child.py), talks Chat Completions to the
recording proxy and MCP to the run's tool server, and writes its outcome where it is told to.
"""

import json
import os
import urllib.request

E = os.environ
MCP = {"Accept": "application/json, text/event-stream"}


def post(url, body, headers):
    headers = {"Authorization": "Bearer " + E["LOOPLAB_TOKEN"], "Content-Type": "application/json", **headers}
    request = urllib.request.Request(url, json.dumps(body).encode(), headers)
    with urllib.request.urlopen(request, timeout=float(E["LOOPLAB_MAX_SECONDS"])) as reply:
        MCP.setdefault("mcp-session-id", reply.headers.get("mcp-session-id") or "")
        text = reply.read().decode()
    events = [line[5:] for line in text.splitlines() if line.startswith("data:")]  # an SSE reply, or plain JSON
    return json.loads(events[-1] if events else text) if text.strip() else None


def mcp(method, params, id=1):
    message = {"jsonrpc": "2.0", "method": method, "params": params} | ({"id": id} if id else {})
    return post(E["LOOPLAB_TOOLS_URL"], message, {k: v for k, v in MCP.items() if v})


outcome = {"ended": "returned", "text": None}
try:
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "stdlib", "version": "1"}}
    mcp("initialize", hello)
    mcp("notifications/initialized", {}, id=None)
    listed = mcp("tools/list", {})["result"]["tools"]
    functions = [{"name": t["name"], "description": t["description"], "parameters": t["inputSchema"]} for t in listed]
    tools = [{"type": "function", "function": f} for f in functions]
    messages = [{"role": "system", "content": E["LOOPLAB_SYSTEM_PROMPT"]}]
    messages.append({"role": "user", "content": E["LOOPLAB_TASK"]})
    for _ in range(int(E["LOOPLAB_CAP"] or 12)):  # the loop's own cap
        body = {"model": E["LOOPLAB_MODEL"], "messages": messages, "tools": tools}
        message = post(E["LOOPLAB_OPENAI_BASE_URL"] + "/chat/completions", body, {})["choices"][0]["message"]
        messages.append(message)
        if not message.get("tool_calls"):
            outcome["text"] = message.get("content")
            break
        for call in message["tool_calls"]:
            args = json.loads(call["function"]["arguments"] or "{}")
            params = {"name": call["function"]["name"], "arguments": args, "_meta": {"looplab/call_id": call["id"]}}
            result = mcp("tools/call", params)["result"]
            text = "".join(part.get("text", "") for part in result["content"])
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": text})
except Exception as exc:  # the proxy's refusal (a 403 past the cap) or anything else: say so, and how
    outcome = {"ended": "raised", "exception": type(exc).__name__, "message": str(exc)}
with open(E["LOOPLAB_RESULT"], "w") as out:
    json.dump(outcome, out)
