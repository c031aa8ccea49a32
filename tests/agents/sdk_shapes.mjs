// Everything the official TypeScript SDKs (@anthropic-ai/sdk, openai,
// pinned here) can put in a request is modelled by the gateway or reported,
// never refused nor lost in silence: the JS twin of
// tests/sdk/test_sdk_shapes.py, run by tests/sdk/test_sdk_shapes_ts.py.
//
// `node sdk_shapes.mjs CONFIG_JSON` walks the SDKs' own .d.ts request types
// with the TypeScript compiler API: Anthropic's `MessageCreateParamsBase`
// (stable and beta), the `MessageParam` roles, every content block param
// and `ToolParam` member; OpenAI's `ChatCompletionCreateParamsBase`, the
// message params' roles and content parts; and `ResponseCreateParamsBase`,
// its input items and their content parts. For each member, role, block,
// part or item it makes the smallest value the type allows (required
// members only, first choices), sends a request holding it with the SDK
// through the gateway to a lane of the same protocol and to one of another
// protocol, and prints one JSON line per case: what was sent, each lane's
// status, and the cross lane's `x-switchyard-dropped`. The config names
// the gateway, the lanes, the mock's signed thought, and the shapes each
// family takes special care of (tests/sdk/modelled.json).
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import path from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const here = path.dirname(fileURLToPath(import.meta.url));
const config = JSON.parse(process.argv[2]);

// The request types, named from the SDKs' public modules.
const ENTRY = path.join(here, "__sdk_shapes_entry__.ts");
const ENTRY_TEXT = `
import type * as AM from "@anthropic-ai/sdk/resources/messages/messages";
import type * as ABM from "@anthropic-ai/sdk/resources/beta/messages/messages";
import type * as OC from "openai/resources/chat/completions/completions";
import type * as OR from "openai/resources/responses/responses";
export type AnthropicCreate = AM.MessageCreateParamsBase;
export type AnthropicBetaCreate = ABM.MessageCreateParamsBase;
export type AnthropicMessage = AM.MessageParam;
export type AnthropicBetaMessage = ABM.BetaMessageParam;
export type AnthropicTool = AM.Tool;
export type AnthropicBetaTool = ABM.BetaTool;
export type ChatCreate = OC.ChatCompletionCreateParamsBase;
export type ChatMessage = OC.ChatCompletionMessageParam;
export type ResponsesCreate = OR.ResponseCreateParamsBase;
export type ResponsesItem = OR.ResponseInputItem;
`;

function program() {
  const options = {
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    types: [],
  };
  const host = ts.createCompilerHost(options);
  const { getSourceFile, fileExists, readFile } = host;
  host.getSourceFile = (name, language, ...rest) =>
    name === ENTRY ? ts.createSourceFile(name, ENTRY_TEXT, language) : getSourceFile.call(host, name, language, ...rest);
  host.fileExists = (name) => name === ENTRY || fileExists.call(host, name);
  host.readFile = (name) => (name === ENTRY ? ENTRY_TEXT : readFile.call(host, name));
  const made = ts.createProgram([ENTRY], options, host);
  const checker = made.getTypeChecker();
  const entry = made.getSourceFile(ENTRY);
  const problems = ts.getPreEmitDiagnostics(made, entry);
  if (problems.length) {
    throw new Error(problems.map((d) => ts.flattenDiagnosticMessageText(d.messageText, "\n")).join("\n"));
  }
  const types = {};
  for (const symbol of checker.getExportsOfModule(checker.getSymbolAtLocation(entry))) {
    types[symbol.name] = checker.getDeclaredTypeOfSymbol(symbol);
  }
  return { checker, types };
}

const { checker, types } = program();
const F = ts.TypeFlags;

/** The options of a union (null and undefined left out), else the type. */
function options(type) {
  const all = type.isUnion() ? type.types : [type];
  return all.filter((t) => !(t.flags & (F.Null | F.Undefined | F.Void)));
}

function isObject(type) {
  return !!(type.flags & F.Object) && !checker.isArrayType(type) && !checker.isTupleType(type);
}

function elementOf(type) {
  return checker.isArrayType(type) ? checker.getTypeArguments(type)[0] : null;
}

/** name → [type, required] of an object type's members. */
function members(type) {
  const out = new Map();
  for (const symbol of checker.getPropertiesOfType(type)) {
    const declared = checker.getTypeOfSymbol(symbol);
    out.set(symbol.name, [checker.getNonNullableType(declared), !(symbol.flags & ts.SymbolFlags.Optional)]);
  }
  return out;
}

/** Every object type a type may hold at its top (through unions and arrays). */
function objects(type) {
  const found = [];
  for (const option of options(type)) {
    const inner = elementOf(option);
    if (inner) found.push(...objects(inner));
    else if (isObject(option) && checker.getPropertiesOfType(option).length) found.push(option);
  }
  return found;
}

