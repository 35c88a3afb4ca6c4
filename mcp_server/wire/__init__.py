"""The wire: JSON-RPC, MCP revisions, and the value types all layers share."""
