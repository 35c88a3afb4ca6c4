"""The one outbound seam: the gateway client, HTTP/1.1, TLS, Retry-After."""
