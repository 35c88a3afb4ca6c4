"""The served tools: the snapshot's non-local entries and build_intent.

Binding is data-driven: an `exec.kind == "route"` entry calls its ROUTES path with the member's
credential; a `"public"` entry fills its path parameters from the arguments (each one
percent-encoded as a single segment) and sends no credential. Arguments not in the path travel
as the query string (GET) or the JSON body (POST).
"""

from __future__ import annotations

import functools
import json
import re
import urllib.parse
from typing import Any, Final

from mcp_server.core import schema, steps
from mcp_server.core.answers import Reader
from mcp_server.core.context import RequestContext
from mcp_server.core.redaction import Redactor
from mcp_server.core.steps import Compute, Steps
from mcp_server.fairwins import payments
from mcp_server.fairwins.outcomes import (
    PUBLIC_NOTE,
    Failure,
    Wording,
    chain_notes,
    classify,
    error_result,
    read_json,
    success_result,
    undescribed,
    verbatim_result,
)
from mcp_server.fairwins.snapshot import Snapshot
from mcp_server.upstream.gateway import Gateway, GatewayRequest, GatewayResponse, Outcome
from mcp_server.wire.jsonrpc import JSONObject, Verbatim, too_deep, well_formed
from mcp_server.wire.versions import STRUCTURED_OUTPUT_VERSIONS

_PATH_PARAM = re.compile(r"{(\w+)}")

BUILD_INTENT: Final[dict[str, Any]] = {
    "name": "build_intent",
    "title": "Prepare an unsigned transaction",
    "description": (
        "Prepare an unsigned FairWins transaction (EIP-712 typed data) to create, accept, cancel "
        "or claim a wager, for the member to review and sign in their own wallet. This server "
        "cannot and will not sign the typed data it returns, and cannot submit it: it holds no "
        "key. Nothing has happened on chain when this returns; the member signs elsewhere and "
        "submits it themselves (the result names the relay path). Never say the action was done. "
        "When the call fails the result is an error naming what could not be built and why."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "intent": {"type": "string", "enum": ["create_wager", "accept_wager", "cancel_wager", "claim_wager"]},
            "chainId": {"type": "integer", "minimum": 1, "maximum": 9007199254740991},
            "params": {"type": "object", "description": "The intent's parameters, as the gateway's OpenAPI describes."},
        },
        "required": ["intent", "chainId", "params"],
        "additionalProperties": False,
    },
    "auth": "grant",
    "scope": "build:intents",
    "exec": {"kind": "route", "route": "member.intents.build"},
    "progress": "Building the unsigned transaction…",
    "view": "intent",
}
UNSIGNED_NOTE = (
    "Nothing was signed or submitted: this is typed data for the member to review and sign in "
    "their own wallet, then submit themselves."
)
# An answer over this size takes milliseconds to read, check and scrub (BENCHMARKS.md): it is
# yielded as a Compute step, so an event loop hands it to its executor and serves on meanwhile.
LARGE_ANSWER: Final = 256 * 1024


def _what(entry: dict[str, Any]) -> str:
    """What a failure sentence says could not be read ("Reading X…": X)."""
    label: str = entry["progress"].rstrip("…")
    if label.startswith("Reading "):
        return label.removeprefix("Reading ")
    if entry["name"] == "build_intent":
        return "the unsigned transaction"
    return f"the answer to {entry['name']}"


def _as_text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (dict, list, bool)) or value is None:
        return json.dumps(value)
    return str(value)


