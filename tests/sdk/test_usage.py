"""Exact money through the official SDKs (issue 46): for each of the six
protocols a fake upstream answers in its vendor's documented shapes, whole
and streamed, reporting every usage kind that vendor's API reports (the
field names are the pinned SDKs' own types: openai, anthropic, google-genai,
cohere, and botocore's bedrock-runtime model). A gateway of its own prices
each lane with a rate card that gives every kind, and the service tiers, a
rate of its own, so a kind lost anywhere (codec reader, stream usage tap,
ledger) changes the price.

Each request goes through a caller SDK to a lane of its own protocol
(passthrough) and to one of another (translated), whole and streamed. The
ledger row (`GET /api/v1/admin/requests`) must hold every kind with the
fake's number and cost exactly what the card says (integer nano-USD,
computed here independently of the gateway's arithmetic); a whole reply
says `x-switchyard-usage: exact`; and the caller's SDK usage object shows
the kinds its own protocol can say."""

from __future__ import annotations

import json
import struct
import threading
import time
import urllib.parse
import zlib
from dataclasses import dataclass, field
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from conftest import admin_api, serving
from sdk_support import INGRESSES, OTHER_LANE, SAME_LANE

TEXT = "Counted."

# ---------------------------------------------------------------- the card

# USD per million tokens, a different rate for every kind the ledger keeps.
RATES = {
    "input": "1.1",
    "output": "2.3",
    "cache_read": "0.37",
    "cache_write": "1.9",
    "cache_write_1h": "3.1",
    "reasoning": "4.3",
    "audio_input": "5.9",
    "audio_output": "7.1",
    "image_input": "6.7",
    "image_output": "8.9",
}
# The factor of each service tier a vendor reports.
TIER_FACTORS = {"priority": "1.7", "flex": "0.45"}

KINDS = list(RATES)


def card_yaml() -> str:
    rates = ", ".join(f"{kind}_utok: {rate}" for kind, rate in RATES.items())
    tiers = ", ".join(f"{tier}: {factor}" for tier, factor in TIER_FACTORS.items())
    return f"{{ {rates}, service_tiers: {{ {tiers} }} }}"


