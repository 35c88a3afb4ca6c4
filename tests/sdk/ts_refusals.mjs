// Run by tests/test_refusal_bodies.py under Node 22: what the official TypeScript SDK client shows for a refusal.
//
// `node ts_refusals.mjs CLIENT_MODULE URL` reads one JSON `[tool, headers]` per stdin line; for each
// it connects a Client (the package the MCP Inspector runs on) to URL over Streamable HTTP, sending
// `headers` on every request, and calls the tool. It prints one JSON list: for each line, the error
// the SDK threw (its class, message and data: what a member's client shows), or the result.
const [clientModule, url] = process.argv.slice(2);
const { Client, StreamableHTTPClientTransport } = await import(clientModule);
let input = "";
for await (const chunk of process.stdin) input += chunk;
const shown = [];
for (const line of input.split("\n").filter((l) => l.trim())) {
  const [tool, headers] = JSON.parse(line);
  const client = new Client({ name: "fairwins-refusal-test", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  try {
    await client.connect(transport);
    shown.push({ result: await client.callTool({ name: tool, arguments: {} }) });
  } catch (error) {
    shown.push({ thrown: error.constructor.name, message: String(error.message), data: error.data ?? null });
  }
  await client.close().catch(() => {});
}
process.stdout.write(JSON.stringify(shown));
