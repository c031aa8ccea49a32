// The official JS SDKs reading one streamed answer through the gateway:
// `node commit_point.mjs ADDR POOL QUESTION` prints, per SDK, the text it
// read, its first event, its finish, and the error it threw (or null), as
// JSON. tests/sdk/test_commit_point.py runs it.
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";

const [addr, pool, question] = process.argv.slice(2);
const messages = [{ role: "user", content: question }];

function thrown(err) {
  return { name: err.constructor.name, message: String(err.message) };
}

async function openaiChat() {
  const seen = { text: "", first: null, finish: null, error: null, apiError: false };
  const client = new OpenAI({ baseURL: `http://${addr}/v1`, apiKey: "x", maxRetries: 0 });
  try {
    const stream = await client.chat.completions.create({ model: pool, messages, stream: true });
    for await (const chunk of stream) {
      const choice = chunk.choices?.[0];
      seen.first ??= choice?.delta?.role ?? "other";
      seen.text += choice?.delta?.content ?? "";
      seen.finish = choice?.finish_reason ?? seen.finish;
    }
  } catch (err) {
    seen.error = thrown(err);
    seen.apiError = err instanceof OpenAI.APIError;
  }
  return seen;
}

async function anthropicMessages() {
  const seen = { text: "", first: null, finish: null, error: null, apiError: false };
  const client = new Anthropic({ baseURL: `http://${addr}`, apiKey: "x", maxRetries: 0 });
  try {
    const stream = client.messages.stream({ model: pool, max_tokens: 256, messages });
    for await (const event of stream) {
      seen.first ??= event.type;
      if (event.type === "content_block_delta" && event.delta.type === "text_delta") seen.text += event.delta.text;
    }
    seen.finish = (await stream.finalMessage()).stop_reason;
  } catch (err) {
    seen.error = thrown(err);
    seen.apiError = err instanceof Anthropic.APIError;
  }
  return seen;
}

console.log(JSON.stringify({ openai: await openaiChat(), anthropic: await anthropicMessages() }));