def expected_cost_nano(kinds: dict[str, int], tier: str | None) -> int:
    """The card's arithmetic, done here: every part of the prompt and of the
    output at its own rate (whole pico-USD per token), the tier's factor in
    millionths, rounded up once to a whole nano-USD."""
    pico = {kind: int(Decimal(rate) * 10**6) for kind, rate in RATES.items()}
    uncached = (
        kinds["input"] - kinds["cache_read"] - kinds["cache_write"] - kinds["audio_input"] - kinds["image_input"]
    )
    text_out = kinds["output"] - kinds["reasoning"] - kinds["audio_output"] - kinds["image_output"]
    five_minute = kinds["cache_write"] - kinds["cache_write_1h"]
    assert min(uncached, text_out, five_minute) >= 0, kinds
    total = (
        uncached * pico["input"]
        + kinds["cache_read"] * pico["cache_read"]
        + five_minute * pico["cache_write"]
        + kinds["cache_write_1h"] * pico["cache_write_1h"]
        + kinds["audio_input"] * pico["audio_input"]
        + kinds["image_input"] * pico["image_input"]
        + text_out * pico["output"]
        + kinds["reasoning"] * pico["reasoning"]
        + kinds["audio_output"] * pico["audio_output"]
        + kinds["image_output"] * pico["image_output"]
    )
    factor = int(Decimal(TIER_FACTORS[tier]) * 10**6) if tier in TIER_FACTORS else 10**6
    return -(-total * factor // (1_000 * 10**6))


# ------------------------------------------------------ what each fake says

# Each vendor's usage as its API reports it (its own conventions: Anthropic
# and Bedrock count cache reads and writes apart from `input_tokens`, Gemini
# counts tool-use prompts and thoughts apart from prompt and candidates).
OPENAI_USAGE = {
    "prompt_tokens": 9000,
    "completion_tokens": 1700,
    "total_tokens": 10700,
    "prompt_tokens_details": {
        "cached_tokens": 4000,
        "cache_write_tokens": 1200,
        "audio_tokens": 600,
        "image_tokens": 500,
        "text_tokens": 7900,
    },
    "completion_tokens_details": {
        "reasoning_tokens": 700,
        "audio_tokens": 300,
        "accepted_prediction_tokens": 40,
        "rejected_prediction_tokens": 10,
        "text_tokens": 700,
    },
}
OPENAI_TIER = "priority"

RESPONSES_USAGE = {
    "input_tokens": 9000,
    "input_tokens_details": {
        "cached_tokens": 4000,
        "cache_write_tokens": 1200,
        "cache_write_tokens_details": {"ttl_30m_tokens": 1000, "ttl_12h_tokens": 200},
    },
    "output_tokens": 1700,
    "output_tokens_details": {"reasoning_tokens": 700},
    "total_tokens": 10700,
}
RESPONSES_TIER = "flex"

ANTHROPIC_USAGE = {
    "input_tokens": 3000,
    "cache_read_input_tokens": 4000,
    "cache_creation_input_tokens": 2000,
    "cache_creation": {"ephemeral_5m_input_tokens": 800, "ephemeral_1h_input_tokens": 1200},
    "output_tokens": 1700,
    "output_tokens_details": {"thinking_tokens": 700},
    "server_tool_use": {"web_search_requests": 3, "web_fetch_requests": 2},
    "service_tier": "priority",
    "inference_geo": "us",
    "speed": "standard",
}

GEMINI_USAGE = {
    "promptTokenCount": 8500,
    "cachedContentTokenCount": 4000,
    "candidatesTokenCount": 1000,
    "toolUsePromptTokenCount": 500,
    "thoughtsTokenCount": 700,
    "totalTokenCount": 10700,
    "promptTokensDetails": [
        {"modality": "TEXT", "tokenCount": 7400},
        {"modality": "AUDIO", "tokenCount": 600},
        {"modality": "IMAGE", "tokenCount": 500},
    ],
    "cacheTokensDetails": [{"modality": "TEXT", "tokenCount": 4000}],
    "candidatesTokensDetails": [
        {"modality": "TEXT", "tokenCount": 500},
        {"modality": "AUDIO", "tokenCount": 300},
        {"modality": "IMAGE", "tokenCount": 200},
    ],
    "toolUsePromptTokensDetails": [{"modality": "TEXT", "tokenCount": 500}],
}

COHERE_USAGE = {
    "billed_units": {"input_tokens": 9000, "output_tokens": 1700},
    "tokens": {"input_tokens": 9120, "output_tokens": 1710},
    "cached_tokens": 4000,
}

BEDROCK_USAGE = {
    "inputTokens": 3000,
    "outputTokens": 1700,
    "totalTokens": 10700,
    "cacheReadInputTokens": 4000,
    "cacheWriteInputTokens": 2000,
    "cacheDetails": [{"inputTokens": 1200, "ttl": "1h"}, {"inputTokens": 800, "ttl": "5m"}],
}
BEDROCK_TIER = {"type": "priority"}


def kinds(**counts: int) -> dict[str, int]:
    return {kind: counts.get(kind, 0) for kind in KINDS}


# What the ledger must keep of each lane's report (the IR's conventions:
# every part counted in its side's total), worked out by hand from the
# vendor's documented meaning, and the service tier it names.
LEDGER = {
    "openai": (
        kinds(input=9000, output=1700, cache_read=4000, cache_write=1200, reasoning=700,
              audio_input=600, image_input=500, audio_output=300),
        "priority",
    ),
    "responses": (kinds(input=9000, output=1700, cache_read=4000, cache_write=1200, reasoning=700), "flex"),
    "anthropic": (
        kinds(input=9000, output=1700, cache_read=4000, cache_write=2000, cache_write_1h=1200, reasoning=700),
        "priority",
    ),
    "gemini": (
        kinds(input=9000, output=1700, cache_read=4000, reasoning=700, audio_input=600, image_input=500,
              audio_output=300, image_output=200),
        None,
    ),
    "cohere": (kinds(input=9000, output=1700, cache_read=4000), None),
    "bedrock": (kinds(input=9000, output=1700, cache_read=4000, cache_write=2000, cache_write_1h=1200), "priority"),
}


# ---------------------------------------------------------- the fake vendors


def sse(events: list[tuple[str | None, dict | str]], crlf: bool = False) -> bytes:
    end = "\r\n" if crlf else "\n"
    out = []
    for name, data in events:
        payload = data if isinstance(data, str) else json.dumps(data)
        out.append((f"event: {name}{end}" if name else "") + f"data: {payload}{end}{end}")
    return "".join(out).encode()


def eventstream(frames: list[tuple[str, dict]]) -> bytes:
    """AWS event-stream frames: prelude (total and headers length, CRC32),
    string headers, the JSON payload and the message's CRC32."""
    out = b""
    for event_type, payload in frames:
        headers = b""
        for name, value in ((":event-type", event_type), (":content-type", "application/json"), (":message-type", "event")):
            headers += bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(value)) + value.encode()
        body = json.dumps(payload).encode()
        prelude = struct.pack(">II", 16 + len(headers) + len(body), len(headers))
        prelude += struct.pack(">I", zlib.crc32(prelude))
        message = prelude + headers + body
        out += message + struct.pack(">I", zlib.crc32(message))
    return out


