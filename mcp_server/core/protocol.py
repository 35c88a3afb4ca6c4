"""The MCP dispatcher: one method table, one exception-to-wire boundary.

A transport hands it a parsed message, its legacy session and a fresh RequestContext; it picks
the era and version (docs/protocol.md: the handshake revisions and the stateless 2026-07-28) and
returns the reply with the HTTP status it earns. It knows nothing of sockets or pipes.
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import GeneratorType
from typing import Any, Final, TypeVar

from mcp_server import __version__
from mcp_server.core import apps, batches, steps
from mcp_server.core.batches import DEFAULT_BATCH_LIMITS, BatchLimits
from mcp_server.core.catalog import Catalog, Prompt, Resource, ResourceTemplate, Tool, View
from mcp_server.core.context import LOG_LEVELS, PaymentAllowance, RequestContext
from mcp_server.core.steps import Steps
from mcp_server.ops import logs, records
from mcp_server.wire import x402
from mcp_server.wire.cancellation import Cancellation
from mcp_server.wire.jsonrpc import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_CAPABILITY,
    PARSE_ERROR,
    RESOURCE_NOT_FOUND,
    UNSUPPORTED_VERSION,
    Batch,
    ClientResponse,
    Encoded,
    Invalid,
    JSONObject,
    McpError,
    Message,
    Notification,
    Request,
    error_object,
    error_response,
    lone_surrogate,
    response,
)
from mcp_server.wire.versions import (
    BATCH_VERSION,
    HTTP_DEFAULT_VERSION,
    LATEST_LEGACY,
    LEGACY_VERSIONS,
    META_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_SERVER_INFO,
    META_VERSION,
    MODERN_VERSIONS,
    STRUCTURED_OUTPUT_VERSIONS,
    SUPPORTED_VERSIONS,
)

log = logging.getLogger("fairwins_mcp.protocol")

SERVER_NAME: Final = "fairwins-mcp"
MODERN_META_PREFIX: Final = "io.modelcontextprotocol/"

# JSON-RPC error code → HTTP status, for modern requests (docs/protocol.md, "HTTP statuses"). Legacy
# requests keep errors in-band (200) except for messages that could not be read at all.
MODERN_HTTP_STATUS: Final[dict[int, int]] = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    METHOD_NOT_FOUND: 404,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    MISSING_CAPABILITY: 400,
    UNSUPPORTED_VERSION: 400,
    INTERNAL_ERROR: 500,
}
LEGACY_HTTP_STATUS: Final[dict[int, int]] = {PARSE_ERROR: 400, INVALID_REQUEST: 400}

# 2026-07-28 removed these; sent with modern `_meta` they are unknown methods.
REMOVED_IN_MODERN: Final = frozenset(
    {"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"}
)
# Results that carry caching hints under 2026-07-28.
CACHEABLE: Final = frozenset(
    {"server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read"}
)
# `Mcp-Name` must repeat this parameter of these methods (2026-07-28 Streamable HTTP).
NAME_PARAM: Final[dict[str, str]] = {"tools/call": "name", "resources/read": "uri", "prompts/get": "name"}
# Methods that may wait on the gateway: their steps reach it (core/steps.py), and a transport
# watches their client for leaving, which cancels them.
BLOCKING_METHODS: Final = frozenset({"tools/call", "resources/read", "prompts/get", "completion/complete"})
MAX_COMPLETIONS: Final = 100
R = TypeVar("R")


@dataclass(slots=True)
class Session:
    """Legacy state: one per stdio process, or one per stateless HTTP POST."""

    http: bool = False
    pinned_legacy: bool = False  # stdio `initialize` pins the process to the legacy era
    version: str = ""
    log_level: str | None = None
    client_capabilities: JSONObject = field(default_factory=dict)
    views_declared: bool = False  # an HTTP `initialize` declared the views: the answer issues their session id

    def legacy_version(self) -> str:
        return self.version or (HTTP_DEFAULT_VERSION if self.http else LATEST_LEGACY)


@dataclass(frozen=True, slots=True)
class Reply:
    """What to send back (None: nothing) and the HTTP status it earns."""

    message: JSONObject | Encoded | None
    status: int = 200


Handler = Callable[[JSONObject, RequestContext, Session], "JSONObject | Steps[JSONObject]"]


def decode_header_value(value: str) -> str | None:
    """A header value with `=?base64?…?=` decoded; None if undecodable."""
    value = value.strip()
    if value.startswith("=?base64?") and value.endswith("?="):
        try:
            return base64.b64decode(value[9:-2], validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
    return value


class Dispatcher:
    """Serves one Catalog to both MCP eras."""

    def __init__(
        self,
        catalog: Catalog,
        *,
        title: str = "FairWins",
        version: str = __version__,
        batch_limits: BatchLimits = DEFAULT_BATCH_LIMITS,
        sign_in: bool = False,
    ) -> None:
        self.catalog = catalog
        self.batch_limits = batch_limits
        self.server_info: JSONObject = {"name": SERVER_NAME, "title": title, "version": version}
        # The icon rides where a client learns who the server is (initialize, server/discover),
        # not on the serverInfo stamped on every modern result.
        self._server_info_icons = apps.with_icons(self.server_info, list(catalog.icons))
        self._instructions = {"instructions": catalog.instructions} if catalog.instructions else {}
        self._views: dict[str, View] = {v.uri: v for v in catalog.views}
        self._view_of: dict[str, str] = {name: v.uri for v in catalog.views for name in v.tools}
        self._tool_lists: dict[tuple[bool, bool, bool], list[JSONObject]] = {}
        self._tools: dict[str, Tool] = {t.name: t for t in catalog.tools}
        self._resources: dict[str, Resource] = {r.uri: r for r in catalog.resources}
        self._prompts: dict[str, Prompt] = {p.name: p for p in catalog.prompts}
        # Definitions never change after start: build the list results once.
        self._tool_list = [t.definition() for t in sorted(catalog.tools, key=lambda t: t.name)]
        if sign_in:  # OAuth mode: each tool says whether it needs a sign-in, and for which scopes
            self._tool_list = [_with_security_schemes(t, _scopes_of(self._tools[t["name"]])) for t in self._tool_list]
        # outputSchema exists from 2025-06-18 on: earlier revisions are listed the tools without it.
        self._tool_list_unstructured = [{k: v for k, v in t.items() if k != "outputSchema"} for t in self._tool_list]
        self._resource_list = [r.definition() for r in catalog.resources]
        templates = [t.definition() for t in catalog.templates]
        prompts = [p.definition() for p in sorted(catalog.prompts, key=lambda p: p.name)]
        self.capabilities = self._capabilities()
        self._methods: dict[str, Handler] = {
            "tools/list": _listing("tools", self._tools_for),
            "tools/call": self._tools_call,
            "resources/list": _listing("resources", self._resources_for),
            "resources/read": self._resources_read,
            "resources/templates/list": _listing("resourceTemplates", lambda ctx: templates),
            "prompts/list": _listing("prompts", lambda ctx: prompts),
            "prompts/get": self._prompts_get,
            "completion/complete": self._complete,
        }
        self._legacy_only: dict[str, Handler] = {
            "initialize": self._initialize,
            "ping": lambda params, ctx, session: {},
            "logging/setLevel": self._set_level,
        }
        self._modern_only: dict[str, Handler] = {"server/discover": self._discover}
        gated = {"tools": "tools/", "resources": "resources/", "prompts": "prompts/", "completions": "completion/"}
        for capability, prefix in gated.items():
            if capability not in self.capabilities:  # unadvertised → unknown method (-32601)
                self._methods = {m: h for m, h in self._methods.items() if not m.startswith(prefix)}

    def _capabilities(self) -> JSONObject:
        caps: JSONObject = {}
        if self.catalog.tools:
            caps["tools"] = {"listChanged": False}
        if self.catalog.resources or self.catalog.templates:
            caps["resources"] = {"subscribe": False, "listChanged": False}
        if self.catalog.prompts:
            caps["prompts"] = {"listChanged": False}
        if self.catalog.prompts or self.catalog.templates:
            caps["completions"] = {}
        caps["logging"] = {}
        return caps

    # ---- entry points -------------------------------------------------------------------

    def is_blocking(self, message: Message | Batch) -> bool:
        """Whether handling may wait on the network (cancelled if the client goes)."""
        if isinstance(message, Batch):
            return any(self.is_blocking(item) for item in message.items)
        return isinstance(message, Request) and message.method in BLOCKING_METHODS

    def scopes_needed(self, message: Message | Batch) -> tuple[str, ...]:
        """The member scopes answering `message` takes (its tools' calls')."""
        if isinstance(message, Batch):
            return tuple(dict.fromkeys(scope for item in message.items for scope in self.scopes_needed(item)))
        if not isinstance(message, Request) or message.method != "tools/call":
            return ()
        name = message.params.get("name")
        tool = self._tools.get(name) if isinstance(name, str) else None
        return _scopes_of(tool) if tool is not None else ()

    def member_scopes(self) -> tuple[str, ...]:
        """Every scope a call here may take, sorted: `scopes_supported`."""
        return tuple(sorted({scope for tool in self._tools.values() for scope in _scopes_of(tool)}))

    def handle(self, message: Message, session: Session, ctx: RequestContext) -> Reply:
        """One message → its reply, each step waited for on this thread.

        Never raises: this is the exception-to-wire boundary. ctx.record is filled in on the way.
        """
        return steps.run(self.handle_steps(message, session, ctx))

    def handle_steps(self, message: Message, session: Session, ctx: RequestContext) -> Steps[Reply]:
        """`handle` as steps (core/steps.py), for any driver to wait on."""
        ctx.record.begin(message)
        reply = yield from self._handle(message, session, ctx)
        if isinstance(message, Request):
            ctx.record.reply(reply.message, cancelled=ctx.cancellation.is_set)
        return reply

    def _handle(self, message: Message, session: Session, ctx: RequestContext) -> Steps[Reply]:
        if isinstance(message, Invalid):
            return Reply(error_response(message.id, message.error), 400)
        if isinstance(message, (ClientResponse, Notification)):
            # The server never asks, so any response is stale; no request waits for a notification
            # (notifications/initialized included).
            return Reply(None, 202)
        return (yield from self._request(message, session, ctx))

    def handle_batch(self, batch: Batch, session: Session, make_ctx: Callable[[], RequestContext]) -> Reply:
        """`handle_batch_steps`, each step waited for on this thread."""
        return steps.run(self.handle_batch_steps(batch, session, make_ctx, Cancellation()))

    def handle_batch_steps(
        self, batch: Batch, session: Session, make_ctx: Callable[[], RequestContext], cancellation: Cancellation
    ) -> Steps[Reply]:
        """A JSON array's answers under 2025-03-26; refused under other revisions.

        `cancellation` is the batch's: thrown (the client left), it stops the item in flight and
        every item after it, and the batch has no answer.
        """
        # A modern header or modern `_meta` on any item means 2026-07-28, where a body is one
        # message: the legacy default (2025-03-26 over HTTP) must not let such a batch through.
        headers = make_ctx().http_headers
        items = [item for item in batch.items if isinstance(item, (Request, Notification))]
        modern = not session.pinned_legacy and (
            _modern_header(headers) or any(_carries_modern_meta(item.params) for item in items)
        )
        if modern or session.legacy_version() != BATCH_VERSION:
            err = error_object(INVALID_REQUEST, f"Invalid Request: batches exist only in MCP {BATCH_VERSION}")
            return Reply(error_response(None, err), 400)
        refusal = batches.over_limits(batch.items, self.batch_limits)
        if refusal is not None:
            return Reply(error_response(None, error_object(INVALID_REQUEST, refusal)), 400)

        def answer(item: Message, ctx: RequestContext) -> Steps[JSONObject | None]:
            if isinstance(item, Request) and item.method == "initialize":
                err = error_object(INVALID_REQUEST, "Invalid Request: initialize must not be part of a batch")
                return error_response(item.id, err)
            message = (yield from self.handle_steps(item, session, ctx)).message
            return message if isinstance(message, dict) else None

        encoded = yield from batches.run_steps(batch.items, self.batch_limits, cancellation, make_ctx, answer)
        return Reply(None, 202) if encoded is None else Reply(encoded, 200)

    # ---- request routing ----------------------------------------------------------------

    def _request(self, req: Request, session: Session, ctx: RequestContext) -> Steps[Reply]:
        # The log filter and the sentences quoting gateway text find this request's credentials here.
        token = logs.bind_request(ctx)
        try:
            return (yield from self._serve(req, session, ctx))
        finally:
            logs.unbind_request(token)

    def _serve(self, req: Request, session: Session, ctx: RequestContext) -> Steps[Reply]:
        ctx.request_id = req.id
        modern = not session.pinned_legacy and (_carries_modern_meta(req.params) or _modern_header(ctx.http_headers))
        ctx.era = "modern" if modern else "legacy"
        try:
            _require_text(req.params)
            era_only = self._modern(req, ctx) if modern else self._legacy(ctx, session)
            ctx.progress_token = _progress_token(req.params)
            handler = era_only.get(req.method) or self._methods.get(req.method)
            if handler is None:
                raise McpError(METHOD_NOT_FOUND, f"Method not found: {req.method}")
            result = yield from _called(handler(req.params, ctx, session))
            if modern:
                self._stamp(result, req.method, ctx)
        except McpError as exc:
            table = MODERN_HTTP_STATUS if modern else LEGACY_HTTP_STATUS
            return Reply(error_response(req.id, exc.to_error()), table.get(exc.code, 200))
        except Exception:
            # Unexpected: the detail goes to stderr, never to the wire.
            log.exception("unexpected failure handling %s", records.clip(req.method))  # a client chose it
            err = error_object(INTERNAL_ERROR, "Internal error")
            return Reply(error_response(req.id, err), 500 if modern else 200)
        return Reply(response(req.id, result), 200)

    def _legacy(self, ctx: RequestContext, session: Session) -> dict[str, Handler]:
        """The session's facts into `ctx`; the methods only legacy requests have."""
        ctx.version = ctx.record.version = session.legacy_version()
        ctx.record.era = "legacy"
        ctx.client_capabilities = session.client_capabilities
        # Stateless HTTP cannot remember a logging/setLevel from another POST, so legacy requests
        # get info and above unless this session set a level ("The server MAY send log messages").
        ctx.log_level = session.log_level or "info"
        return self._legacy_only

    def _modern(self, req: Request, ctx: RequestContext) -> dict[str, Handler]:
        """The `_meta` facts into `ctx`; the methods only modern requests have."""
        meta = self._ladder(req, ctx.http_headers)
        ctx.version = ctx.record.version = meta[META_VERSION]
        ctx.record.era = "modern"
        client = meta.get(META_CLIENT_INFO)
        if isinstance(client, dict):
            ctx.record.client = client
        ctx.client_capabilities = meta[META_CAPABILITIES]
        level = meta.get(META_LOG_LEVEL)
        if level is not None and level not in LOG_LEVELS:
            raise McpError(INVALID_PARAMS, f"Invalid params: unknown log level {level!r}")
        ctx.log_level = level
        if req.method in REMOVED_IN_MODERN:
            raise McpError(METHOD_NOT_FOUND, f"Method not found: {req.method} does not exist in MCP {ctx.version}")
        return self._modern_only

    def _stamp(self, result: JSONObject, method: str, ctx: RequestContext) -> None:
        """A modern result's resultType, caching hints and serverInfo."""
        result["resultType"] = "complete"
        if method in CACHEABLE:
            result.setdefault("ttlMs", self.catalog.list_ttl_ms)
            result.setdefault("cacheScope", "public")
        result_meta = result.get("_meta")
        info = self._server_info_for(ctx.version) if method == "server/discover" else self.server_info
        result["_meta"] = {**(result_meta if isinstance(result_meta, dict) else {}), META_SERVER_INFO: info}

    def ladder_error(self, message: Message | Batch, headers: Mapping[str, str]) -> JSONObject | None:
        """The modern ladder's error for a request the gate refused on its version.

        The gate refuses an unsupported MCP-Protocol-Version before the body is read; once the
        drained body shows a modern request, its answer keeps the ladder's order (-32602 for
        missing _meta, then -32020 for a header that differs from the body, then -32022).
        """
        if not isinstance(message, Request) or not _carries_modern_meta(message.params):
            return None
        try:
            self._ladder(message, headers)
        except McpError as exc:
            return exc.to_error()
        return None

    def _ladder(self, req: Request, headers: Mapping[str, str] | None) -> dict[str, Any]:
        """2026-07-28 validation in the conformance order: _meta, headers, version."""
        meta = req.params.get("_meta")
        if not isinstance(meta, dict):
            raise McpError(INVALID_PARAMS, "Invalid params: _meta is required in MCP 2026-07-28")
        version = meta.get(META_VERSION)
        if not isinstance(version, str):
            raise McpError(INVALID_PARAMS, f"Invalid params: _meta[{META_VERSION!r}] must be a string")
        if not isinstance(meta.get(META_CAPABILITIES), dict):
            raise McpError(INVALID_PARAMS, f"Invalid params: _meta[{META_CAPABILITIES!r}] must be an object")
        if headers is not None:
            if headers.get("mcp-protocol-version") != version:
                raise McpError(HEADER_MISMATCH, "Header mismatch: MCP-Protocol-Version differs from the body's version")
            method_header = headers.get("mcp-method")
            if method_header is None or decode_header_value(method_header) != req.method:
                raise McpError(HEADER_MISMATCH, "Header mismatch: Mcp-Method is missing or differs from the method")
            param = NAME_PARAM.get(req.method)
            if param is not None:
                name_header = headers.get("mcp-name")
                if name_header is None or decode_header_value(name_header) != req.params.get(param):
                    raise McpError(HEADER_MISMATCH, f"Header mismatch: Mcp-Name is missing or differs from {param}")
        if version not in MODERN_VERSIONS:
            raise McpError(
                UNSUPPORTED_VERSION,
                f"Unsupported protocol version: {version}",
                {"supported": list(SUPPORTED_VERSIONS), "requested": version},
            )
        return meta

    # ---- methods --------------------------------------------------------------------------

    def _wants_views(self, capabilities: object) -> bool:
        return bool(self._views) and apps.wants_ui(capabilities)

    def _with_apps(self, capabilities: JSONObject, client: object) -> JSONObject:
        return apps.with_extension(capabilities) if self._wants_views(client) else capabilities

    def _server_info_for(self, version: str) -> JSONObject:
        return self._server_info_icons if version in apps.ICON_VERSIONS else self.server_info

    def _tools_for(self, ctx: RequestContext) -> list[JSONObject]:
        """tools/list for this request: outputSchema, icons and views as it allows."""
        key = (
            ctx.version in STRUCTURED_OUTPUT_VERSIONS,
            ctx.version in apps.ICON_VERSIONS,
            self._wants_views(ctx.client_capabilities),
        )
        listed = self._tool_lists.get(key)
        if listed is None:
            structured, icons, ui = key
            listed = self._tool_list if structured else self._tool_list_unstructured
            if icons:
                listed = [apps.with_icons(t, list(self.catalog.tool_icons)) for t in listed]
            if ui:
                listed = [
                    apps.with_view(t, self._view_of[t["name"]]) if t["name"] in self._view_of else t for t in listed
                ]
            self._tool_lists[key] = listed
        return listed

    def _initialize(self, params: JSONObject, ctx: RequestContext, session: Session) -> JSONObject:
        requested = params.get("protocolVersion")
        # "If the server supports the requested protocol version, it MUST respond with the same
        # version. Otherwise, the server MUST respond with another protocol version it supports."
        version = requested if requested in LEGACY_VERSIONS else LATEST_LEGACY
        ctx.record.version = version
        client = params.get("clientInfo")
        if isinstance(client, dict):
            ctx.record.client = client
        caps = params.get("capabilities")
        if not session.http:
            session.pinned_legacy = True
            session.version = version
            session.client_capabilities = caps if isinstance(caps, dict) else {}
        elif self._wants_views(caps):
            # Over stateless HTTP the declaration reaches later POSTs only in the session id the
            # transport issues with this answer (apps.views_session_id).
            session.views_declared = True
        return {
            "protocolVersion": version,
            "capabilities": self._with_apps(self.capabilities, caps),
            "serverInfo": self._server_info_for(version),
            **self._instructions,
        }

    def _discover(self, params: JSONObject, ctx: RequestContext, session: Session) -> JSONObject:
        capabilities = self._with_apps(self.capabilities, ctx.client_capabilities)
        return {"supportedVersions": list(SUPPORTED_VERSIONS), "capabilities": capabilities, **self._instructions}

    def _set_level(self, params: JSONObject, ctx: RequestContext, session: Session) -> JSONObject:
        level = params.get("level")
        if level not in LOG_LEVELS:
            raise McpError(INVALID_PARAMS, f"Invalid params: level must be one of {', '.join(LOG_LEVELS)}")
        session.log_level = level
        return {}

    def _tools_call(self, params: JSONObject, ctx: RequestContext, session: Session) -> Steps[JSONObject]:
        name = params.get("name")
        if not isinstance(name, str):
            raise McpError(INVALID_PARAMS, "Invalid params: name must be a string")
        tool = self._tools.get(name)
        ctx.record.target("tool", name if tool is not None else None)
        if tool is None:
            raise McpError(INVALID_PARAMS, f"Unknown tool: {name}")
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise McpError(INVALID_PARAMS, "Invalid params: arguments must be an object")
        meta = params.get("_meta")
        if isinstance(meta, dict) and x402.PAYMENT_META_KEY in meta:
            supplied = x402.from_meta(meta[x402.PAYMENT_META_KEY])
            if ctx.payment_conflict is None:
                ctx.payment, ctx.payment_conflict = x402.merge(ctx.payment, supplied)
        if ctx.payment is None and ctx.payment_conflict is None:
            return (yield from _tool_call(tool, arguments, ctx))
        # A paid call is answered as one JSON body, so its receipt can ride in that answer's
        # headers: no progress or log notification may turn it into a stream.
        ctx.progress_token = None
        ctx.log_level = None
        ctx.send = lambda message: None
        # Tools that can be priced say so (tools.GatewayTool.priced); any other tool is never paid.
        priced = getattr(tool, "priced", False) is True
        if ctx.payment_conflict is not None or not priced:
            ctx.record.payment = "refused"
            ctx.record.fail("payment_refused")
        payments = self.catalog.payments
        if payments is None:  # a catalogue built without payments (a test's)
            text = "This server takes no payments; the payment was not sent anywhere."
            return _refusal({"content": [{"type": "text", "text": text}], "isError": True}, ctx)
        if ctx.payment_conflict is not None:
            return _refusal(payments.refused(ctx.payment_conflict), ctx)
        if not priced:
            return _refusal(payments.refused_unpriced(name), ctx)
        if ctx.payment_allowance is None:
            ctx.payment_allowance = PaymentAllowance()
        refusal = ctx.payment_allowance.claim()  # at most once per inbound message, whatever carries it
        if refusal is not None:
            return _refusal(payments.refused(refusal), ctx)
        return (yield from payments.guarded_steps(_tool_call(tool, arguments, ctx), ctx))

    def _resources_for(self, ctx: RequestContext) -> list[JSONObject]:
        if self._wants_views(ctx.client_capabilities):
            return [*self._resource_list, *(v.definition() for v in self._views.values())]
        return self._resource_list

    def _resources_read(self, params: JSONObject, ctx: RequestContext, session: Session) -> Steps[JSONObject]:
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise McpError(INVALID_PARAMS, "Invalid params: uri must be a string")
        resource = self._resources.get(uri)
        if resource is not None:
            ctx.record.target("resource", uri)
            contents = yield from _waits(resource, "read_steps", resource.read, ctx)
            return _read_result(contents, resource.ttl_ms, resource.cache_scope, ctx)
        view = self._views.get(uri)
        if view is not None and apps.wants_ui(ctx.client_capabilities):
            ctx.record.target("resource", uri)
            return _read_result(view.read(ctx), view.ttl_ms, view.cache_scope, ctx)
        for template in self.catalog.templates:
            found: list[JSONObject] | None = yield from _waits(template, "read_steps", template.read, uri, ctx)
            if found is not None:
                # The template, not the URI: what fills it in is the client's.
                ctx.record.target("resource", str(template.definition().get("uriTemplate")))
                return _read_result(found, template.ttl_ms, template.cache_scope, ctx)
        ctx.record.target("resource", None)
        # 2026-07-28: -32602 ("MUST NOT return an empty contents"); earlier revisions: -32002.
        code = INVALID_PARAMS if ctx.era == "modern" else RESOURCE_NOT_FOUND
        raise McpError(code, f"Resource not found: {uri}", {"uri": uri})

    def _prompts_get(self, params: JSONObject, ctx: RequestContext, session: Session) -> Steps[JSONObject]:
        name = params.get("name")
        prompt = self._prompts.get(name) if isinstance(name, str) else None
        ctx.record.target("prompt", prompt.name if prompt is not None else None)
        if prompt is None:
            raise McpError(INVALID_PARAMS, f"Unknown prompt: {name}")
        arguments = params.get("arguments") or {}
        if not isinstance(arguments, dict) or not all(isinstance(v, str) for v in arguments.values()):
            raise McpError(INVALID_PARAMS, "Invalid params: prompt arguments must be an object of strings")
        return (yield from _waits(prompt, "get_steps", prompt.get, arguments, ctx))

    def _complete(self, params: JSONObject, ctx: RequestContext, session: Session) -> Steps[JSONObject]:
        ref = params.get("ref")
        argument = params.get("argument")
        if not isinstance(ref, dict) or not isinstance(argument, dict):
            raise McpError(INVALID_PARAMS, "Invalid params: ref and argument must be objects")
        arg_name, value = argument.get("name"), argument.get("value", "")
        if not isinstance(arg_name, str) or not isinstance(value, str):
            raise McpError(INVALID_PARAMS, "Invalid params: argument.name and argument.value must be strings")
        target: Prompt | ResourceTemplate | None = None
        ref_name, ref_uri = ref.get("name"), ref.get("uri")
        if ref.get("type") == "ref/prompt" and isinstance(ref_name, str):
            target = self._prompts.get(ref_name)
        elif ref.get("type") == "ref/resource" and isinstance(ref_uri, str):
            target = next((t for t in self.catalog.templates if t.definition().get("uriTemplate") == ref_uri), None)
        if target is None:
            raise McpError(INVALID_PARAMS, "Invalid params: ref names no prompt or resource template of this server")
        values = yield from _waits(target, "complete_steps", target.complete, arg_name, value, ctx)
        return {
            "completion": {
                "values": values[:MAX_COMPLETIONS],
                "total": len(values),
                "hasMore": len(values) > MAX_COMPLETIONS,
            }
        }


