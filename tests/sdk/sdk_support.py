"""One driver per ingress SDK: each speaks to the gateway only through its
official Python SDK and reduces what the SDK parsed to a `Result`, so the
tests can assert the same things across all six protocols.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from typing import Any

import httpx

PROTOCOLS = ["openai", "responses", "anthropic", "gemini", "cohere", "bedrock"]
INGRESSES = ["openai-chat", "openai-responses", "anthropic", "gemini", "cohere", "bedrock"]

QUESTION = "weather in Paris?"
TOOL_RESULT = "sunny, 21C"

# Upstream-error tests: for each ingress, a lane of another protocol and one
# of the same protocol.
OTHER_LANE = {
    "openai-chat": "anthropic",
    "openai-responses": "gemini",
    "anthropic": "openai",
    "gemini": "bedrock",
    "cohere": "responses",
    "bedrock": "cohere",
}
SAME_LANE = {
    "openai-chat": "openai",
    "openai-responses": "responses",
    "anthropic": "anthropic",
    "gemini": "gemini",
    "cohere": "cohere",
    "bedrock": "bedrock",
}

# What each SDK reports as the stop reason of a finished text answer, and of
# a turn that ends in a tool call.
END_STOP = {
    "openai-chat": "stop",
    "openai-responses": "completed",
    "anthropic": "end_turn",
    "anthropic-path": "end_turn",
    "gemini": "STOP",
    "cohere": "COMPLETE",
    "bedrock": "end_turn",
}
TOOL_STOP = {
    "openai-chat": "tool_calls",
    "openai-responses": "completed",
    "anthropic": "tool_use",
    "gemini": "STOP",
    "cohere": "TOOL_CALL",
    "bedrock": "tool_use",
}


def stop_name(stop: Any) -> str:
    """An SDK enum's name (Gemini FinishReason.STOP -> "STOP"), else the string."""
    return getattr(stop, "name", None) or str(stop)


def rate_limit_lane(ingress: str, protocol: str, stream: bool) -> str:
    """A lane used only by one 429 test (an ingress, a lane protocol, plain
    or streamed).

    An upstream 429 rests its lane for the Retry-After (1 s from the mock),
    and a rested lane answers the next caller with the gateway's own 429
    instead of reaching the upstream; each test gets its own lane so it sees
    the upstream's answer."""
    return f"rl-{ingress}-{protocol}-{'stream' if stream else 'plain'}"


RATE_LIMIT_LANES = [
    (rate_limit_lane(ingress, lanes[ingress], stream), lanes[ingress])
    for ingress in INGRESSES
    for lanes in (OTHER_LANE, SAME_LANE)
    for stream in (False, True)
]

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}


# --------------------------------------------------------------- evidence


