"""Streamable HTTP, inbound: a server on one event loop, a module a layer.

A request's road: `head` and `reader` (bytes to events, sans-I/O), `gate` (who may ask what; `door`
in OAuth mode), `admission` (connections and unfinished heads per peer), `routes`, then `response`,
`sse` and `record` (the answer and its log line). `connection` (with its `lifecycle` table) holds
one socket; `server` accepts and drains (`drain`). The stdio transport serves on `loop` and
`driver` (with `share`) too; nothing else here is imported on the stdio path.
"""
