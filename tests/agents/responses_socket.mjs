// The official JS SDK's Responses socket (`ResponsesWS` from
// "openai/resources/responses/ws", over the `ws` package) through the
// gateway: `node responses_socket.mjs ADDR KEY LANE...` runs, per lane, on
// one socket: a tool call, its output after `previous_response_id` with
// `store: false`, three text turns each going on from the one before, then
// a previous id the socket never saw (an error event) and one more turn.
// It prints, per lane, what each turn read, as JSON, for
// tests/sdk/test_responses_socket.py to judge.
import OpenAI from "openai";
import { ResponsesWS } from "openai/resources/responses/ws";

const [addr, apiKey, ...lanes] = process.argv.slice(2);
const TERMINAL = new Set(["response.completed", "response.incomplete", "response.failed", "error"]);
const tools = [{
  type: "function", name: "lookup", description: "find a thing", strict: false,
  parameters: { type: "object", properties: { q: { type: "string" } }, required: ["q"] },
}];

// What one turn read: its event types, text deltas, the terminal response
// (or the error event's error).
async function turn(ws, messages, create) {
  ws.send({ type: "response.create", ...create });
  const seen = { types: [], text: "", arguments: "", response: null, error: null };
  for (;;) {
    const next = await Promise.race([
      messages.next(),
      new Promise((_, reject) => setTimeout(() => reject(new Error("no event in 10 s")), 10_000)),
    ]);
    if (next.done) throw new Error(`the socket ended: ${JSON.stringify(seen)}`);
    const item = next.value;
    if (item.type === "error") {
      // A server `error` event arrives as the SDK's WebSocketError.
      seen.types.push("error");
      seen.error = item.error.error?.error ?? { message: item.error.message };
      return seen;
    }
    if (item.type !== "message") continue;
    const event = item.message;
    seen.types.push(event.type);
    if (event.type === "response.output_text.delta") seen.text += event.delta;
    if (event.type === "response.function_call_arguments.delta") seen.arguments += event.delta;
    if (TERMINAL.has(event.type)) {
      seen.response = event.response ?? null;
      if (event.type === "error") seen.error = event.error;
      return seen;
    }
  }
}

async function lane(model) {
  const client = new OpenAI({ baseURL: `http://${addr}/v1`, apiKey, maxRetries: 0 });
  const ws = new ResponsesWS(client);
  const messages = ws.stream()[Symbol.asyncIterator]();
  const turns = [];
  try {
    const first = await turn(ws, messages, { model, store: false, tools, input: '[mock:tool=lookup {"q":"tides"}]' });
    turns.push(first);
    const call = first.response?.output?.find((item) => item.type === "function_call");
    let previous = await turn(ws, messages, {
      model, store: false, tools, previous_response_id: first.response?.id,
      input: [{ type: "function_call_output", call_id: call?.call_id, output: "high at noon" }],
    });
    turns.push(previous);
    for (const n of [3, 4, 5]) {
      previous = await turn(ws, messages, { model, store: false, previous_response_id: previous.response?.id, input: `turn ${n}` });
      turns.push(previous);
    }
    turns.push(await turn(ws, messages, { model, store: false, previous_response_id: "resp_never_seen", input: "hi" }));
    turns.push(await turn(ws, messages, { model, store: false, input: "still here" }));
  } finally {
    ws.close({ code: 1000, reason: "done" });
  }
  return { lane: model, turns };
}

const out = [];
for (const model of lanes) out.push(await lane(model));
console.log(JSON.stringify(out));
