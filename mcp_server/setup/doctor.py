"""`fairwins-mcp check`: the gateway, the token and the tools, in words.

It reads the same Config as the server and asks the gateway through the same seam, two GETs
only (`/status`, and `/v1/member/me` when a token is set): nothing priced, nothing that acts.
Which tools will work follows from those two answers and the served tool table, so the check
never spends a call on a tool. The token appears only redacted (`fw1.…abcd`).

In OAuth mode (`--http … --public-url … --authorization-server …`) it also reads what the server
would: the authorization server's metadata and its keys, by the server's own code (upstream.issuer,
on an event loop of its own), and says what members signing in will meet. Of a key it names the
`kid` and the algorithm, nothing more.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Final, TextIO

from mcp_server import __version__
from mcp_server.core.context import RequestContext
from mcp_server.fairwins.outcomes import Wording, clean, read_json
from mcp_server.fairwins.snapshot import load
from mcp_server.fairwins.tools import GatewayTool, build_tools
from mcp_server.ops import logs
from mcp_server.setup.config import Config, OAuth
from mcp_server.upstream import aio
from mcp_server.upstream.gateway import Gateway, GatewayFailure, GatewayRequest, GatewayResponse, Outcome
from mcp_server.upstream.issuer import Issuer, Metadata, metadata_urls
from mcp_server.wire.access_tokens import KeySet, Loaded

OK: Final = "ok"
FAIL: Final = "FAIL"
WARN: Final = "warn"
SKIP: Final = "skip"
NOTE: Final = "note"
WHERE_TOKENS_COME_FROM: Final = "a member creates one in the FairWins app under Tools > Assistant > API access"
SOON: Final = dt.timedelta(days=7)
PROFILE_SCOPE: Final = "read:profile"


@dataclass(frozen=True)
class Line:
    mark: str  # ok | FAIL | warn | skip | note
    topic: str
    text: str


@dataclass(frozen=True)
class Report:
    lines: tuple[Line, ...]

    @property
    def ok(self) -> bool:
        """Everything a member needs works: no line failed."""
        return all(line.mark != FAIL for line in self.lines)

    def render(self) -> str:
        width = max(len(line.topic) for line in self.lines)
        body = "".join(f"{line.mark:<5} {line.topic:<{width}}  {line.text}\n" for line in self.lines)
        verdict = "Everything a member needs works." if self.ok else "Not everything works: see the FAIL lines above."
        return f"fairwins-mcp check ({__version__})\n{body}{verdict}\n"


@dataclass(frozen=True)
class _Token:
    state: str  # absent | sign_in | no_sign_in | valid | refused | no_profile_scope | unchecked | unknown
    scopes: frozenset[str] = frozenset()


def _why(outcome: Outcome, timeout: float) -> str:
    """Why an answer is not the one we wanted, in words a person can act on."""
    if isinstance(outcome, GatewayFailure):
        if outcome.cause == "refused":
            return "nothing answered there (connection refused)"
        if outcome.cause == "timeout":
            return f"it did not answer within {timeout:g} s"
        return outcome.detail
    status = outcome.status
    if 300 <= status < 400:
        where = outcome.header("Location")
        to = f" to {clean(where, 80)}" if where else ""
        return f"it answered {status}, a redirect{to}, which is not followed: check the URL's scheme, host and path"
    body, problem = read_json(outcome)
    if 200 <= status < 300 and problem is not None:
        return f"it answered, but its answer could not be read{problem}: is this the gateway's base URL?"
    said = body.get("message") if isinstance(body, dict) else None
    quoted = f" (“{clean(said, 120)}”)" if isinstance(said, str) and said.strip() else ""
    return f"it answered {status}{quoted}"


def _when(expires_at: object, now: dt.datetime) -> tuple[str, str]:
    """(mark, words) for a token's expiry as the gateway stated it."""
    if not isinstance(expires_at, str):
        return OK, "no expiry stated"
    try:
        when = dt.datetime.fromisoformat(expires_at)
    except ValueError:
        return WARN, f"expires {clean(expires_at, 40)} (not a date this check can read)"
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    left = when - now
    if left <= dt.timedelta(0):
        return WARN, f"expired {expires_at} by this machine's clock, yet the gateway accepts it: check the clock"
    days = left.days
    span = f"in {days} days" if days >= 2 else "within a day" if days < 1 else "tomorrow"
    if left <= SOON:
        return WARN, f"expires {expires_at} ({span}): {WHERE_TOKENS_COME_FROM}"
    return OK, f"expires {expires_at} ({span})"


