// The MCP Apps test host (tests/test_apps_host.py): the real server, the official app-bridge, a real browser.
//
//   node host.mjs plan.json   → one JSON report per case on stdout, a line each
//
// It is an MCP client of the real server (stdio: a child process speaking 2025-11-25 after
// `initialize`; HTTP: 2026-07-28, client capabilities in every request's `_meta`), declaring the UI
// extension. Like a host, it lists the tools, reads each view's ui:// resource, calls the tool and
// mounts the view in headless Chromium through @modelcontextprotocol/ext-apps's AppBridge, in a
// sandboxed frame on another origin served with the spec's restrictive default CSP. Then it runs
// the lifecycle (tool-input, tool-result or tool-cancelled, host-context-changed, teardown) and
// reports what the frame's DOM holds, every request the page made and every script that ran.
import { spawn } from "node:child_process";
import { readFileSync, mkdirSync } from "node:fs";
import http from "node:http";
import path from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const plan = JSON.parse(readFileSync(process.argv[2], "utf-8"));
const { chromium } = await import(path.join(plan.modules, "playwright-core", "index.mjs"));

// Every wait is for a state the page shows, never for a fixed time; the deadline is long because a
// loaded machine (the whole suite on two cores) makes a browser slow, not wrong.
const WAIT = { timeout: 60000 };
const UI = { extensions: { "io.modelcontextprotocol/ui": { mimeTypes: ["text/html;profile=mcp-app"] } } };
// "If ui.csp is omitted, Host MUST use" (MCP Apps 2026-01-26, Host Behavior), plus the sandbox
// proxy's object-src, frame-src and base-uri defaults.
const CSP = "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; " +
  "img-src 'self' data:; media-src 'self' data:; connect-src 'none'; object-src 'none'; frame-src 'none'; base-uri 'self'";

// ---- the MCP client ---------------------------------------------------------------------
function stdioClient(command, env) {
  const child = spawn(command[0], command.slice(1), { env, stdio: ["pipe", "pipe", "inherit"] });
  const waiting = new Map();
  let nextId = 1;
  createInterface({ input: child.stdout }).on("line", (line) => {
    const message = JSON.parse(line);
    if (message.id !== undefined && waiting.has(message.id)) { waiting.get(message.id)(message); waiting.delete(message.id); }
  });
  const send = (method, params) => new Promise((resolve) => {
    const id = nextId++;
    waiting.set(id, resolve);
    child.stdin.write(JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n");
  });
  return {
    async start() {
      const init = await send("initialize", { protocolVersion: "2025-11-25", capabilities: UI, clientInfo: { name: "fairwins-apps-test-host", version: "1" } });
      child.stdin.write(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) + "\n");
      return init.result;
    },
    call: send,
    close() { child.stdin.end(); return new Promise((resolve) => child.on("exit", resolve)); },
  };
}

function httpClient(url, bearer) {
  let nextId = 1;
  const call = async (method, params) => {
    const body = { jsonrpc: "2.0", id: nextId++, method, params: { ...params, _meta: {
      "io.modelcontextprotocol/protocolVersion": "2026-07-28",
      "io.modelcontextprotocol/clientCapabilities": UI,
      "io.modelcontextprotocol/clientInfo": { name: "fairwins-apps-test-host", version: "1" },
    } } };
    const headers = { "content-type": "application/json", accept: "application/json, text/event-stream",
      "mcp-protocol-version": "2026-07-28", "mcp-method": method };
    if (method === "tools/call") headers["mcp-name"] = params.name;
    if (method === "resources/read") headers["mcp-name"] = params.uri;
    if (bearer) headers.authorization = "Bearer " + bearer;
    const response = await fetch(url, { method: "POST", headers, body: JSON.stringify(body) });
    const text = await response.text();
    if ((response.headers.get("content-type") || "").startsWith("text/event-stream")) {
      const events = text.split("\n").filter((l) => l.startsWith("data:")).map((l) => JSON.parse(l.slice(5)));
      return events.find((e) => e.id === body.id);
    }
    return JSON.parse(text);
  };
  return { async start() { return (await call("server/discover", {})).result; }, call, close() {} };
}

const client = plan.transport === "stdio" ? stdioClient(plan.command, plan.env) : httpClient(plan.url, plan.bearer);
const started = await client.start();
const tools = (await client.call("tools/list", {})).result.tools;
const views = new Map();  // id → { html, meta }
let viewCount = 0;

