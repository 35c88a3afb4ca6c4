"""Streamable HTTP, inbound: the request head and body framing (pure), the gate, admission, a thin threaded server.

Layers, each a module: `head` (bytes of a request head → a `Head` or a `Refusal`), `reader`
(sans-I/O: bytes in, head and body events out), `gate` (who may ask what), `admission` (how many
connections and unfinished heads each peer may hold), `response` (status line and headers out),
`routes` (/healthz, /metrics, the CORS preflight, POST /mcp), `sse` (a lazily started event stream),
`record` (one request as the access log sees it), `disconnects` (cancelling calls whose client
left), `connection` (one socket's requests in turn) and `server` (the listening socket, accept,
drain; the metrics listener too). Nothing here is imported on the stdio path.
"""
