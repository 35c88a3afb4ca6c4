"""The metrics: the registry and its text exposition (checked by hand and by promtool), and where they are served.

Served on a listener of their own (`--metrics`, loopback by default) and on the MCP port only when
asked (`--metrics-on-mcp-port`): the listener is checked with hostile requests in process, and the
whole wiring with real server processes.
"""

from __future__ import annotations

import http.client
import logging
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import pytest

from mcp_server.ops import records
from mcp_server.ops.metrics import (
    CONTENT_TYPE,
    PAYMENT_OUTCOMES,
    REFUSAL_REASONS,
    REQUEST_OUTCOMES,
    STATUS_CLASSES,
    Registry,
    ServerMetrics,
    dump,
    load,
    merge,
    refusal_reason,
    render,
)
from mcp_server.ops.records import FAILURE_KINDS, GATEWAY_CAUSES, METHODS, Attempt, Record
from mcp_server.setup.config import METRICS_DEFAULT, Config, ConfigError, from_env, metrics_address, parse_args
from mcp_server.setup.server import build_dispatcher
from mcp_server.transports.http import gate
from mcp_server.transports.http.server import METRICS_CONNECTIONS, McpHTTPServer, announce_metrics, metrics_server
from mcp_server.wire.jsonrpc import Invalid, Notification, Request, error_object
from tests.conftest import NGINX, PROMETHEUS, ROOT, SIGNAL_STOP, WAIT, server_env
from tests.mcp_http import Raw, refusal, running
from tests.nginx import Nginx
from tests.sandbox_gateway import SandboxGateway
from tests.test_http_workers import Server, answered

TOOLS = ("get_wagers", "get_fees")


def promtool() -> str:
    """Debian's promtool; `make test` installs the `prometheus` package when it is missing."""
    path = shutil.which("promtool")
    assert path, "promtool is missing: run `bash tests/tools/apt.sh promtool prometheus` (make test does)"
    return path


def promtool_check(text: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool(), "check", "metrics"], input=text, capture_output=True, text=True, timeout=60, check=False
    )


def test_counters_gauges_and_histograms_render_in_the_text_format() -> None:
    registry = Registry()
    counter = registry.counter("demo_events_total", "Events\nby kind \\ path", ("kind",))
    gauge = registry.gauge("demo_level", "A level")
    histogram = registry.histogram("demo_seconds", "Latency", buckets=(0.1, 1.0))
    counter.inc('quo"te\\back\nline')
    counter.inc("plain", amount=2)
    gauge.set(3.5)
    for value in (0.05, 0.1, 0.5, 7.0):
        histogram.observe(value)
    assert registry.render() == (
        "# HELP demo_events_total Events\\nby kind \\\\ path\n"
        "# TYPE demo_events_total counter\n"
        'demo_events_total{kind="plain"} 2\n'
        'demo_events_total{kind="quo\\"te\\\\back\\nline"} 1\n'
        "# HELP demo_level A level\n"
        "# TYPE demo_level gauge\n"
        "demo_level 3.5\n"
        "# HELP demo_seconds Latency\n"
        "# TYPE demo_seconds histogram\n"
        'demo_seconds_bucket{le="0.1"} 2\n'  # 0.1 itself is in the 0.1 bucket: "le" is inclusive
        'demo_seconds_bucket{le="1"} 3\n'
        'demo_seconds_bucket{le="+Inf"} 4\n'
        "demo_seconds_sum 7.65\n"
        "demo_seconds_count 4\n"
    )


def test_a_gauge_can_be_read_at_scrape_time() -> None:
    registry = Registry()
    level = [1]
    registry.gauge("demo_in_flight", "Now").set_function(lambda: level[0])
    level[0] = 7
    assert "demo_in_flight 7\n" in registry.render()


def test_a_name_is_registered_once_and_labels_must_match() -> None:
    registry = Registry()
    counter = registry.counter("demo_total", "x", ("a",))
    with pytest.raises(ValueError, match="exists"):
        registry.gauge("demo_total", "y")
    with pytest.raises(ValueError, match="labels"):
        counter.init("a", "b")