def _check_gateway(config: Config, gateway: Gateway) -> tuple[bool, Line]:
    if gateway.target is None:
        unset = "FAIRWINS_API_URL is not set: set it to the gateway's base URL, e.g. https://relay.fairwins.app"
        return False, Line(FAIL, "gateway", gateway.config_problem or unset)
    url = config.api_url or ""
    outcome = gateway.call(GatewayRequest("GET", "/status"))
    if not isinstance(outcome, GatewayResponse) or not 200 <= outcome.status < 300:
        return False, Line(FAIL, "gateway", f"{url} does not answer /status: {_why(outcome, gateway.timeout)}")
    body, problem = read_json(outcome)
    if problem is not None or not isinstance(body, dict):
        return False, Line(FAIL, "gateway", f"{url} /status: {_why(outcome, gateway.timeout)}")
    status = body.get("status")
    said = ", ".join(f"{key} {clean(body[key], 40)}" for key in ("status", "version") if body.get(key) is not None)
    mark = OK if status in (None, "ok") else WARN
    return True, Line(mark, "gateway", f"{url} answers /status" + (f" ({said})" if said else ""))


def _check_token(config: Config, gateway: Gateway, reachable: bool, now: dt.datetime) -> tuple[_Token, list[Line]]:
    token = config.api_token
    if not token:
        why = f"none: FAIRWINS_API_TOKEN is not set; member tools need one ({WHERE_TOKENS_COME_FROM})"
        return _Token("absent"), [Line(FAIL, "token", why)]
    named = f"{logs.redact(token)} (FAIRWINS_API_TOKEN)"
    lines = []
    if not token.startswith("fw1."):
        lines.append(Line(WARN, "token", f"{named} does not start with fw1., as FairWins member tokens do"))
    if not reachable:
        return _Token("unchecked"), [*lines, Line(SKIP, "token", f"{named} not checked: no gateway to ask")]
    # The token introspection route, from the snapshot's route table (the contract's one source).
    outcome = gateway.call(GatewayRequest("GET", load().route_paths["member.me"], bearer=token))
    refusals = {
        401: (
            "refused",
            FAIL,
            f"{named} was refused by the gateway (missing, expired or revoked); {WHERE_TOKENS_COME_FROM}",
        ),
        403: (
            "no_profile_scope",
            WARN,
            f"{named} is accepted but lacks {PROFILE_SCOPE}, so its other scopes cannot be listed",
        ),
    }
    refused = refusals.get(outcome.status) if isinstance(outcome, GatewayResponse) else None
    if refused is not None:
        state, level, words = refused
        return _Token(state), [*lines, Line(level, "token", words)]
    body: Any = None
    if isinstance(outcome, GatewayResponse) and 200 <= outcome.status < 300:
        body, _ = read_json(outcome)
    if not isinstance(body, dict):
        return _Token("unknown"), [
            *lines,
            Line(FAIL, "token", f"{named} could not be checked: {_why(outcome, gateway.timeout)}"),
        ]
    raw_scopes = body.get("scopes")
    scopes = frozenset(s for s in raw_scopes if isinstance(s, str)) if isinstance(raw_scopes, list) else frozenset()
    account = body.get("account")
    whose = f" for account {clean(account, 64)}" if isinstance(account, str) and account else ""
    mark, expiry = _when(body.get("expiresAt"), now)
    lines.append(Line(mark, "token", f"{named} is valid{whose}; {expiry}"))
    listed = ", ".join(sorted(clean(s, 40) for s in scopes)) or "none"
    lines.append(Line(OK if scopes else WARN, "scopes", listed))
    return _Token("valid", scopes), lines