// ---- the host's web server: the host page on 127.0.0.1, each view on localhost (another origin) ----
const server = http.createServer((req, res) => {
  const url = new URL(req.url, "http://x");
  if (url.pathname === "/host.html") {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    return res.end(readFileSync(path.join(here, "host.html")));
  }
  if (url.pathname.startsWith("/node_modules/")) {
    const file = path.join(plan.modules, decodeURIComponent(url.pathname.slice("/node_modules/".length)));
    if (!file.startsWith(plan.modules)) { res.writeHead(404); return res.end(); }
    try {
      const body = readFileSync(file);
      res.writeHead(200, { "content-type": "text/javascript; charset=utf-8" });
      return res.end(body);
    } catch { res.writeHead(404); return res.end(); }
  }
  const view = url.pathname.startsWith("/view/") ? views.get(url.pathname.slice(6)) : undefined;
  if (view) {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8", "content-security-policy": CSP });
    return res.end(view.html);
  }
  res.writeHead(404);
  res.end();
});
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const port = server.address().port;
const hostOrigin = `http://127.0.0.1:${port}`;
const viewOrigin = `http://localhost:${port}`;

const browser = await chromium.launch({
  executablePath: plan.chromium,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
});

function emit(report) { process.stdout.write(JSON.stringify(report) + "\n"); }

// What the frame holds, read from inside it: every element and attribute, the text, the script state.
function inspect() {
  const all = [...document.querySelectorAll("*")];
  return {
    text: document.getElementById("root").innerText,
    textContent: document.getElementById("root").textContent,
    elements: all.map((e) => e.tagName.toLowerCase()),
    attributes: all.flatMap((e) => [...e.attributes].map((a) => [e.tagName.toLowerCase(), a.name, a.value])),
    headings: [...document.querySelectorAll("h1, h2")].map((h) => h.tagName + " " + h.textContent),
    tables: [...document.querySelectorAll("table")].map((t) => ({
      caption: t.caption ? t.caption.textContent : null,
      headers: [...t.querySelectorAll("th")].map((th) => [th.textContent, th.getAttribute("scope")]),
      rows: [...t.tBodies].reduce((n, b) => n + b.rows.length, 0),
      cells: [...t.querySelectorAll("tbody tr")].slice(0, 5).map((tr) => [...tr.cells].map((c) => c.textContent)),
    })),
    labels: [...document.querySelectorAll("label")].map((l) => [l.textContent, l.htmlFor, !!document.getElementById(l.htmlFor)]),
    buttons: [...document.querySelectorAll("button")].map((b) => b.textContent),
    theme: document.documentElement.dataset.theme || null,
    background: getComputedStyle(document.body).backgroundColor,
    pwned: window.__pwned || null,
    title: document.title,
    scripts: document.scripts.length,
  };
}

// The frame's last resize: the iframe as tall as the view's document says it is (the view sends
// ui/notifications/size-changed from a ResizeObserver, the host page sets the iframe's height).
async function frameResized(page, frame) {
  const deadline = Date.now() + WAIT.timeout;
  for (;;) {
    const wanted = Math.min(6000, await frame.evaluate(() => Math.ceil(document.documentElement.scrollHeight)));
    const shown = await page.evaluate(() => window.host.iframe.clientHeight);
    if (Math.abs(wanted - shown) <= 1) return;
    if (Date.now() > deadline) throw new Error(`the frame stayed ${shown} px tall; the view is ${wanted} px`);
    await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => resolve())));
  }
}

