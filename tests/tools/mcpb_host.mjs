// What a host makes of an unpacked MCP Bundle's mcp_config: the command, args and env it will spawn.
// It asks the pinned @anthropic-ai/mcpb package's getMcpConfigForManifest, the code the MCPB README
// says Claude for macOS and Windows uses, so every placeholder (${__dirname}, ${user_config.…},
// ${HOME}, ${DESKTOP}, ${DOCUMENTS}, ${DOWNLOADS}, ${pathSeparator}, ${/}) and every platform
// override is resolved exactly as a host resolves it. Prints the resolved config as JSON.
//
//   node mcpb_host.mjs <mcpb-package-dir> <unpacked-bundle-dir> '<host JSON>'
//   host JSON: {"userConfig": {...}, "systemDirs": {"HOME": ..., ...}, "platform": "linux"}
import { readFileSync } from "node:fs";
import { join, sep } from "node:path";
import { pathToFileURL } from "node:url";

const [packageDir, bundleDir, hostJson] = process.argv.slice(2);
const host = JSON.parse(hostJson);
if (host.platform) {
  // platform_overrides are chosen by process.platform: stand in for a macOS or Windows host.
  Object.defineProperty(process, "platform", { value: host.platform });
}
const mcpb = await import(pathToFileURL(join(packageDir, "dist", "index.js")).href);
const manifest = JSON.parse(readFileSync(join(bundleDir, "manifest.json"), "utf-8"));
const warnings = [];
const config = await mcpb.getMcpConfigForManifest({
  manifest,
  extensionPath: bundleDir,
  systemDirs: host.systemDirs,
  userConfig: host.userConfig,
  pathSeparator: sep,
  logger: { log() {}, warn: (m) => warnings.push(String(m)), error: (m) => warnings.push(String(m)) },
});
process.stdout.write(JSON.stringify({ config: config ?? null, warnings, latest: mcpb.LATEST_MANIFEST_VERSION }) + "\n");