def openai_chat(request: dict) -> tuple[str, bytes]:
    model = request.get("model", "wire-openai")
    head = {"id": "chatcmpl-usage", "created": 1_700_000_000, "model": model, "service_tier": OPENAI_TIER,
            "system_fingerprint": "fp_usage"}
    if not request.get("stream"):
        reply = dict(head, object="chat.completion", usage=OPENAI_USAGE, choices=[{
            "index": 0, "message": {"role": "assistant", "content": TEXT, "refusal": None},
            "logprobs": None, "finish_reason": "stop"}])
        return "application/json", json.dumps(reply).encode()
    chunk = dict(head, object="chat.completion.chunk")
    asked = (request.get("stream_options") or {}).get("include_usage") is True
    none = {"usage": None} if asked else {}
    events = [
        dict(chunk, choices=[{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}], **none),
        dict(chunk, choices=[{"index": 0, "delta": {"content": TEXT}, "finish_reason": None}], **none),
        dict(chunk, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}], **none),
    ]
    if asked:
        events.append(dict(chunk, choices=[], usage=OPENAI_USAGE))
    return "text/event-stream", sse([(None, e) for e in events] + [(None, "[DONE]")])


def responses(request: dict) -> tuple[str, bytes]:
    model = request.get("model", "wire-responses")
    part = {"type": "output_text", "text": TEXT, "annotations": []}
    item = {"type": "message", "id": "msg_usage", "status": "completed", "role": "assistant", "content": [part]}
    response = {
        "id": "resp_usage", "object": "response", "created_at": 1_700_000_000, "status": "completed",
        "model": model, "output": [item], "usage": RESPONSES_USAGE, "service_tier": RESPONSES_TIER,
        "error": None, "incomplete_details": None, "instructions": None, "metadata": {},
        "parallel_tool_calls": True, "temperature": 1.0, "top_p": 1.0, "tool_choice": "auto", "tools": [],
    }
    if not request.get("stream"):
        return "application/json", json.dumps(response).encode()
    started = dict(response, status="in_progress", output=[], usage=None, service_tier="auto")
    open_item = dict(item, status="in_progress", content=[])
    where = {"item_id": "msg_usage", "output_index": 0, "content_index": 0}
    events = [
        {"type": "response.created", "response": started},
        {"type": "response.in_progress", "response": started},
        {"type": "response.output_item.added", "output_index": 0, "item": open_item},
        {"type": "response.content_part.added", **where, "part": dict(part, text="")},
        {"type": "response.output_text.delta", **where, "delta": TEXT, "logprobs": []},
        {"type": "response.output_text.done", **where, "text": TEXT, "logprobs": []},
        {"type": "response.content_part.done", **where, "part": part},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": response},
    ]
    for number, event in enumerate(events):
        event["sequence_number"] = number
    return "text/event-stream", sse([(e["type"], e) for e in events])


def anthropic_messages(request: dict) -> tuple[str, bytes]:
    model = request.get("model", "wire-anthropic")
    message = {"id": "msg_usage", "type": "message", "role": "assistant", "model": model,
               "content": [{"type": "text", "text": TEXT}], "stop_reason": "end_turn", "stop_sequence": None,
               "usage": ANTHROPIC_USAGE}
    if not request.get("stream"):
        return "application/json", json.dumps(message).encode()
    # message_start holds the prompt's counts; message_delta the cumulative
    # counts at the end (MessageDeltaUsage).
    start_usage = {k: v for k, v in ANTHROPIC_USAGE.items() if k not in ("output_tokens_details", "server_tool_use")}
    start_usage["output_tokens"] = 1
    delta_usage = {k: ANTHROPIC_USAGE[k] for k in (
        "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens",
        "output_tokens_details", "server_tool_use")}
    events = [
        {"type": "message_start", "message": dict(message, content=[], stop_reason=None, usage=start_usage)},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "ping"},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": TEXT}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": delta_usage},
        {"type": "message_stop"},
    ]
    return "text/event-stream", sse([(e["type"], e) for e in events])


