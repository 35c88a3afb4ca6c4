"""Gateway outcomes as honest MCP results: the JSON verbatim, or a failure.

Every sentence is a template from the snapshot's `wording` (assistant_contract.results), so the
model reads the same words here as in the app. A failure is never rendered as [], 0 or a gap.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Final

from mcp_server.core import redaction
from mcp_server.core.catalog import text_content
from mcp_server.core.context import RequestContext
from mcp_server.core.steps import Steps
from mcp_server.ops.logs import redact
from mcp_server.upstream.gateway import Gateway, GatewayFailure, GatewayRequest, GatewayResponse, Outcome
from mcp_server.upstream.retry_after import retry_after_seconds
from mcp_server.wire.jsonrpc import (
    INTERNAL_ERROR,
    LONE_SURROGATE,
    MAX_DEPTH,
    JSONObject,
    McpError,
    NumberTooLong,
    Verbatim,
    dumps_in_slices,
    loads,
    too_deep,
    verbatim,
    verbatim_text,
)

PUBLIC_NOTE = "This public read needed no token."
MAX_QUOTED = 200  # characters of gateway-written text quoted inside our own sentences


# A credential the gateway (or a proxy before it) writes back into its own text is never quoted
# on: a member token (docs/gateway.md: `fw1.<opaque>`) keeps only its redacted form, and base64 JSON
# (an x402 payment header, a JWT) is left out whole.
_TOKEN_TEXT = re.compile(r"fw1\.[A-Za-z0-9._~+/=-]{5,}")
_BASE64_JSON = re.compile(r"eyJ[A-Za-z0-9+/_-]{12,}={0,2}")


def clean(text: object, limit: int = MAX_QUOTED) -> str:
    """Gateway-written text, safe to quote: one line, no credential, capped.

    The credentials of the request being handled are removed by value (redaction.py), before the
    cut so that none is left half there; the pattern rules then remove any other credential.
    """
    # What the cut keeps, plus room for a credential across it, each character escaped as six at most.
    raw = str(text)[: (limit + 64) * 6]
    if raw.isprintable():  # no character of category C (nor a line or paragraph separator)
        flat = raw.strip()
    else:
        flat = "".join(ch if unicodedata.category(ch)[0] != "C" else " " for ch in raw).strip()
    flat = redaction.scrub(flat)
    if "fw1." in flat:  # each pattern starts with its literal: most texts need neither search
        flat = _TOKEN_TEXT.sub(lambda m: redact(m.group(0)), flat)
    if "eyJ" in flat:
        flat = _BASE64_JSON.sub("(an encoded credential, not shown)", flat)
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


@dataclass(frozen=True)
class Failure:
    """Why a call failed, as data: its sentence's kind and slots, its answer."""

    kind: str
    status: int | None = None  # the gateway's HTTP status, when it answered
    code: str | None = None  # the error code it wrote ({"error": "<code>"}), when it wrote one
    detail: str = ""
    scope: str = ""
    wait: str = ""
    field: str = ""  # undescribed_answer: where the answer left the contract's shape
    expected: str = ""  # undescribed_answer: what the contract expected there

    def facts(self) -> JSONObject:
        """The sentence's facts, as the contract's failure schema shapes them."""
        facts: JSONObject = {"kind": self.kind}
        if self.status is not None:
            facts["status"] = self.status
        if self.code is not None:
            facts["code"] = self.code
        if self.field:
            facts["field"] = self.field
        if self.expected:
            facts["expected"] = self.expected
        return facts


UNDESCRIBED: Final = "undescribed_answer"
_FIELD_LIMIT: Final = 200  # characters kept of field and expected
_PROBLEM = re.compile(r"`(?P<field>[^`]*)` (?P<rest>.*)", re.DOTALL)


