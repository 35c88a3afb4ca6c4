"""Gateway outcomes → honest MCP results: the gateway's JSON verbatim, or a sentence naming the failure.

Every sentence is a template from the snapshot's `wording` (assistant_contract.results), so the
model reads the same words here as in the app. A failure is never rendered as [], 0 or a gap.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from . import redaction
from .gateway import GatewayFailure, GatewayResponse, Outcome
from .jsonrpc import JSONObject, NumberTooLong, loads
from .logs import redact
from .retry_after import retry_after_seconds

PUBLIC_NOTE = "This public read needed no token."
MAX_QUOTED = 200  # characters of gateway-written text quoted inside our own sentences


# A credential the gateway (or a proxy before it) writes back into its own text is never quoted
# on: a member token (GATEWAY.md: `fw1.<opaque>`) keeps only its redacted form, and base64 JSON
# (an x402 payment header, a JWT) is left out whole.
_TOKEN_TEXT = re.compile(r"fw1\.[A-Za-z0-9._~+/=-]{5,}")
_BASE64_JSON = re.compile(r"eyJ[A-Za-z0-9+/_-]{12,}={0,2}")


def clean(text: object, limit: int = MAX_QUOTED) -> str:
    """Gateway-written text, safe to quote inside a sentence: one line, no control characters, no credential, capped.

    The credentials of the request being handled are removed by value (redaction.py), before the
    cut so that none is left half there; the pattern rules then remove any other credential.
    """
    # What the cut keeps, plus room for a credential across it, each character escaped as six at most.
    raw = str(text)[: (limit + 64) * 6]
    flat = "".join(ch if unicodedata.category(ch)[0] != "C" else " " for ch in raw).strip()
    flat = redaction.scrub(flat)
    flat = _TOKEN_TEXT.sub(lambda m: redact(m.group(0)), flat)
    flat = _BASE64_JSON.sub("(an encoded credential, not shown)", flat)
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


@dataclass(frozen=True)
class Wording:
    unknown: str
    state_phrases: dict[str, str]
    chain_unknown: str
    failures: dict[str, str]

    @classmethod
    def from_snapshot(cls, wording: dict[str, Any]) -> Wording:
        return cls(wording["unknown"], wording["statePhrases"], wording["chainUnknown"], wording["failures"])

    def failure(self, cause: str, what: str, *, detail: str = "", scope: str = "", wait: str = "") -> str:
        sentence = self.failures[cause].format(what=what, detail=detail, scope=scope, wait=wait)
        return f"{sentence} {self.unknown}"


def text_block(text: str) -> JSONObject:
    return {"type": "text", "text": text}


def error_result(text: str) -> JSONObject:
    return {"content": [text_block(text)], "isError": True}


def read_json(resp: GatewayResponse) -> tuple[Any, str | None]:
    """(value, None) when the body is JSON; (None, why not) otherwise."""
    if not resp.body.strip():
        return None, ": it was empty"
    try:
        return loads(resp.body.decode("utf-8")), None
    except UnicodeDecodeError:
        return None, ": it was not valid UTF-8"
    except NumberTooLong as exc:
        return None, f": it held {exc}"
    except ValueError as exc:
        if "deeply" in str(exc):
            return None, ": it was nested too deeply to read"
        kind = clean(resp.header("Content-Type") or "no content type", 60)
        return None, f": it was not JSON ({kind})"


def _seconds(value: float) -> str:
    if value < 120:
        return f"{round(value, 1):g} s"  # 0.5 s stays 0.5 s: a limit is never understated
    if value < 7200:
        return f"{int(value // 60)} min"
    return f"{int(value // 3600)} h" if value < 240 * 3600 else f"{int(value // 86400)} d"


def describe_failure(outcome: Outcome, what: str, wording: Wording, *, scope: str = "", timeout: float = 0) -> str:
    """The sentence for an outcome that is not a readable 2xx JSON answer."""
    if isinstance(outcome, GatewayFailure):
        if outcome.cause == "not_configured":
            if outcome.detail.startswith("FAIRWINS_API_URL is not set"):
                return wording.failure("gateway_not_configured", what)
            return wording.failure("unreachable", what, detail=f": {outcome.detail}")
        if outcome.cause == "unsendable":
            return f"Could not read {what}: {outcome.detail}, so nothing was sent to the gateway. {wording.unknown}"
        if outcome.cause in ("too_large", "unreadable"):
            return wording.failure("unreadable_answer", what, detail=f": {outcome.detail}")
        if outcome.cause == "timeout" and timeout:
            return wording.failure("unreachable", what, detail=f": it did not answer within {_seconds(timeout)}")
        return wording.failure("unreachable", what, detail=f": {outcome.detail}")
    status = outcome.status
    body, _ = read_json(outcome)
    said = body.get("message") if isinstance(body, dict) else None
    quoted = f": the gateway said “{clean(said)}”" if isinstance(said, str) and said.strip() else ""
    if 300 <= status < 400:
        return wording.failure("redirected", what, detail=f" ({status})")
    if status == 401:
        return wording.failure("token_refused", what)
    if status == 403:
        named = body.get("scope") if isinstance(body, dict) else None
        return wording.failure("scope_missing", what, scope=clean(named, 40) if isinstance(named, str) else scope)
    if status == 404:
        return wording.failure("not_found", what, detail=quoted)
    if status == 429:
        wait = retry_after_seconds(outcome.header("Retry-After"))
        return wording.failure(
            "rate_limited", what, wait=f" (retry after {_seconds(wait)})" if wait is not None else ""
        )
    if status == 503:
        return wording.failure("unavailable", what, detail=quoted)
    if status == 402:
        # A price is rendered by payments.price_result; reaching here means none could be read,
        # and an invented one would be worse than none.
        return wording.failure(
            "refused_request", what, detail=": it answered 402 (payment required) with no price this server can show"
        )
    if status >= 500:
        return wording.failure("gateway_error", what, detail=f": it answered {status}")
    if status >= 400:
        return wording.failure("refused_request", what, detail=quoted or f": it answered {status}")
    return wording.failure("unreadable_answer", what, detail=f": it answered {status}")


def chain_notes(value: Any, wording: Wording) -> list[str]:
    """A sentence for every chain in a per-chain envelope that is not `read`, then the UNKNOWN rule."""
    chains = value.get("chains") if isinstance(value, dict) else None
    if not isinstance(chains, list):
        return []
    notes = []
    for chain in chains:
        # Only envelope entries carry a state; other lists of chains (/status) are not envelopes.
        if not isinstance(chain, dict) or "state" not in chain or chain.get("state") == "read":
            continue
        state = chain.get("state")
        phrase = wording.state_phrases.get(state) if isinstance(state, str) and state != "read" else None
        if phrase is None:
            phrase = f"is in a state this server does not recognise ({clean(state, 40)})"
        reason = chain.get("reason")
        notes.append(
            wording.chain_unknown.format(
                chain_id=clean(chain.get("chainId", "(unnamed)"), 24),
                phrase=phrase,
                reason=f" ({clean(reason)})" if isinstance(reason, str) and reason.strip() else "",
            )
        )
    if notes:
        notes.append(wording.unknown)
    return notes


def success_result(value: Any, notes: list[str]) -> JSONObject:
    """The gateway's JSON verbatim as structuredContent and as text, plus the honest notes."""
    content = [text_block(json.dumps(value, ensure_ascii=False, separators=(",", ":")))]
    if notes:
        content.append(text_block(" ".join(notes)))
    result: JSONObject = {"content": content, "isError": False}
    if isinstance(value, dict):
        result["structuredContent"] = value
    return result
