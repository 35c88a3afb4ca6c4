#!/usr/bin/env bash
# The real Node-based CLIs the tests drive, pinned, installed into <repo>/.tools/<name> (git-ignored)
# with npm running on the project's Node 22 (tests/tools/node22.sh). Idempotent; prints the
# command to run on stdout (an absolute path), everything else on stderr.
#
#   mcpb="$(bash tests/tools/npm_tool.sh mcpb)"            # the MCP Bundle CLI (a Node script: run it with Node 22)
#   claude="$(bash tests/tools/npm_tool.sh claude-code)"    # Claude Code (its native binary)
#   inspector="$(bash tests/tools/npm_tool.sh inspector)"   # the MCP Inspector's launcher (run it with Node 22)
#   apps="$(bash tests/tools/npm_tool.sh apps-host)"        # the MCP Apps test host's node_modules (tests/browser_host/)
#   oidc="$(bash tests/tools/npm_tool.sh oidc-provider)"    # node-oidc-provider's node_modules (tests/oidc/provider.mjs)
#
# No install script of a package is run (--ignore-scripts). @anthropic-ai/claude-code's own
# postinstall only copies the native binary of its platform package (an optional dependency,
# here @anthropic-ai/claude-code-linux-x64) over a placeholder; the tests run that binary directly.
set -euo pipefail

MCPB_VERSION="2.1.2"          # @anthropic-ai/mcpb; exact pin
CLAUDE_CODE_VERSION="2.1.332" # @anthropic-ai/claude-code; exact pin
INSPECTOR_VERSION="2.12.0"    # @modelcontextprotocol/inspector; exact pin (the README's Inspector lines name it)
EXT_APPS_VERSION="2.0.4"      # @modelcontextprotocol/ext-apps (its app-bridge: the host side); exact pin
PLAYWRIGHT_CORE_VERSION="1.65.1"  # playwright-core, driving Debian's chromium (no browser download); exact pin
OIDC_PROVIDER_VERSION="9.13.3"    # oidc-provider (node-oidc-provider: the third-party authorization server); exact pin

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
case "${1:-}" in
  mcpb)
    package="@anthropic-ai/mcpb"; version="$MCPB_VERSION"
    prefix="$root/.tools/mcpb"; command="$prefix/node_modules/@anthropic-ai/mcpb/dist/cli/cli.js" ;;
  claude-code)
    package="@anthropic-ai/claude-code"; version="$CLAUDE_CODE_VERSION"
    prefix="$root/.tools/claude-code"; command="$prefix/node_modules/@anthropic-ai/claude-code-linux-x64/claude" ;;
  inspector)
    package="@modelcontextprotocol/inspector"; version="$INSPECTOR_VERSION"
    prefix="$root/.tools/inspector"; command="$prefix/node_modules/$package/clients/launcher/build/index.js" ;;
  apps-host)
    # Two packages in one prefix: the app-bridge is checked here, playwright-core just below.
    package="@modelcontextprotocol/ext-apps"; version="$EXT_APPS_VERSION"
    extra="playwright-core@$PLAYWRIGHT_CORE_VERSION"
    prefix="$root/.tools/apps-host"; command="$prefix/node_modules" ;;
  oidc-provider)
    package="oidc-provider"; version="$OIDC_PROVIDER_VERSION"
    prefix="$root/.tools/oidc-provider"; command="$prefix/node_modules" ;;
  *) echo "usage: npm_tool.sh mcpb|claude-code|inspector|apps-host|oidc-provider" >&2; exit 2 ;;
esac
extra="${extra:-}"

installed_version() {
  local pj="$prefix/node_modules/$package/package.json"
  [ -f "$pj" ] || return 0
  sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$pj" | head -n1
}

node_bin="$(bash "$root/tests/tools/node22.sh")"
extra_ok() {
  [ -z "$extra" ] && return 0
  local pj="$prefix/node_modules/${extra%@*}/package.json"
  [ -f "$pj" ] && grep -q "\"version\": *\"${extra##*@}\"" "$pj"
}
if [ "$(installed_version)" != "$version" ] || [ ! -e "$command" ] || ! extra_ok; then
  echo "npm_tool.sh: installing $package@$version into $prefix" >&2
  mkdir -p "$prefix"
  # npm's own shebang is `env node`: Node 22 first on PATH runs npm (and its engines check) on it.
  PATH="$(dirname "$node_bin"):$PATH" npm install --prefix "$prefix" --save-exact --no-audit --no-fund \
    --ignore-scripts --loglevel=error "$package@$version" $extra >&2
fi
[ "$(installed_version)" = "$version" ] || { echo "npm_tool.sh: $package@$version did not install into $prefix" >&2; exit 1; }
extra_ok || { echo "npm_tool.sh: $extra did not install into $prefix" >&2; exit 1; }
[ -e "$command" ] || { echo "npm_tool.sh: $command is missing after installing $package@$version" >&2; exit 1; }
if [ "$1" = "claude-code" ]; then
  chmod +x "$command"
  got="$("$command" --version 2>/dev/null || true)"
  case "$got" in
    "$version "*) ;;
    *) echo "npm_tool.sh: $command --version says '$got', expected $version" >&2; exit 1 ;;
  esac
fi
echo "$command"
