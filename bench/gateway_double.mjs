// The gateway double of bench.crowd: every GET answered with one fixed JSON body after a fixed
// delay, from Node's event loop, so that a thousand waiting calls cost it timers, not threads, and
// the double never becomes what a crowd measures. Benchmark-only; it runs on the Node 22 that
// tests/tools/node22.sh installs and needs nothing else.
//
//     node bench/gateway_double.mjs --body FILE [--delay-ms 200] [--port 0] [--host 127.0.0.1]
//
// FILE holds the body (bench.crowd writes the sandbox gateway's own get_wagers answer there).
// Prints "gateway double on http://HOST:PORT" on stdout once it listens. Keep-alive is on and no
// connection is timed out while the load runs; anything but GET gets 405, except the harness's
// POST /__double?delay=MS, which changes the delay and answers how many GETs are waiting.

import fs from "node:fs";
import http from "node:http";

function option(name, fallback) {
  const at = process.argv.indexOf(name);
  return at >= 0 && at + 1 < process.argv.length ? process.argv[at + 1] : fallback;
}

const bodyFile = option("--body", "");
if (!bodyFile) {
  process.stderr.write("gateway_double: --body FILE is required\n");
  process.exit(2);
}
const body = fs.readFileSync(bodyFile);
const port = Number(option("--port", "0"));
const host = option("--host", "127.0.0.1");
const headers = {
  "Content-Type": "application/json",
  "Content-Length": String(body.length),
  "Cache-Control": "no-store",
};
const refusal = Buffer.from('{"error":{"code":"method_not_allowed","message":"GET only"}}');

let delayMs = Number(option("--delay-ms", "200"));
let waiting = 0; // GETs not answered yet: bench.conn_memory waits for its calls to arrive here

const server = http.createServer({ keepAlive: true, noDelay: true }, (req, res) => {
  req.resume(); // a GET has no body; whatever came is read and dropped, so the connection stays framed
  if (req.method === "POST" && req.url.startsWith("/__double")) {
    // The harness's control: ?delay=MS changes the delay from now on; the answer is the count waiting.
    const asked = new URL(req.url, "http://double").searchParams.get("delay");
    if (asked !== null) delayMs = Number(asked);
    const text = JSON.stringify({ delayMs, waiting });
    res.writeHead(200, { "Content-Type": "application/json", "Content-Length": String(Buffer.byteLength(text)) });
    res.end(text);
    return;
  }
  if (req.method !== "GET") {
    res.writeHead(405, { "Content-Type": "application/json", "Content-Length": String(refusal.length) });
    res.end(refusal);
    return;
  }
  const answer = () => {
    waiting -= 1;
    if (res.destroyed) return; // the caller left while it waited
    res.writeHead(200, headers);
    res.end(body);
  };
  waiting += 1;
  if (delayMs > 0) setTimeout(answer, delayMs);
  else answer();
});
// The load runs for minutes over connections that stay open: no idle or request timeout may close
// one under it (Node's defaults are 5 s idle and 300 s per request).
server.keepAliveTimeout = 600_000;
server.headersTimeout = 600_000;
server.requestTimeout = 0;
server.maxRequestsPerSocket = 0;
server.maxConnections = 1_000_000;
server.listen({ port, host, backlog: 65535 }, () => {
  const address = server.address();
  process.stdout.write(`gateway double on http://${host}:${address.port}\n`);
});
const stop = () => server.close(() => process.exit(0));
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
