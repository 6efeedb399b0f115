// Calls Engram's MCP tools with the official TypeScript SDK's client, which
// checks every tool result against the tool's output schema the way the
// MCP Inspector and the clients built on the SDK do, and its resources and
// prompts, whose results the client checks against the protocol's schemas.
//
// Usage: node client.mjs <mcp url> <api key>, with a JSON array of calls on
// stdin: {"tool": "...", "arguments": {...}} calls a tool, and
// {"request": "<a Client method: listResources, readResource,
// listResourceTemplates, listPrompts, getPrompt>", "params": {...}} makes
// that request. Prints a JSON array with one entry per call:
// {"result": <the result>} when the client accepted it, {"thrown":
// "<message>", "code": <the JSON-RPC error code, if any>} when the client
// refused it or the server answered with an error.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, key] = process.argv.slice(2);
const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const calls = JSON.parse(Buffer.concat(chunks).toString("utf8"));

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${key}` } },
});
const client = new Client({ name: "engram-schema-check", version: "1" });
await client.connect(transport);
// The output schemas the client checks results against come from the list.
await client.listTools();

const answers = [];
const requests = new Set([
  "listResources",
  "readResource",
  "listResourceTemplates",
  "listPrompts",
  "getPrompt",
]);
for (const { tool, arguments: args, request, params } of calls) {
  try {
    if (tool !== undefined) {
      answers.push({ result: await client.callTool({ name: tool, arguments: args }) });
    } else if (requests.has(request)) {
      answers.push({ result: await client[request](params) });
    } else {
      throw new Error(`not a call: ${JSON.stringify({ tool, request })}`);
    }
  } catch (err) {
    answers.push({ thrown: String(err?.message ?? err), code: err?.code });
  }
}
await client.close();
process.stdout.write(JSON.stringify(answers));