/** The literal a member holds (`type: 'text'`), else undefined. */
function literalOf(type, member) {
  const entry = members(type).get(member);
  if (!entry) return undefined;
  const [memberType] = entry;
  const only = options(memberType);
  return only.length === 1 && only[0].isStringLiteral() ? only[0].value : undefined;
}

function isPlain(type) {
  return !!(type.flags & (F.String | F.Number | F.Boolean | F.BooleanLiteral)) ||
    (type.isIntersection() && type.types.some((t) => t.flags & F.String));
}

/** The smallest value of `type`: required members only, first choices. */
function value(type, depth = 0) {
  if (depth > 6) return {};
  const choices = options(type);
  if (choices.length > 1) {
    // A plain value first (a string for `string | Shape`), else the first literal, else the first shape.
    const plain = choices.find(isPlain) ?? choices.find((t) => t.isLiteral()) ??
      choices.find((t) => t.flags & F.BooleanLiteral) ?? choices[0];
    return value(plain, depth + 1);
  }
  const [only] = choices;
  if (!only) return null;
  if (only.isStringLiteral() || only.isNumberLiteral()) return only.value;
  if (only.flags & F.BooleanLiteral) return checker.typeToString(only) === "true";
  if (only.flags & F.String || (only.isIntersection() && only.types.some((t) => t.flags & F.String))) return "x";
  if (only.flags & (F.Number | F.BigInt)) return 1;
  if (only.flags & F.Boolean) return true;
  const inner = elementOf(only);
  if (inner) return [value(inner, depth + 1)];
  if (checker.isTupleType(only)) return checker.getTypeArguments(only).map((t) => value(t, depth + 1));
  if (isObject(only)) {
    const out = {};
    for (const [name, [memberType, required]] of [...members(only)].sort(([a], [b]) => a.localeCompare(b))) {
      if (required) out[name] = value(memberType, depth + 1);
    }
    return out;
  }
  return {};
}

/** kind → object type, over a union of shapes keyed by `key`. */
function byLiteral(list, key, into = new Map()) {
  for (const type of list) {
    const kind = literalOf(type, key);
    if (kind !== undefined && !into.has(kind)) into.set(kind, type);
  }
  return into;
}

function memberType(type, name) {
  return members(type).get(name)?.[0];
}

/** Whether the SDK sends member `name` of `type` as a header (its doc says so). */
function isHeaderParam(type, name) {
  const symbol = checker.getPropertyOfType(type, name);
  return ts.displayPartsToString(symbol?.getDocumentationComment(checker) ?? []).startsWith("Header param:");
}

// --- sending -----------------------------------------------------------

const anthropic = new Anthropic({ baseURL: `http://${config.gateway}`, apiKey: "unused", maxRetries: 0, timeout: 30000 });
const openai = new OpenAI({ baseURL: `http://${config.gateway}/v1`, apiKey: "unused", maxRetries: 0, timeout: 30000 });

async function consume(data) {
  if (data && typeof data[Symbol.asyncIterator] === "function") {
    for await (const _ of data) { /* drained */ }
  }
}

/** One call: its status, the dropped paths, and an error's text. */
async function call(send) {
  try {
    const { data, response } = await send().withResponse();
    await consume(data);
    const header = response.headers.get("x-switchyard-dropped") ?? "";
    return { status: response.status, dropped: header.split(",").map((p) => p.trim()).filter(Boolean) };
  } catch (err) {
    return { status: err.status ?? 0, dropped: [], error: String(err.message).slice(0, 500) };
  }
}

const results = [];

async function check(family, what, reportedAs, send) {
  const same = await call(() => send(config.lanes[family].same));
  const cross = await call(() => send(config.lanes[family].cross));
  const pending = config[family].pending?.[what] ?? null;
  results.push({ family, what, reported_as: reportedAs, same, cross, body: send.body, pending });
}

// --- Anthropic Messages ------------------------------------------------

const A = config.anthropic;

function anthropicSend(beta, body) {
  const send = (lane) => {
    const request = { model: lane, max_tokens: 64, ...body };
    return beta ? anthropic.beta.messages.create(request) : anthropic.messages.create(request);
  };
  send.body = body;
  return send;
}

const anthropicMessages = [...objects(types.AnthropicMessage), ...objects(types.AnthropicBetaMessage)];

function anthropicBlocks() {
  const found = new Map();
  for (const message of anthropicMessages) {
    const blocks = objects(memberType(message, "content"));
    byLiteral(blocks, "type", found);
    for (const block of blocks) {
      // A tool result's own content blocks.
      if (literalOf(block, "type") === "tool_result" && memberType(block, "content")) {
        byLiteral(objects(memberType(block, "content")), "type", found);
      }
    }
  }
  return found;
}