def _check_oauth(oauth: OAuth, timeout: float) -> list[Line]:
    """The resource, the issuer's metadata and keys, read as the server does."""
    covers = f" (covering {oauth.public_url})" if oauth.resource != oauth.public_url else ""
    served = f"tokens must carry it in aud; its metadata is served at {oauth.metadata_url}"
    lines = [Line(OK, "resource", f"{oauth.resource}{covers}: {served}")]
    issuer = Issuer(oauth.issuer, KeySet(), timeout=timeout)
    problem = asyncio.run(_load_keys(issuer))
    if issuer.metadata is None:
        why = clean(problem or "it named no keys", 600)
        return [
            *lines,
            Line(FAIL, "issuer", f"{oauth.issuer}: {why}; members cannot sign in"),
            Line(SKIP, "keys", "not read: no metadata names them"),
        ]
    lines += _metadata_lines(oauth, issuer.metadata)
    jwks_uri = clean(issuer.metadata.jwks_uri, 200)
    if issuer.loaded is None:
        return [*lines, Line(FAIL, "keys", f"{oauth.issuer}: {clean(problem, 400)}; no member's token can be checked")]
    return lines + _key_lines(issuer.loaded, issuer.keys, jwks_uri)


async def _load_keys(issuer: Issuer) -> str | None:
    """The server's own fetch of metadata and keys, on a loop of the check's."""
    try:
        return await issuer.load_keys()
    finally:
        aio.close_pools(asyncio.get_running_loop())


def _metadata_lines(oauth: OAuth, metadata: Metadata) -> list[Line]:
    """Which well-known URL answered, and what sign-in needs of its metadata."""
    document = metadata.document
    kind = "RFC 8414" if metadata.url == metadata_urls(oauth.issuer)[0] else "OpenID Connect discovery"
    lines = [Line(OK, "issuer", f"{oauth.issuer}: metadata read from {metadata.url} ({kind}); its issuer matches")]
    said: list[str] = []
    methods = document.get("code_challenge_methods_supported")
    if isinstance(methods, list) and "S256" in methods:
        said.append("PKCE S256")
    else:
        lines.append(
            Line(
                FAIL,
                "sign-in",
                "the metadata advertises no PKCE S256 (code_challenge_methods_supported): "
                "MCP clients refuse to sign in without it",
            )
        )
    ways = []
    if isinstance(document.get("registration_endpoint"), str):
        ways.append("dynamic client registration")
    if document.get("client_id_metadata_document_supported") is True:
        ways.append("Client ID Metadata Documents")
    if ways:
        said.append("clients register by " + " or ".join(ways))
    else:
        lines.append(
            Line(
                WARN,
                "sign-in",
                "neither dynamic client registration nor Client ID Metadata Documents: only clients "
                "registered beforehand can sign in (claude.ai, Claude Desktop and ChatGPT register one of those ways)",
            )
        )
    indicators = document.get("resource_indicators_supported")  # not every server states it
    if indicators is True:
        said.append("resource indicators (RFC 8707)")
    elif indicators is False:
        lines.append(
            Line(
                WARN,
                "sign-in",
                "the metadata says resource indicators (RFC 8707) are not supported: "
                f"its tokens must still carry {oauth.resource} in aud, or each one is refused",
            )
        )
    if said:
        lines.append(Line(OK, "sign-in", "; ".join(said)))
    return lines


def _key_lines(loaded: Loaded, keys: KeySet, jwks_uri: str) -> list[Line]:
    """The keys loaded, each by kid and algorithm, and those left out and why."""
    named = []
    for kid in dict.fromkeys(loaded.kids):
        algs = ", ".join(sorted({key.alg for key in keys.candidates(kid)})) or "never used: the set has other keys"
        named.append(f"kid {clean(kid, 64)} ({algs})" if kid is not None else f"no kid ({algs})")
    lines = []
    count = len(loaded.kids)
    if count:
        lines.append(Line(OK, "keys", f"{count} key{'s' if count != 1 else ''} from {jwks_uri}: {', '.join(named)}"))
    else:
        lines.append(Line(FAIL, "keys", f"{jwks_uri} holds no key this server can verify with"))
    if loaded.skipped:
        left_out = ", ".join(
            f"{'kid ' + clean(kid, 64) if kid is not None else 'no kid'} ({reason.replace('_', ' ')})"
            for kid, reason in loaded.skipped
        )
        lines.append(Line(WARN, "keys", f"{len(loaded.skipped)} left out: {left_out}"))
    return lines


