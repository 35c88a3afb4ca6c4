"""The official MCP conformance suite: its fixtures, a test-only server composing them, and the scripts that run it."""