def test_snapshots_of_several_processes_sum() -> None:
    def process(n: int) -> Registry:
        registry = Registry()
        registry.counter("demo_total", "x", ("k",)).inc("a", amount=n)
        registry.histogram("demo_seconds", "y", buckets=(1.0,)).observe(n)
        return registry

    one, two = process(1), process(2)
    text = render([one.collect(), two.collect()])
    assert 'demo_total{k="a"} 3\n' in text
    assert 'demo_seconds_bucket{le="1"} 1\n' in text and 'demo_seconds_bucket{le="+Inf"} 2\n' in text
    assert "demo_seconds_sum 3\n" in text and "demo_seconds_count 2\n" in text
    other = Registry()
    other.gauge("demo_total", "x", ("k",))
    with pytest.raises(ValueError, match="differs"):
        merge([one.collect(), other.collect()])


def test_counting_from_many_threads_loses_nothing() -> None:
    registry = Registry()
    counter = registry.counter("demo_total", "x", ("k",))
    histogram = registry.histogram("demo_seconds", "y")
    start = threading.Barrier(8)

    def work() -> None:
        start.wait(timeout=10)
        for i in range(5000):
            counter.inc("a" if i % 2 else "b")
            histogram.observe(0.001)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    family = counter.collect()
    assert family.samples == {("a",): 20000.0, ("b",): 20000.0}
    counts, _ = histogram.collect().histograms[()]
    assert sum(counts) == 40000


@pytest.mark.parametrize(
    ("status", "error", "reason"),
    [
        (503, "busy", "busy"),
        (503, "shutting_down", "draining"),
        (408, "request_timeout", "timeout"),
        (413, "body_too_large", "size"),
        (414, "too_large", "size"),
        (431, "headers_too_large", "size"),
        (400, "bad_framing", "malformed"),
        (400, "duplicate_header", "malformed"),
        (411, "length_required", "malformed"),
        (403, "origin_not_allowed", "gate"),
        (403, "host_not_allowed", "gate"),
        (404, "not_found", "gate"),
        (405, "method_not_allowed", "gate"),
        (415, "unsupported_media_type", "gate"),
        (406, "not_acceptable", "gate"),
        (400, "bad_authorization", "gate"),
        (429, "too_many_connections", "busy"),  # a client address over its share
        (429, "too_many_unfinished_requests", "busy"),
        (400, "missing_host", "malformed"),
        (505, "http_version_not_supported", "malformed"),
        (400, None, "gate"),  # an unsupported MCP-Protocol-Version: a JSON-RPC error body
        (200, None, None),
        (202, None, None),
    ],
)
def test_each_http_refusal_has_one_reason(status: int, error: str | None, reason: str | None) -> None:
    assert refusal_reason(status, error) == reason
    assert reason is None or reason in REFUSAL_REASONS


def finished(message: object, tool: tuple[str | None] | None = None, reply: object = None) -> Record:
    """A record as the dispatcher leaves it: its message, the tool it named (if any), its answer."""
    record = Record("http")
    record.begin(message)
    if tool is not None:
        record.target("tool", tool[0])
    if isinstance(reply, dict):
        record.reply(reply)
    return record


