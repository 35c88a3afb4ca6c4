"""The authorization server's signing keys, fetched by the outbound seam.

In OAuth mode (docs/authorization.md) every access token is checked against the keys its issuer
publishes: the issuer's metadata (RFC 8414, or OpenID Connect discovery) names `jwks_uri`, and
that JWK Set is loaded into a `KeySet` (wire/access_tokens.py). Both are read by the gateway
client (`GatewayCall.arun`): HTTPS only (http on loopback), no redirect followed, a bounded
answer, the same deadlines and retries. Nothing here holds a token.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from mcp_server.upstream.gateway import Gateway, GatewayFailure, GatewayRequest, GatewayResponse
from mcp_server.wire.access_tokens import MAX_JWKS_BYTES, KeySet, Loaded

MAX_METADATA_BYTES: Final = 64 * 1024  # an authorization server's metadata is a few KB


def metadata_urls(issuer: str) -> tuple[str, str]:
    """Where an issuer's metadata may be: RFC 8414's name first, then OIDC's."""
    parts = urllib.parse.urlsplit(issuer)
    path = parts.path.rstrip("/")
    origin = f"{parts.scheme}://{parts.netloc}"
    return (
        f"{origin}/.well-known/oauth-authorization-server{path}",
        f"{origin}{path}/.well-known/openid-configuration",
    )


@dataclass(frozen=True, slots=True)
class Metadata:
    """An issuer's metadata as read: its URL, the document, its `jwks_uri`."""

    url: str
    document: Mapping[str, object]
    jwks_uri: str


class Issuer:
    """One authorization server: its metadata, and its keys loaded into `keys`."""

    def __init__(self, issuer: str, keys: KeySet, *, timeout: float = 10.0) -> None:
        self.issuer = issuer
        self.keys = keys
        self.timeout = timeout
        self.metadata: Metadata | None = None
        self.loaded: Loaded | None = None  # what the last key set read gave (`fairwins-mcp check` lists it)

    async def load_keys(self) -> str | None:
        """Fetch the key set (the first time, its metadata too); None, or why not."""
        if self.metadata is None:
            problems = []
            for url in metadata_urls(self.issuer):
                found = await self._metadata(url)
                if isinstance(found, Metadata):
                    self.metadata = found
                    break
                problems.append(found)
            else:
                return f"its metadata could not be read ({'; '.join(problems)})"
        jwks_uri = self.metadata.jwks_uri
        body = await _get(jwks_uri, MAX_JWKS_BYTES, self.timeout)
        if isinstance(body, str):
            return f"its keys ({jwks_uri}) could not be read: {body}"
        loaded = self.keys.load(body, time.time())
        if loaded.refused is not None:
            return f"its keys ({jwks_uri}) could not be read: {loaded.refused}"
        self.loaded = loaded
        if not loaded.kids:
            return f"its key set ({jwks_uri}) holds no key this server can verify with"
        return None

    async def _metadata(self, url: str) -> Metadata | str:
        """The metadata at `url`, naming this issuer and a `jwks_uri`; or why not."""
        body = await _get(url, MAX_METADATA_BYTES, self.timeout)
        if isinstance(body, str):
            return f"{url}: {body}"
        try:
            document = json.loads(body)
        except (ValueError, RecursionError):
            return f"{url} is not JSON"
        if not isinstance(document, dict):
            return f"{url} is not a JSON object"
        # RFC 8414 §3.3: metadata whose issuer differs from the one asked for is not used.
        named = document.get("issuer")
        if named != self.issuer:
            # Quoted as JSON, cut short: the server's text, never a second log line.
            said = f" ({json.dumps(named[:100])})" if isinstance(named, str) else ""
            return f"{url} names another issuer{said}"
        jwks_uri = document.get("jwks_uri")
        if not isinstance(jwks_uri, str) or not jwks_uri.startswith(("https://", "http://")):
            return f"{url} names no jwks_uri"
        return Metadata(url, document, jwks_uri)


async def _get(url: str, max_body: int, timeout: float) -> bytes | str:
    """The body of a 200 answer to GET `url` (outbound seam), or why not."""
    parts = urllib.parse.urlsplit(url)
    gateway = Gateway(f"{parts.scheme}://{parts.netloc}", timeout=timeout, max_body=max_body, attempts=2)
    if gateway.config_problem is not None:
        return gateway.config_problem
    path = urllib.parse.quote(parts.path or "/", safe="/%:@!$&'()*+,;=-._~")
    query = tuple(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
    outcome = await gateway.step(GatewayRequest("GET", path, query)).arun()
    if isinstance(outcome, GatewayFailure):
        return f"{outcome.cause}: {outcome.detail}"
    assert isinstance(outcome, GatewayResponse)
    if outcome.status != 200:
        return f"HTTP {outcome.status}"
    return outcome.body
