"""The honest wording every consumer uses for what a read returned or could not return.

Sentences are `str.format` templates; the placeholders each one takes are named in the comment
beside it. Consumers fill them and never rephrase them, so the model reads the same words from
the in-app assistant and from the MCP server.
"""

from __future__ import annotations

from typing import Final

# The sentence this project's rule rests on: a source that could not be read is not "none".
UNKNOWN_SENTENCE: Final[str] = (
    "This is an UNKNOWN, not an empty result: say that it could not be read, "
    "never that there is none or that it is zero."
)

# What each per-chain envelope state means, in words (GATEWAY.md "Response shapes").
STATE_PHRASES: Final[dict[str, str]] = {
    "read": "was read",
    "not-configured": "is not configured on this gateway",
    "unreadable": "could not be read",
}

# One chain that is not `read`: {chain_id}, {phrase} (from STATE_PHRASES), {reason} ("" or ": why").
CHAIN_UNKNOWN: Final[str] = "Chain {chain_id} {phrase}{reason}."

# Whole-call failures. Every template takes {what}: the thing that could not be read ("your wagers").
FAILURE_SENTENCES: Final[dict[str, str]] = {
    "gateway_not_configured": (
        "Could not read {what}: no FairWins gateway is configured (FAIRWINS_API_URL is not set)."
    ),
    "no_token": (
        "Could not read {what}: no member token was given. A member creates one in the FairWins "
        "app under Tools > Assistant > API access."
    ),
    "token_refused": (
        "Could not read {what}: the gateway refused the member token (missing, expired or "
        "revoked). A member creates a new one in the FairWins app under Tools > Assistant > API access."
    ),
    # {scope}: the scope the gateway asked for.
    "scope_missing": (
        "Could not read {what}: the member token does not hold the scope {scope}. A member creates "
        "a token with that scope in the FairWins app under Tools > Assistant > API access."
    ),
    # {wait}: "" or " (retry after N s)".
    "rate_limited": "Could not read {what}: the gateway is rate-limiting requests{wait}.",
    # {detail}: "" or ": how it failed".
    "unreachable": "Could not read {what}: the gateway could not be reached{detail}.",
    "unreadable_answer": "Could not read {what}: the gateway's answer could not be read{detail}.",
    "unavailable": "Could not read {what}: the gateway is up but a service behind it is down{detail}.",
    "not_found": "Could not read {what}: the gateway has no such route or object{detail}.",
    "refused_request": "Could not read {what}: the gateway refused the request{detail}.",
    "gateway_error": "Could not read {what}: the gateway failed{detail}.",
    "redirected": (
        "Could not read {what}: the gateway answered with a redirect{detail}, which is not followed "
        "(following it would carry the member's credential to another address)."
    ),
}
