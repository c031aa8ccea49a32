"""Capturing upstreams for the agent tests: each keeps every request
exactly as it arrived (path, headers, raw body bytes) and answers in its
API's stream shape, scripted. `CaptureServer` speaks Anthropic Messages: a
signed thinking block, then a call of the tool it was given, or (once the
conversation holds a tool result, or with no tool to call) a text answer
naming what the tool returned. `ResponsesCaptureServer` speaks OpenAI
Responses (Codex's API) the same way: a `function_call` item, then a
message naming the `function_call_output` it was sent.

Run it alone to refresh the Claude Code fixtures of the Anthropic codec's
golden tests (point the CLI's ANTHROPIC_BASE_URL at it):

    python3 tests/sdk/agent_capture.py 8787 /tmp/captured Read '{"file_path": "/tmp/project/note.txt"}'
"""

from __future__ import annotations

import json
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


@dataclass
class Captured:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict:
        return json.loads(self.body)


@dataclass
class Script:
    """The tool call the first turn makes (`None`: answer in text)."""

    tool: str | None = None
    arguments: dict = field(default_factory=dict)


def tool_result_text(body: dict) -> str | None:
    """The text of the tool result in the last turn (system messages aside)."""
    turns = [m for m in body.get("messages", []) if m.get("role") != "system"]
    if not turns or not isinstance(turns[-1].get("content"), list):
        return None
    for block in turns[-1]["content"]:
        if block.get("type") == "tool_result":
            content = block.get("content")
            if isinstance(content, list):
                return "".join(part.get("text", "") for part in content)
            return content or ""
    return None


def events(body: dict, script: Script) -> list[tuple[str, dict]]:
    message = {"id": "msg_capture", "type": "message", "role": "assistant", "model": body.get("model", ""),
               "content": [], "stop_reason": None, "stop_sequence": None,
               "usage": {"input_tokens": 10, "output_tokens": 1}}
    out = [("message_start", {"type": "message_start", "message": message})]
    blocks: list[tuple[dict, list[dict]]] = [
        ({"type": "thinking", "thinking": "", "signature": ""},
         [{"type": "thinking_delta", "thinking": "the user wants this done"},
          {"type": "signature_delta", "signature": "capture-signature"}]),
    ]
    returned = tool_result_text(body)
    if returned is None and script.tool is not None:
        blocks.append(({"type": "tool_use", "id": "toolu_capture_1", "name": script.tool, "input": {}},
                       [{"type": "input_json_delta", "partial_json": json.dumps(script.arguments)}]))
        stop = "tool_use"
    else:
        text = "no tool was called" if returned is None else f"the tool returned: {returned}"
        blocks.append(({"type": "text", "text": ""}, [{"type": "text_delta", "text": text}]))
        stop = "end_turn"
    for index, (start, deltas) in enumerate(blocks):
        out.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": start}))
        out += [("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}) for d in deltas]
        out.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    out.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                  "usage": {"output_tokens": 12}}))
    out.append(("message_stop", {"type": "message_stop"}))
    return out


def function_output_text(body: dict) -> str | None:
    """The output of the last `function_call_output` item of a Responses
    input, when the input ends in tool outputs (after the last message)."""
    returned = None
    for item in body.get("input", []) if isinstance(body.get("input"), list) else []:
        if item.get("type") == "message":
            returned = None
        elif item.get("type") == "function_call_output":
            output = item.get("output")
            if isinstance(output, list):
                output = "".join(part.get("text", "") for part in output)
            returned = output or ""
    return returned


def responses_events(body: dict, script: Script) -> list[tuple[str, dict]]:
    """A Responses stream: created, one output item (a call of the scripted
    tool, or a message naming the tool's output), completed."""
    response = {"id": "resp_capture", "object": "response", "created_at": 1700000000, "status": "in_progress",
                "model": body.get("model", ""), "output": [], "usage": None}
    returned = function_output_text(body)
    if returned is None and script.tool is not None:
        item = {"type": "function_call", "id": "fc_capture_1", "call_id": "call_capture_1", "name": script.tool,
                "arguments": json.dumps(script.arguments), "status": "completed"}
        deltas = [("response.function_call_arguments.delta",
                   {"item_id": item["id"], "output_index": 0, "delta": item["arguments"]})]
    else:
        text = "no tool was called" if returned is None else f"the tool returned: {returned}"
        item = {"type": "message", "id": "msg_capture", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}
        deltas = [("response.output_text.delta",
                   {"item_id": item["id"], "output_index": 0, "content_index": 0, "delta": text})]
    started = {**item, "status": "in_progress"}
    if item["type"] == "function_call":
        started["arguments"] = ""
    else:
        started["content"] = []
    done = {**response, "status": "completed", "output": [item],
            "usage": {"input_tokens": 10, "output_tokens": 12, "total_tokens": 22,
                      "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}}
    out = [("response.created", {"response": response}),
           ("response.output_item.added", {"output_index": 0, "item": started}),
           *deltas,
           ("response.output_item.done", {"output_index": 0, "item": item}),
           ("response.completed", {"response": done})]
    return [(name, {"type": name, "sequence_number": n, **data}) for n, (name, data) in enumerate(out)]


class CaptureServer:
    """Serves on a free loopback port until `close`."""

    # The stream this upstream answers (Anthropic Messages).
    events = staticmethod(events)

    def __init__(self, script: Script | None = None, port: int = 0):
        self.script = script or Script()
        self.captured: list[Captured] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):  # noqa: N802 - http.server's name
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                owner.captured.append(Captured(self.path, {k.lower(): v for k, v in self.headers.items()}, raw))
                body = json.loads(raw or b"{}")
                if body.get("stream"):
                    payload = "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n"
                                      for name, data in owner.events(body, owner.script)).encode()
                    content_type = "text/event-stream"
                else:
                    payload = json.dumps({"type": "error", "error": {
                        "type": "invalid_request_error", "message": "this capture answers streams only"}}).encode()
                    content_type = "application/json"
                self.send_response(200 if body.get("stream") else 400)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *_):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class ResponsesCaptureServer(CaptureServer):
    """`CaptureServer` speaking OpenAI Responses (`responses_events`)."""

    events = staticmethod(responses_events)


def main(argv: list[str]) -> None:
    port, out = int(argv[1]), Path(argv[2])
    script = Script(argv[3], json.loads(argv[4])) if len(argv) > 4 else Script()
    out.mkdir(parents=True, exist_ok=True)
    server = CaptureServer(script, port)
    print(f"capturing on {server.address} into {out}", flush=True)
    seen = 0
    try:
        while True:
            threading.Event().wait(0.2)
            for captured in server.captured[seen:]:
                (out / f"{seen:03}.body.json").write_bytes(captured.body)
                (out / f"{seen:03}.headers.json").write_text(json.dumps(captured.headers, indent=1))
                seen += 1
    except KeyboardInterrupt:
        server.close()


if __name__ == "__main__":
    main(sys.argv)