def _called(result: JSONObject | Steps[JSONObject]) -> Steps[JSONObject]:
    """A handler's result, at once or by the steps of one that may wait."""
    if isinstance(result, GeneratorType):
        value: JSONObject = yield from result
        return value
    assert isinstance(result, dict)
    return result


def _with_security_schemes(definition: JSONObject, scopes: tuple[str, ...]) -> JSONObject:
    """A tool's definition with OpenAI Apps' `securitySchemes` in `_meta`.

    ChatGPT reads them to know which tools need the member signed in (OAuth 2.1, with these
    scopes) and which need no one (`noauth`); the MCP schema leaves `_meta` open, so every other
    client passes them by. The challenge itself stays the HTTP `401` (transports/http/door.py).
    """
    scheme: JSONObject = {"type": "oauth2", "scopes": list(scopes)} if scopes else {"type": "noauth"}
    meta = definition.get("_meta")
    return {**definition, "_meta": {**(meta if isinstance(meta, dict) else {}), "securitySchemes": [scheme]}}


def _scopes_of(tool: Tool) -> tuple[str, ...]:
    """The member scopes a call of `tool` takes (its `scopes`, if any)."""
    scopes = getattr(tool, "scopes", ())
    return tuple(scopes) if isinstance(scopes, tuple) else ()


