"""The MCP core: the dispatcher and the parts it is made of.

The dispatcher, batches, the catalogue's interface, the request context, schemas, answers, MCP
Apps, redaction and the steps a request waits for.
"""
