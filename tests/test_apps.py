"""MCP Apps (`io.modelcontextprotocol/ui`) as negotiated, in both eras; icons; the views as package data.

The views' rendering is proven in a real browser (tests/test_apps_host.py); here: who is offered
them, what they are offered, and that a client declaring nothing is served what it was before.
"""

from __future__ import annotations

import html.parser
import json
import re
from typing import Any

import pytest

from mcp_server.core.apps import UI_EXTENSION, UI_MIME_TYPE
from mcp_server.core.protocol import Dispatcher, Session
from mcp_server.fairwins import views
from mcp_server.setup.server import build_catalog
from mcp_server.upstream.gateway import Gateway
from mcp_server.wire.jsonrpc import Request
from mcp_server.wire.versions import META_CAPABILITIES, META_CLIENT_INFO, META_SERVER_INFO, META_VERSION
from tests.conftest import McpClient, client_for
from tests.sandbox_gateway import TOKEN_MEMBER_A, SandboxGateway

UI_CAPS: dict[str, Any] = {"extensions": {UI_EXTENSION: {"mimeTypes": [UI_MIME_TYPE]}}}
VIEW_URIS = {v.uri for v in views.VIEWS}
TOOLS_WITH_VIEWS = {name: v.uri for v in views.VIEWS for name in v.tools}


def legacy(mcp: McpClient, capabilities: dict[str, Any], version: str = "2025-11-25") -> dict[str, Any]:
    answer = mcp.request(
        "initialize",
        {"protocolVersion": version, "capabilities": capabilities, "clientInfo": {"name": "t", "version": "0"}},
    )
    result: dict[str, Any] = answer["result"]
    return result


def modern(
    dispatcher: Dispatcher,
    method: str,
    params: dict[str, Any] | None = None,
    capabilities: dict[str, Any] | None = None,
) -> dict[str, Any]:
    from mcp_server.core.context import RequestContext

    params = dict(params or {})
    params["_meta"] = {
        META_VERSION: "2026-07-28",
        META_CAPABILITIES: capabilities or {},
        META_CLIENT_INFO: {"name": "t", "version": "0"},
    }
    reply = dispatcher.handle(Request(1, method, params), Session(http=True), RequestContext())
    assert isinstance(reply.message, dict)
    message: dict[str, Any] = json.loads(json.dumps(reply.message))
    return message


class _Checker(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attributes: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes.extend(attrs)


# ---- negotiation -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "declared",
    [
        {},
        {"extensions": {}},
        {"extensions": {UI_EXTENSION: {}}},
        {"extensions": {UI_EXTENSION: {"mimeTypes": ["text/html"]}}},
    ],
)
def test_a_legacy_client_that_does_not_declare_the_html_profile_is_served_as_before(
    sandbox: SandboxGateway, declared: dict[str, Any]
) -> None:
    before = client_for(sandbox.url)
    plain = legacy(before, {})
    mcp = client_for(sandbox.url)
    init = legacy(mcp, declared)
    assert init["capabilities"] == plain["capabilities"] and "extensions" not in init["capabilities"]
    tools = mcp.request("tools/list")["result"]["tools"]
    assert tools == before.request("tools/list")["result"]["tools"]
    assert all("_meta" not in t for t in tools)
    listed = {r["uri"] for r in mcp.request("resources/list")["result"]["resources"]}
    assert not listed & VIEW_URIS
    for uri in VIEW_URIS:
        error = mcp.request("resources/read", {"uri": uri})["error"]
        assert error["code"] == -32002 and error["data"] == {"uri": uri}
    # Same answers, and the complete text fallback: the tool result is what it always was.
    result = mcp.call_tool("get_wagers", bearer=TOKEN_MEMBER_A)
    assert result["isError"] is False and result["content"][0]["type"] == "text"
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]


