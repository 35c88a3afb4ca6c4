// The MCP Inspector's web UI (its Apps tab) rendering each view from the real server (tests/test_apps_inspector.py).
//
//   node inspector.mjs plan.json   → one JSON report per app on stdout, a line each
//
// The plan names the Inspector's URL (with its session token), the pinned playwright-core, the
// chromium binary, and the apps to open by the title the Apps tab lists them under. For each: the
// server's switch is turned on, the Apps tab opened, the app selected, "Open App" clicked (the
// Inspector then calls the tool and renders the view through its own sandbox proxy), and the
// view's frame read.
import { readFileSync } from "node:fs";
import path from "node:path";

const plan = JSON.parse(readFileSync(process.argv[2], "utf-8"));
const { chromium } = await import(path.join(plan.modules, "playwright-core", "index.mjs"));
const browser = await chromium.launch({
  executablePath: plan.chromium,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
});
// Each step waits for the state the page shows, never for a fixed time; the deadlines are long
// because a loaded machine (the whole suite on two cores) makes the Inspector slow, not wrong.
const WAIT = { timeout: 90000 };
// A Mantine switch: a transparent <input role=switch> stretched over its track, inside a <label>.
// The suite used to force-click the page's first [role=switch]: `force` skips Playwright's wait
// for the element to be visible, stable and enabled, so on a loaded machine the click came while
// the server's card was still being laid out (the input's box still empty) and failed with
// "Element is not visible". A person clicks the switch they can see: the label holding the switch
// of that accessible name, clicked once Playwright sees it visible, stable and enabled.
function switchTrack(page, name) {
  return page.locator("label").filter({ has: page.getByRole("switch", { name }) }).first();
}
// Polls `probe` until it returns something, up to WAIT.timeout; null after that.
async function until(page, probe) {
  const deadline = Date.now() + WAIT.timeout;
  while (Date.now() < deadline) {
    const found = await probe();
    if (found) return found;
    await page.waitForTimeout(100);
  }
  return null;
}
try {
  for (const app of plan.apps) {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    await page.goto(plan.url);
    // The server's card lists it as `Connect or disconnect "<name>"`; the switch turns it on.
    await switchTrack(page, /^Connect or disconnect /).click(WAIT);
    await page.waitForSelector('[data-testid="connection-status"][data-status="connected"]', WAIT);
    await page.getByText("Apps", { exact: true }).first().click(WAIT);
    await page.getByText(/^MCP Apps \(\d+\)$/).first().waitFor(WAIT);
    await page.getByText(app.title, { exact: true }).first().waitFor(WAIT);
    const listed = await page.getByText(app.title, { exact: true }).count();
    await page.getByText(app.title, { exact: true }).first().click(WAIT);
    const open = page.getByRole("button", { name: "Open App" });
    if (app.arguments) {
      // The form's "Edit as JSON" switch: the arguments typed in as the JSON they are.
      await switchTrack(page, "Edit as JSON").click(WAIT);
      // An Ace editor: focused through its scroller (its text layer sits on top, so the click is
      // forced once the scroller is visible), emptied, and the JSON typed in as one paste.
      const editor = page.locator('[data-testid="apps-form"] .ace_scroller').first();
      await editor.waitFor({ state: "visible", ...WAIT });
      await editor.click({ force: true, ...WAIT });
      await page.keyboard.press("Control+A");
      await page.keyboard.press("Delete");
      await page.keyboard.insertText(JSON.stringify(app.arguments));
      if (plan.failures) await page.screenshot({ path: plan.failures });
      await open.click(WAIT);
    }
    let opened = Boolean(app.arguments);
    // The Inspector's sandbox proxy (another origin) holds the view's frame (srcdoc). A tool
    // without required arguments opens at once; one whose form the Inspector shows anyway waits
    // for "Open App": whichever the page shows is what happens next.
    const read = async () => {
      for (const frame of page.frames()) {
        const found = await frame.evaluate(() => {
          const root = document.getElementById("root");
          return root && document.documentElement.dataset.view && !/Waiting for the answer/.test(root.textContent)
            ? { view: document.documentElement.dataset.view, text: root.innerText, theme: document.documentElement.dataset.theme || null }
            : null;
        }).catch(() => null);
        if (found) return found;
      }
      if (!opened && await open.isVisible().catch(() => false)) {
        opened = true;
        await open.click(WAIT);
      }
      return null;
    };
    const view = await until(page, read);
    if (app.screenshot) await page.screenshot({ path: app.screenshot });
    process.stdout.write(JSON.stringify({ title: app.title, listed, view }) + "\n");
    await page.close();
  }
} finally {
  await browser.close();
}
