"""The MCP core: the dispatcher and the parts it is made of."""
