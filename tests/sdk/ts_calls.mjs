// Run by tests/test_relayed_shapes.py under Node 22: the official TypeScript SDK client makes tool calls.
//
// `node ts_calls.mjs CLIENT_DIST http URL` or `node ts_calls.mjs CLIENT_DIST stdio COMMAND ARG…` reads
// one JSON `[tool, arguments]` per stdin line, connects one Client (the package the MCP Inspector runs
// on) over Streamable HTTP or stdio, lists the tools, and makes each call. Its callTool validates a
// result's structuredContent against the listed outputSchema and throws when it does not fit. For each
// call it prints what was thrown, or the result and the SDK's own validator's verdict on its
// structuredContent (ajv, as the client compiles it), which is also asked about `misfit` (a market
// with no question), so that its acceptance is a verdict and not a pass-through.
const [dist, transportKind, ...target] = process.argv.slice(2);
const { Client, StreamableHTTPClientTransport } = await import(new URL("index.mjs", dist).href);
const { StdioClientTransport } = await import(new URL("stdio.mjs", dist).href);
const { AjvJsonSchemaValidator } = await import(new URL("validators/ajv.mjs", dist).href);
let input = "";
for await (const chunk of process.stdin) input += chunk;
const wanted = input.split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
const transport =
  transportKind === "http"
    ? new StreamableHTTPClientTransport(new URL(target[0]))
    : new StdioClientTransport({ command: target[0], args: target.slice(1), env: process.env, stderr: "ignore" });
const client = new Client({ name: "fairwins-relayed-test", version: "1.0.0" });
await client.connect(transport);
const schemas = Object.fromEntries((await client.listTools()).tools.map((t) => [t.name, t.outputSchema]));
const ajv = new AjvJsonSchemaValidator();
const verdict = (schema, value) => {
  const checked = ajv.getValidator(schema)(value);
  return checked.valid ? null : String(checked.errorMessage);
};
const shown = [];
for (const [name, args] of wanted) {
  try {
    const result = await client.callTool({ name, arguments: args });
    const schema = schemas[name];
    shown.push({
      isError: result.isError ?? false,
      structuredContent: result.structuredContent ?? null,
      text: result.content.map((b) => b.text ?? ""),
      ajv: schema && result.structuredContent !== undefined ? verdict(schema, result.structuredContent) : "no schema",
      misfit: schema ? verdict(schema, { markets: [{ outcomes: "[]" }], pairs: [1], items: [1] }) : null,
    });
  } catch (error) {
    shown.push({ thrown: error.constructor.name, message: String(error.message) });
  }
}
await client.close().catch(() => {});
process.stdout.write(JSON.stringify(shown));