def gemini(path: str, _request: dict) -> tuple[str, bytes]:
    model = path.split("/models/", 1)[-1].split(":", 1)[0]
    candidate = {"content": {"role": "model", "parts": [{"text": TEXT}]}, "finishReason": "STOP", "index": 0}
    reply = {"candidates": [candidate], "usageMetadata": GEMINI_USAGE, "modelVersion": model, "responseId": "r-usage"}
    if ":streamGenerateContent" not in path:
        return "application/json", json.dumps(reply).encode()
    # Every chunk has usageMetadata; the prompt's counts come first, the
    # whole report with the last chunk.
    first_usage = {k: GEMINI_USAGE[k] for k in ("promptTokenCount", "cachedContentTokenCount", "promptTokensDetails",
                                                "cacheTokensDetails")}
    first_usage["totalTokenCount"] = GEMINI_USAGE["promptTokenCount"]
    first = {"candidates": [{"content": {"role": "model", "parts": [{"text": TEXT[:4]}]}, "index": 0}],
             "usageMetadata": first_usage, "modelVersion": model, "responseId": "r-usage"}
    last = dict(reply, candidates=[dict(candidate, content={"role": "model", "parts": [{"text": TEXT[4:]}]})])
    return "text/event-stream", sse([(None, first), (None, last)], crlf=True)


def cohere_chat(request: dict) -> tuple[str, bytes]:
    if not request.get("stream"):
        reply = {"id": "c-usage", "finish_reason": "COMPLETE",
                 "message": {"role": "assistant", "content": [{"type": "text", "text": TEXT}]}, "usage": COHERE_USAGE}
        return "application/json", json.dumps(reply).encode()
    events = [
        {"type": "message-start", "id": "c-usage",
         "delta": {"message": {"role": "assistant", "content": [], "tool_plan": "", "tool_calls": [], "citations": []}}},
        {"type": "content-start", "index": 0, "delta": {"message": {"content": {"type": "text", "text": ""}}}},
        {"type": "content-delta", "index": 0, "delta": {"message": {"content": {"text": TEXT}}}},
        {"type": "content-end", "index": 0},
        {"type": "message-end", "delta": {"finish_reason": "COMPLETE", "usage": COHERE_USAGE}},
    ]
    return "text/event-stream", sse([(e["type"], e) for e in events])


def bedrock(path: str, _request: dict) -> tuple[str, bytes]:
    if path.endswith("/converse"):
        reply = {"output": {"message": {"role": "assistant", "content": [{"text": TEXT}]}}, "stopReason": "end_turn",
                 "usage": BEDROCK_USAGE, "metrics": {"latencyMs": 12}, "performanceConfig": {"latency": "standard"},
                 "serviceTier": BEDROCK_TIER}
        return "application/json", json.dumps(reply).encode()
    frames = [
        ("messageStart", {"role": "assistant"}),
        ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": TEXT}}),
        ("contentBlockStop", {"contentBlockIndex": 0}),
        ("messageStop", {"stopReason": "end_turn"}),
        ("metadata", {"usage": BEDROCK_USAGE, "metrics": {"latencyMs": 12},
                      "performanceConfig": {"latency": "standard"}, "serviceTier": BEDROCK_TIER}),
    ]
    return "application/vnd.amazon.eventstream", eventstream(frames)


class Vendors(BaseHTTPRequestHandler):
    """Every vendor's chat endpoint on one port, told apart by path."""

    protocol_version = "HTTP/1.1"

    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        request = json.loads(body or b"{}")
        path = urllib.parse.urlsplit(self.path).path
        if path.endswith("/chat/completions"):
            kind, reply = openai_chat(request)
        elif path.endswith("/responses"):
            kind, reply = responses(request)
        elif path.endswith("/messages"):
            kind, reply = anthropic_messages(request)
        elif "/models/" in path and ":" in path.rsplit("/", 1)[-1]:
            kind, reply = gemini(path, request)
        elif path.endswith("/v2/chat"):
            kind, reply = cohere_chat(request)
        elif path.startswith("/model/"):
            kind, reply = bedrock(path, request)
        else:
            kind, reply = "application/json", json.dumps({"error": f"no fake for {path}"}).encode()
            self.send_response(404)
            self._finish(kind, reply)
            return
        self.send_response(200)
        self._finish(kind, reply)

    def _finish(self, kind: str, reply: bytes) -> None:
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *_):
        pass


