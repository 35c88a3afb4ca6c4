"""`python -m mcp_server`: the `fairwins-mcp` console script's entry point."""

from mcp_server.setup.cli import main

raise SystemExit(main())
