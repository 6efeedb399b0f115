// Calls Engram's MCP tools with the official TypeScript SDK's client, which
// checks every tool result against the tool's output schema the way the
// MCP Inspector and the clients built on the SDK do.
//
// Usage: node client.mjs <mcp url> <api key>, with a JSON array of calls,
// [{"tool": "...", "arguments": {...}}], on stdin. Prints a JSON array with
// one entry per call: {"result": <the CallToolResult>} when the client
// accepted it, {"thrown": "<message>"} when the client refused it.

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
for (const { tool, arguments: args } of calls) {
  try {
    answers.push({ result: await client.callTool({ name: tool, arguments: args }) });
  } catch (err) {
    answers.push({ thrown: String(err?.message ?? err) });
  }
}
await client.close();
process.stdout.write(JSON.stringify(answers));