# ----------------------------------------------------------- the gateway

LANES = ["openai", "responses", "anthropic", "gemini", "cohere", "bedrock"]


def usage_config(upstream: str, db: str) -> str:
    lines = [
        "auth: { mode: keys }",
        f"storage: {{ sqlite_path: {db} }}",
        "governance: { ledger_flush_interval: 20ms }",
        "providers:",
    ]
    lines += [f'  fake-{p}: {{ protocol: {p}, base_url: "http://{upstream}" }}' for p in LANES]
    lines.append("models:")
    lines += [f"  usage-{p}: {{ provider: fake-{p}, model: wire-{p} }}" for p in LANES]
    lines.append("rate_card:")
    lines += [f"  usage-{p}: {card_yaml()}" for p in LANES]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def metered(tmp_path_factory):
    """The fake vendors and a gateway priced by the card above: (data
    address, admin address)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Vendors)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    workdir = tmp_path_factory.mktemp("usage")
    upstream = f"127.0.0.1:{server.server_address[1]}"
    # The suite's listeners and admin token, then this module's own config.
    head = lambda lanes: lanes.split("providers:\n", 1)[0]  # noqa: E731
    try:
        with serving(workdir, usage_config(upstream, str(workdir / "ledger.db")), config=head) as addresses:
            yield addresses
    finally:
        server.shutdown()


# ------------------------------------------------------------- the callers


@dataclass
class Answer:
    """What a caller's SDK gave back: the reply's headers (whole replies)
    and its usage object as plain data."""

    text: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)
    tier: Any = None


class Heads:
    """The last response's headers, through httpx's public response hook."""

    def __init__(self) -> None:
        self.last: dict[str, str] = {}

    def hook(self, response) -> None:
        self.last = {k.lower(): v for k, v in response.headers.items()}


def plain(value: Any) -> Any:
    """An SDK model as plain data (pydantic models, enums, dicts)."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    return value


