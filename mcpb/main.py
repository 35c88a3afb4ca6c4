"""The MCP Bundles' entry point (server/main.py in each bundle): start the bundled fairwins-mcp with this Python.

The uv bundle's host runs `uv run --directory <bundle> server/main.py`: uv picks a Python that meets
the bundle's pyproject.toml (>=3.11), makes <bundle>/.venv and runs `<bundle>/.venv/bin/python
server/main.py` in <bundle>. The python bundle's host runs `python3 -I <bundle>/server/main.py`
(`python` on Windows). `-I` keeps the member's own PYTHONPATH, PYTHONHOME, PYTHONSTARTUP and user
site-packages out, and also leaves this file's directory off sys.path, so it is put first here:
the bundled `mcp_server` is always the one imported, whatever the host's working directory or
environment holds. This file must still parse on an old Python, so that one too gets a sentence
instead of a traceback.
"""

import os
import sys

REQUIRED = (3, 11)

if sys.version_info < REQUIRED:
    found = ".".join(str(part) for part in sys.version_info[:3])
    sys.stderr.write(
        f"fairwins-mcp needs Python {REQUIRED[0]}.{REQUIRED[1]} or newer, but the host started "
        f"{sys.executable or 'python'} (Python {found}). Install Python {REQUIRED[0]}.{REQUIRED[1]}+ "
        "from python.org (or your package manager) so that it is the first python3 on PATH "
        "(python on Windows), then restart Claude Desktop.\n"
    )
    raise SystemExit(1)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from mcp_server.setup.cli import main  # noqa: E402  (after the path is set: the bundled package)

raise SystemExit(main(sys.argv[1:]))