@PROMETHEUS
def test_records_count_as_requests_tools_gateway_calls_and_payments() -> None:
    metrics = ServerMetrics(TOOLS, "9.9.9")
    ok = finished(Request(1, "tools/call", {}), ("get_wagers",), {"result": {"isError": False}})
    ok.attempt(Attempt(503, None, 0.02, "a" * 16, 1, False, True))
    ok.attempt(Attempt(200, None, 0.01, "b" * 16, 2, False, True))
    failed = finished(Request(2, "tools/call", {}), (None,), {"error": {"code": -32602}})
    timed_out = Record("stdio")
    timed_out.begin(Request(3, "tools/call", {}))
    timed_out.target("tool", "get_fees")
    timed_out.attempt(Attempt(None, "timeout", 2.0, "c" * 16, 1, True, True))
    timed_out.fail("unreachable")
    timed_out.reply({"result": {"isError": True}})
    refused = finished(Request(4, "tools/call", {}), ("get_fees",))
    refused.payment = "refused"
    refused.fail("payment_refused")
    refused.reply({"result": {"isError": True}})
    initialized = finished(Request(5, "initialize", {}))
    initialized.version = "2025-06-18"
    initialized.reply({"result": {}})
    for record in (
        initialized,
        ok,
        failed,
        timed_out,
        refused,
        finished(Request(6, "weird/method", {}), None, {"error": {"code": -32601}}),
        finished(Notification("notifications/initialized", {})),
        finished(Notification("notifications/who-knows", {})),
        finished(Invalid(None, error_object(-32700, "Parse error"))),
    ):
        records.count(record, metrics)
    text = metrics.render()
    for line in (
        'fairwins_mcp_requests_total{method="tools/call",outcome="result"} 1',
        'fairwins_mcp_requests_total{method="tools/call",outcome="error"} 1',
        'fairwins_mcp_requests_total{method="tools/call",outcome="tool_error"} 2',
        'fairwins_mcp_requests_total{method="other",outcome="error"} 1',  # never the method as sent
        'fairwins_mcp_requests_total{method="invalid",outcome="error"} 1',
        'fairwins_mcp_tool_calls_total{tool="get_wagers",outcome="result"} 1',
        'fairwins_mcp_tool_calls_total{tool="unknown",outcome="error"} 1',
        'fairwins_mcp_tool_calls_total{tool="get_fees",outcome="unreachable"} 1',
        'fairwins_mcp_tool_calls_total{tool="get_fees",outcome="payment_refused"} 1',
        'fairwins_mcp_notifications_total{method="notifications/initialized"} 1',
        'fairwins_mcp_notifications_total{method="other"} 1',
        'fairwins_mcp_gateway_responses_total{class="2xx"} 1',
        'fairwins_mcp_gateway_responses_total{class="5xx"} 1',
        'fairwins_mcp_gateway_failures_total{cause="timeout"} 1',
        "fairwins_mcp_gateway_retries_total 1",
        'fairwins_mcp_initialize_total{revision="2025-06-18"} 1',
        "fairwins_mcp_gateway_request_duration_seconds_count 3",
        'fairwins_mcp_payments_total{outcome="unknown"} 1',
        'fairwins_mcp_payments_total{outcome="refused"} 1',
        'fairwins_mcp_build_info{version="9.9.9"} 1',
    ):
        assert line + "\n" in text, line
    checked = promtool_check(text)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_no_label_value_comes_from_the_client() -> None:
    metrics = ServerMetrics(TOOLS, "0.1.0")
    sent = "fw1.client-chosen-" + "x" * 40
    record = finished(Request(sent, sent, {"_meta": {"traceparent": sent}}), (None,), {"result": {}})
    record.client = {"name": sent, "version": sent}
    record.fail(sent)
    records.count(record, metrics)
    text = metrics.render()
    assert sent not in text and "x" * 40 not in text
    samples = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    label_values = set(re.findall(r'="((?:[^"\\]|\\.)*)"', samples))
    bucket_bounds = {v for v in label_values if v == "+Inf" or v.replace(".", "", 1).isdigit()}
    allowed = (
        METHODS
        | FAILURE_KINDS
        | set(TOOLS)
        | set(REFUSAL_REASONS)
        | set(PAYMENT_OUTCOMES)
        | set(STATUS_CLASSES)
        | set(REQUEST_OUTCOMES)
        | {"other", "unknown", "invalid", "0.1.0"}
    )
    assert label_values - bucket_bounds <= allowed


@PROMETHEUS
def test_promtool_accepts_the_full_set_and_refuses_a_broken_one() -> None:
    checked = promtool_check(ServerMetrics(TOOLS, "0.1.0").render())
    assert checked.returncode == 0, checked.stdout + checked.stderr
    broken = promtool_check("# TYPE demo counter\ndemo{a=b} 1\n")
    assert broken.returncode != 0  # the check can fail: it is really looking


def test_every_cause_the_gateway_seam_names_is_a_label_of_its_own() -> None:
    upstream = pathlib.Path(__file__).resolve().parent.parent / "mcp_server" / "upstream"
    source = "".join((upstream / name).read_text(encoding="utf-8") for name in ("gateway.py", "exchange.py", "aio.py"))
    named = set(re.findall(r'(?:TransportError|GatewayFailure)\(\s*"([a-z_]+)"', source))
    assert named and named - {"not_configured"} <= set(GATEWAY_CAUSES)


def test_a_snapshot_survives_its_trip_through_a_file() -> None:
    metrics = ServerMetrics(TOOLS, "1.2.3")
    metrics.requests.inc("tools/call", "result", amount=3)
    metrics.request_seconds.observe(0.2, "tools/call")
    families = metrics.registry.collect()
    assert render([load(dump(families))]) == render([families])
    with pytest.raises(ValueError):
        load('[{"name": "x"}]')


def dead_pid() -> int:
    probe = subprocess.Popen(["true"])
    probe.wait(timeout=10)
    return probe.pid


