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
const WAIT = { timeout: 30000 };
try {
  for (const app of plan.apps) {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    await page.goto(plan.url);
    await page.locator("[role=switch]").first().click({ force: true });
    await page.waitForSelector('[data-testid="connection-status"][data-status="connected"]', WAIT);
    await page.getByText("Apps", { exact: true }).first().click();
    await page.getByText(/^MCP Apps \(\d+\)$/).first().waitFor(WAIT);
    const listed = await page.getByText(app.title, { exact: true }).count();
    await page.getByText(app.title, { exact: true }).first().click(WAIT);
    if (app.arguments) {
      // The form's "Edit as JSON" switch: the arguments typed in as the JSON they are.
      await page.getByRole("switch", { name: "Edit as JSON" }).click({ force: true, timeout: 30000 });
      // An Ace editor: focused through its scroller, emptied, and the JSON typed in as one paste.
      await page.locator('[data-testid="apps-form"] .ace_scroller').first().click({ force: true, timeout: 30000 });
      await page.keyboard.press("Control+A");
      await page.keyboard.press("Delete");
      await page.keyboard.insertText(JSON.stringify(app.arguments));
      if (plan.failures) await page.screenshot({ path: plan.failures });
    }
    // A tool without required arguments opens at once; one with a form waits for "Open App".
    const open = page.getByRole("button", { name: "Open App" });
    if (await open.waitFor({ timeout: 3000 }).then(() => true, () => false)) await open.click(WAIT);
    // The Inspector's sandbox proxy (another origin) holds the view's frame (srcdoc).
    const view = await (async () => {
      for (let i = 0; i < 300; i++) {
        for (const frame of page.frames()) {
          const found = await frame.evaluate(() => {
            const root = document.getElementById("root");
            return root && document.documentElement.dataset.view && !/Waiting for the answer/.test(root.textContent)
              ? { view: document.documentElement.dataset.view, text: root.innerText, theme: document.documentElement.dataset.theme || null }
              : null;
          }).catch(() => null);
          if (found) return found;
        }
        await page.waitForTimeout(100);
      }
      return null;
    })();
    if (app.screenshot) await page.screenshot({ path: app.screenshot });
    process.stdout.write(JSON.stringify({ title: app.title, listed, view }) + "\n");
    await page.close();
  }
} finally {
  await browser.close();
}