# Why no member tool works, by the token's state, where the state alone says it.
_WHY_NOT: Final = {
    "absent": "they need a member token",
    "no_sign_in": "members cannot sign in (above)",
    "refused": "the token was refused",
}


def _tool_lines(tools: list[GatewayTool], reachable: bool, token: _Token) -> list[Line]:
    working: list[str] = []
    broken: dict[str, list[str]] = defaultdict(list)  # reason → tool names (or "name (scope)")
    unknown: list[str] = []
    sign_in: list[str] = []
    for tool in sorted(tools, key=lambda t: t.name):
        scope: str = tool.entry.get("scope") or ""
        state = token.state
        if not reachable:
            broken["no gateway answers"].append(tool.name)
        elif tool.public or (state == "valid" and scope in token.scopes):
            working.append(tool.name)
        elif state == "valid" or (state == "no_profile_scope" and scope == PROFILE_SCOPE):
            broken["the token lacks their scope"].append(f"{tool.name} ({scope})")
        elif state == "sign_in":
            sign_in.append(tool.name)
        elif state in _WHY_NOT:
            broken[_WHY_NOT[state]].append(tool.name)
        else:
            unknown.append(tool.name)
    lines = []
    if working:
        every = "all " if len(working) == len(tools) else ""
        lines.append(Line(OK, "tools", f"{every}{len(working)} will work: {', '.join(working)}"))
    for reason, names in broken.items():
        lines.append(Line(FAIL, "tools", f"{len(names)} will not work, {reason}: {', '.join(names)}"))
    if sign_in:
        lines.append(Line(NOTE, "tools", f"{len(sign_in)} need a member's sign-in: {', '.join(sign_in)}"))
    if unknown:
        lines.append(
            Line(WARN, "tools", f"{len(unknown)} cannot be judged without the token's scopes: {', '.join(unknown)}")
        )
    priced = sorted(t.name for t in tools if t.priced)
    if reachable and token.state == "absent" and priced:
        lines.append(Line(NOTE, "tools", f"without a token, {', '.join(priced)} can instead be paid per call (x402)"))
    return lines


def diagnose(config: Config, gateway: Gateway, now: dt.datetime | None = None) -> Report:
    """Judge every served tool from the gateway's answers to two questions."""
    now = now or dt.datetime.now(dt.UTC)
    # Gateway text quoted in a line never carries the token back (redaction.py), whatever the gateway echoes.
    with logs.request_bound(RequestContext(bearer=config.api_token)):
        reachable, gateway_line = _check_gateway(config, gateway)
        oauth_lines = [] if config.oauth is None else _check_oauth(config.oauth, config.timeout)
        if config.oauth is not None and not config.api_token:
            # Each member brings a token of the sign-in's: there is none to set, and none to check.
            signed_in = all(line.mark != FAIL for line in oauth_lines)
            token = _Token("sign_in" if signed_in else "no_sign_in")
            token_lines = [Line(SKIP, "token", f"none needed: in OAuth mode members sign in at {config.oauth.issuer}")]
        else:
            token, token_lines = _check_token(config, gateway, reachable, now)
    snap = load()
    tools = build_tools(snap, gateway, Wording.from_snapshot(snap.wording))
    return Report((gateway_line, *oauth_lines, *token_lines, *_tool_lines(tools, reachable, token)))


def run(config: Config, out: TextIO, *, gateway: Gateway | None = None, now: dt.datetime | None = None) -> int:
    """Write the report to `out`; 0 if all a member needs works, else 1."""
    if gateway is None:
        from mcp_server.setup.server import build_gateway

        gateway = build_gateway(config)
    report = diagnose(config, gateway, now)
    out.write(report.render())
    out.flush()
    return 0 if report.ok else 1