@PROMETHEUS
def test_workers_figures_are_summed_a_gone_workers_counts_kept_and_its_gauges_dropped(tmp_path: pathlib.Path) -> None:
    def worker(calls: int, in_flight: int) -> str:
        metrics = ServerMetrics(TOOLS, "1.2.3")
        metrics.tool_calls.inc("get_wagers", "result", amount=calls)
        metrics.in_flight.set_function(lambda: in_flight)
        return dump(metrics.registry.collect())

    (tmp_path / f"{dead_pid()}.json").write_text(worker(5, 9), encoding="utf-8")  # a worker that has gone
    (tmp_path / "not-a-snapshot.json").write_text("{", encoding="utf-8")
    (tmp_path / f"{os.getppid()}.json").write_text(worker(7, 2), encoding="utf-8")  # alive: pytest's parent
    here = ServerMetrics(TOOLS, "1.2.3")
    here.tool_calls.inc("get_wagers", "result")
    here.in_flight.set_function(lambda: 1)
    here.shared = str(tmp_path)  # as share() leaves it, without the timer
    text = here.render()
    assert 'fairwins_mcp_tool_calls_total{tool="get_wagers",outcome="result"} 13\n' in text  # 5 + 7 + 1
    assert "fairwins_mcp_requests_in_flight 3\n" in text  # 2 + 1: the gone worker's 9 is not counted
    assert 'fairwins_mcp_build_info{version="1.2.3"} 1\n' in text  # the same in every worker, not summed
    assert (tmp_path / f"{os.getpid()}.json").exists()  # a scrape publishes this worker's own figures first
    checked = promtool_check(text)
    assert checked.returncode == 0, checked.stdout + checked.stderr


# ---- where the metrics are served: the settings ----------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "env", "address", "on_port"),
    [
        (["--http", "0"], {}, None, False),  # off unless asked
        (["--http", "0"], {"K_SERVICE": "fairwins-mcp"}, None, False),  # Cloud Run binds 0.0.0.0: still off
        (["--http", "0", "--metrics"], {}, METRICS_DEFAULT, False),
        (["--http", "0", "--metrics"], {"K_SERVICE": "fairwins-mcp"}, ("127.0.0.1", 9464), False),
        (["--http", "0", "--metrics", ":0"], {}, ("127.0.0.1", 0), False),
        (["--http", "0", "--metrics", "9500"], {}, ("127.0.0.1", 9500), False),
        (["--http", "0", "--metrics", "localhost:9500"], {}, ("127.0.0.1", 9500), False),
        (["--http", "0", "--metrics", "[::1]:9500"], {}, ("::1", 9500), False),
        (["--http", "0", "--metrics=0.0.0.0:9464"], {}, ("0.0.0.0", 9464), False),  # allowed, with a warning
        (["--http", "0"], {"FAIRWINS_MCP_METRICS": "127.0.0.1:9600"}, ("127.0.0.1", 9600), False),
        (["--http", "0", "--metrics", ":1"], {"FAIRWINS_MCP_METRICS": "127.0.0.1:9600"}, ("127.0.0.1", 1), False),
        ([], {"FAIRWINS_MCP_METRICS": "127.0.0.1:9600"}, None, False),  # read, and unused over stdio
        (["--http", "0", "--metrics-on-mcp-port"], {}, None, True),
        (["--http", "0", "--metrics", "--metrics-on-mcp-port"], {}, METRICS_DEFAULT, True),
    ],
)
def test_where_the_metrics_are_served(
    argv: list[str], env: dict[str, str], address: tuple[str, int] | None, on_port: bool
) -> None:
    config = from_env(env, parse_args(argv))
    assert (config.metrics_address, config.metrics_on_mcp_port) == (address, on_port)
    assert config.metrics == (address is not None or on_port)
    assert METRICS_DEFAULT == ("127.0.0.1", 9464)


@pytest.mark.parametrize(
    "text",
    [
        "example.com:9464",
        "::1:9464",
        "[::1]",
        "[127.0.0.1]:9464",
        "127.0.0.1:",
        "127.0.0.1:99999",
        "127.0.0.1:+80",
        "127.0.0.1:٨٠",
        "",
        "0.0.0.0:9464:1",
        "[::1]9464",
    ],
)
def test_a_metrics_address_that_is_not_one_is_refused_with_a_sentence(text: str) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(text))):
        metrics_address(text)
    with pytest.raises(ConfigError, match="FAIRWINS_MCP_METRICS"):
        from_env({"FAIRWINS_MCP_METRICS": text or "x"}, parse_args(["--http", "0"]))


