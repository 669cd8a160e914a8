// Drives `agentnode mcp serve --http` with the official TypeScript MCP SDK
// client over Streamable HTTP (StreamableHTTPClientTransport). Used by
// test/mcp_http_test.go; the sibling of client.mjs (stdio).
//
//   node http-client.mjs PLAN_JSON
//
// PLAN_JSON: {"url": "http://127.0.0.1:PORT/mcp", "token": TOKEN,
//             "calls": [{"name": TOOL, "arguments": ANY}, ...]}
// Prints one JSON object: {"server", "capabilities", "sessionId", "tools",
// "results"} like client.mjs. Exits non-zero only if the session itself
// fails (e.g. a 401 at initialize).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const plan = JSON.parse(process.argv[2]);
const headers = {};
if (plan.token) {
  headers.Authorization = `Bearer ${plan.token}`;
}
const transport = new StreamableHTTPClientTransport(new URL(plan.url), {
  requestInit: { headers },
});
const client = new Client({ name: "agentnode-e2e-ts-http", version: "1.0.0" });
await client.connect(transport);

const out = {
  server: client.getServerVersion(),
  capabilities: client.getServerCapabilities(),
  sessionId: transport.sessionId ?? null,
  tools: [],
  results: [],
};
const listed = await client.listTools();
out.tools = listed.tools.map((t) => ({
  name: t.name,
  description: t.description,
  inputSchema: t.inputSchema,
  outputSchema: t.outputSchema,
}));
for (const c of plan.calls ?? []) {
  try {
    const r = await client.callTool({ name: c.name, arguments: c.arguments });
    out.results.push({
      isError: r.isError === true,
      text: (r.content ?? []).filter((x) => x.type === "text").map((x) => x.text).join(""),
      structuredContent: r.structuredContent ?? null,
      meta: r._meta ?? null,
      raw: r,
    });
  } catch (e) {
    out.results.push({ protocolError: String(e && e.message ? e.message : e) });
  }
}
await transport.terminateSession().catch(() => {});
await client.close();
process.stdout.write(JSON.stringify(out) + "\n");