def test_a_legacy_client_that_declares_the_extension_gets_it_advertised_linked_and_readable(
    sandbox: SandboxGateway,
) -> None:
    mcp = client_for(sandbox.url)
    init = legacy(mcp, UI_CAPS)
    assert init["capabilities"]["extensions"] == {UI_EXTENSION: {}}
    tools = {t["name"]: t for t in mcp.request("tools/list")["result"]["tools"]}
    for name, tool in tools.items():
        if name in TOOLS_WITH_VIEWS:
            assert tool["_meta"] == {"ui": {"resourceUri": TOOLS_WITH_VIEWS[name]}}
        else:
            assert "_meta" not in tool
    assert {"get_wagers", "build_intent", "get_prediction_markets"} <= set(TOOLS_WITH_VIEWS)
    listed = {r["uri"]: r for r in mcp.request("resources/list")["result"]["resources"]}
    assert VIEW_URIS <= set(listed) and all(listed[u]["mimeType"] == UI_MIME_TYPE for u in VIEW_URIS)
    for uri in VIEW_URIS:
        (contents,) = mcp.request("resources/read", {"uri": uri})["result"]["contents"]
        assert contents["uri"] == uri and contents["mimeType"] == UI_MIME_TYPE
        assert_one_html5_document(contents["text"])
        ui = contents["_meta"]["ui"]
        # No domains of any kind: hosts apply the restrictive default CSP (connect-src 'none').
        assert "csp" not in ui and "domain" not in ui
        assert set(ui.get("permissions", {})) <= {"clipboardWrite"}


def test_a_modern_client_negotiates_per_request_and_server_discover_says_so(sandbox: SandboxGateway) -> None:
    dispatcher = client_for(sandbox.url).dispatcher
    plain = modern(dispatcher, "server/discover")["result"]
    offered = modern(dispatcher, "server/discover", capabilities=UI_CAPS)["result"]
    assert "extensions" not in plain["capabilities"]
    assert offered["capabilities"]["extensions"] == {UI_EXTENSION: {}}
    assert {k: v for k, v in offered["capabilities"].items() if k != "extensions"} == plain["capabilities"]
    tools = {t["name"]: t for t in modern(dispatcher, "tools/list", capabilities=UI_CAPS)["result"]["tools"]}
    assert {n: t["_meta"]["ui"]["resourceUri"] for n, t in tools.items() if "_meta" in t} == TOOLS_WITH_VIEWS
    assert all("_meta" not in t for t in modern(dispatcher, "tools/list")["result"]["tools"])
    for uri in VIEW_URIS:
        read = modern(dispatcher, "resources/read", {"uri": uri}, UI_CAPS)["result"]
        assert read["contents"][0]["mimeType"] == UI_MIME_TYPE and read["resultType"] == "complete"
        assert modern(dispatcher, "resources/read", {"uri": uri})["error"]["code"] == -32602


def _legacy_http(url: str, capabilities: dict[str, Any], session_id: str | None = None) -> tuple[Any, Any, Any]:
    """initialize, then tools/list and resources/read of a view as later POSTs, as a 2025-11-25 client sends them."""
    from tests.mcp_http import CLIENT_INFO, post

    init = post(
        url,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": capabilities, "clientInfo": CLIENT_INFO},
        },
        {},
    )
    sent = init.headers.get("mcp-session-id") if session_id is None else session_id
    later = {"MCP-Protocol-Version": "2025-11-25", **({"Mcp-Session-Id": sent} if sent else {})}
    listed = post(url, {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}, later)
    uri = sorted(VIEW_URIS)[0]
    read = post(url, {"jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": {"uri": uri}}, later)
    return init, listed, read


