"""Run by tests/test_sdk_oauth.py inside .venv-sdk: the official MCP Python SDK client signs in by OAuth.

`python tests/sdk/oauth_python.py URL REDIRECT_URI MODE` connects one Client to the MCP server at
URL over Streamable HTTP (MODE: the SDK's `legacy` handshake or its `auto` discovery), its
HTTP client authenticated by the SDK's own `OAuthClientProvider` with in-memory storage and no
client registered. It lists the tools, then calls `get_wagers` for chain 137: the server answers
401 with its challenge, and the provider runs the whole flow inline (protected resource metadata,
authorization server metadata, dynamic registration, authorization with PKCE, token) and retries.

The browser's part is the test's: the redirect handler prints `{"authorize": URL}` as one line on
stdout, and the callback handler reads the redirect the consent produced (the REDIRECT_URI with
`code`, `state` and `iss`) as one line on stdin. The last stdout line is the report: what the
call returned, the ids of the wagers it read, the client it registered, what it asked for and
was granted, and the SHA-256 of the access token it holds, never the token.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
import urllib.parse
from typing import Any

from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken


class Memory:
    """The SDK's TokenStorage, held in memory for this one run."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


def say(line: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


async def main(url: str, redirect_uri: str, mode: str) -> dict[str, Any]:
    storage = Memory()
    asked: list[str] = []

    async def redirect_handler(authorization_url: str) -> None:
        asked.append(authorization_url)
        say({"authorize": authorization_url})

    async def callback_handler() -> AuthorizationCodeResult:
        line = await asyncio.to_thread(sys.stdin.readline)
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(line.strip()).query))
        if "code" not in query:
            raise RuntimeError(f"the consent came back without a code: {sorted(query)} {query.get('error')}")
        return AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))

    provider = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            client_name="fairwins-mcp tests: Python SDK",
            redirect_uris=[redirect_uri],  # type: ignore[list-item]
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )
    report: dict[str, Any] = {"sdk": "python", "mode": mode}
    async with create_mcp_http_client(auth=provider) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:  # type: ignore[arg-type]
            tools = [tool.name for tool in (await client.list_tools()).tools]
            report["listed"] = "get_wagers" in tools
            report["tokenBeforeCall"] = storage.tokens is not None
            result = await client.call_tool("get_wagers", {"chainId": 137})
    content = result.structured_content or {}
    chains = content.get("chains", []) if isinstance(content, dict) else []
    authorize = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(asked[0]).query)) if asked else {}
    token = storage.tokens
    report |= {
        "isError": result.is_error,
        "text": " ".join(getattr(block, "text", "") for block in result.content)[:300] if result.is_error else "",
        "wagers": [wager.get("id") for chain in chains for wager in chain.get("wagers", [])],
        "authorizations": len(asked),
        "resource": authorize.get("resource"),
        "scope": authorize.get("scope"),
        "clientId": storage.client_info.client_id if storage.client_info else None,  # a public client's: no secret
        "tokenSha256": hashlib.sha256(token.access_token.encode()).hexdigest() if token else None,
        "granted": token.scope if token else None,
    }
    return report


if __name__ == "__main__":
    say(asyncio.run(main(*sys.argv[1:4])))