def ask(ingress: str, addr: str, key: dict, model: str, stream: bool) -> Answer:
    heads = Heads()
    answer = Answer()
    question = "What does this cost?"
    if ingress.startswith("openai"):
        import openai

        client = openai.OpenAI(base_url=f"http://{addr}/v1", api_key=key["key"], max_retries=0,
                               http_client=openai.DefaultHttpxClient(event_hooks={"response": [heads.hook]}))
        if ingress == "openai-chat":
            messages = [{"role": "user", "content": question}]
            if not stream:
                reply = client.chat.completions.create(model=model, messages=messages)
                answer.text, answer.usage, answer.tier = reply.choices[0].message.content, plain(reply.usage), reply.service_tier
            else:
                for chunk in client.chat.completions.create(model=model, messages=messages, stream=True,
                                                            stream_options={"include_usage": True}):
                    for choice in chunk.choices:
                        answer.text += choice.delta.content or ""
                    if chunk.usage is not None:
                        answer.usage, answer.tier = plain(chunk.usage), chunk.service_tier
        else:
            if not stream:
                final = client.responses.create(model=model, input=question)
            else:
                final = None
                for event in client.responses.create(model=model, input=question, stream=True):
                    if event.type == "response.completed":
                        final = event.response
                assert final is not None, "no response.completed"
            answer.text, answer.usage, answer.tier = final.output_text, plain(final.usage), final.service_tier
        client.close()
    elif ingress == "anthropic":
        import anthropic

        client = anthropic.Anthropic(base_url=f"http://{addr}", api_key=key["key"], max_retries=0,
                                     http_client=anthropic.DefaultHttpxClient(event_hooks={"response": [heads.hook]}))
        kwargs = {"model": model, "max_tokens": 2000, "messages": [{"role": "user", "content": question}]}
        if stream:
            with client.messages.stream(**kwargs) as s:
                message = s.get_final_message()
        else:
            message = client.messages.create(**kwargs)
        answer.text = "".join(block.text for block in message.content if block.type == "text")
        answer.usage = plain(message.usage)
        client.close()
    elif ingress == "gemini":
        from google import genai
        from google.genai import types

        client = genai.Client(api_key=key["key"], http_options=types.HttpOptions(
            base_url=f"http://{addr}", api_version="v1beta", retry_options=types.HttpRetryOptions(attempts=1),
            client_args={"event_hooks": {"response": [heads.hook]}}))
        chunks = (list(client.models.generate_content_stream(model=model, contents=question)) if stream
                  else [client.models.generate_content(model=model, contents=question)])
        for chunk in chunks:
            answer.text += chunk.text or ""
            if chunk.usage_metadata is not None:
                answer.usage = plain(chunk.usage_metadata)
        client.close()
    elif ingress == "cohere":
        import cohere
        import httpx

        http = httpx.Client(timeout=30, event_hooks={"response": [heads.hook]})
        client = cohere.ClientV2(api_key=key["key"], base_url=f"http://{addr}", max_retries=0, httpx_client=http)
        messages = [{"role": "user", "content": question}]
        if not stream:
            reply = client.chat(model=model, messages=messages)
            answer.text = "".join(item.text for item in reply.message.content or [] if item.type == "text")
            answer.usage = plain(reply.usage)
        else:
            for event in client.chat_stream(model=model, messages=messages):
                if event.type == "content-delta":
                    answer.text += event.delta.message.content.text or ""
                elif event.type == "message-end":
                    answer.usage = plain(event.delta.usage)
        http.close()
    elif ingress == "bedrock":
        import boto3
        from botocore.config import Config

        client = boto3.client("bedrock-runtime", endpoint_url=f"http://{addr}", region_name="us-east-1",
                              aws_access_key_id=key["aws_access_key_id"],
                              aws_secret_access_key=key["aws_secret_access_key"],
                              config=Config(retries={"total_max_attempts": 1, "mode": "standard"}))
        messages = [{"role": "user", "content": [{"text": question}]}]
        if not stream:
            reply = client.converse(modelId=model, messages=messages)
            heads.last = {k.lower(): v for k, v in reply["ResponseMetadata"]["HTTPHeaders"].items()}
            answer.text = "".join(block.get("text", "") for block in reply["output"]["message"]["content"])
            answer.usage, answer.tier = reply.get("usage", {}), reply.get("serviceTier")
        else:
            for event in client.converse_stream(modelId=model, messages=messages)["stream"]:
                if "contentBlockDelta" in event:
                    answer.text += event["contentBlockDelta"]["delta"].get("text", "")
                elif "metadata" in event:
                    answer.usage = event["metadata"].get("usage", {})
                    answer.tier = event["metadata"].get("serviceTier")
        client.close()
    else:
        raise ValueError(ingress)
    answer.headers = heads.last
    return answer


# ----------------------------------------------------- what callers can say

# The wire usage each lane's fake sends, and the service tier it names as
# the caller's SDK parses it (same-protocol replies reach their caller as
# sent).
SENT = {
    "openai": (OPENAI_USAGE, OPENAI_TIER),
    "responses": (RESPONSES_USAGE, RESPONSES_TIER),
    "anthropic": (ANTHROPIC_USAGE, None),
    "gemini": (GEMINI_USAGE, None),
    "cohere": (COHERE_USAGE, None),
    "bedrock": (BEDROCK_USAGE, BEDROCK_TIER),
}


def tier_name(ingress: str, tier: str | None) -> Any:
    """How `ingress`'s protocol names the tier that served a request."""
    if ingress.startswith("openai"):
        return {"standard": "default"}.get(tier, tier)
    if ingress == "bedrock":
        return None if tier is None else {"type": {"standard": "default"}.get(tier, tier)}
    return None  # Anthropic says it in its usage; Gemini and Cohere cannot


