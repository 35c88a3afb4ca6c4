#!/usr/bin/env bash
# The MCP Inspector (npm @modelcontextprotocol/inspector), pinned, for tests/test_inspector.py: installed
# with the machine's own npm into <repo>/.tools/inspector (git-ignored), run on Node 22 (node22.sh).
# Idempotent; prints the path of the Inspector's launcher script on stdout, everything else on stderr.
# The README's Inspector lines name this same version; tests/test_inspector.py holds them to it.
#
#   launcher="$(bash tests/tools/inspector.sh)"; "$(bash tests/tools/node22.sh)" "$launcher" --cli ...
set -euo pipefail

INSPECTOR_VERSION="2.12.0"  # @modelcontextprotocol/inspector on npm; exact pin
PKG="@modelcontextprotocol/inspector"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
prefix="$root/.tools/inspector"
package_json="$prefix/node_modules/$PKG/package.json"
launcher="$prefix/node_modules/$PKG/clients/launcher/build/index.js"

bash "$root/tests/tools/node22.sh" >/dev/null  # the Inspector needs Node >= 22.19
installed="$(sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$package_json" 2>/dev/null | head -n1 || true)"
if [ "$installed" != "$INSPECTOR_VERSION" ] || [ ! -f "$launcher" ]; then
  command -v npm >/dev/null || { echo "inspector.sh: npm is required to install the MCP Inspector" >&2; exit 1; }
  echo "inspector.sh: installing $PKG@$INSPECTOR_VERSION into $prefix" >&2
  mkdir -p "$prefix"
  npm install --prefix "$prefix" --save-exact --no-audit --no-fund --ignore-scripts --loglevel=error \
    "$PKG@$INSPECTOR_VERSION" >&2
fi
[ -f "$launcher" ] || { echo "inspector.sh: $launcher is missing after the install" >&2; exit 1; }
echo "$launcher"