def undescribed(problem: str, status: int | None) -> Failure:
    """A 2xx answer read whole that fits no shape the contract describes.

    `problem` is schema.check's sentence: the field in backticks ("`markets[0].question` must be a
    string"), or "the arguments" when the value as a whole misfits.
    """
    match = _PROBLEM.fullmatch(problem)
    field, rest = (match["field"], match["rest"]) if match else ("", problem.removeprefix("the arguments "))
    # The path is made of the gateway's own names: quoted only cleaned (one line, no credential, cut).
    return Failure(UNDESCRIBED, status, field=clean(field, _FIELD_LIMIT), expected=clean(rest, _FIELD_LIMIT))


@dataclass(frozen=True)
class Wording:
    unknown: str
    state_phrases: dict[str, str]
    chain_unknown: str
    failures: dict[str, str]
    http_facts: dict[str, str]
    error_code: re.Pattern[str]
    undescribed: str = ""
    undescribed_detail: str = ""
    failures_signed_in: dict[str, str] = field(default_factory=dict)  # OAuth mode's, by kind

    @classmethod
    def from_snapshot(cls, wording: dict[str, Any]) -> Wording:
        return cls(
            wording["unknown"],
            wording["statePhrases"],
            wording["chainUnknown"],
            wording["failures"],
            wording["httpFacts"],
            re.compile(wording["errorCodePattern"]),
            wording["undescribed"],
            wording["undescribedDetail"],
            wording.get("failuresSignedIn", {}),
        )

    def failure(
        self,
        cause: str,
        what: str,
        *,
        detail: str = "",
        scope: str = "",
        wait: str = "",
        status: int | None = None,
        code: str | None = None,
        signed_in: bool = False,
    ) -> str:
        template = self.failures_signed_in.get(cause) if signed_in else None
        sentence = (template or self.failures[cause]).format(
            what=what, detail=detail, scope=scope, wait=wait, http=self._http(status, code)
        )
        return f"{sentence} {self.unknown}"

    def _http(self, status: int | None, code: str | None) -> str:
        if status is None:
            return ""
        with_code = code is not None and self.error_code.fullmatch(code)
        return self.http_facts["statusAndCode" if with_code else "status"].format(status=status, code=code)

    def say(self, failure: Failure, what: str, *, signed_in: bool = False) -> str:
        """The contract's sentence for `failure`, the UNKNOWN sentence after it.

        `signed_in` (an OAuth access token) takes the contract's sentence for a member who signed
        in, where it has one.

        An undescribed answer was read, so it gets its own sentence and not the UNKNOWN one (which
        says "say that it could not be read"): the gateway's text follows it in the result.
        """
        f = failure
        if f.kind == UNDESCRIBED:
            where = f"`{f.field}`" if f.field else "the answer"
            detail = self.undescribed_detail.format(field=where, expected=f.expected)
            return self.undescribed.format(what=what, http=self._http(f.status, f.code), detail=detail)
        return self.failure(
            f.kind, what, detail=f.detail, scope=f.scope, wait=f.wait, status=f.status, code=f.code, signed_in=signed_in
        )


def error_result(text: str, facts: JSONObject | None = None, answer: str | None = None) -> JSONObject:
    """A tool error result, `facts` (a Failure's) as structuredContent.

    `answer`, the gateway's own text of an undescribed answer, follows the sentence as a second
    text block: the outputSchema holds structuredContent and not content, so the answer rides in
    content, and structuredContent carries the facts, which fit the schema's failure branch.
    """
    result: JSONObject = {"content": [text_content(text)], "isError": True}
    if answer is not None:
        result["content"].append(text_content(answer))
    if facts is not None:
        result["structuredContent"] = facts
    return result


DEEP = f": it was nested too deeply to read (more than {MAX_DEPTH} levels, deeper than MCP clients read)"


