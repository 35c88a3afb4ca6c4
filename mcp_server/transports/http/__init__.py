"""Streamable HTTP, inbound: the request head and body framing (pure), the gate, admission, a server on one event loop.

Layers, each a module: `head` (bytes of a request head → a `Head` or a `Refusal`), `reader`
(sans-I/O: bytes in, head and body events out), `gate` (who may ask what), `admission` (how many
connections and unfinished heads each peer may hold), `response` (status line and headers out),
`routes` (/healthz, /metrics, the CORS preflight, POST /mcp), `sse` (a lazily started event stream),
`record` (one request as the access log sees it), `loop` (the event loop: what its errors cost,
stop signals), `connection` (one socket's protocol object and its requests in turn, a client's
leaving cancelling its call) and `server` (the listening socket, accept, drain; the metrics
listener too). The stdio transport serves on `loop` and `driver` (with `share`) too; nothing else here is
imported on the stdio path.
"""
