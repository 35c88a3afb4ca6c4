"""The wire: JSON-RPC values, MCP revisions and the value types every layer shares."""