def _tool_call(tool: Tool, arguments: JSONObject, ctx: RequestContext) -> Steps[JSONObject]:
    return (yield from _waits(tool, "call_steps", tool.call, arguments, ctx))


def _waits(target: object, name: str, blocking: Callable[..., R], *args: Any) -> Steps[R]:
    """`target.<name>(*args)` as steps where offered, else `blocking(*args)`.

    Gateway tools offer steps; a test's fake may offer only the Protocol method, which never waits.
    """
    offered = getattr(target, name, None)
    if offered is None:
        return blocking(*args)
    result: R = yield from offered(*args)
    return result


def _require_text(params: JSONObject) -> None:
    """-32602 naming the first string in params that is not Unicode text."""
    where = lone_surrogate(params)
    if where is not None:
        raise McpError(
            INVALID_PARAMS,
            f"Invalid params: {where} is not Unicode text: it holds a lone UTF-16 surrogate "
            "(a \\ud800-\\udfff escape without its pair), which cannot be sent anywhere. Nothing was "
            "sent to the gateway.",
        )


def _refusal(result: JSONObject, ctx: RequestContext) -> JSONObject:
    """A refused payment, its kind as structuredContent where allowed."""
    if ctx.version in STRUCTURED_OUTPUT_VERSIONS:
        result["structuredContent"] = {"kind": "payment_refused"}
    return result


