// Drives `agentnode mcp serve` with the official TypeScript MCP SDK client
// (@modelcontextprotocol/sdk, pinned in package.json). Used by
// test/mcp_test.go: a client nobody here wrote.
//
//   node client.mjs PLAN_JSON
//
// PLAN_JSON: {"command": PATH, "args": [...], "cwd": DIR,
//             "calls": [{"name": TOOL, "arguments": ANY}, ...],
//             "requests": [{"method": "resources/read", "params": {...}}, ...]}
// The server inherits this process's environment (AGENTNODE_HOME etc.).
// Prints one JSON object: {"server": {...}, "tools": [...], "results": [...]}
// where each result is {"isError", "text", "structuredContent", "meta"} or
// {"protocolError": MESSAGE}, and "raw" the whole result as the SDK parsed it;
// "requests" (resources/list, resources/templates/list, resources/read,
// prompts/list, prompts/get, completion/complete) answer in "requests": {"result": ...} or
// {"protocolError": MESSAGE, "code": N}. Exits non-zero only if the session itself fails.
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
      raw: r,
    });
  } catch (e) {
    out.results.push({ protocolError: String(e && e.message ? e.message : e) });
  }
}
const requests = {
  "resources/list": (p) => client.listResources(p),
  "resources/templates/list": (p) => client.listResourceTemplates(p),
  "resources/read": (p) => client.readResource(p),
  "prompts/list": (p) => client.listPrompts(p),
  "prompts/get": (p) => client.getPrompt(p),
  "completion/complete": (p) => client.complete(p),
};
out.requests = [];
for (const q of plan.requests ?? []) {
  try {
    out.requests.push({ result: await requests[q.method](q.params) });
  } catch (e) {
    out.requests.push({ protocolError: String(e && e.message ? e.message : e), code: e?.code ?? null, data: e?.data ?? null });
  }
}
await client.close();
process.stdout.write(JSON.stringify(out) + "\n");
