// Subscribes to one resource through `engram mcp`, the stdio bridge, with
// the official TypeScript SDK's client, which checks the bridge's
// capabilities and every message against the protocol's schemas.
//
// Usage: node subscribe.mjs <engram binary> <engram url> <api key> <uri>.
// Starts the bridge (polling every 100 ms), subscribes to <uri>, prints a
// JSON line {"resources": <the server's resources capability>} once
// subscribed, then waits for notifications/resources/updated and prints
// {"updated": "<its uri>"} before it exits. The caller changes the
// resource between the two lines.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const [engram, url, key, uri] = process.argv.slice(2);
const transport = new StdioClientTransport({
  command: engram,
  args: ["mcp", "--url", url, "--watch-ms", "100"],
  env: { ...process.env, ENGRAM_API_KEY: key },
});
const client = new Client({ name: "engram-subscribe-check", version: "1" });
const updated = new Promise((resolve) =>
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (notification) =>
    resolve(notification.params.uri),
  ),
);
await client.connect(transport);
await client.subscribeResource({ uri });
process.stdout.write(`${JSON.stringify({ resources: client.getServerCapabilities().resources })}\n`);
process.stdout.write(`${JSON.stringify({ updated: await updated })}\n`);
await client.close();
