#!/usr/bin/env python3
"""One MCP exchange over Streamable HTTP: initialize, notifications/initialized, tools/call
run_command COMMAND, at http://HOST:PORT/mcp. Prints the tool result's text and exits 0
when the call succeeded (not isError) and the text contains EXPECT; otherwise says what
came back and exits 1. Waits up to TIMEOUT seconds for each answer (a socket-activated
server starts on the first connection). Usage: http_call.py URL EXPECT COMMAND [TIMEOUT]"""
import json
import sys
import urllib.request


def post(url, msg, session, timeout):
    headers = {"Content-Type": "application/json",
               "Accept": "application/json, text/event-stream"}
    if session:
        headers["Mcp-Session-Id"] = session
    req = urllib.request.Request(url, data=json.dumps(msg).encode(), headers=headers)
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        body = resp.read().decode()
        session = resp.headers.get("Mcp-Session-Id", session)
        if resp.status == 202 or "id" not in msg:
            return None, session
        if resp.headers.get("Content-Type", "").startswith("text/event-stream"):
            for line in body.splitlines():
                if line.startswith("data:"):
                    reply = json.loads(line[5:])
                    if reply.get("id") == msg["id"]:
                        return reply, session
            raise SystemExit(f"http_call: no answer to request {msg['id']} in the stream: {body}")
        return json.loads(body), session


def main():
    if len(sys.argv) not in (4, 5):
        raise SystemExit(__doc__)
    url, expect, command = sys.argv[1:4]
    timeout = float(sys.argv[4]) if len(sys.argv) == 5 else 60
    init, session = post(url, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                               "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                          "clientInfo": {"name": "packaging-test",
                                                         "version": "1"}}}, None, timeout)
    if "result" not in init or not session:
        raise SystemExit(f"http_call: initialize failed (session {session!r}): {init}")
    post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session, timeout)
    reply, _ = post(url, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                          "params": {"name": "run_command", "arguments": {"command": command}}},
                    session, timeout)
    result = reply.get("result", {})
    text = "".join(c.get("text", "") for c in result.get("content", []))
    print(text)
    if "result" not in reply or result.get("isError") or expect not in text:
        raise SystemExit(f"http_call: run_command did not print {expect!r}: {reply}")


if __name__ == "__main__":
    main()
