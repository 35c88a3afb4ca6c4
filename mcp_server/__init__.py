"""fairwins-mcp: a standard-library MCP server for the FairWins gateway."""

__version__ = "0.1.0"
