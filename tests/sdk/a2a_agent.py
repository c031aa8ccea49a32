"""An A2A agent written with the official a2a-sdk server (1.x, JSON-RPC),
for test_a2a.py: `python a2a_agent.py PORT` serves its card at
`/.well-known/agent-card.json` and JSON-RPC at `/`; `python a2a_agent.py
PORT rest` serves the HTTP+JSON binding only (its card names no JSON-RPC
interface), with `binding: HTTP+JSON` in what it reports.

It answers a message with a task: an artifact `echo: <text>`, completed,
and the run identity the gateway sent it (`x-switchyard-run`,
`x-switchyard-a2a-task`) in the status update's metadata, with the cost
`charge <usd>` asks it to report (`metadata.cost_usd`). `slow` works until
cancelled."""

from __future__ import annotations

import asyncio
import sys

import uvicorn
from starlette.applications import Starlette

from a2a.helpers.proto_helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events.event_queue_v2 import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Part, TaskState


class Echo(AgentExecutor):
    def __init__(self, binding: str) -> None:
        self.binding = binding

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        if context.current_task is None:
            await event_queue.enqueue_event(new_task_from_user_message(context.message))
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.start_work()
        if text == "slow":
            await asyncio.sleep(30)
        headers = context.call_context.state.get("headers", {})
        await updater.add_artifact([Part(text=f"echo: {text}")], name="answer")
        metadata = {
            "run": headers.get("x-switchyard-run", ""),
            "a2a_task": headers.get("x-switchyard-a2a-task", ""),
            "binding": self.binding,
        }
        if text.startswith("charge "):
            metadata["cost_usd"] = float(text.split()[1])
        await updater.update_status(TaskState.TASK_STATE_COMPLETED, metadata=metadata)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.cancel()


def main() -> None:
    port = int(sys.argv[1])
    binding = "HTTP+JSON" if sys.argv[2:] == ["rest"] else "JSONRPC"
    card = AgentCard(
        name="Echo agent",
        description="Echoes what it is sent.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=f"http://127.0.0.1:{port}", protocol_binding=binding, protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="Echo", description="Echoes text.", tags=["echo"])],
    )
    handler = DefaultRequestHandler(agent_executor=Echo(binding), task_store=InMemoryTaskStore(), agent_card=card)
    if binding == "JSONRPC":
        # 0.3's method names too (`message/send`), for 0.3 callers.
        routes = create_jsonrpc_routes(handler, rpc_url="/", enable_v0_3_compat=True)
    else:
        routes = create_rest_routes(handler)
    app = Starlette(routes=create_agent_card_routes(card) + routes)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
