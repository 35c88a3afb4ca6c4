// The comparison server in TypeScript's SDK: the official @modelcontextprotocol/sdk serving the
// same two tools as bench/sdk_server.py against the same stub. Benchmark-only: it runs on the Node
// 22 that tests/tools/node22.sh installs, from the SDK that `make bench-compare` installs into the
// git-ignored .tools/ts-sdk (pinned by bench/ts-sdk/package-lock.json); never a project dependency.
//
//     node bench/ts_sdk_server.mjs                             stdio (token from FAIRWINS_API_TOKEN)
//     node bench/ts_sdk_server.mjs --http 0 --host 127.0.0.1   streamable HTTP, stateless, JSON answers;
//                                                              prints http://HOST:PORT/mcp on stderr
//
// Written the way the SDK's documentation shows a stateless server (a fresh McpServer and
// StreamableHTTPServerTransport per request, on node:http), with the same work per call as ours:
// one GET through Node's fetch (keep-alive), bearer from the request's Authorization header (HTTP)
// or the environment (stdio), the gateway JSON as structuredContent and as text, a non-2xx answer
// as isError.

import http from "node:http";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

// The SDK lives in .tools/ts-sdk (or wherever TS_SDK_PREFIX says), not beside this file.
const here = path.dirname(fileURLToPath(import.meta.url));
const prefix = process.env.TS_SDK_PREFIX || path.join(here, "..", ".tools", "ts-sdk");
const require = createRequire(path.join(prefix, "package.json"));
const load = (name) => import(pathToFileURL(require.resolve(name)).href);

const { McpServer } = await load("@modelcontextprotocol/sdk/server/mcp.js");
const { StreamableHTTPServerTransport } = await load("@modelcontextprotocol/sdk/server/streamableHttp.js");
const { StdioServerTransport } = await load("@modelcontextprotocol/sdk/server/stdio.js");
const { z } = await load("zod");

const READ_ONLY = { readOnlyHint: true, idempotentHint: true, openWorldHint: true };
const BASE = (process.env.FAIRWINS_API_URL || "").replace(/\/+$/, "");

function failure(text) {
  return { content: [{ type: "text", text }], isError: true };
}

function bearer(extra) {
  const value = extra?.requestInfo?.headers?.authorization || "";
  if (value.toLowerCase().startsWith("bearer ")) return value.slice(7).trim();
  return process.env.FAIRWINS_API_TOKEN || null;
}

async function read(route, params, token, what) {
  if (!BASE) return failure(`Could not read ${what}: FAIRWINS_API_URL is not set.`);
  const headers = { Accept: "application/json" };
  if (token) headers.Authorization = `Bearer ${token}`;
  const url = new URL(BASE + route);
  for (const [k, v] of Object.entries(params || {})) url.searchParams.set(k, v);
  let response;
  try {
    response = await fetch(url, { headers, redirect: "manual", signal: AbortSignal.timeout(10_000) });
  } catch (err) {
    return failure(`Could not read ${what}: the gateway did not answer (${err?.name || "error"}).`);
  }
  if (response.status !== 200) {
    await response.arrayBuffer().catch(() => undefined);
    return failure(`Could not read ${what}: the gateway answered HTTP ${response.status}.`);
  }
  let data;
  try {
    data = await response.json();
  } catch {
    return failure(`Could not read ${what}: the gateway's answer was not JSON.`);
  }
  return { content: [{ type: "text", text: JSON.stringify(data) }], structuredContent: data };
}

function buildServer() {
  const server = new McpServer(
    { name: "fairwins-ts-sdk-bench", version: "1.0.0" },
    { instructions: "Benchmark twin of fairwins-mcp: reads the FairWins gateway; never signs, never pays." },
  );
  server.registerTool(
    "get_gateway_status",
    {
      title: "Gateway status",
      description: "Read the FairWins gateway's public status: health, version, chains and rails on, prices.",
      annotations: READ_ONLY,
    },
    async () => read("/status", null, null, "the gateway status"),
  );
  server.registerTool(
    "get_wagers",
    {
      title: "Your wagers",
      description:
        "Read the member's wagers per chain. Each chain is read, unreadable or not-configured; " +
        "an unreadable chain is UNKNOWN, never an empty result.",
      inputSchema: { chainId: z.number().int().positive().optional().describe("Only this chain") },
      annotations: READ_ONLY,
    },
    async ({ chainId }, extra) => {
      const token = bearer(extra);
      if (!token) return failure("Could not read your wagers: no API token (set FAIRWINS_API_TOKEN).");
      const params = chainId === undefined ? null : { chainId: String(chainId) };
      return read("/v1/member/wagers", params, token, "your wagers");
    },
  );
  return server;
}

function argument(name, fallback) {
  const i = process.argv.indexOf(name);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

const httpPort = argument("--http", null);
if (httpPort === null) {
  await buildServer().connect(new StdioServerTransport());
} else {
  const host = argument("--host", "127.0.0.1");
  const listener = http.createServer(async (req, res) => {
    if (req.method !== "POST" || !req.url.startsWith("/mcp")) {
      res.writeHead(405, { Allow: "POST" }).end();
      return;
    }
    const server = buildServer();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on("close", () => {
      transport.close();
      server.close();
    });
    try {
      await server.connect(transport);
      await transport.handleRequest(req, res);
    } catch (err) {
      if (!res.headersSent) res.writeHead(500).end();
    }
  });
  listener.keepAliveTimeout = 30_000;
  listener.listen(Number(httpPort), host, () => {
    const { port } = listener.address();
    process.stderr.write(`fairwins-ts-sdk-bench listening on http://${host}:${port}/mcp\n`);
  });
  for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, () => listener.close(() => process.exit(0)));
}
