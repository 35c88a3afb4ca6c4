"""Transports: stdio lines and Streamable HTTP, the only code that touches a client's bytes."""
