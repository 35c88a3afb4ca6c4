"""The hosted door in OAuth mode.

A request's access token judged, or the challenge that asks for one.

docs/authorization.md is the design. Every token a request brings is validated before the
request is processed (`Door.admit`), whatever it asks: a token refused here is never forwarded.
A request without one is served while it needs no member; a call that needs the member gets the
`401` challenge that starts a host's sign-in, and a valid token without the call's scopes the
`403` that asks for more consent. Nothing here holds a token past the request.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from mcp_server.transports.http.response import error_body
from mcp_server.upstream.issuer import Issuer
from mcp_server.wire.access_tokens import Invalid, KeySet, Policy, Validator, Verdict
from mcp_server.wire.jsonrpc import Id

log = logging.getLogger("fairwins_mcp.http")

WELL_KNOWN: Final = "/.well-known/oauth-protected-resource"
MEMBER_TOKEN_PREFIX: Final = "fw1."  # a member's own token, made in the FairWins app


@dataclass(frozen=True, slots=True)
class Challenge:
    """A request refused before it is processed.

    Its status, its WWW-Authenticate value, its body.
    """

    status: int
    authenticate: str | None
    body: bytes


class Door:
    """One resource's door.

    Its settings, the issuer's keys, and the verdicts on the tokens it saw.
    """

    def __init__(
        self,
        resource: str,
        metadata_url: str,
        issuer: str,
        scopes: Sequence[str],
        *,
        timeout: float = 10.0,
        member_tokens: bool = False,
    ) -> None:
        self.resource = resource
        # Both doors (--accept-fw1-tokens): a member's own fw1. token goes on as without OAuth,
        # for the gateway to judge, while every other token is judged here.
        self.member_tokens = member_tokens
        self.metadata_url = metadata_url
        self.issuer_url = issuer
        self.scopes = tuple(scopes)
        keys = KeySet()
        self.validator = Validator(Policy(issuer, resource), keys)
        self.issuer = Issuer(issuer, keys, timeout=timeout)
        self._loading: asyncio.Future[str | None] | None = None
        self._problem: str | None = None  # why the last fetch of the keys failed; None once one worked
        # RFC 9728 §3.1's path-aware name, and the bare one clients also ask for.
        path = urllib.parse.urlsplit(metadata_url).path
        self.metadata_paths = frozenset({path, WELL_KNOWN})
        self.metadata = json.dumps(
            {
                "resource": resource,
                "authorization_servers": [issuer],
                "bearer_methods_supported": ["header"],
                "scopes_supported": list(self.scopes),
                "resource_name": "FairWins",
            },
            separators=(",", ":"),
        ).encode()

    def signed_in(self, token: str) -> bool:
        """Whether `token` is judged as an access token.

        Every token is, but a member's fw1 one at both doors.
        """
        return not (self.member_tokens and token.startswith(MEMBER_TOKEN_PREFIX))

    async def admit(self, token: str | None, needed: Sequence[str], request_id: Id | None) -> Challenge | None:
        """The challenge to answer, or None when the request may go on.

        A request that goes on does so with `token`, if any.
        """
        if token is None:
            if not needed:
                return None
            return self._challenge(401, None, needed, request_id, _SIGN_IN)
        if not self.signed_in(token):
            return None
        verdict = await self._verdict(token)
        if isinstance(verdict, str):
            return Challenge(503, None, error_body("authorization_server_unreachable", verdict, request_id))
        if isinstance(verdict, Invalid):
            return self._challenge(401, "invalid_token", needed or self.scopes, request_id, _INVALID[verdict.reason])
        missing = verdict.missing(needed)
        if missing:
            words = _MORE_SCOPES.format(scopes=", ".join(missing))
            return self._challenge(403, "insufficient_scope", needed, request_id, words)
        return None

    async def _verdict(self, token: str) -> Verdict | str:
        """The token's verdict.

        The issuer's keys are fetched first when they are unknown or old.
        """
        keys = self.validator.keys
        remembered = self.validator.remembered(token, time.time())
        if remembered is not None and not keys.stale(time.time()):
            return remembered  # the common case: a token seen before, a hash and a lookup on the loop
        verdict = await self._judged(token)
        unknown = isinstance(verdict, Invalid) and verdict.reason == "unknown_key"
        if (unknown or keys.stale(time.time())) and (self._loading is not None or keys.claim_refetch(time.time())):
            await self._load()
            verdict = await self._judged(token)
        if keys.stale(time.time()) and self._problem is not None:
            # No key set to judge by: the authorization server's outage, never the token's fault,
            # until a fetch (at most every 30 s) reads one again.
            return f"The authorization server ({self.issuer_url}) could not be asked: {self._problem}. Retry shortly"
        return verdict

    async def _judged(self, token: str) -> Verdict:
        """A signature checked off the loop.

        An ES256 check takes milliseconds of Python (BENCHMARKS.md).
        """
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, self.validator.check, token, time.time())

    async def _load(self) -> str | None:
        """One fetch of the issuer's keys at a time.

        The calls that need them meanwhile wait for it.
        """
        if self._loading is None:
            self._loading = asyncio.ensure_future(self.issuer.load_keys())
            self._loading.add_done_callback(self._loaded)
        return await asyncio.shield(self._loading)

    def _loaded(self, done: asyncio.Future[str | None]) -> None:
        self._loading = None
        problem = self._problem = None if done.cancelled() else done.result()
        if problem is not None:
            log.warning("the authorization server %s could not be read: %s", self.issuer_url, problem)

    def _challenge(
        self, status: int, error: str | None, scopes: Sequence[str], request_id: Id | None, words: str
    ) -> Challenge:
        parts = [f'resource_metadata="{self.metadata_url}"']
        if error is not None:
            parts.insert(0, f'error="{error}"')
        if scopes:
            parts.append(f'scope="{" ".join(scopes)}"')
        body = error_body(error or "sign_in_required", words, request_id)
        return Challenge(status, "Bearer " + ", ".join(parts), body)


_SIGN_IN: Final = (
    "This call reads the member's FairWins account: sign in to FairWins (your MCP client offers it, "
    "from this answer's WWW-Authenticate header), then ask again. Nothing was sent to the gateway"
)
_MORE_SCOPES: Final = (
    "The FairWins sign-in this token comes from does not allow this call ({scopes} missing): sign in "
    "again and approve it. Nothing was sent to the gateway"
)
_REFUSED: Final = "The access token was refused ({why}): sign in to FairWins again. Nothing was sent to the gateway"
_INVALID: Final = {
    "oversized": _REFUSED.format(why="it is too long"),
    "malformed": _REFUSED.format(why="it is not an access token of this server's authorization server"),
    "wrong_type": _REFUSED.format(why="it is not an access token"),
    "alg_not_allowed": _REFUSED.format(why="its signing algorithm is not accepted"),
    "unknown_key": _REFUSED.format(why="its signing key is not the authorization server's"),
    "bad_signature": _REFUSED.format(why="its signature does not verify"),
    "bad_claim": _REFUSED.format(why="it lacks a claim an access token carries"),
    "wrong_issuer": _REFUSED.format(why="it was issued by another authorization server"),
    "wrong_audience": _REFUSED.format(why="it was issued for another server"),
    "expired": _REFUSED.format(why="it has expired"),
    "not_yet_valid": _REFUSED.format(why="it is not valid yet"),
}