@pytest.mark.parametrize(
    ("argv", "words"),
    [(["--metrics"], "--metrics needs --http"), (["--metrics-on-mcp-port"], "--metrics-on-mcp-port needs --http")],
)
def test_metrics_without_http_are_refused(argv: list[str], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        from_env({}, parse_args(argv))


# ---- the gate: /metrics on the MCP port only when asked, and nothing else on the metrics listener ----


def refusal_of(method: str, path: str, policy: gate.Policy) -> tuple[int, str, str]:
    decision = gate.check(method, path, {"host": "localhost"}, policy)
    assert isinstance(decision, gate.Refuse), decision
    return decision.status, decision.error, decision.message


@pytest.mark.parametrize("loopback", [True, False])
def test_without_the_flag_metrics_on_the_mcp_port_are_any_unknown_path(loopback: bool) -> None:
    policy = gate.Policy(loopback_bind=loopback)
    for method in ("GET", "HEAD", "POST"):
        assert refusal_of(method, "/metrics", policy) == refusal_of(method, "/nowhere", policy)
    assert gate.check("GET", "/metrics", {}, gate.Policy(loopback_bind=False, metrics=True)) == gate.Admit("metrics")


def test_the_metrics_listener_admits_get_and_head_of_metrics_and_nothing_else() -> None:
    policy = gate.Policy(loopback_bind=True, max_body=0, metrics=True, metrics_only=True)
    for method in ("GET", "HEAD"):
        assert gate.check(method, "/metrics?x=1", {"host": "127.0.0.1:9464"}, policy) == gate.Admit("metrics")
    refused = gate.check("POST", "/metrics", {"host": "localhost"}, policy)
    assert isinstance(refused, gate.Refuse) and (refused.status, refused.allow) == (405, "GET, HEAD")
    for method, path in (("GET", "/healthz"), ("POST", "/mcp"), ("OPTIONS", "/mcp"), ("OPTIONS", "*"), ("GET", "/")):
        assert refusal_of(method, path, policy)[:2] == (404, "not_found"), (method, path)
    rebound = gate.check("GET", "/metrics", {"host": "attacker.example"}, policy)  # DNS rebinding
    assert isinstance(rebound, gate.Refuse) and rebound.status == 403


# ---- the metrics listener, in process: hostile callers are refused and it goes on serving ------------


@contextmanager
def metrics_listening(registry: ServerMetrics) -> Iterator[McpHTTPServer]:
    """The metrics listener on 127.0.0.1:0 around `registry`, stopped on exit."""
    with running(metrics_server(build_dispatcher(Config()), registry)) as server:
        yield server


def scrape(port: int, method: str = "GET", path: str = "/metrics") -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
    try:
        conn.request(method, path)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


SCRAPE = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


@PROMETHEUS
def test_the_metrics_listener_answers_get_and_head_with_the_text_format_on_a_kept_connection() -> None:
    registry = ServerMetrics(TOOLS, "1.2.3")
    registry.tool_calls.inc("get_fees", "result", amount=4)
    with metrics_listening(registry) as server:
        port = server.server_address[1]
        status, headers, body = scrape(port)
        assert status == 200 and headers["content-type"] == CONTENT_TYPE
        assert 'fairwins_mcp_tool_calls_total{tool="get_fees",outcome="result"} 4\n' in body.decode()
        checked = promtool_check(body.decode())
        assert checked.returncode == 0, checked.stdout + checked.stderr
        head_status, head_headers, head_body = scrape(port, "HEAD")
        assert (head_status, head_body) == (200, b"") and int(head_headers["content-length"]) == len(body)
        client = Raw(port)
        try:
            for _ in range(3):  # Prometheus keeps its connection between scrapes
                client.send(SCRAPE)
                answer = client.response()
                assert answer is not None and answer.status == 200 and "connection" not in answer.headers
        finally:
            client.close()


HOSTILE = {
    "a POST with a body": (b"POST /metrics HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nGET /", 405, False),
    "a GET with a body": (b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nGET /", 200, False),
    "a chunked GET": (
        b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nGET /\r\n0\r\n\r\n",
        200,
        False,
    ),
    "the MCP endpoint": (b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\n{}", 404, False),
    "the health check": (b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n", 404, False),
    "a rebound name": (b"GET /metrics HTTP/1.1\r\nHost: attacker.example\r\n\r\n", 403, False),
    "a head over 64 KiB": (
        b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n",
        431,
        True,
    ),
    "a line over 64 KiB": (b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n", 414, True),
    "two framings": (
        b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
        400,
        True,
    ),
    "two hosts": (b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nHost: localhost\r\n\r\n", 400, True),
    "no request line": (b"HELLO\r\n\r\n", 400, True),
    "a bare LF": (b"GET /metrics HTTP/1.1\nHost: localhost\n\n", 400, True),
    "HTTP/2": (b"GET /metrics HTTP/2.0\r\nHost: localhost\r\n\r\n", 505, True),
    "no Host": (b"GET /metrics HTTP/1.1\r\n\r\n", 400, True),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_the_metrics_listener_refuses_a_hostile_request_cleanly_and_goes_on_serving(name: str) -> None:
    data, status, closes = HOSTILE[name]
    registry = ServerMetrics(TOOLS, "1.2.3")
    with metrics_listening(registry) as server:
        client = Raw(server.server_address[1])
        try:
            client.send(data)
            answer = client.response()
            assert answer is not None and answer.status == status, answer
            if closes:
                assert answer.headers.get("connection") == "close" and client.closed()
            else:
                # The body was read to its end, as its framing said: the next request on the
                # connection is read as one (a body's bytes are never a request).
                client.send(SCRAPE)
                following = client.response()
                assert following is not None and following.status == 200
        finally:
            client.close()
        assert scrape(server.server_address[1])[0] == 200
        text = registry.render()
    # The metrics listener counts nothing: a scrape, or a stranger at its door, is no MCP traffic.
    assert all(line.endswith(" 0") for line in text.splitlines() if line.startswith("fairwins_mcp_http_refusals"))


def test_the_metrics_listener_has_a_small_connection_bound_of_its_own() -> None:
    with metrics_listening(ServerMetrics(TOOLS, "1.2.3")) as server, ExitStack() as held:
        port = server.server_address[1]
        share = METRICS_CONNECTIONS // 2
        for _ in range(share):
            held.callback(Raw(port).close)  # an idle scraper
        over = Raw(port)
        over.send(SCRAPE)
        answer = over.response()
        assert answer is not None and (answer.status, refusal(answer.body)[0]) == (429, "too_many_connections")
        over.close()
        for n in range(METRICS_CONNECTIONS - share):
            held.callback(Raw(port, source=f"127.0.0.{2 + n}").close)
        full = Raw(port, source="127.0.0.200")
        full.send(SCRAPE)
        answer = full.response()
        assert answer is not None and (answer.status, refusal(answer.body)[0]) == (503, "busy")
        full.close()
        held.close()
        assert server.wait_idle(WAIT)
        assert scrape(port)[0] == 200


def test_a_metrics_listener_beyond_loopback_is_announced_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    loopback = socket.socket()
    outside = socket.socket()  # bound, never listening: nothing can connect to it
    try:
        loopback.bind(("127.0.0.1", 0))
        outside.bind(("0.0.0.0", 0))
        with caplog.at_level(logging.INFO, logger="fairwins_mcp"):
            announce_metrics(("127.0.0.1", 8790), loopback, False, summed=False)
            assert [r.levelno for r in caplog.records] == [logging.INFO]
            assert caplog.records[0].getMessage() == f"metrics: http://127.0.0.1:{loopback.getsockname()[1]}/metrics"
            caplog.clear()
            announce_metrics(("0.0.0.0", 8790), outside, True, summed=True)
    finally:
        loopback.close()
        outside.close()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2, warnings
    assert "0.0.0.0 is not a loopback address: whoever can reach it reads" in warnings[0]
    assert "--metrics-on-mcp-port: every client that reaches the MCP port reads" in warnings[1]


# ---- real server processes --------------------------------------------------------------------------


def metrics_port(server: Server) -> int:
    return int(server.wait_output(r"metrics: http://127\.0\.0\.1:(\d+)/metrics(?! \(--metrics-on)").group(1))


HEALTH = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"


def ask_raw(port: int, data: bytes, count: int) -> list[int]:
    client = Raw(port)
    try:
        client.send(data)
        statuses = []
        for _ in range(count):
            answer = client.response()
            assert answer is not None
            statuses.append(answer.status)
        return statuses
    finally:
        client.close()


@SIGNAL_STOP
def test_a_cloud_run_style_server_keeps_its_metrics_off_the_mcp_port(sandbox: SandboxGateway) -> None:
    # K_SERVICE: Cloud Run's settings (JSON logs; 0.0.0.0 without --host, which this test keeps on loopback).
    server = Server(sandbox.url, "--host", "127.0.0.1", "--metrics", "127.0.0.1:0", env={"K_SERVICE": "fairwins-mcp"})
    try:
        port, scrapes = server.port, metrics_port(server)
        status, _, body = server.post("get_perps_pairs")
        assert answered(status, body)
        nowhere = Raw(server.port)
        nowhere.send(b"GET /nowhere HTTP/1.1\r\nHost: localhost\r\n\r\n")
        expected = nowhere.response()
        nowhere.close()
        for method in ("GET", "HEAD"):
            got = Raw(port)
            got.send(f"{method} /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
            answer = got.response(head=method == "HEAD")
            got.close()
            assert answer is not None and expected is not None
            assert (answer.status, answer.headers["content-length"]) == (404, expected.headers["content-length"])
            assert method == "HEAD" or answer.body == expected.body
        # A body sent to /metrics on the MCP port is read to its end like any other path's: were it
        # read as a request, the second answer would be its 404.
        smuggled = b"GET /nowhere HTTP/1.1\r\nHost: localhost\r\n\r\n"
        posted = b"POST /metrics HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\n\r\n%s" % (
            len(smuggled),
            smuggled,
        )
        assert ask_raw(port, posted + HEALTH, 2) == [404, 200]
        status, headers, text = scrape(scrapes)
        assert status == 200 and headers["content-type"] == CONTENT_TYPE
        assert 'fairwins_mcp_tool_calls_total{tool="get_perps_pairs",outcome="result"} 1\n' in text.decode()
        server.signal(signal.SIGTERM)
        assert server.wait(WAIT * 4) == 0, server.output[-3000:]
    finally:
        server.kill()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", scrapes), timeout=WAIT).close()


@SIGNAL_STOP
@pytest.mark.parametrize("listener", [False, True])
def test_metrics_on_the_mcp_port_only_when_asked(sandbox: SandboxGateway, listener: bool) -> None:
    server = Server(sandbox.url, "--metrics-on-mcp-port", *(["--metrics", ":0"] if listener else []))
    try:
        status, _, body = server.post("get_perps_pairs")
        assert answered(status, body)
        on_port = scrape(server.port)
        assert on_port[0] == 200 and on_port[1]["content-type"] == CONTENT_TYPE
        server.wait_output(rf"metrics: http://127\.0\.0\.1:{server.port}/metrics \(--metrics-on-mcp-port\)")
        counted = 'fairwins_mcp_tool_calls_total{tool="get_perps_pairs",outcome="result"} 1\n'
        assert counted in on_port[2].decode()
        if listener:
            assert counted in scrape(metrics_port(server))[2].decode()  # the same figures at both doors
        else:
            assert len(re.findall(r"metrics: http://", server.output)) == 1  # no listener of their own
        server.signal(signal.SIGTERM)
        assert server.wait(WAIT * 4) == 0, server.output[-3000:]
    finally:
        server.kill()


def test_a_metrics_port_already_taken_stops_the_start_with_a_sentence(sandbox: SandboxGateway) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "mcp_server", "--http", "0", "--metrics", f"127.0.0.1:{port}"],
            cwd=ROOT,
            env=server_env(FAIRWINS_API_URL=sandbox.url),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=WAIT * 3,
            check=False,
        )
    assert done.returncode == 1, done.stderr
    assert f"fairwins-mcp: cannot listen on 127.0.0.1:{port} for --metrics:" in done.stderr


@NGINX
def test_a_reverse_proxy_that_forwards_every_path_exposes_no_metrics(sandbox: SandboxGateway) -> None:
    # The nginx block in docs/hosting.md forwards `location /` whole: /metrics must not be there to forward.
    server = Server(sandbox.url, "--metrics", "127.0.0.1:0")
    try:
        scrapes = metrics_port(server)
        with Nginx(server.port) as nginx:
            assert scrape(nginx.port, path="/healthz")[0] == 200  # the proxy does reach the server
            for method in ("GET", "HEAD"):
                assert scrape(nginx.port, method)[0] == 404
        assert scrape(scrapes)[0] == 200
    finally:
        server.kill()
