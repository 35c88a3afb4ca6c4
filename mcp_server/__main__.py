"""`python -m mcp_server`: the same entry point as the `fairwins-mcp` console script."""

from mcp_server.setup.cli import main

raise SystemExit(main())
