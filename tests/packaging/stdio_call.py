#!/usr/bin/env python3
"""One MCP exchange over stdio with `mcpcell serve`: initialize, notifications/initialized,
tools/call run_command COMMAND. Prints the tool result's text and exits 0 when the call
succeeded (not isError) and the text contains EXPECT; otherwise says what came back and
exits 1. Usage: stdio_call.py EXPECT COMMAND -- SERVER ARGV..."""
import json
import subprocess
import sys


def read_reply(proc, want_id):
    """The JSON-RPC response with id want_id; notifications before it are skipped."""
    for line in proc.stdout:
        msg = json.loads(line)
        if msg.get("id") == want_id and ("result" in msg or "error" in msg):
            return msg
    raise SystemExit(f"stdio_call: the server closed stdout before answering request {want_id}"
                     f" (exit status {proc.wait()})")


def send(proc, msg):
    proc.stdin.write(json.dumps(msg) + "\n")
    proc.stdin.flush()


def main():
    if len(sys.argv) < 5 or sys.argv[3] != "--":
        raise SystemExit(__doc__)
    expect, command, argv = sys.argv[1], sys.argv[2], sys.argv[4:]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    send(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "packaging-test", "version": "1"}}})
    init = read_reply(proc, 1)
    if "result" not in init or init["result"].get("serverInfo", {}).get("name") is None:
        raise SystemExit(f"stdio_call: initialize failed: {init}")
    send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    send(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "run_command", "arguments": {"command": command}}})
    reply = read_reply(proc, 2)
    proc.stdin.close()
    status = proc.wait(timeout=60)
    result = reply.get("result")
    if result is None:
        raise SystemExit(f"stdio_call: tools/call failed: {reply}")
    text = "".join(c.get("text", "") for c in result.get("content", []))
    print(text)
    if result.get("isError") or expect not in text:
        raise SystemExit(f"stdio_call: expected a successful result containing {expect!r}")
    if status != 0:
        raise SystemExit(f"stdio_call: the server exited with status {status} after stdin closed")


if __name__ == "__main__":
    main()
