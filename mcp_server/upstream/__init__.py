"""The one outbound seam: the gateway client, HTTP/1.1 over one socket, TLS, Retry-After."""
