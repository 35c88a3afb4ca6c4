"""The honest wording every consumer uses for what a read returned or could not return.

Sentences are `str.format` templates; the placeholders each one takes are named in the comment
beside it. Consumers fill them and never rephrase them, so the model reads the same words from
the in-app assistant and from the MCP server. `failure_sentence` fills them the one right way.
"""

from __future__ import annotations

import re
from typing import Final

# The sentence this project's rule rests on: a source that could not be read is not "none".
UNKNOWN_SENTENCE: Final[str] = (
    "This is an UNKNOWN, not an empty result: say that it could not be read, "
    "never that there is none or that it is zero."
)

# What each per-chain envelope state means, in words (docs/gateway.md, "Response shapes").
STATE_PHRASES: Final[dict[str, str]] = {
    "read": "was read",
    "not-configured": "is not configured on this gateway",
    "unreadable": "could not be read",
}

# One chain that is not `read`: {chain_id}, {phrase} (from STATE_PHRASES), {reason} ("" or " (why)").
CHAIN_UNKNOWN: Final[str] = "Chain {chain_id} {phrase}{reason}."

# The {http} slot of a failure sentence when the gateway answered: its HTTP status, and the error
# code it wrote in its body ({"error": "<code>", …}, docs/gateway.md, "Errors") when it wrote one.
# Empty when nothing answered (the gateway was not reached, or was never asked).
HTTP_FACTS: Final[dict[str, str]] = {
    "status": " (HTTP {status})",
    "statusAndCode": " (HTTP {status}, {code})",
}
# What a gateway error code must look like to be quoted as one: an identifier, not prose.
ERROR_CODE_PATTERN: Final[str] = "^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"

# Whole-call failures, by kind. Every template takes {what}: the thing that could not be read
# ("your wagers"), and {http} (HTTP_FACTS, or "") where the gateway may have answered.
FAILURE_SENTENCES: Final[dict[str, str]] = {
    "gateway_not_configured": (
        "Could not read {what}: no FairWins gateway is configured (FAIRWINS_API_URL is not set)."
    ),
    "no_token": (
        "Could not read {what}: no member token was given{http}. A member creates one in the FairWins "
        "app under Tools > Assistant > API access."
    ),
    "token_refused": (
        "Could not read {what}: the gateway refused the member token{http}; it is missing, expired or "
        "revoked. A member creates a new one in the FairWins app under Tools > Assistant > API access."
    ),
    # {scope}: the scope the gateway asked for.
    "scope_missing": (
        "Could not read {what}: the member token does not hold the scope {scope}{http}. A member creates "
        "a token with that scope in the FairWins app under Tools > Assistant > API access."
    ),
    # {wait}: "" or "; retry after N s".
    "rate_limited": "Could not read {what}: the gateway is rate-limiting requests{http}{wait}.",
    # {detail}: "" or ": how it failed" (no {http}: nothing answered).
    "unreachable": "Could not read {what}: the gateway could not be reached{detail}.",
    "unreadable_answer": "Could not read {what}: the gateway's answer could not be read{http}{detail}.",
    "unavailable": "Could not read {what}: the gateway is up but a service behind it is down{http}{detail}.",
    "not_found": "Could not read {what}: the gateway has no such route or object{http}{detail}.",
    "refused_request": "Could not read {what}: the gateway refused the request{http}{detail}.",
    "gateway_error": "Could not read {what}: the gateway failed{http}{detail}.",
    "redirected": (
        "Could not read {what}: the gateway answered with a redirect{http}, which is not followed "
        "(following it would carry the member's credential to another address)."
    ),
}

# The same failures for a member who signed in (OAuth mode: the client holds an access token the
# server checked, not an fw1 token the member made): what to do is sign in again, from the client.
SIGNED_IN_SENTENCES: Final[dict[str, str]] = {
    "token_refused": (
        "Could not read {what}: the gateway refused the access token{http}; it is expired or revoked. "
        "The member signs in to FairWins again from this client (its Connect or sign-in button)."
    ),
    "scope_missing": (
        "Could not read {what}: the access token does not hold the scope {scope}{http}. The member signs in "
        "to FairWins again from this client and approves that scope."
    ),
}

# A 2xx answer that was read whole but is not in a shape this contract describes (a field missing,
# or of a type no output schema allows). It was read, so it is not called unreadable, and the
# member keeps the gateway's text: it follows this sentence in the result, unchecked. {what},
# {http}; {detail}: ": `<field>` <what was expected>" (UNDESCRIBED_DETAIL).
UNDESCRIBED_ANSWER: Final[str] = (
    "The gateway answered with {what}{http}, but in a shape this server's contract does not describe{detail}. "
    "Its answer follows as the gateway wrote it, unchecked: report what it says as the gateway's words, "
    "and never call it none or zero for not fitting."
)
# {field}: the field's path in the answer in backticks (`markets[0].outcomes`), or "the answer" for the whole of it.
UNDESCRIBED_DETAIL: Final[str] = ": {field} {expected}"

_CODE: Final = re.compile(ERROR_CODE_PATTERN)


def http_facts(status: int | None, code: str | None = None) -> str:
    """The {http} slot: "" when nothing answered, " (HTTP 503)" or " (HTTP 503, unavailable)"."""
    if status is None:
        return ""
    if code is not None and _CODE.fullmatch(code):
        return HTTP_FACTS["statusAndCode"].format(status=status, code=code)
    return HTTP_FACTS["status"].format(status=status)


def failure_sentence(
    kind: str,
    what: str,
    *,
    status: int | None = None,
    code: str | None = None,
    detail: str = "",
    scope: str = "",
    wait: str = "",
) -> str:
    """The whole honest sentence for a failed call: the kind's template filled, then UNKNOWN_SENTENCE."""
    sentence = FAILURE_SENTENCES[kind].format(
        what=what, http=http_facts(status, code), detail=detail, scope=scope, wait=wait
    )
    return f"{sentence} {UNKNOWN_SENTENCE}"


def undescribed_sentence(
    what: str, field: str, expected: str, *, status: int | None = None, code: str | None = None
) -> str:
    """The whole sentence for a 2xx answer read whole that fits no shape the contract describes.

    `field` is the path in the answer ("markets[0].question"; "" for the answer as a whole), and
    `expected` what the contract expected there ("is required", "must be a string").
    """
    detail = UNDESCRIBED_DETAIL.format(field=f"`{field}`" if field else "the answer", expected=expected)
    return UNDESCRIBED_ANSWER.format(what=what, http=http_facts(status, code), detail=detail)