async function anthropicFamily() {
  const roles = new Set(anthropicMessages.map((m) => literalOf(m, "role")));
  for (const role of [...roles].sort()) {
    const messages = [{ role: "user", content: "hi" }, { role: "assistant", content: "hello" }, { role, content: "a note" }];
    if (role !== "user") messages.push({ role: "user", content: "go on" });
    await check("anthropic", `role ${role}`, null, anthropicSend(role === "system", { messages }));
  }
  const blocks = anthropicBlocks();
  for (const [kind, type] of [...blocks].sort(([a], [b]) => a.localeCompare(b))) {
    let block = value(type);
    if (kind === "thinking") block = { ...block, thinking: config.thought, signature: config.signature };
    if (kind === "tool_reference") block = { type: "tool_result", tool_use_id: "toolu_1", content: [block] };
    let messages;
    if (A.system_blocks.includes(kind)) {
      messages = [{ role: "user", content: "hi" }, { role: "system", content: [block] }];
    } else if (A.assistant_blocks.includes(kind) || (kind.endsWith("_tool_result") && kind !== "tool_result")) {
      messages = [{ role: "user", content: "hi" }, { role: "assistant", content: [block] }, { role: "user", content: "go on" }];
    } else {
      messages = [{ role: "user", content: [block] }];
    }
    const reported = A.modelled_blocks.includes(kind) ? null : `messages.content.${kind}`;
    await check("anthropic", `content block ${kind}`, reported, anthropicSend(true, { messages }));
  }
  const seen = new Map();
  for (const [beta, params] of [[false, types.AnthropicCreate], [true, types.AnthropicBetaCreate]]) {
    for (const [name, [type]] of members(params)) {
      if (!["model", "max_tokens", "messages"].includes(name) && !seen.has(name)) {
        seen.set(name, [beta, type, isHeaderParam(params, name)]);
      }
    }
  }
  for (const [name, [beta, type, header]] of [...seen].sort(([a], [b]) => a.localeCompare(b))) {
    const body = { messages: [{ role: "user", content: "hi" }], [name]: value(type) };
    // A header param is reported under its header's name (a new one fails: no name known).
    const reported = header ? A.header_params[name] ?? `an unknown header param ${name}`
      : A.modelled_members.includes(name) ? null : name;
    await check("anthropic", `member ${name}`, reported, anthropicSend(beta, body));
  }
  const tools = new Map();
  for (const [beta, tool] of [[false, types.AnthropicTool], [true, types.AnthropicBetaTool]]) {
    for (const name of members(tool).keys()) if (!tools.has(name)) tools.set(name, [beta, tool]);
  }
  for (const [name, [beta, tool]] of [...tools].sort(([a], [b]) => a.localeCompare(b))) {
    const made = { ...value(tool), [name]: value(memberType(tool, name)) };
    if (name === "type") made.type = "custom";
    const body = { messages: [{ role: "user", content: "hi [mock:tool=none]" }], tools: [made] };
    const reported = A.modelled_tool_members.includes(name) ? null : `tools.${name}`;
    await check("anthropic", `tool member ${name}`, reported, anthropicSend(beta, body));
  }
}

// --- OpenAI Chat Completions ---------------------------------------------

const C = config.chat;

function chatSend(body) {
  const send = (lane) => openai.chat.completions.create({ model: lane, ...body });
  send.body = body;
  return send;
}

/** The content parts each role's message takes: role → (type → part). */
function chatParts() {
  const found = new Map();
  for (const message of objects(types.ChatMessage)) {
    const role = literalOf(message, "role");
    const content = memberType(message, "content");
    if (content) found.set(role, byLiteral(objects(content), "type", found.get(role) ?? new Map()));
  }
  return found;
}

const CALL = { id: "call_1", type: "function", function: { name: "lookup", arguments: "{}" } };

/** A conversation where `message` is in its place: a tool's result after
 * its call, a function's after its (legacy) `function_call`. */
function chatAround(role, message) {
  const messages = [{ role: "user", content: "hi" }];
  if (role === "tool") {
    messages.push({ role: "assistant", content: null, tool_calls: [{ ...CALL }] });
    message = { ...message, tool_call_id: CALL.id };
  } else if (role === "function") {
    messages.push({ role: "assistant", content: null, function_call: { ...CALL.function } });
    message = { ...message, name: CALL.function.name };
  } else if (role !== "user") {
    messages.push({ role: "assistant", content: "hello" });
  }
  messages.push(message);
  if (role !== "user") messages.push({ role: "user", content: "go on" });
  return messages;
}

