"""A small upstream MCP server for the MCP gateway tests, built on the official SDK.

    python mcp_upstream.py http --port N [--name tickets|files] [--json-response]
    python mcp_upstream.py stdio [--name tickets|files]

HTTP serves Streamable HTTP at /mcp (``--path``) with stateful sessions
(``Mcp-Session-Id``), SSE responses unless ``--json-response``. ``--port 0``
picks a free port; the bound one is written to ``--port-file`` (and printed as
``listening on http://HOST:PORT/mcp``) once the server accepts connections.

Options shared by both transports:
  --schema-flag FILE  while FILE exists, ``read_ticket`` (tickets) / ``read_file``
                      (files) list an extra required ``reason`` parameter, so
                      the tool's inputSchema (and any digest of it) changes.
                      ``tools/list`` is computed per call.
  --log FILE          append one JSON line per inbound request/notification:
                      {"server","method","name","arguments","authorization",
                      "session_id","protocol_version"}; lets a test see what
                      reached the upstream (and in which revision: the SDK
                      serves 2026-07-28 to a request whose
                      MCP-Protocol-Version names it, the handshake otherwise).

Tools (name ``tickets``): read_ticket(id), read_queue(), close_ticket(id),
slow_echo(text, seconds=1.0), echo_secret(text), whoami(), count(n), explode().
Tools (name ``files``): list_files(), read_file(path), delete_file(path), count(n).
``count(n, label="", pause=0)`` reports n progress steps ("<label> step i"),
``pause`` seconds apart.
Each server also has one prompt ``greeting(name)`` and one resource
``<name>://readme``. An unknown tool or a missing required argument is a
JSON-RPC error -32602; ``explode`` returns a result with ``isError: true``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from typing import Any

import anyio
import mcp.types as types
from mcp.server import Server
from mcp.shared.exceptions import MCPError

INVALID_PARAMS = -32602


def _schema(props: dict[str, str], required: list[str] | None = None) -> dict[str, Any]:
    """A JSON Schema object with string/integer/number properties."""
    return {
        "type": "object",
        "properties": {name: {"type": kind} for name, kind in props.items()},
        "required": list(props) if required is None else required,
    }


def _tools(name: str, schema_changed: bool) -> list[types.Tool]:
    ro = types.ToolAnnotations(read_only_hint=True)
    destructive = types.ToolAnnotations(destructive_hint=True)
    if name == "files":
        read_props = {"path": "string", **({"reason": "string"} if schema_changed else {})}
        return [
            types.Tool(name="list_files", description="List the files.", input_schema=_schema({}), annotations=ro),
            types.Tool(
                name="read_file", description="Read one file.", input_schema=_schema(read_props), annotations=ro
            ),
            types.Tool(
                name="delete_file",
                description="Delete one file.",
                input_schema=_schema({"path": "string"}),
                annotations=destructive,
            ),
            _count_tool(),
        ]
    read_props = {"id": "string", **({"reason": "string"} if schema_changed else {})}
    return [
        types.Tool(name="read_ticket", description="Read one ticket.", input_schema=_schema(read_props), annotations=ro),
        types.Tool(name="read_queue", description="Read the ticket queue.", input_schema=_schema({}), annotations=ro),
        types.Tool(
            name="close_ticket",
            description="Close one ticket.",
            input_schema=_schema({"id": "string"}),
            annotations=destructive,
        ),
        types.Tool(
            name="slow_echo",
            description="Echo text after sleeping `seconds` (default 1.0).",
            input_schema=_schema({"text": "string", "seconds": "number"}, required=["text"]),
        ),
        types.Tool(name="echo_secret", description="Echo text back verbatim.", input_schema=_schema({"text": "string"})),
        types.Tool(
            name="whoami",
            description="The Authorization header this server received ('none' when absent).",
            input_schema=_schema({}),
        ),
        _count_tool(),
        types.Tool(name="explode", description="Always fails with isError: true.", input_schema=_schema({})),
    ]


def _count_tool() -> types.Tool:
    return types.Tool(
        name="count",
        description="Send n progress notifications (`pause` s apart), then return 'counted n'.",
        input_schema=_schema({"n": "integer", "label": "string", "pause": "number"}, required=["n"]),
    )


def _text(text: str, *, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error)


def _header(ctx: Any, name: str) -> str | None:
    """A request header from the HTTP request behind `ctx` (None on stdio)."""
    headers = getattr(getattr(ctx, "request", None), "headers", None)
    return headers.get(name) if headers is not None else None


def build_server(name: str, schema_flag: str | None, log_path: str | None) -> Server[Any]:
    def schema_changed() -> bool:
        return schema_flag is not None and os.path.exists(schema_flag)

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=_tools(name, schema_changed()))

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        args: dict[str, Any] = dict(params.arguments or {})
        tool = next((t for t in _tools(name, schema_changed()) if t.name == params.name), None)
        if tool is None:
            raise MCPError(INVALID_PARAMS, f"Unknown tool: {params.name}")
        missing = [p for p in tool.input_schema.get("required", []) if p not in args]
        if missing:
            raise MCPError(INVALID_PARAMS, f"{params.name}: missing required argument(s): {', '.join(missing)}")

        match params.name:
            case "read_ticket":
                return _text(f"ticket {args['id']}: open")
            case "read_queue":
                return _text("queue: T-1, T-2, T-3")
            case "close_ticket":
                return _text(f"ticket {args['id']}: closed")
            case "slow_echo":
                await anyio.sleep(float(args.get("seconds", 1.0)))
                return _text(str(args["text"]))
            case "echo_secret":
                return _text(str(args["text"]))
            case "whoami":
                return _text(_header(ctx, "authorization") or "none")
            case "count":
                n, label, pause = int(args["n"]), str(args.get("label", "")), float(args.get("pause", 0))
                for i in range(1, n + 1):
                    if pause:
                        await anyio.sleep(pause)
                    # A no-op unless the caller sent `_meta.progressToken`.
                    await ctx.session.report_progress(i, n, f"{label} step {i}".strip())
                return _text(f"counted {n}")
            case "explode":
                return _text("explode: it blew up", is_error=True)
            case "list_files":
                return _text("a.txt\nb.txt")
            case "read_file":
                return _text(f"contents of {args['path']}")
            case "delete_file":
                return _text(f"deleted {args['path']}")
        raise MCPError(INVALID_PARAMS, f"Unknown tool: {params.name}")  # pragma: no cover

    async def list_prompts(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        return types.ListPromptsResult(
            prompts=[
                types.Prompt(
                    name="greeting",
                    description=f"A greeting from the {name} server.",
                    arguments=[types.PromptArgument(name="name", description="Who to greet.", required=True)],
                )
            ]
        )

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        if params.name != "greeting":
            raise MCPError(INVALID_PARAMS, f"Unknown prompt: {params.name}")
        who = (params.arguments or {}).get("name")
        if who is None:
            raise MCPError(INVALID_PARAMS, "greeting: missing required argument: name")
        return types.GetPromptResult(
            description="greeting",
            messages=[
                types.PromptMessage(
                    role="user", content=types.TextContent(type="text", text=f"Hello, {who}! ({name} server)")
                )
            ],
        )

    readme_uri = f"{name}://readme"

    async def list_resources(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[types.Resource(uri=readme_uri, name="readme", mime_type="text/plain")]
        )

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        if str(params.uri) != readme_uri:
            raise MCPError(INVALID_PARAMS, f"Unknown resource: {params.uri}")
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=readme_uri, mime_type="text/plain", text=f"readme of {name}")]
        )

    def tool_input_schema(tool_name: str) -> dict[str, Any] | None:
        # Lets the SDK check 2026-07-28 `Mcp-Param-*` headers without re-running tools/list per call.
        tool = next((t for t in _tools(name, schema_changed()) if t.name == tool_name), None)
        return tool.input_schema if tool is not None else None

    server: Server[Any] = Server(
        name,
        version="1.0.0",
        get_tool_input_schema=tool_input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
    )

    if log_path is not None:

        async def log_middleware(ctx: Any, call_next: Any) -> Any:
            params = ctx.params if isinstance(ctx.params, Mapping) else {}
            record = {
                "server": name,
                "method": ctx.method,
                "name": params.get("name"),
                "arguments": params.get("arguments"),
                "authorization": _header(ctx, "authorization"),
                "session_id": _header(ctx, "mcp-session-id"),
                "protocol_version": _header(ctx, "mcp-protocol-version"),
            }
            with open(log_path, "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")
            return await call_next(ctx)

        server.middleware.append(log_middleware)

    return server


async def serve_http(server: Server[Any], args: argparse.Namespace) -> None:
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    app = server.streamable_http_app(
        streamable_http_path=args.path,
        json_response=args.json_response,
        stateless_http=args.stateless,
        host=args.host,
        # The gateway connects by address; don't let Host/Origin checks get in the way.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning", lifespan="on")
    userver = uvicorn.Server(config)

    async def announce() -> None:
        while not userver.started:
            await anyio.sleep(0.02)
        port = userver.servers[0].sockets[0].getsockname()[1]
        if args.port_file:
            tmp = args.port_file + ".tmp"
            with open(tmp, "w") as f:
                f.write(str(port))
            os.replace(tmp, args.port_file)
        print(f"listening on http://{args.host}:{port}{args.path}", flush=True)

    async with anyio.create_task_group() as tg:
        tg.start_soon(announce)
        await userver.serve()
        tg.cancel_scope.cancel()


async def serve_stdio(server: Server[Any]) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("transport", choices=["http", "stdio"])
    parser.add_argument("--name", default="tickets", choices=["tickets", "files"])
    parser.add_argument("--schema-flag", default=None, metavar="FILE")
    parser.add_argument("--log", default=None, metavar="FILE")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", default=None, metavar="FILE")
    parser.add_argument("--path", default="/mcp")
    parser.add_argument("--json-response", action="store_true", help="answer POSTs with JSON instead of SSE")
    parser.add_argument("--stateless", action="store_true", help="no Mcp-Session-Id (default: stateful)")
    args = parser.parse_args(argv)

    server = build_server(args.name, args.schema_flag, args.log)
    if args.transport == "http":
        anyio.run(serve_http, server, args)
    else:
        anyio.run(serve_stdio, server)


if __name__ == "__main__":
    sys.exit(main())