def test_legacy_http_carries_the_declaration_in_the_session_id_it_issues(sandbox: SandboxGateway) -> None:
    """Stateless HTTP keeps nothing: the declaration travels in the Mcp-Session-Id that initialize's answer issues."""
    from tests.mcp_http import serving

    with serving(client_for(sandbox.url).dispatcher) as server:
        init, listed, read = _legacy_http(server.url, UI_CAPS)
        session_id = init.headers["mcp-session-id"]
        assert re.fullmatch(r"fw-ui-[0-9a-f]{32}", session_id)
        assert init.result["capabilities"]["extensions"] == {UI_EXTENSION: {}}
        linked = {t["name"]: t["_meta"]["ui"]["resourceUri"] for t in listed.result["tools"] if "_meta" in t}
        assert linked == TOOLS_WITH_VIEWS
        assert read.result["contents"][0]["mimeType"] == UI_MIME_TYPE
        again, _, _ = _legacy_http(server.url, UI_CAPS)
        assert again.headers["mcp-session-id"] != session_id  # one per handshake, never reused


@pytest.mark.parametrize(
    "session_id",
    [None, "fw-ui-" + "0" * 31, "fw-ui-" + "G" * 32, "another-server-session", "fw-ui-" + "0" * 32 + "x"],
)
def test_legacy_http_without_the_declaration_or_its_session_id_is_served_as_before(
    sandbox: SandboxGateway, session_id: str | None
) -> None:
    """No declaration: no session id and no views; an id of any other form vouches for nothing."""
    from tests.mcp_http import serving

    with serving(client_for(sandbox.url).dispatcher) as server:
        init, listed, read = _legacy_http(server.url, {}, session_id)
        assert "mcp-session-id" not in init.headers and "extensions" not in init.result["capabilities"]
        assert all("_meta" not in t for t in listed.result["tools"])
        assert read.error["code"] == -32002  # not found, as before the views existed


# ---- icons -----------------------------------------------------------------------------------


def _icon_bytes(icon: dict[str, Any]) -> bytes:
    import base64

    src = icon["src"]
    assert src.startswith("data:image/png;base64,") and icon["mimeType"] == "image/png"
    return base64.b64decode(src.split(",", 1)[1], validate=True)


def _png_size(data: bytes) -> str:
    """A PNG's "WxH" from its IHDR chunk, which the format puts first."""
    import struct

    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return f"{width}x{height}"


def test_the_server_and_every_tool_carry_the_icon_at_64_px_in_both_eras(sandbox: SandboxGateway) -> None:
    from tests.conftest import ROOT

    package_icon = (ROOT / "mcp_server" / "fairwins" / "ui" / "icon-64.png").read_bytes()
    mcp = client_for(sandbox.url)
    (icon,) = legacy(mcp, {})["serverInfo"]["icons"]
    assert _icon_bytes(icon) == package_icon and icon["sizes"] == [_png_size(package_icon)] == ["64x64"]
    for tool in mcp.request("tools/list")["result"]["tools"]:
        assert tool["icons"] == [icon]
    dispatcher = mcp.dispatcher
    discover = modern(dispatcher, "server/discover")["result"]
    assert discover["_meta"][META_SERVER_INFO]["icons"] == [icon]
    assert all("icons" in t for t in modern(dispatcher, "tools/list")["result"]["tools"])
    # Every other modern result is stamped with the plain serverInfo, no icon.
    assert "icons" not in modern(dispatcher, "tools/list")["result"]["_meta"][META_SERVER_INFO]
    # The bundles and the registry keep the 512 px drawing (scripts/icon.py draws both files).
    assert _png_size((ROOT / "mcpb" / "icon.png").read_bytes()) == "512x512"


@pytest.mark.parametrize("capabilities", [{}, UI_CAPS], ids=["plain", "apps"])
def test_initialize_over_http_is_under_3_kb_with_a_decodable_icon_of_its_declared_size(
    sandbox: SandboxGateway, capabilities: dict[str, Any]
) -> None:
    """A newcomer's curl of `initialize` reads as an answer, not a wall of base64: the whole HTTP body under 3 KB."""
    from tests.mcp_http import serving

    with serving(client_for(sandbox.url).dispatcher) as server:
        init, _, _ = _legacy_http(server.url, capabilities)
    assert len(init.body) < 3 * 1024, f"initialize answered {len(init.body)} bytes"
    (icon,) = init.result["serverInfo"]["icons"]
    assert icon["sizes"] == [_png_size(_icon_bytes(icon))]