def read_json(resp: GatewayResponse) -> tuple[Any, str | None]:
    """A gateway body as JSON clients read: (value, None), or (None, why not)."""
    if not resp.body.strip():
        return None, ": it was empty"
    try:
        text = resp.body.decode("utf-8")
        if too_deep(resp.body):  # deeper than the official SDKs read (jsonrpc.MAX_DEPTH)
            loads(text)  # JSON or not: that is said first
            return None, DEEP
        return loads(text), None
    except UnicodeDecodeError:
        return None, ": it was not valid UTF-8"
    except NumberTooLong as exc:
        return None, f": it held {exc}"
    except ValueError as exc:
        if "deeply" in str(exc):
            return None, DEEP
        kind = clean(resp.header("Content-Type") or "no content type", 60)
        return None, f": it was not JSON ({kind})"


def _seconds(value: float) -> str:
    if value < 120:
        return f"{round(value, 1):g} s"  # 0.5 s stays 0.5 s: a limit is never understated
    if value < 7200:
        return f"{int(value // 60)} min"
    return f"{int(value // 3600)} h" if value < 240 * 3600 else f"{int(value // 86400)} d"


def classify(outcome: Outcome, wording: Wording, *, scope: str = "", timeout: float = 0) -> Failure:
    """What went wrong with an outcome that is not a readable 2xx JSON answer."""
    if isinstance(outcome, GatewayFailure):
        return _unanswered(outcome, timeout)
    return _answered(outcome, wording, scope)


def _unanswered(outcome: GatewayFailure, timeout: float) -> Failure:
    """The Failure of an outcome where the gateway gave no answer."""
    if outcome.cause == "not_configured" and outcome.detail.startswith("FAIRWINS_API_URL is not set"):
        return Failure("gateway_not_configured")
    if outcome.cause == "unsendable":
        return Failure("unreachable", detail=f": {outcome.detail}, so nothing was sent to it")
    if outcome.cause in ("too_large", "unreadable"):
        return Failure("unreadable_answer", detail=f": {outcome.detail}")
    if outcome.cause == "timeout" and timeout:
        return Failure("unreachable", detail=f": it did not answer within {_seconds(timeout)}")
    return Failure("unreachable", detail=f": {outcome.detail}")


def _said(body: Any, wording: Wording) -> tuple[str, str | None]:
    """What the gateway wrote: its message quoted (or ""), its code (or None)."""
    said = body.get("message") if isinstance(body, dict) else None
    quoted = f": the gateway said “{clean(said)}”" if isinstance(said, str) and said.strip() else ""
    written = body.get("error") if isinstance(body, dict) else None
    code = written if isinstance(written, str) and wording.error_code.fullmatch(written) else None
    return quoted, code


def _answered(outcome: GatewayResponse, wording: Wording, scope: str) -> Failure:
    """Why an answer the gateway gave is a failure, from its status and body."""
    status = outcome.status
    body, _ = read_json(outcome)
    quoted, code = _said(body, wording)
    if 300 <= status < 400:
        return Failure("redirected", status, code)
    if status == 401:
        return Failure("token_refused", status, code)
    if status == 403:
        named = body.get("scope") if isinstance(body, dict) else None
        return Failure("scope_missing", status, code, scope=clean(named, 40) if isinstance(named, str) else scope)
    if status == 404:
        return Failure("not_found", status, code, detail=quoted)
    if status == 429:
        wait = retry_after_seconds(outcome.header("Retry-After"))
        return Failure("rate_limited", status, code, wait=f"; retry after {_seconds(wait)}" if wait is not None else "")
    if status == 503:
        return Failure("unavailable", status, code, detail=quoted)
    if status == 402:
        # A price is rendered by payments.price_result; reaching here means none could be read,
        # and an invented one would be worse than none.
        return Failure(
            "refused_request", status, code, detail=": it asked for a payment but sent no price this server can show"
        )
    if status >= 500:
        return Failure("gateway_error", status, code, detail=quoted)
    if status >= 400:
        return Failure("refused_request", status, code, detail=quoted)
    return Failure("unreadable_answer", status, code)


