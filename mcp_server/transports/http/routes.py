"""The routes: /healthz, /metrics, CORS preflight, POST /mcp, refusals.

Each is `route(connection, head, decision)`. A route that has no use for a body drops it first
(`Connection.drop_body`), so a body never outlives its request; POST /mcp reads its own.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final

from mcp_server import __version__
from mcp_server.core import apps
from mcp_server.core.context import RequestContext
from mcp_server.core.protocol import Session
from mcp_server.ops import records
from mcp_server.ops.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from mcp_server.transports.http import gate
from mcp_server.transports.http.admission import SLOT_WAIT
from mcp_server.transports.http.connection import Connection, unwatched
from mcp_server.transports.http.driver import Run, drive, off_loop
from mcp_server.transports.http.flow import STREAM_BACKLOG
from mcp_server.transports.http.head import Head, Refusal
from mcp_server.transports.http.record import CLIENT_LEFT
from mcp_server.transports.http.response import error_body
from mcp_server.transports.http.sse import Stream
from mcp_server.wire.cancellation import Cancellation
from mcp_server.wire.jsonrpc import Batch, Id, Message, Request, dumps, encode, error_object, error_response, parse
from mcp_server.wire.versions import LEGACY_VERSIONS

if TYPE_CHECKING:
    from mcp_server.core.protocol import Dispatcher
    from mcp_server.transports.http.door import Challenge, Door

CORS_ALLOW_HEADERS: Final = (
    "Content-Type, Accept, Authorization, MCP-Protocol-Version, Mcp-Method, Mcp-Name, Mcp-Session-Id, X-PAYMENT,"
    " PAYMENT-SIGNATURE, traceparent, tracestate"
)
CORS_EXPOSE_HEADERS: Final = "X-PAYMENT-RESPONSE, PAYMENT-RESPONSE, PAYMENT-REQUIRED, Mcp-Session-Id, WWW-Authenticate"
HEALTH_BODY, STOPPING_BODY = (
    json.dumps({"status": status, "name": "fairwins-mcp", "version": __version__}, separators=(",", ":")).encode()
    for status in ("ok", "stopping")
)


def cors(origin: str | None) -> dict[str, str]:
    if origin is None:
        return {}
    return {
        "Access-Control-Allow-Origin": origin,
        "Vary": "Origin",
        "Access-Control-Expose-Headers": CORS_EXPOSE_HEADERS,
    }


async def health(conn: Connection, head: Head, decision: gate.Admit) -> None:
    if await conn.drop_body(head):
        if conn.server.unready or conn.server.stopping:
            # Stopping: a balancer that polls health takes this instance out of rotation, while
            # every request it still sends here is answered.
            await conn.respond(503, STOPPING_BODY, extra={"Retry-After": "1"})
        else:
            await conn.respond(200, HEALTH_BODY)


async def metrics(conn: Connection, head: Head, decision: gate.Admit) -> None:
    """GET /metrics: Prometheus text, on its own listener or the MCP port."""
    registry = conn.server.exports
    if not await conn.drop_body(head):
        return
    if registry is None:
        await conn.respond(404, error_body("not_found", "Not found: the MCP endpoint is POST /mcp"))
        return
    await conn.respond(200, registry.render().encode("utf-8"), content_type=METRICS_CONTENT_TYPE)


async def preflight(conn: Connection, head: Head, decision: gate.Admit) -> None:
    if not await conn.drop_body(head):
        return
    extra = cors(decision.cors)
    if decision.cors is not None:
        extra.update(
            {
                # The resource's metadata is read with GET by any page (RFC 9728); /mcp takes POST.
                "Access-Control-Allow-Methods": "GET, HEAD, OPTIONS" if decision.cors == "*" else "POST, OPTIONS",
                "Access-Control-Allow-Headers": CORS_ALLOW_HEADERS,
                "Access-Control-Max-Age": "600",
            }
        )
    await conn.respond(204, b"", extra=extra)


async def refuse(conn: Connection, head: Head, decision: gate.Refuse) -> None:
    extra = cors(decision.cors)
    if decision.allow:
        extra["Allow"] = decision.allow
    # A request refused for what it is (400, 411, 413) is not read further: the connection closes.
    close = decision.status in (400, 411, 413) and decision.jsonrpc_code is None
    if decision.jsonrpc_code is None:
        if close or await conn.drop_body(head):
            await conn.respond(decision.status, error_body(decision.error, decision.message), extra=extra, close=close)
        return
    # Refused over its MCP-Protocol-Version header: the body (when it can be had) says which
    # JSON-RPC error, in the ladder's order, and under which id.
    body = b""
    if head.has_body and not head.expect_continue and head.length <= conn.server.policy.max_body:
        read = await conn.read_body(conn.server.policy.max_body)
        if read is None:
            conn.life.closing = True
            return
        body = read if isinstance(read, bytes) else b""
    message = parse(body) if body else None
    msg_id = message.id if isinstance(message, Request) else None
    dispatcher = conn.server.dispatcher
    error = (message and dispatcher.ladder_error(message, head.headers)) or error_object(
        decision.jsonrpc_code, decision.message, decision.data
    )
    # The record says what every other JSON-RPC refusal says: the method, the id, the error's code.
    record = conn.record.record
    if isinstance(message, Request):
        record.begin(message)
    record.outcome, record.code = "error", error.get("code")
    conn.record.error = decision.error
    await conn.respond(decision.status, dumps(error_response(msg_id, error)), extra=extra)


async def resource_metadata(conn: Connection, head: Head, decision: gate.Admit) -> None:
    """GET /.well-known/oauth-protected-resource[/mcp] (RFC 9728, OAuth)."""
    door = conn.server.door
    if not await conn.drop_body(head) or door is None:
        return
    extra = {**cors(decision.cors), "Cache-Control": "max-age=300"}
    await conn.respond(200, door.metadata, extra=extra)


def _credential(conn: Connection, headers: dict[str, str]) -> tuple[str | None, str] | None:
    auth = headers.get("authorization")
    if auth is None:
        env = conn.server.env_bearer
        return (env, "env") if env else (None, "none")
    scheme, _, token = auth.strip().partition(" ")
    token = token.strip()
    # Visible ASCII only (RFC 6750's b64token is narrower still): what the gateway is sent must be
    # what the member pasted, and the stdio side refuses anything else in FAIRWINS_API_TOKEN too.
    # Checked in C (an access token is 800 bytes, on every call): isascii reads a flag, and what
    # deleting the visible bytes leaves is what is not visible.
    if scheme.lower() != "bearer" or not token or not token.isascii() or token.encode().translate(None, _VISIBLE):
        return None
    # A request's own token always wins over the environment's: a shared instance never mixes members.
    return token, "header"


_VISIBLE: Final = bytes(range(0x21, 0x7F))  # the visible ASCII bytes: a token's

_ESCAPED: Final = (
    "The bearer token holds an escape ({escape}), which no bearer token holds (RFC 6750): it was URL-encoded "
    "or copied out of a JSON string on the way; send it exactly as FairWins issued it. Nothing was sent to the "
    "gateway"
)
# RFC 6750 §3.1: a malformed request is invalid_request, with 400 (its description allows no quote or
# backslash). Not 401: MCP clients answer a 401 with their OAuth flow (the Inspector says only
# "auth_required"), and the member would never read why; this server offers no OAuth to find.
_MALFORMED_BEARER: Final = (
    'Bearer error="invalid_request", error_description="the token holds an escape; send it as issued"'
)


def _escape(credential: tuple[str | None, str]) -> str | None:
    """The escape in a caller's own bearer (the env's was checked at start)."""
    token, source = credential
    if source != "header" or token is None or ("%" not in token and "\\" not in token):
        return None
    from mcp_server.core.redaction import escape_in

    return escape_in(token)


def _request_id(body: bytes) -> Id | None:
    """The id of the request in `body`; None for a batch, notification or none."""
    message = parse(body)
    return message.id if isinstance(message, Request) else None


async def _credential_or_refusal(
    conn: Connection, head: Head, body: bytes, extra: dict[str, str]
) -> tuple[str | None, str] | None:
    """The request's credential; None once its refusal is answered.

    A malformed Authorization, a bearer with an escape, or a payment header over its bound is
    refused before anything is parsed or sent to the gateway.
    """
    credential = _credential(conn, head.headers)
    if credential is None:
        refused = error_body("bad_authorization", "Authorization must be 'Bearer <token>'", _request_id(body))
        await conn.respond(400, refused, extra=extra)
        return None
    escape = _escape(credential)
    if escape is not None:
        refused = error_body("escaped_bearer", _ESCAPED.format(escape=escape), _request_id(body))
        await conn.respond(400, refused, extra={**extra, "WWW-Authenticate": _MALFORMED_BEARER})
        return None
    if "x-payment" in head.headers or "payment-signature" in head.headers:
        from mcp_server.wire.x402 import INBOUND_HEADERS, oversized  # only paid calls load the payments code

        for name, sent in INBOUND_HEADERS.items():
            why = oversized(sent, len(head.headers.get(name, "")))
            if why is not None:
                message = f"{why[0].upper()}{why[1:]}; nothing was sent to the gateway"
                await conn.respond(400, error_body("payment_too_large", message, _request_id(body)), extra=extra)
                return None
    return credential


async def mcp(conn: Connection, head: Head, decision: gate.Admit) -> None:
    extra = cors(decision.cors)
    server = conn.server
    if head.expect_continue:
        conn.start_answer()
        if not (conn.write(b"HTTP/1.1 100 Continue\r\n\r\n") and await conn.flush()):
            return  # "100 Continue" is promised only once the gate admits the request
    body = await conn.read_body(server.policy.max_body)
    if body is None:
        conn.life.closing = True  # the client stopped sending: nothing to answer
        return
    if isinstance(body, Refusal):
        await conn.respond(body.status, error_body(body.error, body.message), extra=extra, close=True)
        return
    credential = await _credential_or_refusal(conn, head, body, extra)
    if credential is None:
        return
    parsed = parse(body)
    if server.door is not None:
        challenge = await _signed_in(server.door, server.dispatcher, parsed, credential[0], head.headers)
        if challenge is not None:
            if challenge.authenticate is not None:
                extra = {**extra, "WWW-Authenticate": challenge.authenticate}
            await conn.respond(challenge.status, challenge.body, extra=extra)
            return
        if credential[0] is not None and server.door.signed_in(credential[0]):
            credential = (credential[0], "signed_in")  # its failures say to sign in again, not to make a token
    cancellation = Cancellation()
    unwatch = unwatched
    if server.dispatcher.is_blocking(parsed):
        # The request is whole: from here its client's leaving (Connection.watch) ends its wait for
        # a call slot, then its call: no batch item not yet run starts, nothing more goes upstream.
        unwatch = conn.watch(cancellation.cancel)
    taken = None if cancellation.is_set else await conn.wait_for_slot(SLOT_WAIT)
    if not taken:
        unwatch()
        if taken is None:
            _left_waiting(conn, parsed)
            return
        request_id = parsed.id if isinstance(parsed, Request) else None
        busy = error_body("busy", "Too many requests in flight; retry shortly", request_id)
        await conn.respond(503, busy, extra={**extra, "Retry-After": "1"})
        return
    conn.record.request_size = len(body)
    try:
        await _serve_message(conn, head, parsed, credential, extra, cancellation, unwatch)
    finally:
        server.release_slot()


async def _signed_in(
    door: Door, dispatcher: Dispatcher, message: Message | Batch, token: str | None, headers: dict[str, str]
) -> Challenge | None:
    """OAuth mode: None when the request may go on, else its challenge.

    A paid call without a token keeps its x402 path (docs/payments.md); a request the modern
    ladder refuses (its headers differ from its body) gets the ladder's error first.
    """
    if token is None and ("x-payment" in headers or "payment-signature" in headers):
        return None
    if isinstance(message, Request) and dispatcher.ladder_error(message, headers) is not None:
        return None
    request_id = message.id if isinstance(message, Request) else None
    return await door.admit(token, dispatcher.scopes_needed(message), request_id)


def _left_waiting(conn: Connection, message: Message | Batch) -> None:
    """Log a request whose client left while it waited for a slot.

    Nothing of it ran and nothing is sent: a request is logged as cancelled, as a call whose client
    left during it is; a batch with its size.
    """
    if isinstance(message, Request):
        record = conn.record.record
        record.begin(message)
        record.reply(None, cancelled=True)
    elif isinstance(message, Batch):
        conn.record.batch = len(message.items)
    conn.life.closing = True
    conn.finish(CLIENT_LEFT)


async def _serve_message(
    conn: Connection,
    head: Head,
    message: Message | Batch,
    credential: tuple[str | None, str],
    extra: dict[str, str],
    cancellation: Cancellation,
    unwatch: Callable[[], None],
) -> None:
    """Answer a request's message while it holds a call slot.

    `unwatch` ends the watch on its client (`Connection.watch`), once nothing is left to cancel.
    """
    server = conn.server
    dispatcher = server.dispatcher
    headers = head.headers
    exchange = conn.record
    request_record = exchange.record
    items: list[records.Record] = []
    header_version = headers.get("mcp-protocol-version")
    session = Session(
        http=True,
        version=header_version if header_version in LEGACY_VERSIONS else "",
        client_capabilities=apps.session_capabilities(headers.get("mcp-session-id")),
    )
    payment, conflict = None, None
    if "x-payment" in headers or "payment-signature" in headers:
        from mcp_server.wire.x402 import from_http_headers  # only paid calls load the payments code

        payment, conflict = from_http_headers(headers)

    def make_ctx(cancellation: Cancellation | None = None, record: records.Record | None = None) -> RequestContext:
        if record is None:  # a batch item: a record of its own, logged before the request's
            record = records.Record("http")
            record.inbound = request_record.inbound
            items.append(record)
        return RequestContext(
            bearer=credential[0],
            bearer_source=credential[1],
            payment=payment,
            payment_conflict=conflict,
            http_headers=headers,
            cancellation=cancellation or Cancellation(),
            record=record,
        )

    run = Run()
    try:
        if isinstance(message, Batch):
            reply = await drive(
                dispatcher.handle_batch_steps(message, session, make_ctx, cancellation), server.pacing, run
            )
            for item in items:
                if item.outcome:  # the first context only lent its headers
                    records.finish(item, server.metrics)
            exchange.batch = len(message.items)
        else:
            ctx = make_ctx(cancellation, request_record)
            stream = None
            if payment is None and head.minor == 1 and gate.accepts(headers.get("accept"), "text/event-stream"):

                def write(data: bytes | memoryview) -> bool:
                    # A client that lets notifications pile up unread is not reading: the stream
                    # ends. A notification's bound only: the answer is written as any answer is.
                    return conn.write(data) and conn.backlog() < STREAM_BACKLOG

                conn.start_answer()
                stream = Stream(write, extra, close=server.stopping)
                ctx.send = stream.send
            reply = await drive(dispatcher.handle_steps(message, session, ctx), server.pacing, run)
            extra = {**extra, **ctx.response_headers}
            if session.views_declared:
                extra["Mcp-Session-Id"] = apps.views_session_id()
            if stream is not None and stream.started and not cancellation.is_set:
                conn.start_answer()
                last = stream.finish(reply.message)
                delivered = last is not None and await conn.send_answer(last)
                if not delivered or stream.close:
                    conn.life.closing = True
                conn.finish(200, delivered=delivered)
                return
    finally:
        unwatch()
    if cancellation.is_set:
        conn.life.closing = True  # the client went away: nothing more is sent for this request
        conn.finish(CLIENT_LEFT)
        return
    if reply.message is None:
        await conn.respond(202, b"", extra=extra)  # a notification or a client response: accepted
    else:
        # An answer built from a large gateway answer is encoded where it was read: off the loop.
        answer = reply.message
        parts = await off_loop(lambda: encode(answer), server.pacing) if run.heavy else encode(answer)
        await conn.respond(reply.status, parts, extra=extra)


ROUTES: Final[dict[str, Callable[[Connection, Head, gate.Admit], Awaitable[None]]]] = {
    "health": health,
    "metrics": metrics,
    "preflight": preflight,
    "mcp": mcp,
    "resource-metadata": resource_metadata,
}
