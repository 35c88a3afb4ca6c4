"""The worker supervisor with toy workers (tests/worker_fixture.py): one socket, replacement, signals, drain."""

from __future__ import annotations

import http.client
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import pytest

from mcp_server.ops import listener as listening
from mcp_server.ops import workers
from tests.conftest import PROCFS, ROOT, WAIT, server_env

pytestmark = PROCFS

T = TypeVar("T")


def eventually(probe: Callable[[], T | None], what: str, timeout: float = WAIT) -> T:
    """`probe()`'s first truthy value, asked every 20 ms; fails the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.02)


def children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return sorted(int(x) for x in fh.read().split())
    except OSError:
        return []


def socket_inodes(pid: int) -> set[str]:
    found = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:"):
            found.add(target)
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Fixture:
    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.worker_fixture", *args],
            cwd=ROOT,
            env=server_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert self.proc.stdout is not None and self.proc.stderr is not None
        line = self.proc.stdout.readline()
        assert line.startswith("port "), line
        self.port = int(line.split()[1])
        self._stderr: list[str] = []
        self._reader = threading.Thread(target=lambda: self._stderr.extend(self.proc.stderr or ()), daemon=True)
        self._reader.start()

    @property
    def stderr(self) -> str:
        return "".join(self._stderr)

    def get(self, path: str, timeout: float = WAIT) -> tuple[int, str]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            return resp.status, resp.read().decode()
        finally:
            conn.close()

    def workers(self, count: int, without: int = 0) -> list[int]:
        """The supervisor's children once there are `count` of them (and `without` is not one)."""

        def probe() -> list[int] | None:
            kids = children(self.proc.pid)
            return kids if len(kids) == count and without not in kids else None

        return eventually(probe, f"{count} workers")

    def wait(self) -> int:
        code = self.proc.wait(WAIT)
        self._reader.join(WAIT)
        return code

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(WAIT)


def slow_request(fx: Fixture) -> tuple[threading.Thread, list[tuple[int, str]], int]:
    """A one-second request, already being served when this returns: its thread, its answer, the worker's pid."""
    answers: list[tuple[int, str]] = []
    slow = threading.Thread(target=lambda: answers.append(fx.get("/slow?s=1.0")))
    slow.start()
    eventually(lambda: "slow request in worker" in fx.stderr, "the slow request to reach a worker")
    return slow, answers, int(fx.stderr.split("slow request in worker ")[1].split()[0])


@contextmanager
def fixture(*args: str) -> Iterator[Fixture]:
    started = Fixture(*args)
    try:
        yield started
    finally:
        started.kill()


def test_n_workers_share_one_listening_socket() -> None:
    with fixture("--workers", "3") as fx:
        pids = fx.workers(3)
        listening = socket_inodes(fx.proc.pid)
        for pid in pids:
            # The supervisor's listening socket is the same kernel object in every worker.
            assert listening & socket_inodes(pid), f"worker {pid} does not hold the listening socket"
        served = {fx.get("/pid")[1].strip() for _ in range(30)}
        assert served <= {str(pid) for pid in pids}


def test_a_worker_that_dies_is_replaced_and_the_port_keeps_serving() -> None:
    with fixture("--workers", "2") as fx:
        first = fx.workers(2)
        os.kill(first[0], signal.SIGKILL)
        replaced = fx.workers(2, without=first[0])
        assert first[1] in replaced
        assert fx.get("/pid")[0] == 200
        assert f"(pid {first[0]}) was killed by SIGKILL" in eventually(lambda: fx.stderr, "the log line")


def test_a_crashing_worker_is_replaced_too() -> None:
    with fixture("--workers", "1") as fx:
        (first,) = fx.workers(1)
        with pytest.raises((ConnectionError, http.client.HTTPException)):
            fx.get("/exit?code=3")
        (second,) = fx.workers(1, without=first)
        assert fx.get("/pid") == (200, f"{second}\n")
        assert f"(pid {first}) exited with code 3" in fx.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_drains_every_worker_and_exits_0(sig: signal.Signals) -> None:
    with fixture("--workers", "2") as fx:
        pids = fx.workers(2)
        slow, answers, _ = slow_request(fx)
        os.kill(fx.proc.pid, sig)  # the supervisor alone: it tells each worker the instance stops
        assert fx.wait() == 0, fx.stderr
        slow.join(WAIT)
        assert answers and answers[0][0] == 200, answers
        assert not any(alive(pid) for pid in pids)
        assert fx.stderr.count("drained and exited") == 2
        assert fx.stderr.count("stops: instance") == 2