def test_revisions_before_icons_existed_are_served_without_them(sandbox: SandboxGateway) -> None:
    mcp = client_for(sandbox.url)
    assert "icons" not in legacy(mcp, {}, "2025-06-18")["serverInfo"]
    assert all("icons" not in t for t in mcp.request("tools/list")["result"]["tools"])


def test_server_json_names_the_same_icon_by_an_https_url() -> None:
    from tests.conftest import ROOT

    server = json.loads((ROOT / "server.json").read_text(encoding="utf-8"))
    (icon,) = server["icons"]
    # https only, as the registry's schema takes: the bundle's icon file as the release's tag holds
    # it in the repository pyproject.toml names, so the URL resolves once that tag is pushed.
    import tomllib

    source = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["urls"]["Source"]
    repo = source.removeprefix("https://github.com/")
    assert icon["src"] == f"https://raw.githubusercontent.com/{repo}/v{server['version']}/mcpb/icon.png"
    assert icon["mimeType"] == "image/png" and icon["sizes"] == ["512x512"]


# ---- the views as files --------------------------------------------------------------------


def assert_one_html5_document(text: str) -> None:
    assert text.startswith("<!DOCTYPE html>\n") and text.rstrip().endswith("</html>")
    checker = _Checker()
    checker.feed(text)
    assert checker.tags.count("html") == 1 and checker.tags.count("body") == 1 and checker.tags.count("head") == 1
    assert checker.tags.count("script") == 1  # inline; nothing loaded from anywhere
    for name, value in checker.attributes:
        assert name not in ("src", "href", "action", "srcset"), (name, value)


@pytest.mark.parametrize("view", views.VIEWS, ids=lambda v: v.name)
def test_each_view_is_small_self_contained_and_names_itself(view: views.View) -> None:
    page = view.html()
    assert len(page.encode("utf-8")) <= 40 * 1024
    assert f'<html lang="en" data-view="{view.name}" data-tools="{" ".join(view.tools)}">' in page
    assert_one_html5_document(page)


def test_which_tools_have_a_view_is_views_py_alone_and_the_page_draws_every_view() -> None:
    """The page names no tool (it reads <html data-tools>), and draws each view views.py declares."""
    from tests import catalog

    page = views._page()
    names, tools = "|".join(v.name for v in views.VIEWS), "|".join(catalog.SERVED)
    paired = re.findall(rf"\b({names})\s*:\s*[\"']({tools})[\"']", page)
    assert paired == [], f"app.html maps views to tools itself; views.py's View.tools is the one list: {paired}"
    (dispatch,) = re.findall(r"\(\{ ([^}]*) \}\)\[VIEW\]", page)
    drawn = [entry.split(":")[0].strip() for entry in dispatch.split(",")]
    assert sorted(drawn) == sorted(v.name for v in views.VIEWS)
    for view in views.VIEWS:
        assert set(view.tools) <= set(catalog.SERVED), view


def test_the_page_builds_no_markup_from_strings_and_fetches_nothing() -> None:
    """docs/style.md habit 13, read from the source; the browser test proves the same with hostile data."""
    page = views.View("ui://x", "wagers", "", "", ()).html()
    for forbidden in (
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "fetch(",
        "XMLHttpRequest",
        "WebSocket",
        "EventSource",
        "eval(",
        "new Function",
        "import(",
        "sendBeacon",
        "srcdoc",
        ".src =",
        "href =",
    ):
        assert forbidden not in page, forbidden
    assert not re.search(r"setAttribute\(\"(?!role|aria-hidden)", page)


def test_the_views_are_read_when_a_client_asks_not_at_start(sandbox: SandboxGateway) -> None:
    views._page.cache_clear()
    dispatcher = Dispatcher(build_catalog(Gateway(sandbox.url, timeout=5)))
    assert views._page.cache_info().currsize == 0
    modern(dispatcher, "resources/read", {"uri": views.VIEWS[0].uri}, UI_CAPS)
    assert views._page.cache_info().currsize == 1