def caller_usage(ingress: str, lane: str, stream: bool) -> dict[str, Any]:
    """What `ingress`'s usage object must say of `lane`'s report: every kind
    its protocol has a field for, in its own conventions (a path of keys,
    `[MODALITY]` picking a Gemini modality's count, → value)."""
    if SAME_LANE[ingress] == lane:
        sent = SENT[lane][0]
        return flatten(snake(sent) if ingress == "gemini" else sent)
    k, tier = LEDGER[lane]
    tool_prompt = GEMINI_USAGE["toolUsePromptTokenCount"] if lane == "gemini" else 0
    web_searches = ANTHROPIC_USAGE["server_tool_use"]["web_search_requests"] if lane == "anthropic" else 0
    some = lambda n: n or None  # noqa: E731 - a count said only when there is one
    if ingress == "openai-chat":
        return {
            "prompt_tokens": k["input"], "completion_tokens": k["output"], "total_tokens": k["input"] + k["output"],
            "prompt_tokens_details.cached_tokens": k["cache_read"],
            "prompt_tokens_details.cache_write_tokens": some(k["cache_write"]),
            "prompt_tokens_details.audio_tokens": k["audio_input"],
            "prompt_tokens_details.image_tokens": some(k["image_input"]),
            "completion_tokens_details.reasoning_tokens": k["reasoning"],
            "completion_tokens_details.audio_tokens": k["audio_output"],
        }
    if ingress == "openai-responses":
        return {
            "input_tokens": k["input"], "output_tokens": k["output"], "total_tokens": k["input"] + k["output"],
            "input_tokens_details.cached_tokens": k["cache_read"],
            "input_tokens_details.cache_write_tokens": k["cache_write"],
            "output_tokens_details.reasoning_tokens": k["reasoning"],
        }
    if ingress == "anthropic":
        said = {
            "input_tokens": k["input"] - k["cache_read"] - k["cache_write"],
            "cache_read_input_tokens": k["cache_read"],
            "cache_creation_input_tokens": k["cache_write"],
            "cache_creation.ephemeral_5m_input_tokens": k["cache_write"] - k["cache_write_1h"],
            "cache_creation.ephemeral_1h_input_tokens": k["cache_write_1h"],
            "output_tokens": k["output"],
            "output_tokens_details.thinking_tokens": some(k["reasoning"]),
            "server_tool_use.web_search_requests": some(web_searches),
            "service_tier": None if tier is None else {"priority": "priority"}.get(tier, "standard"),
        }
        if stream:
            # Another vendor's stream reports usage only at its end, and an
            # Anthropic stream's last usage (`MessageDeltaUsage`) has no
            # lifetimes nor tier: the SDK keeps message_start's (none yet).
            for path in ("cache_creation.ephemeral_5m_input_tokens", "cache_creation.ephemeral_1h_input_tokens",
                         "service_tier"):
                del said[path]
        return said
    if ingress == "gemini":
        return {
            "prompt_token_count": k["input"] - tool_prompt,
            "candidates_token_count": k["output"] - k["reasoning"],
            "total_token_count": k["input"] + k["output"],
            "cached_content_token_count": some(k["cache_read"]),
            "thoughts_token_count": some(k["reasoning"]),
            "tool_use_prompt_token_count": some(tool_prompt),
            "prompt_tokens_details[AUDIO]": some(k["audio_input"]),
            "prompt_tokens_details[IMAGE]": some(k["image_input"]),
            "candidates_tokens_details[AUDIO]": some(k["audio_output"]),
            "candidates_tokens_details[IMAGE]": some(k["image_output"]),
        }
    if ingress == "cohere":
        return {
            "tokens.input_tokens": k["input"], "tokens.output_tokens": k["output"],
            "billed_units.input_tokens": k["input"], "billed_units.output_tokens": k["output"],
            "cached_tokens": some(k["cache_read"]),
        }
    if ingress == "bedrock":
        details = [{"inputTokens": n, "ttl": ttl}
                   for ttl, n in (("1h", k["cache_write_1h"]), ("5m", k["cache_write"] - k["cache_write_1h"])) if n]
        return {
            "inputTokens": k["input"] - k["cache_read"] - k["cache_write"],
            "outputTokens": k["output"],
            "totalTokens": k["input"] + k["output"],
            "cacheReadInputTokens": some(k["cache_read"]),
            "cacheWriteInputTokens": some(k["cache_write"]),
            "cacheDetails": details if k["cache_write_1h"] else None,
        }
    raise ValueError(ingress)


def caller_tier(ingress: str, lane: str) -> Any:
    """The service tier `ingress`'s reply names beside its usage (OpenAI's
    and Responses' top-level `service_tier`, Bedrock's `serviceTier`)."""
    if SAME_LANE[ingress] == lane:
        return SENT[lane][1]
    return tier_name(ingress, LEDGER[lane][1])


def snake(value: Any) -> Any:
    """google-genai's field names for Gemini's camelCase wire names."""
    if isinstance(value, dict):
        return {"".join("_" + c.lower() if c.isupper() else c for c in k): snake(v) for k, v in value.items()}
    if isinstance(value, list):
        return [snake(v) for v in value]
    return value


