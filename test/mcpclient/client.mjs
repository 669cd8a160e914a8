// Drives `agentnode mcp serve` with the official TypeScript MCP SDK client
// (@modelcontextprotocol/sdk, pinned in package.json). Used by
// test/mcp_test.go: a client nobody here wrote.
//
//   node client.mjs PLAN_JSON
//
// PLAN_JSON: {"command": PATH, "args": [...], "cwd": DIR,
//             "calls": [{"name": TOOL, "arguments": ANY}, ...]}
// The server inherits this process's environment (AGENTNODE_HOME etc.).
// Prints one JSON object: {"server": {...}, "tools": [...], "results": [...]}
// where each result is {"isError", "text", "structuredContent", "meta"} or
// {"protocolError": MESSAGE}. Exits non-zero only if the session itself fails.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const plan = JSON.parse(process.argv[2]);
const transport = new StdioClientTransport({
  command: plan.command,
  args: plan.args ?? [],
  cwd: plan.cwd,
  env: { ...process.env },
  stderr: "inherit",
});
const client = new Client({ name: "agentnode-e2e-ts", version: "1.0.0" });
await client.connect(transport);

const out = {
  server: client.getServerVersion(),
  capabilities: client.getServerCapabilities(),
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
    });
  } catch (e) {
    out.results.push({ protocolError: String(e && e.message ? e.message : e) });
  }
}
await client.close();
process.stdout.write(JSON.stringify(out) + "\n");
