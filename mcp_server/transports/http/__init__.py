"""Streamable HTTP, inbound: a server on one event loop.

Layers, each a module: `head` (bytes of a request head → a `Head` or a `Refusal`), `reader`
(sans-I/O: bytes in, head and body events out), `gate` (who may ask what), `door` (the hosted door
in OAuth mode), `admission` (how many connections and unfinished heads each peer may hold),
`response` (status line and headers out), `routes` (/healthz, /metrics, the CORS preflight, POST
/mcp), `sse` (a lazily started event stream), `record` (one request as the access log sees it),
`loop` (the event loop: what its errors cost, stop signals), `driver` (the dispatcher's steps on
the loop, with `share` pacing large answers), `lifecycle` (one connection's events and what they
mean), `connection` (one socket's protocol object and its requests in turn, a client's leaving
cancelling its call), `drain` (the drain's clock) and `server` (the listening socket, accept,
drain; the metrics listener too). The stdio transport serves on `loop` and `driver` (with `share`)
too; nothing else here is imported on the stdio path.
"""
