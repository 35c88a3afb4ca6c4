"""A real Prometheus server scrapes a real server's metrics listener and answers PromQL with what the test did.

The server is the real command (`fairwins-mcp --http 0 --metrics 127.0.0.1:0`), alone and with
`--workers 2`, whose figures are summed. Prometheus is Debian's `prometheus` package (`make test`
installs it when missing). It runs on a free port with its own storage in a temporary directory,
scrapes every second, and is stopped in `finally`, whatever happened.
"""

from __future__ import annotations

import http.client
import json
import pathlib
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.conftest import PROMETHEUS, WAIT
from tests.sandbox_gateway import SandboxGateway
from tests.test_http_workers import answered, started

pytestmark = PROMETHEUS

START_TIMEOUT = 90.0  # a shared, loaded machine: Prometheus can take a while to open its storage
QUERY_TIMEOUT = 90.0
CALLS = 7


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def fetch(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    """GET on loopback, straight (http.client: no proxy from the environment can get in between)."""
    parts = urllib.parse.urlsplit(url)
    assert parts.hostname == "127.0.0.1" and parts.port is not None
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        conn.request("GET", parts.path + (f"?{parts.query}" if parts.query else ""))
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


@contextmanager
def prometheus(target: str, workdir: pathlib.Path) -> Iterator[str]:
    """Prometheus scraping `target` (host:port) every second; yields its base URL."""
    binary = shutil.which("prometheus")
    assert binary, "prometheus is missing: run `bash tests/tools/apt.sh prometheus prometheus` (make test does)"
    config = workdir / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: fairwins-mcp\n    scrape_interval: 1s\n    scrape_timeout: 1s\n"
        f"    static_configs:\n      - targets: ['{target}']\n",
        encoding="utf-8",
    )
    for attempt in range(5):  # the port was free a moment ago; somebody else may have taken it since
        port = free_port()
        log = workdir / f"prometheus-{attempt}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [
                    binary,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={workdir / f'data-{attempt}'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                    "--log.level=warn",
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
            )
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + START_TIMEOUT
            ready = False
            while time.monotonic() < deadline and proc.poll() is None:
                try:
                    ready = fetch(f"{base}/-/ready", timeout=2)[0] == 200
                except OSError:
                    ready = False
                if ready:
                    break
                time.sleep(0.2)  # polling a process's readiness; bounded by the deadline above
            if ready:
                yield base
                return
            text = log.read_text(errors="replace")
            assert proc.poll() is not None and "address already in use" in text, f"prometheus did not start:\n{text}"
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=15)
    raise AssertionError("prometheus found no free port in 5 attempts")


def query(base: str, promql: str) -> list[dict[str, Any]]:
    status, body = fetch(f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": promql}))
    assert status == 200, body
    answer = json.loads(body)
    assert answer["status"] == "success", answer
    result: list[dict[str, Any]] = answer["data"]["result"]
    return result


def wait_for_value(base: str, promql: str, expected: float) -> float:
    """The query's single value once it equals `expected`; fails with the last value after QUERY_TIMEOUT."""
    deadline = time.monotonic() + QUERY_TIMEOUT
    last: float | None = None
    while time.monotonic() < deadline:
        result = query(base, promql)
        if result:
            last = float(result[0]["value"][1])
            if last == expected:
                return last
        time.sleep(0.5)  # Prometheus scrapes every second; bounded by the deadline above
    raise AssertionError(f"{promql} was {last}, not {expected}, after {QUERY_TIMEOUT} s")


@pytest.mark.parametrize("workers", [(), ("--workers", "2")], ids=["one process", "two workers"])
def test_prometheus_scrapes_the_metrics_listener_and_counts_the_calls_made(
    sandbox: SandboxGateway, tmp_path: pathlib.Path, workers: tuple[str, ...]
) -> None:
    with started(sandbox.url, "--metrics", "127.0.0.1:0", *workers) as server:
        target = f"127.0.0.1:{server.metrics_port()}"
        if workers:
            server.workers(2)
        with prometheus(target, tmp_path) as base:
            assert wait_for_value(base, 'up{job="fairwins-mcp"}', 1) == 1  # scraped, and healthy
            for n in range(CALLS):  # a connection each: with workers, either may take it
                status, _, body = server.post("get_perps_pairs", rid=n)
                assert answered(status, body)
            counted = 'sum(fairwins_mcp_tool_calls_total{tool="get_perps_pairs",outcome="result"})'
            assert wait_for_value(base, counted, CALLS) == CALLS
            upstream = 'sum(fairwins_mcp_gateway_responses_total{class="2xx"})'
            assert wait_for_value(base, upstream, CALLS) == CALLS
            assert fetch(f"http://127.0.0.1:{server.port}/metrics")[0] == 404  # nothing on the MCP port
        server.signal(signal.SIGTERM)
        assert server.wait(WAIT * 4) == 0, server.output[-3000:]