def flatten(value: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in value.items():
        if isinstance(v, dict):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def at(value: Any, path: str) -> Any:
    for part in path.split("."):
        name, _, modality = part.partition("[")
        value = value.get(name) if isinstance(value, dict) else None
        if modality:
            counts = [d.get("token_count") for d in value or [] if d.get("modality") == modality.rstrip("]")]
            value = sum(counts) if counts else None
    return value


def ledger_row(admin: str, key_id: str) -> dict:
    """The one ledger row of `key_id`, once written (rows are flushed in
    batches every 20 ms here)."""
    deadline = time.monotonic() + 10
    while True:
        rows = admin_api(admin, "GET", f"/api/v1/admin/requests?key={key_id}&limit=10")["data"]
        if rows:
            assert len(rows) == 1, rows
            return rows[0]
        assert time.monotonic() < deadline, f"no ledger row for {key_id}"
        time.sleep(0.02)


# ------------------------------------------------------------------ tests

# Translated pairs beside the suite's OTHER_LANE: each caller from a lane
# whose report has kinds the caller's protocol can say (audio and images
# for OpenAI and Gemini callers, cache writes by lifetime and the tier for
# Anthropic and Bedrock callers).
RICH_LANE = {
    "openai-chat": "gemini",
    "openai-responses": "anthropic",
    "anthropic": "bedrock",
    "gemini": "openai",
    "cohere": "anthropic",
    "bedrock": "anthropic",
}
PAIRS = [(ingress, lanes[ingress]) for lanes in (SAME_LANE, OTHER_LANE, RICH_LANE) for ingress in INGRESSES]


def test_the_card_prices_every_kind_apart():
    """Each kind the fakes report moves the price: one token more of any
    kind costs its own rate (no two kinds share one)."""
    assert len(set(RATES.values())) == len(RATES)
    base = kinds(input=100, output=100, cache_read=10, cache_write=10, cache_write_1h=5, reasoning=10,
                 audio_input=10, image_input=10, audio_output=10, image_output=10)
    costs = set()
    for kind in KINDS:
        more = dict(base, **{kind: base[kind] + 1000})
        # a part of a side's total grows the total with it
        if kind in ("cache_read", "cache_write", "audio_input", "image_input"):
            more["input"] += 1000
        if kind == "cache_write_1h":
            more["cache_write"] += 1000
            more["input"] += 1000
        if kind in ("reasoning", "audio_output", "image_output"):
            more["output"] += 1000
        costs.add(expected_cost_nano(more, None))
    assert len(costs) == len(KINDS)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("ingress,lane", PAIRS, ids=[f"{i}-to-{lane}" for i, lane in PAIRS])
def test_every_kind_reaches_the_ledger_at_the_cards_price(metered, ingress, lane, stream):
    addr, admin = metered
    key = admin_api(admin, "POST", "/api/v1/admin/keys",
                    {"name": f"usage-{ingress}-{lane}", "issue_aws_credential": True})
    answer = ask(ingress, addr, key, f"usage-{lane}", stream)
    assert answer.text == TEXT, answer

    row = ledger_row(admin, key["id"])
    expected, tier = LEDGER[lane]
    stored = {kind: row[f"{kind}_tokens"] for kind in KINDS}
    assert stored == expected, f"the ledger lost a kind of {lane}'s report: {row}"
    assert row["estimated"] is False and "estimated" not in row.get("notes", {}), row
    assert row.get("notes", {}).get("service_tier") == tier, row
    if lane == "anthropic":
        assert row["notes"]["web_searches"] == ANTHROPIC_USAGE["server_tool_use"]["web_search_requests"], row
    cost = expected_cost_nano(expected, tier)
    assert row["cost_nano"] == cost, f"cost {row['cost_nano']} != the card's {cost}: {row}"
    assert row["price_nano"] == cost, row  # no markup
    assert row["status"] == 200 and row["stream"] is stream, row

    if not stream:
        assert answer.headers.get("x-switchyard-usage") == "exact", answer.headers
        assert answer.headers.get("x-request-id") == row["request_id"], (answer.headers, row)

    sdk = answer.usage
    wrong = {path: (at(sdk, path), value) for path, value in caller_usage(ingress, lane, stream).items() if at(sdk, path) != value}
    assert not wrong, f"{ingress} caller's usage (said, meant): {wrong}; all of it: {sdk}"
    if ingress.startswith("openai") or ingress == "bedrock":
        assert answer.tier == caller_tier(ingress, lane), answer.tier
