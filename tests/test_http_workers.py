"""`fairwins-mcp --http PORT --workers N|auto` as a real process tree: one port, replaced workers, drains, pre-stop."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from mcp_server.setup.config import ConfigError, from_env, parse_args
from tests.balancer import CALL_HEADERS, Process, call_body, wait_for
from tests.conftest import PROCFS, WAIT, server_env
from tests.sandbox_gateway import SandboxGateway
from tests.test_workers import alive, children

pytestmark = PROCFS


class Server(Process):
    def __init__(self, gateway_url: str, *args: str, env: dict[str, str] | None = None, taskset: str = "") -> None:
        argv = [sys.executable, "-m", "mcp_server", "--http", "0", *args]
        if taskset:
            argv = ["taskset", "-c", taskset, *argv]
        super().__init__("fairwins-mcp --workers", argv, server_env(FAIRWINS_API_URL=gateway_url, **(env or {})))
        self.port = int(self.wait_output(r"listening on http://127\.0\.0\.1:(\d+)/mcp").group(1))
        self.pid = self.proc.pid

    def workers(self, count: int, without: int = 0) -> list[int]:
        found: list[list[int]] = []

        def probe() -> bool:
            kids = children(self.pid)
            if len(kids) == count and without not in kids:
                found.append(kids)
                return True
            return False

        wait_for(probe, f"{count} workers", WAIT)
        # Each serving (its SIGTERM handler set): only then does a signal to one of them mean a drain.
        for pid in found[-1]:
            self.wait_output(rf"worker {pid} serving")
        return found[-1]

    def post(self, name: str = "get_wagers", rid: int = 1) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=WAIT * 2)
        try:
            body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name}})
            conn.request("POST", "/mcp", body=body if name != "get_wagers" else call_body(rid), headers=CALL_HEADERS)
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()

    def metrics_port(self) -> int:
        """The port of the metrics listener (--metrics), as the server logged it."""
        return int(self.wait_output(r"metrics: http://127\.0\.0\.1:(\d+)/metrics(?! \(--metrics-on)").group(1))

    def scrape(self, port: int) -> tuple[int, str]:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
        try:
            conn.request("GET", "/metrics")
            resp = conn.getresponse()
            return resp.status, resp.read().decode()
        finally:
            conn.close()

    def health(self) -> int:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=WAIT)
        try:
            conn.request("GET", "/healthz")
            return conn.getresponse().status
        finally:
            conn.close()


def answered(status: int, body: bytes) -> bool:
    return status == 200 and json.loads(body)["result"]["isError"] is False


@contextmanager
def started(gateway_url: str, *args: str, **options: Any) -> Iterator[Server]:
    server = Server(gateway_url, *args, **options)
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def slow_gateway() -> Iterator[SandboxGateway]:
    # Every call waits half a second at the gateway: a stop always finds calls in flight.
    with SandboxGateway(delay=0.5) as gateway:
        yield gateway


def test_two_workers_serve_one_port_and_drain_together_on_sigterm(slow_gateway: SandboxGateway) -> None:
    with started(slow_gateway.url, "--workers", "2") as server:
        pids = server.workers(2)
        assert server.output.count("listening on") == 1
        assert "with 2 workers" in server.output
        results: list[tuple[int, dict[str, str], bytes]] = []
        calls = [threading.Thread(target=lambda i=i: results.append(server.post(rid=i))) for i in range(6)]
        for thread in calls:
            thread.start()
        slow_gateway.wait_for_requests(6, timeout=WAIT)
        server.signal(signal.SIGTERM)
        assert server.wait(WAIT * 4) == 0, server.output[-3000:]
        for thread in calls:
            thread.join(WAIT)
        assert len(results) == 6 and all(answered(status, body) for status, _, body in results), results
        assert server.output.count("drained and exited") == 2
        assert not any(alive(pid) for pid in pids)


def test_a_worker_killed_outright_is_replaced_and_the_port_never_stops_answering(slow_gateway: SandboxGateway) -> None:
    with started(slow_gateway.url, "--workers", "2") as server:
        first = server.workers(2)
        os.kill(first[0], signal.SIGKILL)
        server.workers(2, without=first[0])
        status, _, body = server.post()
        assert answered(status, body)
        assert re.search(rf"worker \d \(pid {first[0]}\) was killed by SIGKILL", server.output)


def test_sigterm_to_one_worker_drains_it_alone_while_the_others_serve(slow_gateway: SandboxGateway) -> None:
    with started(slow_gateway.url, "--workers", "2") as server:
        first = server.workers(2)
        os.kill(first[0], signal.SIGTERM)
        replaced = server.workers(2, without=first[0])
        assert first[1] in replaced
        for i in range(4):
            status, _, body = server.post(rid=i)
            assert answered(status, body)
        assert "this worker leaves, the others go on accepting" in server.output
        assert re.search(rf"worker \d \(pid {first[0]}\) exited with code 0", server.output)


def counted(text: str, tool: str = "get_perps_pairs") -> int:
    found = re.search(rf'^fairwins_mcp_tool_calls_total{{tool="{tool}",outcome="result"}} (\d+)$', text, re.M)
    assert found, text
    return int(found[1])


def test_workers_answer_on_the_one_metrics_listener_with_every_workers_figures_summed(sandbox: SandboxGateway) -> None:
    calls = 12
    with started(sandbox.url, "--workers", "2", "--metrics", "127.0.0.1:0") as server:
        port = server.metrics_port()
        first = server.workers(2)
        assert "(every worker's, summed)" in server.output
        for n in range(calls):  # a connection each: either worker may take it
            status, _, body = server.post("get_perps_pairs", rid=n)
            assert answered(status, body)
        seen: list[int] = []

        def summed() -> bool:  # another worker's figures are at most a second old
            status, text = server.scrape(port)
            assert status == 200
            seen.append(counted(text))
            return seen[-1] == calls

        wait_for(summed, f"{calls} calls summed on the metrics listener", WAIT)
        assert server.health() == 200
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=WAIT)
        conn.request("GET", "/metrics")
        assert conn.getresponse().status == 404  # not on the MCP port: that needs --metrics-on-mcp-port
        conn.close()
        # A worker killed outright: the listener's queue is the supervisor's, so scrapes go on
        # being answered, and the gone worker's last counts stay in the sum.
        os.kill(first[0], signal.SIGKILL)
        for _ in range(4):
            status, text = server.scrape(port)
            assert status == 200 and counted(text) == calls
        server.workers(2, without=first[0])
        assert counted(server.scrape(port)[1]) == calls
        assert seen == sorted(seen)  # a counter never goes back, whichever worker answered
        server.signal(signal.SIGTERM)
        assert server.wait(WAIT * 4) == 0, server.output[-3000:]
        assert server.output.count("drained and exited") == 2
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=WAIT).close()


def test_under_workers_every_json_record_names_the_process_that_wrote_it(sandbox: SandboxGateway) -> None:
    # Issue 62: with --workers N the records did not say which worker served a request.
    calls = 6
    with started(sandbox.url, "--workers", "2", "--log-format", "json") as server:
        workers = set(server.workers(2))
        for n in range(calls):  # a connection each: either worker may take it
            status, _, body = server.post("get_perps_pairs", rid=n)
            assert answered(status, body)
        server.signal(signal.SIGTERM)
        assert server.wait(WAIT * 4) == 0, server.output[-3000:]
    records = [json.loads(line) for line in server.output.splitlines() if line.startswith("{")]
    assert records and all(isinstance(r.get("pid"), int) for r in records), server.output[-3000:]
    (listening,) = [r for r in records if r["message"].startswith("fairwins-mcp listening on")]
    assert listening["pid"] == server.pid
    # Each worker logs its own pid in words once it serves: its records carry that pid, not the supervisor's.
    serving = {
        int(r["message"].split()[1]): r["pid"] for r in records if re.fullmatch(r"worker \d+ serving", r["message"])
    }
    assert serving == {pid: pid for pid in workers}
    served = [r for r in records if r.get("method") == "tools/call"]
    assert len(served) == calls and {r["pid"] for r in served} <= workers, served


def test_workers_auto_counts_the_cpus_this_process_may_use(slow_gateway: SandboxGateway) -> None:
    with started(slow_gateway.url, "--workers", "auto", taskset="0") as server:  # pinned to one CPU
        assert server.workers(1)
        assert "with 1 worker (auto" in server.output


def test_the_pre_stop_delay_reports_unhealthy_while_it_still_serves(slow_gateway: SandboxGateway) -> None:
    with started(slow_gateway.url, env={"FAIRWINS_MCP_PRESTOP_DELAY": "3"}) as server:
        assert server.health() == 200
        server.signal(signal.SIGTERM)
        server.wait_output(r"/healthz answers 503")
        assert server.health() == 503  # a new connection is still accepted during the pre-stop delay
        status, headers, body = server.post()
        assert answered(status, body) and "connection" not in headers
        assert server.wait(WAIT * 4) == 0, server.output[-3000:]


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        (["--http", "0"], {}, None),
        (["--http", "0", "--workers", "3"], {}, 3),
        (["--http", "0", "--workers", "auto"], {}, 0),
        (["--http", "0"], {"FAIRWINS_MCP_WORKERS": "auto"}, 0),
        (["--http", "0", "--workers", "2"], {"FAIRWINS_MCP_WORKERS": "8"}, 2),  # the flag wins
        ([], {"FAIRWINS_MCP_WORKERS": "4"}, 4),  # read, and unused over stdio
    ],
)
def test_workers_setting(argv: list[str], env: dict[str, str], expected: int | None) -> None:
    assert from_env(env, parse_args(argv)).http_workers == expected


@pytest.mark.parametrize(
    ("argv", "env", "words"),
    [
        (["--http", "0", "--workers", "0"], {}, "from 1 to 256"),
        (["--http", "0", "--workers", "many"], {}, "or auto"),
        (["--http", "0"], {"FAIRWINS_MCP_WORKERS": "-1"}, "FAIRWINS_MCP_WORKERS"),
        (["--workers", "2"], {}, "needs --http"),
        (["--http", "0"], {"FAIRWINS_MCP_DRAIN_IDLE": "40"}, "must not exceed FAIRWINS_MCP_IDLE_TIMEOUT"),
        (["--http", "0"], {"FAIRWINS_MCP_PRESTOP_DELAY": "-1"}, "between 0 and 300"),
        (["--http", "0"], {"FAIRWINS_MCP_MAX_CONCURRENCY": "9000"}, "between 1 and 8192"),
    ],
)
def test_bad_door_settings_are_refused_with_a_sentence(argv: list[str], env: dict[str, str], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        from_env(env, parse_args(argv))


def test_door_defaults() -> None:
    config = from_env({}, parse_args(["--http", "0"]))
    assert (config.max_concurrency, config.idle_timeout, config.drain_idle, config.prestop_delay) == (1024, 30, 10, 0)
    shorter = from_env({"FAIRWINS_MCP_IDLE_TIMEOUT": "4"}, parse_args(["--http", "0"]))
    assert shorter.drain_idle == 4  # the grace never outlasts the idle timeout