def read_public(
    gateway: Gateway, wording: Wording, path: str, what: str, ctx: RequestContext, data: Any = None
) -> Steps[tuple[Any, bytes]]:
    """A public GET's JSON and body, or McpError(-32603) saying why not."""
    record = ctx.record
    outcome: Outcome = yield gateway.step(
        GatewayRequest("GET", path), ctx.cancellation, trace=record.trace, observe=record.attempt
    )
    if isinstance(outcome, GatewayResponse) and 200 <= outcome.status < 300:
        value, problem = read_json(outcome)
        if problem is None:
            return value, outcome.body
        failure = Failure("unreadable_answer", detail=problem)
    else:
        failure = classify(outcome, wording, timeout=gateway.timeout)
    record.fail(failure.kind)
    raise McpError(INTERNAL_ERROR, wording.say(failure, what), data)


def describe_failure(outcome: Outcome, what: str, wording: Wording, *, scope: str = "", timeout: float = 0) -> str:
    """The sentence for an outcome that is not a readable 2xx JSON answer."""
    return wording.say(classify(outcome, wording, scope=scope, timeout=timeout), what)


def chain_notes(value: Any, wording: Wording) -> list[str]:
    """A sentence for each chain of an envelope not `read`, then UNKNOWN's."""
    chains = value.get("chains") if isinstance(value, dict) else None
    if not isinstance(chains, list):
        return []
    notes = []
    for chain in chains:
        # Only envelope entries carry a state; other lists of chains (/status) are not envelopes.
        if not isinstance(chain, dict) or "state" not in chain or chain.get("state") == "read":
            continue
        state = chain.get("state")
        phrase = wording.state_phrases.get(state) if isinstance(state, str) else None
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


def verbatim_result(text: str, raw: bytes, is_object: bool, notes: list[str]) -> JSONObject:
    """`success_result` for an answer read and checked as text (answers.py).

    The text block is the gateway's text (its outer whitespace off), escaped once, here;
    structuredContent is its bytes. Both are spliced into the message as it is encoded.
    """
    stripped = raw.strip(b" \t\r\n") if raw.isascii() else None
    text_value = verbatim_text(text.strip(" \t\r\n"), stripped)
    return _success(text_value, notes, verbatim(text, raw) if is_object else None)


def success_result(value: Any, notes: list[str], redactor: redaction.Redactor | None = None) -> JSONObject:
    """The gateway's JSON as structuredContent and as text, with the notes.

    Encoded once, a slice at a time (jsonrpc.dumps_in_slices): the text block is that text,
    escaped once, and structuredContent the same text, written as it is (jsonrpc.Verbatim); each
    lone surrogate is U+FFFD, as `jsonrpc.encode` writes one. With `redactor`, the value's
    strings are scrubbed first, and the text is held to the definition as a whole: one that might
    still spell a credential (a run across two strings) is left as values for the exact search
    (tools._without_credentials).
    """
    if redactor is not None:
        value = redactor.scrub_value(value)
    text = dumps_in_slices(value, ensure_ascii=False)
    if LONE_SURROGATE.search(text):
        text = LONE_SURROGATE.sub("\ufffd", text)
    raw = text.encode("utf-8")
    if redactor is not None and redactor.might_be_in(raw):
        return _success(text, notes, value if isinstance(value, dict) else None)
    ascii_raw, held = (raw if raw.isascii() else None), redactor is not None
    structured = verbatim(text, ascii_raw, held) if isinstance(value, dict) else None
    return _success(verbatim_text(text, ascii_raw, held), notes, structured)


def _success(text: str | Verbatim, notes: list[str], structured: Any) -> JSONObject:
    """A success result: text, notes, and structuredContent unless None."""
    content: list[JSONObject] = [{"type": "text", "text": text}]
    if notes:
        content.append(text_content(" ".join(notes)))
    result: JSONObject = {"content": content, "isError": False}
    if structured is not None:
        result["structuredContent"] = structured
    return result