def test_ctrl_c_to_the_whole_process_group_is_one_instance_stop() -> None:
    with fixture("--workers", "2") as fx:
        fx.workers(2)
        os.killpg(fx.proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
        assert fx.wait() == 0, fx.stderr
        assert fx.stderr.count("stops: instance") == 2
        assert "stops: alone" not in fx.stderr


def test_sigterm_to_one_worker_drains_it_alone_and_a_replacement_takes_its_place() -> None:
    with fixture("--workers", "2") as fx:
        first = fx.workers(2)
        slow, answers, busy = slow_request(fx)
        os.kill(busy, signal.SIGTERM)
        others = fx.workers(2, without=busy)
        assert next(pid for pid in first if pid != busy) in others
        # The port never stopped accepting: the socket lives on in the other worker and the replacement.
        assert all(fx.get("/pid")[0] == 200 for _ in range(10))
        slow.join(WAIT)
        assert answers and answers[0][0] == 200, answers
        assert f"worker {busy} stops: alone" in fx.stderr
        assert f"(pid {busy}) exited with code 0" in fx.stderr


def test_a_worker_that_fails_its_drain_makes_the_exit_code_1() -> None:
    with fixture("--workers", "2", "--drain-exit", "4") as fx:
        fx.workers(2)
        os.kill(fx.proc.pid, signal.SIGTERM)
        assert fx.wait() == 1
        assert "exited with code 4 while draining" in fx.stderr


def test_a_worker_still_running_after_the_stop_timeout_is_killed() -> None:
    with fixture("--workers", "1", "--stop-timeout", "0.5") as fx:
        (pid,) = fx.workers(1)
        cut: list[BaseException] = []

        def hang() -> None:
            try:
                fx.get("/slow?s=30")
            except (ConnectionError, http.client.HTTPException) as exc:
                cut.append(exc)

        slow = threading.Thread(target=hang, daemon=True)
        slow.start()
        eventually(lambda: "slow request in worker" in fx.stderr, "the slow request to reach a worker")
        os.kill(fx.proc.pid, signal.SIGTERM)
        assert fx.wait() == 1
        slow.join(WAIT)
        assert cut, "the killed worker's connection should have been cut"
        assert "still running after 0 s: killed" in fx.stderr or "still running after 1 s: killed" in fx.stderr
        assert not alive(pid)


def test_workers_drain_when_the_supervisor_is_killed() -> None:
    with fixture("--workers", "2") as fx:
        pids = fx.workers(2)
        os.kill(fx.proc.pid, signal.SIGKILL)  # no chance to forward anything
        fx.proc.wait(WAIT)
        eventually(lambda: not any(alive(pid) for pid in pids), "the orphaned workers to exit")


def test_backoff_grows_in_a_crash_loop_and_resets_after_a_long_life() -> None:
    delays = [0.0]
    for _ in range(10):
        delays.append(workers.next_backoff(delays[-1], lived=0.1))
    assert delays[1] == workers.FIRST_BACKOFF
    assert delays == sorted(delays) and delays[-1] == workers.MAX_BACKOFF
    assert workers.next_backoff(workers.MAX_BACKOFF, lived=workers.QUICK_DEATH) == 0.0


def test_the_supervisor_refuses_to_fork_from_a_threaded_process() -> None:
    listener = listening.listen("127.0.0.1", 0)
    try:
        # pytest itself runs threads here (the sandbox gateway's, the watchdog's) or this one does.
        blocker = threading.Event()
        extra = threading.Thread(target=blocker.wait, daemon=True)
        extra.start()
        with pytest.raises(RuntimeError, match="before any thread"):
            workers.supervise(listener, 1, lambda sock, lifeline: 0, stop_timeout=1)
        blocker.set()
    finally:
        listener.close()


def test_a_worker_that_exits_1_at_its_start_is_replaced_after_its_backoff_and_counted() -> None:
    with fixture("--workers", "1", "--crash-first", "3") as fx:
        # Three crash loops' worth of starts, then a worker that serves: the port answers.
        status, pid = eventually(lambda: _answer(fx), "a worker that serves after three crashes")
        assert status == 200
        crashes = re.findall(
            r"exited with code 1 after [\d.]+ s; a replacement starts in ([\d.]+) s \((\d+) replaced", fx.stderr
        )
        expected, backoff = [], 0.0
        for count in (1, 2, 3):
            backoff = workers.next_backoff(backoff, lived=0.0)
            expected.append((f"{backoff:.1f}", str(count)))
        assert crashes == expected, fx.stderr
        assert fx.stderr.count("crashes at its start") == 3
        assert fx.workers(1) == [int(pid)]


def _answer(fx: Fixture) -> tuple[int, str] | None:
    try:
        status, body = fx.get("/pid", timeout=1.0)
    except (OSError, http.client.HTTPException):
        return None
    return status, body.strip()


def test_a_reap_that_raises_is_logged_with_its_traceback_and_the_loop_goes_on() -> None:
    with fixture("--workers", "2", "--reap-fails", "1") as fx:
        first = fx.workers(2)
        log = eventually(lambda: "injected waitpid failure 1" in fx.stderr and fx.stderr, "the failure logged")
        assert "the worker supervisor's loop failed (1 in a row); it goes on in 0.1 s" in log
        assert "Traceback (most recent call last)" in log and "InjectedReapFailure: injected waitpid failure 1" in log
        # Still listening to its workers: one that dies is replaced...
        os.kill(first[0], signal.SIGKILL)
        fx.workers(2, without=first[0])
        # ...and to its signals: the drain ends with 0.
        os.kill(fx.proc.pid, signal.SIGTERM)
        assert fx.wait() == 0, fx.stderr
        assert fx.stderr.count("drained and exited") == 2


def test_a_supervisor_loop_that_cannot_go_on_stops_its_workers_and_exits_non_zero() -> None:
    with fixture("--workers", "2", "--reap-fails", "-1") as fx:
        pids = fx.workers(2)
        assert fx.wait() == 1, fx.stderr
        assert f"loop failed {workers.FAILED_TURNS} times in a row and cannot go on" in fx.stderr
        # Its workers were told the instance stops (end of file on their lifeline): they drain and leave.
        eventually(lambda: not any(alive(pid) for pid in pids), "the workers to exit")
        eventually(lambda: fx.stderr.count("stops: instance") == 2, "both workers' drains")
