"""Transports: stdio lines and Streamable HTTP.

The only code that touches a client's bytes.
"""