async function chatFamily() {
  const messages = objects(types.ChatMessage);
  for (const message of messages) {
    const role = literalOf(message, "role");
    const made = { ...value(message), role, content: "a note" };
    const reported = C.modelled_roles.includes(role) ? null : `messages.${role}`;
    await check("chat", `role ${role}`, reported, chatSend({ messages: chatAround(role, made) }));
  }
  for (const [role, parts] of chatParts()) {
    for (const [kind, type] of parts) {
      const part = C.parts[kind] ?? value(type);
      const made = { ...value(messages.find((m) => literalOf(m, "role") === role)), role, content: [part] };
      const reported = C.modelled_parts.includes(kind) ? null : `messages.content.${kind}`;
      await check("chat", `${role} content part ${kind}`, reported, chatSend({ messages: chatAround(role, made) }));
    }
  }
  for (const [name, [type]] of [...members(types.ChatCreate)].sort(([a], [b]) => a.localeCompare(b))) {
    if (["model", "messages"].includes(name)) continue;
    const body = { messages: [{ role: "user", content: "hi" }], [name]: value(type) };
    const reported = C.modelled_members.includes(name) || name in C.transport ? null : name;
    await check("chat", `member ${name}`, reported, chatSend(body));
  }
}

// --- OpenAI Responses ------------------------------------------------------

const R = config.responses;

function responsesSend(body) {
  const send = (lane) => openai.responses.create({ model: lane, ...body });
  send.body = body;
  return send;
}

/** An input where `item` is in its place: an output after the call it
 * answers (`answers`), a model's message or item before a user's turn. */
function responsesAround(kind, item) {
  const input = [{ role: "user", content: "hi" }];
  const answered = R.answers[kind];
  if (answered) {
    input.push(answered);
    item.call_id = answered.call_id;
  }
  input.push(item);
  input.push({ role: "user", content: "go on" });
  return input;
}

async function responsesFamily() {
  const list = objects(types.ResponsesItem);
  const items = new Map();
  const messages = [];
  for (const item of list) {
    const kind = literalOf(item, "type") ?? (members(item).has("role") ? "message" : undefined);
    if (kind === "message") messages.push(item);
    else if (kind !== undefined && !items.has(kind)) items.set(kind, item);
  }
  const roles = new Map();
  const parts = new Map();
  for (const message of messages) {
    for (const role of options(memberType(message, "role")).map((t) => t.value)) {
      if (!roles.has(role)) roles.set(role, message);
    }
    for (const part of objects(memberType(message, "content"))) {
      const kind = literalOf(part, "type");
      if (kind !== undefined && !parts.has(kind)) parts.set(kind, [part, message]);
    }
  }
  for (const [role, message] of [...roles].sort(([a], [b]) => a.localeCompare(b))) {
    const made = { ...value(message), role, content: role === "assistant" ? "hello" : "a note" };
    delete made.id; delete made.status;
    await check("responses", `role ${role}`, null, responsesSend({ input: responsesAround("message", made) }));
  }
  for (const [kind, [part, message]] of [...parts].sort(([a], [b]) => a.localeCompare(b))) {
    // A user's message where the type allows one (system text is text only).
    const allowed = options(memberType(message, "role")).map((t) => t.value);
    const role = allowed.includes("user") ? "user" : allowed[0];
    let made = R.parts[kind] ?? value(part);
    if (kind === "output_text") made = { ...made, annotations: [] };
    made = { ...value(message), role, content: [made] };
    delete made.id; delete made.status;
    const reported = R.modelled_parts.includes(kind) ? null : `input.content.${kind}`;
    await check("responses", `${role} content part ${kind}`, reported, responsesSend({ input: responsesAround("message", made) }));
  }
  for (const [kind, type] of [...items].sort(([a], [b]) => a.localeCompare(b))) {
    // `type` may be optional (an item reference): the item names it.
    const made = { ...value(type), type: kind };
    const reported = R.modelled_items.includes(kind) ? null : R.unmodelled_items_path;
    await check("responses", `input item ${kind}`, reported, responsesSend({ input: responsesAround(kind, made) }));
  }
  for (const [name, [type]] of [...members(types.ResponsesCreate)].sort(([a], [b]) => a.localeCompare(b))) {
    if (["model", "input"].includes(name) || name in R.server_side) continue;
    const body = { input: "hi", [name]: value(type) };
    const reported = R.modelled_members.includes(name) || name in R.transport ? null : name;
    await check("responses", `member ${name}`, reported, responsesSend(body));
  }
}

const families = { anthropic: anthropicFamily, chat: chatFamily, responses: responsesFamily };
for (const family of config.families ?? Object.keys(families)) await families[family]();
console.log(JSON.stringify(results));
