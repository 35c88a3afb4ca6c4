"""Transports, stdio and Streamable HTTP: the only code on client bytes."""
