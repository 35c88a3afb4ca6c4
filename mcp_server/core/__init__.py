"""The MCP core: the dispatcher, batches, the catalogue's interface, the request context, schemas, redaction."""