class Recorder:
    """Remembers the requests the SDKs send; replays the last one on failure."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []

    def httpx_hook(self, request) -> None:  # httpx and httpx2 alike
        try:
            body = bytes(request.content)
        except Exception:  # a streamed request body; the SDKs send JSON bytes
            body = b"<unread>"
        self.requests.append((request.method, str(request.url), dict(request.headers), body))

    def botocore_hook(self, request, **_: Any) -> None:
        body = request.body or b""
        if hasattr(body, "read"):
            body = b"<stream>"
        if isinstance(body, str):
            body = body.encode()
        self.requests.append((request.method, request.url, dict(request.headers), body))
        return None  # let botocore send it

    def evidence(self) -> str:
        if not self.requests:
            return "(the SDK sent no request)"
        method, url, headers, body = self.requests[-1]
        keep = {k: v for k, v in headers.items() if k.lower() in ("content-type", "accept", "anthropic-version")}
        out = [f"--- replay of the SDK's request #{len(self.requests)}: {method} {url}", f"request body: {clip(body)}"]
        try:
            r = httpx.request(method, url, headers=keep, content=body, timeout=10)
            lane = r.headers.get("x-switchyard-lane", "-")
            out.append(f"gateway answered {r.status_code} (content-type {r.headers.get('content-type')}, lane {lane})")
            out.append(f"raw body: {clip(r.content)}")
        except Exception as err:  # noqa: BLE001
            out.append(f"replay failed: {err!r}")
        return "\n".join(out)

    @contextlib.contextmanager
    def capture(self):
        """Runs a test body; any failure is re-raised with the raw HTTP evidence."""
        self.requests.clear()
        try:
            yield self
        except BaseException as err:
            if isinstance(err, (KeyboardInterrupt, SystemExit)):
                raise
            raise AssertionError(f"{type(err).__module__}.{type(err).__name__}: {err}\n{self.evidence()}") from err


def clip(data: bytes, limit: int = 1800) -> str:
    text = data.decode("utf-8", errors="backslashreplace") if isinstance(data, bytes) else str(data)
    if any(c in text for c in "\x00\x01\x02\x03"):  # binary (event-stream): show bytes
        text = repr(data)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


# ------------------------------------------------------------------ result


@dataclass
class Call:
    id: str | None
    name: str
    args: Any  # parsed arguments (dict when the SDK gives JSON)
    raw_args: Any = None  # arguments exactly as the SDK gave them
    extra: Any = None  # SDK-specific bits needed to echo the call back


@dataclass
class Result:
    text: str = ""
    input_tokens: int | None = None
    output_tokens: int | None = None
    stop: Any = None
    calls: list[Call] = field(default_factory=list)
    extra: Any = None


def parse_args(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            return raw
    return raw


# ----------------------------------------------------------------- drivers


class Driver:
    name = ""

    def chat(self, model: str, text: str, stream: bool) -> Result:
        raise NotImplementedError

    def tool_call(self, model: str, stream: bool, text: str = QUESTION) -> Result:
        raise NotImplementedError

    def tool_result(self, model: str, first: Result, stream: bool) -> Result:
        raise NotImplementedError

    def close(self) -> None:
        pass


class OpenAIChat(Driver):
    name = "openai-chat"

    def __init__(self, addr: str, rec: Recorder, api_key: str = "x") -> None:
        import openai

        self.client = openai.OpenAI(
            base_url=f"http://{addr}/v1",
            api_key=api_key,
            max_retries=0,
            http_client=openai.DefaultHttpxClient(event_hooks={"request": [rec.httpx_hook]}),
        )

    TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "weather", "parameters": SCHEMA}}]

    def _run(self, model, messages, stream, tools=None) -> Result:
        kwargs: dict[str, Any] = {"model": model, "messages": messages}
        if tools:
            kwargs["tools"] = tools
        out = Result()
        if not stream:
            r = self.client.chat.completions.create(**kwargs)
            choice = r.choices[0]
            out.text = choice.message.content or ""
            out.stop = choice.finish_reason
            for tc in choice.message.tool_calls or []:
                out.calls.append(Call(tc.id, tc.function.name, parse_args(tc.function.arguments), tc.function.arguments))
            if r.usage is not None:
                out.input_tokens, out.output_tokens = r.usage.prompt_tokens, r.usage.completion_tokens
            return out
        partial: dict[int, dict[str, Any]] = {}
        with self.client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kwargs) as s:
            for chunk in s:
                if chunk.usage is not None:
                    out.input_tokens, out.output_tokens = chunk.usage.prompt_tokens, chunk.usage.completion_tokens
                for choice in chunk.choices:
                    if choice.delta.content:
                        out.text += choice.delta.content
                    for tc in choice.delta.tool_calls or []:
                        slot = partial.setdefault(tc.index, {"id": None, "name": "", "args": ""})
                        if tc.id:
                            slot["id"] = tc.id
                        if tc.function and tc.function.name:
                            slot["name"] += tc.function.name
                        if tc.function and tc.function.arguments:
                            slot["args"] += tc.function.arguments
                    if choice.finish_reason:
                        out.stop = choice.finish_reason
        for _, slot in sorted(partial.items()):
            out.calls.append(Call(slot["id"], slot["name"], parse_args(slot["args"]), slot["args"]))
        return out

    def chat(self, model, text, stream):
        return self._run(model, [{"role": "user", "content": text}], stream)

    def tool_call(self, model, stream, text=QUESTION):
        return self._run(model, [{"role": "user", "content": text}], stream, self.TOOLS)

    def tool_result(self, model, first, stream):
        call = first.calls[0]
        messages = [
            {"role": "user", "content": QUESTION},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.raw_args}}],
            },
            {"role": "tool", "tool_call_id": call.id, "content": TOOL_RESULT},
        ]
        return self._run(model, messages, stream, self.TOOLS)

    def close(self):
        self.client.close()


class OpenAIResponses(Driver):
    name = "openai-responses"

    def __init__(self, addr: str, rec: Recorder, api_key: str = "x") -> None:
        import openai

        self.client = openai.OpenAI(
            base_url=f"http://{addr}/v1",
            api_key=api_key,
            max_retries=0,
            http_client=openai.DefaultHttpxClient(event_hooks={"request": [rec.httpx_hook]}),
        )

    TOOLS = [{"type": "function", "name": "get_weather", "description": "weather", "parameters": SCHEMA}]

    def _run(self, model, input, stream, tools=None) -> Result:
        kwargs: dict[str, Any] = {"model": model, "input": input}
        if tools:
            kwargs["tools"] = tools
        out = Result()
        if not stream:
            final = self.client.responses.create(**kwargs)
            out.text = final.output_text
        else:
            final = None
            with self.client.responses.create(stream=True, **kwargs) as s:
                for event in s:
                    if event.type == "response.output_text.delta":
                        out.text += event.delta
                    elif event.type in ("response.completed", "response.incomplete", "response.failed"):
                        final = event.response
            if final is None:
                raise AssertionError("the Responses stream ended without response.completed")
            assert final.output_text == out.text, (
                f"streamed deltas {out.text!r} differ from response.completed output {final.output_text!r}"
            )
        out.stop = final.status
        for item in final.output:
            if item.type == "function_call":
                # The item's own id (`fc_…`) rides along: clients replay it.
                out.calls.append(Call(item.call_id, item.name, parse_args(item.arguments), item.arguments, extra=item.id))
        if final.usage is not None:
            out.input_tokens, out.output_tokens = final.usage.input_tokens, final.usage.output_tokens
        out.extra = final
        return out

    def chat(self, model, text, stream):
        return self._run(model, text, stream)

    def tool_call(self, model, stream, text=QUESTION):
        return self._run(model, text, stream, self.TOOLS)

    def tool_result(self, model, first, stream):
        call = first.calls[0]
        replayed = {"type": "function_call", "call_id": call.id, "name": call.name, "arguments": call.raw_args}
        if call.extra:
            replayed["id"] = call.extra
        items = [
            {"role": "user", "content": QUESTION},
            replayed,
            {"type": "function_call_output", "call_id": call.id, "output": TOOL_RESULT},
        ]
        return self._run(model, items, stream, self.TOOLS)

    def close(self):
        self.client.close()


class Anthropic(Driver):
    name = "anthropic"

    def __init__(self, addr: str, rec: Recorder, base_path: str = "", api_key: str = "x") -> None:
        import anthropic

        self.client = anthropic.Anthropic(
            base_url=f"http://{addr}{base_path}",
            api_key=api_key,
            max_retries=0,
            http_client=anthropic.DefaultHttpxClient(event_hooks={"request": [rec.httpx_hook]}),
        )

    TOOLS = [{"name": "get_weather", "description": "weather", "input_schema": SCHEMA}]

    def _run(self, model, messages, stream, tools=None) -> Result:
        kwargs: dict[str, Any] = {"model": model, "max_tokens": 256, "messages": messages}
        if tools:
            kwargs["tools"] = tools
        if stream:
            with self.client.messages.stream(**kwargs) as s:
                message = s.get_final_message()
        else:
            message = self.client.messages.create(**kwargs)
        out = Result(stop=message.stop_reason, extra=message)
        for block in message.content:
            if block.type == "text":
                out.text += block.text
            elif block.type == "tool_use":
                out.calls.append(Call(block.id, block.name, block.input, block.input))
        if message.usage is not None:
            out.input_tokens, out.output_tokens = message.usage.input_tokens, message.usage.output_tokens
        return out

    def chat(self, model, text, stream):
        return self._run(model, [{"role": "user", "content": text}], stream)

    def tool_call(self, model, stream, text=QUESTION):
        return self._run(model, [{"role": "user", "content": text}], stream, self.TOOLS)

    def tool_result(self, model, first, stream):
        call = first.calls[0]
        messages = [
            {"role": "user", "content": QUESTION},
            {"role": "assistant", "content": [{"type": "tool_use", "id": call.id, "name": call.name, "input": call.raw_args}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": TOOL_RESULT}]},
        ]
        return self._run(model, messages, stream, self.TOOLS)

    def close(self):
        self.client.close()


class Gemini(Driver):
    name = "gemini"

    def __init__(self, addr: str, rec: Recorder, api_key: str = "x") -> None:
        from google import genai
        from google.genai import types

        self.types = types
        self.client = genai.Client(
            api_key=api_key,
            http_options=types.HttpOptions(
                base_url=f"http://{addr}",
                api_version="v1beta",
                retry_options=types.HttpRetryOptions(attempts=1),
                client_args={"event_hooks": {"request": [rec.httpx_hook]}},
            ),
        )

    def _tools(self):
        t = self.types
        return [
            t.Tool(
                function_declarations=[
                    t.FunctionDeclaration(
                        name="get_weather",
                        description="weather",
                        parameters=t.Schema(
                            type=t.Type.OBJECT,
                            properties={"city": t.Schema(type=t.Type.STRING)},
                            required=["city"],
                        ),
                    )
                ]
            )
        ]

    def _run(self, model, contents, stream, tools=None) -> Result:
        t = self.types
        config = None
        if tools:
            config = t.GenerateContentConfig(
                tools=tools,
                automatic_function_calling=t.AutomaticFunctionCallingConfig(disable=True),
            )
        out = Result()
        chunks = (
            list(self.client.models.generate_content_stream(model=model, contents=contents, config=config))
            if stream
            else [self.client.models.generate_content(model=model, contents=contents, config=config)]
        )
        model_parts = []
        for chunk in chunks:
            if chunk.usage_metadata is not None and chunk.usage_metadata.candidates_token_count is not None:
                out.input_tokens = chunk.usage_metadata.prompt_token_count
                out.output_tokens = chunk.usage_metadata.candidates_token_count
            for candidate in chunk.candidates or []:
                if candidate.finish_reason is not None:
                    out.stop = candidate.finish_reason
                for part in (candidate.content.parts if candidate.content else None) or []:
                    model_parts.append(part)
                    if part.text and not part.thought:
                        out.text += part.text
                    if part.function_call is not None:
                        fc = part.function_call
                        out.calls.append(Call(fc.id, fc.name, fc.args, fc.args, extra=part))
        out.extra = model_parts
        return out

    def _question(self, text=QUESTION):
        t = self.types
        return t.Content(role="user", parts=[t.Part(text=text)])

    def chat(self, model, text, stream):
        return self._run(model, text, stream)

    def tool_call(self, model, stream, text=QUESTION):
        return self._run(model, [self._question(text)], stream, self._tools())

    def tool_result(self, model, first, stream):
        t = self.types
        call = first.calls[0]
        contents = [
            self._question(),
            t.Content(role="model", parts=[call.extra]),
            t.Content(
                role="user",
                parts=[t.Part(function_response=t.FunctionResponse(id=call.id, name=call.name, response={"result": TOOL_RESULT}))],
            ),
        ]
        return self._run(model, contents, stream, self._tools())

    def close(self):
        self.client.close()


class Cohere(Driver):
    name = "cohere"

    def __init__(self, addr: str, rec: Recorder, api_key: str = "x") -> None:
        import cohere

        # cohere takes a plain httpx client; 300 s is its own default timeout
        self.http = httpx.Client(timeout=300, event_hooks={"request": [rec.httpx_hook]})
        self.client = cohere.ClientV2(api_key=api_key, base_url=f"http://{addr}", max_retries=0, httpx_client=self.http)

    TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "weather", "parameters": SCHEMA}}]

    def _run(self, model, messages, stream, tools=None) -> Result:
        kwargs: dict[str, Any] = {"model": model, "messages": messages}
        if tools:
            kwargs["tools"] = tools
        out = Result()
        if not stream:
            r = self.client.chat(**kwargs)
            out.stop = r.finish_reason
            for item in r.message.content or []:
                if item.type == "text":
                    out.text += item.text
            for tc in r.message.tool_calls or []:
                out.calls.append(Call(tc.id, tc.function.name, parse_args(tc.function.arguments), tc.function.arguments))
            out.extra = r.message.tool_plan
            if r.usage is not None and r.usage.tokens is not None:
                out.input_tokens, out.output_tokens = r.usage.tokens.input_tokens, r.usage.tokens.output_tokens
            return out
        calls: list[dict[str, Any]] = []
        plan = ""
        for event in self.client.chat_stream(**kwargs):
            kind = event.type
            if kind == "content-delta":
                out.text += event.delta.message.content.text or ""
            elif kind == "tool-plan-delta":
                plan += event.delta.message.tool_plan or ""
            elif kind == "tool-call-start":
                tc = event.delta.message.tool_calls
                calls.append({"id": tc.id, "name": tc.function.name, "args": tc.function.arguments or ""})
            elif kind == "tool-call-delta":
                calls[-1]["args"] += event.delta.message.tool_calls.function.arguments or ""
            elif kind == "message-end":
                out.stop = event.delta.finish_reason
                usage = event.delta.usage
                if usage is not None and usage.tokens is not None:
                    out.input_tokens, out.output_tokens = usage.tokens.input_tokens, usage.tokens.output_tokens
        for c in calls:
            out.calls.append(Call(c["id"], c["name"], parse_args(c["args"]), c["args"]))
        out.extra = plan or None
        return out

    def chat(self, model, text, stream):
        return self._run(model, [{"role": "user", "content": text}], stream)

    def tool_call(self, model, stream, text=QUESTION):
        return self._run(model, [{"role": "user", "content": text}], stream, self.TOOLS)

    def tool_result(self, model, first, stream):
        call = first.calls[0]
        assistant: dict[str, Any] = {
            "role": "assistant",
            "tool_calls": [{"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.raw_args}}],
        }
        if first.extra:
            assistant["tool_plan"] = first.extra
        messages = [
            {"role": "user", "content": QUESTION},
            assistant,
            {"role": "tool", "tool_call_id": call.id, "content": TOOL_RESULT},
        ]
        return self._run(model, messages, stream, self.TOOLS)

    def close(self):
        self.http.close()


class Bedrock(Driver):
    name = "bedrock"

    def __init__(self, addr: str, rec: Recorder, aws: tuple[str, str] = ("x", "x")) -> None:
        import boto3
        from botocore.config import Config

        self.client = boto3.client(
            "bedrock-runtime",
            endpoint_url=f"http://{addr}",
            region_name="us-east-1",
            aws_access_key_id=aws[0],
            aws_secret_access_key=aws[1],
            # total_max_attempts=1: no retries (`max_attempts` counts retries, so 1 would retry once)
            config=Config(retries={"total_max_attempts": 1, "mode": "standard"}),
        )
        self.client.meta.events.register("before-send.bedrock-runtime", rec.botocore_hook)

    TOOL_CONFIG = {"tools": [{"toolSpec": {"name": "get_weather", "description": "weather", "inputSchema": {"json": SCHEMA}}}]}

    def _run(self, model, messages, stream, tools=False) -> Result:
        kwargs: dict[str, Any] = {"modelId": model, "messages": messages}
        if tools:
            kwargs["toolConfig"] = self.TOOL_CONFIG
        out = Result()
        if not stream:
            r = self.client.converse(**kwargs)
            out.stop = r.get("stopReason")
            for block in r["output"]["message"]["content"]:
                if "text" in block:
                    out.text += block["text"]
                if "toolUse" in block:
                    tu = block["toolUse"]
                    out.calls.append(Call(tu["toolUseId"], tu["name"], tu["input"], tu["input"]))
            usage = r.get("usage")
            if usage:
                out.input_tokens, out.output_tokens = usage.get("inputTokens"), usage.get("outputTokens")
            return out
        r = self.client.converse_stream(**kwargs)
        blocks: dict[int, dict[str, Any]] = {}
        for event in r["stream"]:
            if "contentBlockStart" in event:
                e = event["contentBlockStart"]
                tu = e.get("start", {}).get("toolUse")
                if tu:
                    blocks[e.get("contentBlockIndex", 0)] = {"id": tu.get("toolUseId"), "name": tu.get("name"), "args": ""}
            elif "contentBlockDelta" in event:
                e = event["contentBlockDelta"]
                delta = e.get("delta", {})
                if "text" in delta:
                    out.text += delta["text"]
                if "toolUse" in delta:
                    slot = blocks.setdefault(e.get("contentBlockIndex", 0), {"id": None, "name": "", "args": ""})
                    slot["args"] += delta["toolUse"].get("input", "")
            elif "messageStop" in event:
                out.stop = event["messageStop"].get("stopReason")
            elif "metadata" in event:
                usage = event["metadata"].get("usage") or {}
                out.input_tokens, out.output_tokens = usage.get("inputTokens"), usage.get("outputTokens")
        for _, slot in sorted(blocks.items()):
            out.calls.append(Call(slot["id"], slot["name"], parse_args(slot["args"]), parse_args(slot["args"])))
        return out

    def chat(self, model, text, stream):
        return self._run(model, [{"role": "user", "content": [{"text": text}]}], stream)

    def tool_call(self, model, stream, text=QUESTION):
        return self._run(model, [{"role": "user", "content": [{"text": text}]}], stream, tools=True)

    def tool_result(self, model, first, stream):
        call = first.calls[0]
        messages = [
            {"role": "user", "content": [{"text": QUESTION}]},
            {"role": "assistant", "content": [{"toolUse": {"toolUseId": call.id, "name": call.name, "input": call.raw_args}}]},
            {"role": "user", "content": [{"toolResult": {"toolUseId": call.id, "content": [{"text": TOOL_RESULT}]}}]},
        ]
        return self._run(model, messages, stream, tools=True)

    def close(self):
        self.client.close()


def make_drivers(addr: str, rec: Recorder, api_key: str = "x", aws: tuple[str, str] = ("x", "x")) -> dict[str, Driver]:
    """One driver per ingress, presenting `api_key` (Bedrock: signing with `aws`)."""
    return {
        "openai-chat": OpenAIChat(addr, rec, api_key),
        "openai-responses": OpenAIResponses(addr, rec, api_key),
        "anthropic": Anthropic(addr, rec, api_key=api_key),
        "anthropic-path": Anthropic(addr, rec, base_path="/lane-openai", api_key=api_key),
        "gemini": Gemini(addr, rec, api_key),
        "cohere": Cohere(addr, rec, api_key),
        "bedrock": Bedrock(addr, rec, aws),
    }


# ------------------------------------------------------------------ errors


@dataclass
class ErrorFacts:
    own: bool  # the SDK's own API error type
    status: int | None  # the HTTP status the SDK reports
    message: str  # the error message the SDK exposes
    kind: str | None  # the protocol's error type/status/code string
    headers: dict[str, str]  # response headers, lower-cased names
    described: str


def _headers(raw: Any) -> dict[str, str]:
    try:
        return {str(k).lower(): str(v) for k, v in dict(raw or {}).items()}
    except Exception:  # noqa: BLE001
        return {}


def error_facts(ingress: str, exc: BaseException) -> ErrorFacts:
    name = type(exc).__name__
    if ingress.startswith("openai"):
        import openai

        if not isinstance(exc, openai.APIStatusError):
            return ErrorFacts(False, None, str(exc), None, {}, name)
        return ErrorFacts(True, exc.status_code, exc.message, exc.type, _headers(exc.response.headers), name)
    if ingress.startswith("anthropic"):
        import anthropic

        if not isinstance(exc, anthropic.APIStatusError):
            return ErrorFacts(False, None, str(exc), None, {}, name)
        body = exc.body if isinstance(exc.body, dict) else {}
        kind = (body.get("error") or {}).get("type") if isinstance(body.get("error"), dict) else None
        return ErrorFacts(True, exc.status_code, exc.message, kind, _headers(exc.response.headers), name)
    if ingress == "gemini":
        from google.genai import errors

        if not isinstance(exc, errors.APIError):
            return ErrorFacts(False, None, str(exc), None, {}, name)
        response = getattr(exc, "response", None)
        return ErrorFacts(True, exc.code, str(exc.message), exc.status, _headers(getattr(response, "headers", None)), name)
    if ingress == "cohere":
        from cohere.core.api_error import ApiError

        if not isinstance(exc, ApiError):
            return ErrorFacts(False, None, str(exc), None, {}, name)
        return ErrorFacts(True, exc.status_code, str(exc.body), None, _headers(exc.headers), name)
    if ingress == "bedrock":
        from botocore.exceptions import ClientError

        if not isinstance(exc, ClientError):
            return ErrorFacts(False, None, str(exc), None, {}, name)
        err = exc.response.get("Error", {})
        meta = exc.response.get("ResponseMetadata", {})
        return ErrorFacts(
            True, meta.get("HTTPStatusCode"), str(err.get("Message", "")), err.get("Code"),
            _headers(meta.get("HTTPHeaders")), f"ClientError[{err.get('Code')}]",
        )
    raise ValueError(ingress)


def expected_error(ingress: str, status: int):
    """The exception class the SDK documents for `status`, and the protocol's
    error type string (None where the protocol has none)."""
    if ingress.startswith("openai"):
        import openai

        return {400: (openai.BadRequestError, "invalid_request_error"), 429: (openai.RateLimitError, "rate_limit_error")}[status]
    if ingress.startswith("anthropic"):
        import anthropic

        return {400: (anthropic.BadRequestError, "invalid_request_error"), 429: (anthropic.RateLimitError, "rate_limit_error")}[status]
    if ingress == "gemini":
        from google.genai import errors

        return {400: (errors.ClientError, "INVALID_ARGUMENT"), 429: (errors.ClientError, "RESOURCE_EXHAUSTED")}[status]
    if ingress == "cohere":
        import cohere

        return {400: (cohere.errors.BadRequestError, None), 429: (cohere.errors.TooManyRequestsError, None)}[status]
    if ingress == "bedrock":
        from botocore.exceptions import ClientError

        return {400: (ClientError, "ValidationException"), 429: (ClientError, "ThrottlingException")}[status]
    raise ValueError(ingress)


# The mock's reasoning text and its signature (crates/transport/src/mock.rs:
# a keyed hash of the text, so a lane refuses the text changed or a
# signature it did not give).
MOCK_THOUGHT = "the user wants a deterministic answer"
MOCK_SIGNATURE = "mock-sig-f6602ef5033b30028853266c4fb05e7d"
