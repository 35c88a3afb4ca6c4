"""The HTTP gate as a pure function: no sockets, every row of the Origin, Host and media-type matrix."""

from __future__ import annotations

import pytest

from mcp_server.transports.http import gate
from mcp_server.transports.http.gate import Admit, Policy, Refuse

LOCAL = Policy(loopback_bind=True, allowed_origins=frozenset({"https://app.fairwins.example"}), max_body=1024)
HOSTED = Policy(loopback_bind=False, allowed_origins=frozenset(), max_body=1024)
GOOD = {
    "host": "127.0.0.1:8790",
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "content-length": "10",
}


def decide(policy: Policy = LOCAL, method: str = "POST", path: str = "/mcp", **changes: str | None) -> Admit | Refuse:
    headers = {**GOOD}
    for name, value in changes.items():
        key = name.replace("_", "-")
        if value is None:
            headers.pop(key, None)
        else:
            headers[key] = value
    return gate.check(method, path, headers, policy)


def test_a_well_formed_post_is_admitted() -> None:
    assert decide() == Admit("mcp", None, False, 10)


@pytest.mark.parametrize(
    "origin",
    [
        "http://localhost:6274",
        "http://localhost",
        "http://127.0.0.1:3000",
        "http://[::1]:8080",
        "https://app.fairwins.example",
    ],
)
def test_loopback_and_listed_origins_are_served_with_cors(origin: str) -> None:
    decision = decide(origin=origin)
    assert isinstance(decision, Admit) and decision.cors == origin


def test_an_absent_origin_is_served_without_cors() -> None:
    decision = decide(origin=None)
    assert isinstance(decision, Admit) and decision.cors is None


@pytest.mark.parametrize(
    "origin",
    [
        "null",
        "https://evil.example",
        "http://localhost.evil.example",
        "file://",
        "https://app.fairwins.example.evil.example",
        "http://app.fairwins.example",  # the listed origin is https only
        "*",
        "",
        # Values the URL parser itself refuses: still an answer, never an exception (issue 12).
        "http://[::1",
        "http://]",
        "http://[zz::1]",
        "http://localhost:99999",
        "http://localhost:port",
        "http://[::1]:²",
        "http://localhost\u00b2",
        "http://local host",
        "http://localhost\x00",
        "http://loc\u0430lhost",
    ],
)
def test_any_other_origin_is_refused_with_403(origin: str) -> None:
    decision = decide(origin=origin)
    assert isinstance(decision, Refuse) and (decision.status, decision.error) == (403, "origin_not_allowed")


def test_a_text_plain_post_from_a_foreign_origin_is_refused_as_an_origin_problem() -> None:
    # The CORS-safelisted shape a browser sends without a preflight: refused before its media type matters.
    decision = decide(origin="https://evil.example", content_type="text/plain")
    assert isinstance(decision, Refuse) and decision.status == 403


@pytest.mark.parametrize("host", ["localhost", "localhost:8790", "127.0.0.1:1", "[::1]:8790", "[::1]", "127.0.0.2:80"])
def test_loopback_host_headers_are_served_when_bound_to_loopback(host: str) -> None:
    assert isinstance(decide(host=host), Admit)


@pytest.mark.parametrize(
    "host",
    ["evil.example", "evil.example:8790", "localhost.evil.example", "10.0.0.5:8790", "", None, "localhost:²", "[::1"],
)
def test_a_rebinding_host_is_refused_when_bound_to_loopback(host: str | None) -> None:
    decision = decide(host=host)
    assert isinstance(decision, Refuse) and decision.status == 403 and decision.error == "host_not_allowed"


def test_an_absolute_form_host_is_the_one_checked() -> None:
    assert isinstance(gate.check("POST", "/mcp", {**GOOD, "host": "evil.example"}, LOCAL, "localhost:8790"), Admit)
    refused = gate.check("POST", "/mcp", GOOD, LOCAL, "evil.example")
    assert isinstance(refused, Refuse) and refused.error == "host_not_allowed"


@pytest.mark.parametrize("path", ["/healthz", "/healthz?probe=1"])
@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_health_is_a_route_of_its_own_with_no_origin_rules(path: str, method: str) -> None:
    decision = decide(method=method, path=path, origin="https://evil.example", content_type=None)
    assert decision == Admit("health")


def test_any_host_is_served_when_hosted() -> None:
    assert isinstance(decide(HOSTED, host="mcp.fairwins.example"), Admit)


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT"])
def test_other_methods_on_mcp_are_405_allowing_post(method: str) -> None:
    decision = decide(method=method)
    assert isinstance(decision, Refuse) and decision.status == 405 and decision.allow == "POST"


def test_options_is_a_preflight() -> None:
    assert decide(method="OPTIONS", origin="http://localhost:6274") == Admit("preflight", "http://localhost:6274")


def test_health_and_unknown_paths() -> None:
    assert decide(method="GET", path="/healthz") == Admit("health")
    unknown = decide(path="/other")
    assert isinstance(unknown, Refuse) and unknown.status == 404


@pytest.mark.parametrize(
    ("changes", "status"),
    [
        ({"content_type": "text/plain"}, 415),
        ({"content_type": None}, 415),
        ({"accept": "text/html"}, 406),
        ({"content_length": "1025"}, 413),
        ({"content_length": "-1"}, 400),
        ({"content_length": None}, 411),
        ({"transfer_encoding": "chunked"}, 400),  # with a Content-Length too: smuggling shape
        ({"mcp_protocol_version": "2099-01-01"}, 400),
    ],
)
def test_media_type_size_framing_and_version_refusals(changes: dict[str, str | None], status: int) -> None:
    decision = decide(**changes)
    assert isinstance(decision, Refuse) and decision.status == status


def test_json_with_a_charset_and_a_missing_accept_are_fine() -> None:
    assert isinstance(decide(content_type="application/json; charset=utf-8", accept=None), Admit)
    assert isinstance(decide(accept="text/event-stream"), Admit)
    assert isinstance(decide(accept="*/*"), Admit)


def test_chunked_without_content_length_is_admitted() -> None:
    decision = decide(content_length=None, transfer_encoding="chunked")
    assert isinstance(decision, Admit) and decision.chunked


def test_an_unsupported_version_is_a_json_rpc_error_listing_what_is_supported() -> None:
    decision = decide(mcp_protocol_version="v999.0.0")
    assert isinstance(decision, Refuse) and decision.jsonrpc_code == -32022
    assert decision.data == {
        "supported": ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"],
        "requested": "v999.0.0",
    }


def test_every_supported_version_passes_the_gate() -> None:
    for version in ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"):
        assert isinstance(decide(mcp_protocol_version=version), Admit)


ACCEPT_VERDICTS = [  # (Accept, admits application/json, admits text/event-stream)
    ("application/json, text/event-stream", True, True),
    ("text/html", False, False),
    ("application/json;q=0, text/event-stream", False, True),
    ("text/event-stream;q=0", False, False),
    ("*/*", True, True),
    ("application/*;q=0.5", True, False),
    ("  ", True, True),
    ("TEXT/EVENT-STREAM", False, True),
    ("text/*;q=0.0", False, False),
    ("image/png, " * 40, False, False),
]


@pytest.mark.parametrize(("accept", "json", "stream"), ACCEPT_VERDICTS)
def test_an_accept_header_admits_its_own_type_a_wildcard_and_never_a_q_of_zero(
    accept: str, json: bool, stream: bool
) -> None:
    assert (gate.accepts(accept, "application/json"), gate.accepts(accept, "text/event-stream")) == (json, stream)
