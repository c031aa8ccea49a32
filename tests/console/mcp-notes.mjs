// A tiny MCP server on stdio (one JSON-RPC message per line) for the
// console test: one tool, `read_note`, answering with its note's text.
import { createInterface } from 'node:readline';

const send = (message) => process.stdout.write(`${JSON.stringify(message)}\n`);
const tool = {
  name: 'read_note',
  description: 'Read one note.',
  inputSchema: { type: 'object', properties: { id: { type: 'string' } }, required: ['id'] },
};

createInterface({ input: process.stdin }).on('line', (line) => {
  let message;
  try { message = JSON.parse(line); } catch { return; }
  if (message.id === undefined) return; // a notification
  const { id, method, params } = message;
  if (method === 'initialize') {
    return send({ jsonrpc: '2.0', id, result: { protocolVersion: params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'notes', version: '1' } } });
  }
  if (method === 'tools/list') return send({ jsonrpc: '2.0', id, result: { tools: [tool] } });
  if (method === 'tools/call' && params.name === 'read_note') {
    return send({ jsonrpc: '2.0', id, result: { content: [{ type: 'text', text: `note ${params.arguments.id}` }], isError: false } });
  }
  return send({ jsonrpc: '2.0', id, error: { code: -32601, message: `Method not found: ${method}` } });
});
