"""The wire: JSON-RPC values, MCP revisions, the shared value types.

The value types every layer shares.
"""