def _carries_modern_meta(params: JSONObject) -> bool:
    # Any io.modelcontextprotocol/ key marks a modern request, even a malformed one: it must
    # then be refused by the modern ladder, not served as legacy.
    meta = params.get("_meta")
    return isinstance(meta, dict) and any(isinstance(k, str) and k.startswith(MODERN_META_PREFIX) for k in meta)


def _modern_header(headers: Mapping[str, str] | None) -> bool:
    """Whether an HTTP `MCP-Protocol-Version` names no handshake revision."""
    header = headers.get("mcp-protocol-version") if headers is not None else None
    return header is not None and header not in LEGACY_VERSIONS


def _read_result(contents: list[JSONObject], ttl_ms: int, cache_scope: str, ctx: RequestContext) -> JSONObject:
    """A ReadResourceResult, with the caching hints for modern requests."""
    if ctx.era != "modern":
        return {"contents": contents}
    return {"contents": contents, "ttlMs": ttl_ms, "cacheScope": cache_scope}


def _progress_token(params: JSONObject) -> str | int | None:
    meta = params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    if isinstance(token, str) or (isinstance(token, int) and not isinstance(token, bool)):
        return token
    return None


def _listing(name: str, listed: Callable[[RequestContext], list[JSONObject]]) -> Handler:
    """A `*/list` method; every list fits one page, so no cursor is issued."""

    def handler(params: JSONObject, ctx: RequestContext, session: Session) -> JSONObject:
        cursor = params.get("cursor")
        if cursor is not None and not (cursor == "" and ctx.era == "modern"):
            raise McpError(INVALID_PARAMS, "Invalid params: unknown cursor (every list here fits one page)")
        return {name: list(listed(ctx))}

    return handler
