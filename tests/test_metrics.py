"""The metrics registry and its text exposition, checked by hand and by Prometheus's own promtool."""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import threading

import pytest

from mcp_server.ops import records
from mcp_server.ops.metrics import (
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
from mcp_server.wire.jsonrpc import Invalid, Notification, Request, error_object

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


def test_promtool_accepts_the_full_set_and_refuses_a_broken_one() -> None:
    checked = promtool_check(ServerMetrics(TOOLS, "0.1.0").render())
    assert checked.returncode == 0, checked.stdout + checked.stderr
    broken = promtool_check("# TYPE demo counter\ndemo{a=b} 1\n")
    assert broken.returncode != 0  # the check can fail: it is really looking


def test_every_cause_the_gateway_seam_names_is_a_label_of_its_own() -> None:
    source = (pathlib.Path(__file__).resolve().parent.parent / "mcp_server" / "upstream" / "gateway.py").read_text(
        encoding="utf-8"
    )
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
