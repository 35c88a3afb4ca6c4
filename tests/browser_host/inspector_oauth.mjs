// The MCP Inspector's own OAuth flow in headless Chromium, against the server in OAuth mode
// (tests/test_inspector_oauth.py).
//
//   node inspector_oauth.mjs plan.json   → one JSON report on stdout
//
// The plan names the Inspector's URL (with its session token), the pinned playwright-core, the
// chromium binary, the authorization server's origin, how its consent page is answered (a radio
// to choose, if any, and the button to press), the tool and its arguments, and where the
// screenshots go. What a person does, step by step: turn the server's switch on (initialize and
// tools/list need no sign-in), open the Tools tab, choose the tool, type its arguments, "Execute
// Tool". The member call's 401 reaches the page as the Inspector's auth challenge; the Inspector
// discovers, registers and sends the browser to the authorization server, whose consent page is
// answered here. Back on the Inspector's /oauth/callback it exchanges the code, reconnects and
// says "Retry your action": "Execute Tool" again, and the result is read from the page.
//
// Version 2.12 of the Inspector runs every OAuth request (the resource and authorization server
// metadata, the registration, the token request) through its own backend (`POST /api/fetch`, the
// URL in the body) and the MCP traffic through `/api/mcp/send`: those are watched to report the
// trail. No token is reported, only the SHA-256 of the access token the token endpoint answered.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";

const plan = JSON.parse(readFileSync(process.argv[2], "utf-8"));
const { chromium } = await import(path.join(plan.modules, "playwright-core", "index.mjs"));
const WAIT = { timeout: plan.waitMs ?? 30000 };
const inspector = new URL(plan.url).origin;
const sha256 = (text) => createHash("sha256").update(text).digest("hex");
const withoutQuery = (url) => url.split("?")[0];

const report = {
  trail: [], // what happened, in order: the Inspector's fetches, the challenge, the page's navigations
  challenge: null, // the auth challenge the Inspector's backend handed the page for the member call
  authorizationUrl: null, // the authorization request the Inspector sent the browser with (no secret in it)
  consentPage: null, // the authorization server's page, as text
  callback: null, // the Inspector's callback URL: its path and the names of its query parameters
  clientId: null, // from the registration's answer
  tokenAnswers: 0,
  tokenSha256: null, // of the access token the token endpoint answered
  notes: [], // the Inspector's notifications, as they showed
  formRestored: null, // the tool's arguments as the Inspector showed them again after the sign-in
  result: null, // the Results panel's text
  structured: null, // the Structured Output panel's text
};

const browser = await chromium.launch({
  executablePath: plan.chromium,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
});
const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
// Each notification the Inspector shows, kept as it appears: a toast closes itself after a few
// seconds, so it is recorded by an observer in the page rather than looked for afterwards.
await page.addInitScript(() => {
  window.__notes = [];
  new MutationObserver(() => {
    for (const root of document.querySelectorAll(".mantine-Notifications-root")) {
      // textContent: a toast is in the DOM before its transition makes it visible to innerText.
      const text = [...root.querySelectorAll("p, div:not(:has(*))")].map((node) => node.textContent.trim())
        .filter(Boolean).join(" / ");
      if (text && !window.__notes.includes(text)) window.__notes.push(text);
    }
  }).observe(document, { childList: true, subtree: true, characterData: true, attributes: true });
});
const notes = new Set();
async function keepNotes() {
  for (const note of (await page.evaluate(() => window.__notes ?? []).catch(() => []))) notes.add(note);
}
page.on("framenavigated", (frame) => {
  if (frame !== page.mainFrame()) return;
  const url = new URL(frame.url());
  report.trail.push({ step: "navigate", url: withoutQuery(url.href) });
  // The callback's query holds the code: only its parameters' names are kept, and the issuer.
  if (url.origin === inspector && url.pathname === "/oauth/callback" && !report.callback) {
    report.callback = { path: url.pathname, params: [...url.searchParams.keys()].sort(), iss: url.searchParams.get("iss") };
  }
});
page.on("request", (request) => {
  // The authorization request as the Inspector built it (a server may redirect it to its consent page).
  if (!report.authorizationUrl && request.isNavigationRequest() && new URL(request.url()).origin === plan.authorizationServer) {
    report.authorizationUrl = request.url();
  }
  if (!request.url().startsWith(`${inspector}/api/fetch`)) return;
  const asked = JSON.parse(request.postData() ?? "{}");
  report.trail.push({ step: "fetch", method: asked.method ?? "GET", url: asked.url });
});
// An answer's place in the trail is taken when it arrives (its body is read after): the page
// acts on it at once, before the body is in hand here.
page.on("response", async (response) => {
  const url = response.url();
  if (url.startsWith(`${inspector}/api/fetch`)) {
    const asked = JSON.parse(response.request().postData() ?? "{}");
    const entry = { step: "fetched", url: asked.url, status: null };
    report.trail.push(entry);
    const answer = await response.json().catch(() => null);
    if (!answer) return;
    entry.status = answer.status;
    const body = (() => { try { return JSON.parse(answer.body); } catch { return null; } })();
    if (body && /\/(register|reg)$/.test(withoutQuery(asked.url)) && body.client_id) report.clientId = body.client_id;
    if (body && body.access_token) {
      report.tokenAnswers += 1;
      report.tokenSha256 = sha256(body.access_token);
    }
  } else if (url.startsWith(`${inspector}/api/mcp/send`)) {
    const entry = { step: "sent" };
    report.trail.push(entry);
    const answer = await response.json().catch(() => null);
    if (answer && answer.kind === "auth_challenge") {
      report.challenge = answer.authChallenge;
      Object.assign(entry, { step: "challenge", status: answer.authChallenge?.raw?.httpStatus ?? null });
    }
  }
});