async function runCase(c) {
  const tool = tools.find((t) => t.name === c.tool);
  const uri = tool && tool._meta && tool._meta.ui && tool._meta.ui.resourceUri;
  if (!uri) return { name: c.name, error: `tools/list gave ${c.tool} no _meta.ui.resourceUri` };
  const read = await client.call("resources/read", { uri });
  const contents = read.result.contents[0];
  const id = String(++viewCount);
  views.set(id, { html: contents.text, meta: contents._meta });

  const context = await browser.newContext({ viewport: { width: 700, height: 900 }, locale: "en-US" });
  const page = await context.newPage();
  const requests = [], consoleLines = [], pageErrors = [];
  page.on("request", (r) => requests.push({ url: r.url(), frame: r.frame() === page.mainFrame() ? "host" : "view" }));
  page.on("console", (m) => consoleLines.push(m.type() + ": " + m.text()));
  page.on("pageerror", (e) => pageErrors.push(String(e)));
  const serverCalls = [];
  await page.exposeFunction("mcpCall", async (method, params) => {
    serverCalls.push({ method, params });
    const answer = await client.call(method, params);
    return answer.result !== undefined ? answer.result : { isError: true, content: [{ type: "text", text: JSON.stringify(answer.error) }] };
  });
  await page.goto(hostOrigin + "/host.html");
  await page.waitForFunction(() => window.hostReady === true, null, WAIT).catch((e) => {
    throw new Error(`the host page did not start: ${e.message}; console: ${consoleLines.join(" | ")}; errors: ${pageErrors.join(" | ")}`);
  });
  const granted = c.clipboardWrite === true;
  await page.evaluate((o) => window.mountView(o), {
    src: `${viewOrigin}/view/${id}`, theme: c.theme || "light", locale: c.locale || "en-US", timeZone: c.timeZone || "UTC",
    sandbox: c.sandbox || "allow-scripts", allow: granted ? "clipboard-write" : "", serverTools: c.serverTools !== false,
    clipboardWrite: granted, tool,
  });
  const frame = page.frames().find((f) => f.url().startsWith(viewOrigin));
  const before = await frame.evaluate(inspect);

  // The host's own tool call, then the notifications the spec orders: tool-input, then the result.
  const args = c.arguments || {};
  const answer = c.cancel ? null : await client.call("tools/call", { name: c.tool, arguments: args });
  await page.evaluate((a) => window.host.bridge.sendToolInput({ arguments: a }), args);
  if (c.cancel) await page.evaluate((r) => window.host.bridge.sendToolCancelled({ reason: r }), c.cancel);
  else await page.evaluate((r) => window.host.bridge.sendToolResult(r), answer.result);
  await frame.waitForFunction(() => !/Waiting for the answer/.test(document.getElementById("root").textContent), null, WAIT);
  const report = { name: c.name, uri, meta: contents._meta, before, result: answer && answer.result, after: await frame.evaluate(inspect) };

  if (c.screenshot) {
    mkdirSync(c.screenshot.dir, { recursive: true });
    await frameResized(page, frame);
    await page.locator("iframe").screenshot({ path: path.join(c.screenshot.dir, c.screenshot.file) });
  }
  for (const action of c.actions || []) {
    if (action.type === "search") {
      const calls = serverCalls.length;
      await frame.fill("#q", action.text);
      if (action.via === "enter") await frame.press("#q", "Enter");
      else await frame.click("button:text('Search')");
      await frame.waitForFunction((q) => document.getElementById("root").textContent.includes("“" + q + "”"), action.text, WAIT);
      report[action.as] = { view: await frame.evaluate(inspect), calls: await page.evaluate(() => window.host.calls), serverCalls: serverCalls.slice(calls) };
    } else if (action.type === "theme") {
      await page.evaluate((t) => window.host.bridge.sendHostContextChange({ theme: t }), action.theme);
      await frame.waitForFunction((t) => document.documentElement.dataset.theme === t, action.theme, WAIT);
      report[action.as] = await frame.evaluate(inspect);
    } else if (action.type === "copy") {
      await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: viewOrigin });
      await frame.click("button:text('Copy typed data as JSON')");
      await frame.waitForFunction(() => /Copied|Could not copy/.test(document.getElementById("root").textContent), null, WAIT);
      report[action.as] = await frame.evaluate(inspect);
    } else if (action.type === "keyboard") {
      // Tab from the top of the frame: what receives focus, in order.
      await frame.click("h1");
      const order = [];
      for (let i = 0; i < (action.tabs || 4); i++) {
        await page.keyboard.press("Tab");
        order.push(await frame.evaluate(() => document.activeElement ? document.activeElement.tagName.toLowerCase() + (document.activeElement.id ? "#" + document.activeElement.id : "") : null));
      }
      report[action.as] = order;
    }
  }
  report.teardown = await page.evaluate(() => window.host.bridge.teardownResource({}).then(() => "answered", (e) => "failed: " + e.message));
  report.sizes = await page.evaluate(() => window.host.sizes);
  report.hostCalls = await page.evaluate(() => window.host.calls);
  report.viewRequests = requests.filter((r) => r.frame === "view").map((r) => r.url);
  report.hostRequests = requests.filter((r) => r.frame === "host").map((r) => r.url);
  report.console = consoleLines;
  report.pageErrors = pageErrors;
  await context.close();
  return report;
}

try {
  emit({ name: "_started", started, tools: tools.map((t) => ({ name: t.name, meta: t._meta || null })) });
  for (const c of plan.cases) emit(await runCase(c));
} finally {
  await browser.close();
  server.close();
  await client.close();
}