class GatewayTool:
    """One tool whose execution is a gateway call."""

    def __init__(self, entry: dict[str, Any], snap: Snapshot, gateway: Gateway, wording: Wording) -> None:
        self.name: str = entry["name"]
        self.entry = entry
        self.gateway = gateway
        self.wording = wording
        self.schema: dict[str, Any] = entry["inputSchema"]
        self.what = _what(entry)
        ex = entry["exec"]
        if ex["kind"] == "route":
            route = snap.routes[ex["route"]]
            self.method: str = route["method"]
            self.path_template: str = route["path"]
            self.priced: bool = bool(route["priced"])
            self.public = False
        elif ex["kind"] == "public":
            self.method, self.path_template, self.priced, self.public = "GET", ex["path"], False, True
        else:
            raise ValueError(f"{self.name} is executed locally and cannot be served here")
        # What a call needs of the member's grant: the contract's scope for a route read as the member.
        scope = entry.get("scope")
        self.scopes: tuple[str, ...] = (scope,) if isinstance(scope, str) and scope and not self.public else ()
        # The contract's outputSchema for what this tool executes: its route, or its public path.
        target = ex["route"] if ex["kind"] == "route" else ex["path"]
        self.output_schema: dict[str, Any] = snap.output_schemas[target]
        # Read once: every call checks its arguments, and every answer its shape.
        self._check_arguments = schema.compile_schema(self.schema)
        self._check_answer = schema.compile_schema(self.output_schema)
        read = self.method == "GET"
        self._definition: JSONObject = {
            "name": self.name,
            "title": entry["title"],
            "description": entry["description"],
            "inputSchema": self.schema,
            "outputSchema": self.output_schema,
            "annotations": {
                "title": entry["title"],
                "readOnlyHint": True,  # nothing here changes anything: reads, and typed data to sign elsewhere
                "destructiveHint": False,
                "idempotentHint": read,
                "openWorldHint": True,
            },
        }

    def definition(self) -> JSONObject:
        return self._definition

    # Worked out for a tool's first answer, not at start: each is Python compiled at run time.

    @functools.cached_property
    def _fits_answer(self) -> schema.Verdict:
        """Whether an answer fits the outputSchema (the checker words a misfit)."""
        return schema.compile_verdict(self.output_schema)

    @functools.cached_property
    def _reader(self) -> Reader:
        # The chains' states make the notes (chain_notes): their items stay in what the reader keeps.
        return Reader(self.output_schema, kept=("chains",))

    def build_request(self, arguments: dict[str, Any], ctx: RequestContext) -> GatewayRequest:
        rest = dict(arguments)

        def fill(match: re.Match[str]) -> str:
            # One segment each: "/" and every other reserved character is encoded, so no
            # argument can reach another route.
            segment = urllib.parse.quote(_as_text(rest.pop(match.group(1))), safe="")
            # quote() leaves dots alone, and a "." or ".." segment is resolved away by servers
            # and proxies (RFC 3986 §5.2.4): encoded, it stays data.
            return segment.replace(".", "%2E") if segment.strip(".") == "" else segment

        path = _PATH_PARAM.sub(fill, self.path_template)
        body = None
        query: tuple[tuple[str, str], ...] = ()
        if self.method == "GET":
            query = tuple((k, _as_text(v)) for k, v in rest.items())
        else:
            body = json.dumps(rest, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        # A payment travels only to a route that can be priced, and replaces the bearer there: the
        # paid rail serves the payer, and a member's token alongside would ask two questions.
        payment = ctx.payment if self.priced else None
        bearer = None if self.public or payment is not None else ctx.bearer
        return GatewayRequest(self.method, path, query, body, bearer, payment)

    def call(self, arguments: JSONObject, ctx: RequestContext) -> JSONObject:
        """`call_steps`, its gateway request waited for on this thread."""
        return steps.run(self.call_steps(arguments, ctx))

    def call_steps(self, arguments: JSONObject, ctx: RequestContext) -> Steps[JSONObject]:
        """The call as steps (core/steps.py): the gateway request, the reading."""
        problem = self._check_arguments(arguments, "")
        if problem:
            text = f"Invalid arguments for {self.name}: {problem}. Nothing was sent to the gateway."
            return self._error(Failure("invalid_arguments"), ctx, text=text)
        request = self.build_request(schema.with_defaults(arguments, self.schema), ctx)
        if not self.public and request.bearer is None and not self.priced:
            return self._error(Failure("no_token"), ctx)
        # Progress counts gateway requests: done so far of those this call needs, as far as known.
        # One, unless a retry adds another; the last notification says all of them are done.
        requests = 1
        ctx.report_progress(0, requests, self.entry["progress"])

        def on_retry(attempt: int, why: str, delay: float) -> None:
            nonlocal requests
            ctx.log("warning", f"{self.name}: the gateway call failed ({why}); retrying in {delay:.1f} s")
            requests = attempt + 1
            ctx.report_progress(attempt, requests, f"Retrying in {delay:.1f} s: {why}…")

        if request.payment is not None:
            ctx.payment_sent = True  # from here on, what became of the payment may be unknowable
        record = ctx.record
        step = self.gateway.step(request, ctx.cancellation, on_retry, trace=record.trace, observe=record.attempt)
        outcome: Outcome = yield step
        answered = "The gateway answered." if isinstance(outcome, GatewayResponse) else "The gateway did not answer."
        ctx.report_progress(requests, requests, answered)

        def finish() -> JSONObject:
            exposed = _exposed(outcome, request, ctx)
            # An answer that cannot spell the call's credentials is passed on as the gateway wrote it;
            # one that might is rendered as values and searched (_without_credentials).
            result = self.render(outcome, request, ctx, verbatim=not exposed, scrub=exposed)
            if result.get("isError") is True:
                self._note_failure(result, outcome, request, ctx)
            return _without_credentials(result, ctx) if exposed else result

        if isinstance(outcome, GatewayResponse) and len(outcome.body) > LARGE_ANSWER:
            rendered: JSONObject = yield Compute(finish, ctx.cancellation, error_result("The call was cancelled."))
            return rendered
        return finish()

    def render(
        self,
        outcome: Outcome,
        request: GatewayRequest,
        ctx: RequestContext,
        *,
        verbatim: bool = False,
        scrub: bool = False,
    ) -> JSONObject:
        """The call's result.

        `scrub`: an answer that might spell the call's credentials has its values scrubbed before
        it is encoded (the caller still holds the whole result to them).
        """
        redactor = ctx.redactor() if scrub else None
        if request.payment is not None:
            paid = payments.paid_result(
                outcome,
                self.name,
                ctx.response_headers,
                lambda resp: self._answer(resp, ctx, verbatim, redactor),
                self._failure,
            )
            if paid.get("isError") is True and "structuredContent" not in paid and _structured(ctx):
                paid["structuredContent"] = self._paid_failure(outcome, paid).facts()
            return paid
        if isinstance(outcome, GatewayResponse) and 200 <= outcome.status < 300:
            return self._answer(outcome, ctx, verbatim, redactor)
        if isinstance(outcome, GatewayResponse) and outcome.status in (402, 412) and self.priced:
            price = payments.price_result(outcome, self.name)
            if price is not None:
                return price
        failure = self._classify(outcome)
        if failure.status == 401 and request.bearer is None:
            failure = Failure("no_token", failure.status, failure.code)
        return self._error(failure, ctx)

    def _answer(
        self,
        resp: GatewayResponse,
        ctx: RequestContext,
        verbatim: bool = False,
        redactor: Redactor | None = None,
    ) -> JSONObject:
        """A 2xx answer's result: its JSON with notes, or why it is unreadable.

        With `verbatim`, the answer is first read as text in one pass (answers.Reader): when the
        reader vouches for it, it is passed on as the gateway's own text and bytes (each lone
        surrogate escape written as U+FFFD, as `jsonrpc.encode` writes one on the exact path).
        Anything the reader doubts (a failure above all) is read here the exact way, which words
        the failure.
        """
        if verbatim:
            fast = self._read_answer(resp)
            if fast is not None:
                return fast
        value, problem = read_json(resp)
        if problem is not None:
            return self._error(Failure("unreadable_answer", resp.status, detail=problem), ctx)
        shape = None if self._fits_answer(value) else self._check_answer(value, "")
        if shape is not None:
            # The outputSchema is a promise ("If an output schema is provided: Servers MUST provide
            # structured results that conform to this schema"), so an answer that breaks it is not
            # structuredContent. It was read, though: it is said to be in a shape the contract does
            # not describe, never unreadable, and its text stays in content, which no schema holds.
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
            return self._error(undescribed(shape, resp.status), ctx, answer=text)
        return success_result(value, self._notes(value), redactor)

    def _read_answer(self, resp: GatewayResponse) -> JSONObject | None:
        """The answer as the gateway wrote it if the reader vouches, else None."""
        if not resp.body.strip():
            return None
        try:
            text = resp.body.decode("utf-8")
        except UnicodeDecodeError:
            return None
        if too_deep(resp.body):
            return None  # deeper than the SDKs read: the exact reading words it
        body = resp.body
        readable = well_formed(text)  # half an emoji: U+FFFD (jsonrpc.well_formed says why)
        if readable is not text:
            text, body = readable, readable.encode("utf-8")
        vouched, skeleton = self._reader.read(text)
        if not vouched:
            return None
        return verbatim_result(text, body, isinstance(skeleton, dict), self._notes(skeleton))

    def _notes(self, value: Any) -> list[str]:
        notes = chain_notes(value, self.wording)
        if self.public:
            notes.append(PUBLIC_NOTE)
        if self.method != "GET":
            notes.append(UNSIGNED_NOTE)
        return notes

    def _classify(self, outcome: Outcome) -> Failure:
        scope = self.entry.get("scope", "")
        return classify(outcome, self.wording, scope=scope, timeout=self.gateway.timeout)

    def _failure(self, outcome: Outcome) -> str:
        return self.wording.say(self._classify(outcome), self.what)

    def _paid_failure(self, outcome: Outcome, result: JSONObject) -> Failure:
        receipt = result.get("_meta", {}).get(payments.RESPONSE_META_KEY)
        status = outcome.status if isinstance(outcome, GatewayResponse) else None
        if isinstance(receipt, dict) and receipt.get("success") is False:
            return Failure("settlement_failed", status)
        return self._classify(outcome)

    def _error(self, failure: Failure, ctx: RequestContext, *, text: str = "", answer: str | None = None) -> JSONObject:
        """The error result for `failure`, in the contract's words unless `text`."""
        ctx.record.fail(failure.kind)
        text = text or self.wording.say(failure, self.what, signed_in=ctx.bearer_source == "signed_in")
        return error_result(text, failure.facts() if _structured(ctx) else None, answer)

    def _note_failure(self, result: JSONObject, outcome: Outcome, request: GatewayRequest, ctx: RequestContext) -> None:
        """Why the call ended as an error, for its record, if _error did not say."""
        record = ctx.record
        if record.failure is not None:
            return
        if isinstance(outcome, GatewayResponse) and outcome.status in (402, 412):
            record.fail("payment_rejected" if request.payment is not None else "price")
        elif request.payment is not None:
            record.fail(self._paid_failure(outcome, result).kind)
        else:
            record.fail(self._classify(outcome).kind)


def _structured(ctx: RequestContext) -> bool:
    """Whether the request's revision has structuredContent."""
    return ctx.version in STRUCTURED_OUTPUT_VERSIONS


_JOINED_BODY: Final = 64 * 1024  # bytes of body searched together with the headers
_DECODED: Final = frozenset(name.lower() for name in payments.DECODED_HEADERS)  # x402 headers this server decodes


def _exposed(outcome: Outcome, request: GatewayRequest, ctx: RequestContext) -> bool:
    """Whether the gateway's reply might spell the bearer or payment forwarded.

    Everything in a result that is not this server's own comes from the answer's bytes, or from
    the x402 headers decoded (which always count as might). An answer whose bytes cannot spell
    the credential (the usual case; redaction.Redactor.might_be_in) needs no search.
    """
    redactor = ctx.redactor() if request.bearer is not None or request.payment is not None else None
    if redactor is None or not isinstance(outcome, GatewayResponse):
        return False  # no answer, so nothing the gateway wrote: the sentence is this server's own
    if not _DECODED.isdisjoint({name.lower() for name, _ in outcome.headers}):
        return True
    # The header values in one text, a line each: a line break is in no needle, so no run spans two,
    # and it starts no escape. A short body is searched in the same text (one search, not two);
    # a long one on its own, not copied.
    texts = [value.encode("latin-1") for _, value in outcome.headers]
    body = outcome.body
    if len(body) <= _JOINED_BODY:
        return redactor.might_be_in(b"\n".join([*texts, body]))
    return redactor.might_be_in(b"\n".join(texts)) or redactor.might_be_in(body)


def _without_credentials(result: JSONObject, ctx: RequestContext) -> JSONObject:
    """The result and its headers, without the bearer or payment forwarded.

    Whatever the gateway wrote back (its data included) is searched by value (redaction.py); a
    receipt header that holds one is not copied: its decoded, scrubbed form stays in `_meta`.
    """
    redactor = ctx.redactor()
    if redactor is None:
        return result
    for name, value in list(ctx.response_headers.items()):
        if redactor.holds(value):
            del ctx.response_headers[name]
    # An answer encoded without being held to the credentials is read back, to be searched by value.
    for block in result.get("content", []):
        if isinstance(block, dict) and isinstance(block.get("text"), Verbatim) and not block["text"].held:
            block["text"] = block["text"].value()
    structured = result.get("structuredContent")
    if isinstance(structured, Verbatim) and not structured.held:
        result["structuredContent"] = structured.value()
    scrubbed: JSONObject = redactor.scrub_value(result)
    return scrubbed


def build_tools(snap: Snapshot, gateway: Gateway, wording: Wording) -> list[GatewayTool]:
    """The served tools: each non-local snapshot entry, and build_intent."""
    served = [GatewayTool(entry, snap, gateway, wording) for entry in snap.tools if entry["exec"]["kind"] != "local"]
    served.append(GatewayTool(BUILD_INTENT, snap, gateway, wording))
    return served