// A Mantine switch: the label holding the switch of that accessible name (tests/browser_host/inspector.mjs).
const switchTrack = (name) => page.locator("label").filter({ has: page.getByRole("switch", { name }) }).first();
const connected = () => page.waitForSelector('[data-testid="connection-status"][data-status="connected"]', WAIT);
async function fillArguments() {
  for (const [name, value] of Object.entries(plan.arguments)) await page.getByLabel(name, { exact: true }).fill(String(value), WAIT);
}

let failed = null;
try {
  await page.goto(plan.url);
  await switchTrack(/^Connect or disconnect /).click(WAIT);
  await connected();
  await page.getByText("Tools", { exact: true }).first().click(WAIT);
  await page.getByText(plan.tool, { exact: true }).first().click(WAIT);
  await fillArguments();
  const execute = page.getByRole("button", { name: "Execute Tool" });
  await execute.click(WAIT);
  // The 401: the Inspector discovers, registers and sends the browser to the authorization server.
  await page.waitForURL((url) => url.origin === plan.authorizationServer, WAIT);
  await page.getByRole("button", { name: plan.consent.submit }).waitFor(WAIT);
  report.consentPage = await page.locator("body").innerText();
  if (plan.consent.choose) await page.getByLabel(plan.consent.choose).check(WAIT);
  await page.getByRole("button", { name: plan.consent.submit }).click(WAIT);
  // Back at the Inspector: its /oauth/callback takes the code (seen in the trail), then the page
  // returns to the tool it was on.
  await page.waitForURL((url) => url.origin === inspector && url.pathname !== "/oauth/callback", WAIT);
  await connected();
  await page.waitForFunction(() => (window.__notes ?? []).some((note) => /succeeded/.test(note)), null, WAIT);
  await keepNotes();
  report.formRestored = Object.fromEntries(await Promise.all(Object.keys(plan.arguments).map(
    async (name) => [name, await page.getByLabel(name, { exact: true }).inputValue(WAIT)])));
  if (Object.entries(plan.arguments).some(([name, value]) => report.formRestored[name] !== String(value))) await fillArguments();
  // "Retry your action": the same call, now with the member's token.
  await execute.click(WAIT);
  await page.locator('[data-testid="structured-output"] .ace_editor').first().waitFor(WAIT);
  const panels = await page.evaluate(() => {
    const value = (editor) => editor?.env?.editor?.getValue() ?? null;
    const structured = document.querySelector('[data-testid="structured-output"] .ace_editor');
    const editors = [...document.querySelectorAll('[data-testid="tools-screen"] .ace_editor')];
    return { result: value(editors.find((editor) => editor !== structured)), structured: value(structured) };
  });
  Object.assign(report, panels);
  await keepNotes();
  if (plan.screenshot) await page.screenshot({ path: plan.screenshot });
} catch (error) {
  failed = `${error.name}: ${error.message.split("\n")[0]} (at ${withoutQuery(page.url())})`;
  if (plan.failure) await page.screenshot({ path: plan.failure }).catch(() => {});
  report.page = await page.locator("body").innerText().catch(() => null);
} finally {
  await keepNotes();
  report.notes = [...notes];
  report.trail = report.trail.filter((entry) => entry.step !== "sent"); // the MCP messages answered
  await browser.close();
}
if (failed) report.error = failed;
process.stdout.write(JSON.stringify(report) + "\n");
