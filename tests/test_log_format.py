"""stderr logging: the text and JSON forms, the buffered stderr handler, and the short LogRecord of a record."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import random
import re
import select
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

import pytest

from mcp_server.ops import logs, records
from mcp_server.ops.records import Record
from mcp_server.wire.jsonrpc import Request
from tests.conftest import ROOT, server_env
from tests.secret_canaries import CANARY_TOKEN

WAIT = 10.0

# Windows' select() takes sockets only, and a pipe there cannot be made non-blocking.
PIPE_WAIT: Final = pytest.mark.posix("waits on a pipe with select() or reads it non-blocking")


def a_record() -> Record:
    record = Record("stdio")
    record.begin(Request(7, "tools/call", {"name": "get_wagers"}))
    record.target("tool", "get_wagers")
    record.version = "2025-11-25"
    record.reply({"result": {"isError": False}})
    return record


def test_the_text_form_is_time_level_logger_and_message() -> None:
    formatter = logs.TextFormatter()
    line = formatter.format(logging.LogRecord("fairwins_mcp.x", logging.INFO, "", 0, "hello %s", ("you",), None))
    stamp, (level, name, message) = line[:23], line[24:].split(" ", 2)
    assert stamp[4] == "-" and stamp[10] == " " and stamp[19] == ","
    assert (level, name, message) == ("INFO", "fairwins_mcp.x:", "hello you")


def test_a_json_line_carries_cloud_loggings_fields_and_a_traceback_in_its_message() -> None:
    formatter = logs.JsonFormatter("proj")
    try:
        raise ValueError("boom")
    except ValueError:
        exc = sys.exc_info()
    entry = json.loads(
        formatter.format(logging.LogRecord("fairwins_mcp.protocol", logging.ERROR, "", 0, "failed", (), exc))
    )
    assert entry["severity"] == "ERROR" and entry["logger"] == "fairwins_mcp.protocol"
    assert entry["message"].startswith("failed\nTraceback") and "ValueError: boom" in entry["message"]
    assert entry["time"].endswith("Z") and "T" in entry["time"]


def test_a_registered_secret_is_scrubbed_from_every_json_field() -> None:
    logs.register_secret(CANARY_TOKEN)
    record = a_record()
    record.client = {"name": CANARY_TOKEN, "version": "1"}  # nothing puts one there; the formatter still scrubs
    formatter = logs.JsonFormatter()
    log_record = logging.LogRecord("fairwins_mcp.access", logging.INFO, "", 0, record, (), None)
    log_record.mcp_record = record
    line = formatter.format(log_record)
    assert CANARY_TOKEN not in line and logs.redact(CANARY_TOKEN) in json.loads(line)["client"]["name"]


@contextmanager
def pipe_handler() -> Iterator[tuple[logs.StderrHandler, int]]:
    read_fd, write_fd = os.pipe()
    handler = logs.StderrHandler(write_fd)
    handler.setFormatter(logs.TextFormatter())
    try:
        yield handler, read_fd
    finally:
        handler.close()  # closes write_fd
        os.close(read_fd)


def read_within(fd: int, timeout: float) -> bytes:
    ready, _, _ = select.select([fd], [], [], timeout)
    assert ready, f"nothing written within {timeout} s"
    return os.read(fd, 65536)


def line(level: int, text: str) -> logging.LogRecord:
    return logging.LogRecord("fairwins_mcp.x", level, "", 0, text, (), None)


@PIPE_WAIT
def test_lines_are_written_in_order_within_the_flush_interval_a_warning_without_waiting_for_it() -> None:
    with pipe_handler() as (handler, fd):
        handler.handle(line(logging.INFO, "routine"))
        assert read_within(fd, logs.FLUSH_AFTER + WAIT).endswith(b"INFO fairwins_mcp.x: routine\n")
        handler.handle(line(logging.INFO, "before"))
        handler.handle(line(logging.WARNING, "urgent"))
        data = b""
        while data.count(b"\n") < 2:
            data += read_within(fd, WAIT)
        assert [row.split(b": ", 1)[1] for row in data.splitlines()] == [b"before", b"urgent"]


def test_a_stderr_nobody_reads_never_blocks_a_logging_thread_and_the_loss_is_counted() -> None:
    with pipe_handler() as (handler, fd):
        text = "x" * 1000
        done = threading.Event()

        def flood() -> None:
            # Past the pipe's 64 KiB and the bound, in two halves with the writer's flush between
            # them: the half it has taken and cannot write still counts against the bound.
            half = (logs.MAX_WAITING // 1000 + 200) // 2
            for n in range(2 * half):
                if n == half:
                    time.sleep(3 * logs.FLUSH_AFTER)
                handler.handle(line(logging.INFO, text))
            done.set()

        threading.Thread(target=flood, daemon=True).start()
        assert done.wait(WAIT), "a thread logging to a stderr nobody reads was blocked"
        data = bytearray()
        noted = threading.Event()

        def read_all() -> None:  # reading again lets the writer go on, and it says what it lost
            try:
                while chunk := os.read(fd, 65536):
                    data.extend(chunk)
                    if b"were dropped" in data:
                        noted.set()
            except OSError:
                return  # the test closed the pipe

        reader = threading.Thread(target=read_all, daemon=True)
        reader.start()
        assert noted.wait(WAIT), "no line said that lines were dropped"
        # The reader ends at the end of the stream, before the pipe is closed: a thread still
        # reading that descriptor number afterwards would take the next test's pipe's bytes.
        handler.close()
        reader.join(WAIT)
        assert not reader.is_alive()
    note = next(row for row in bytes(data).splitlines() if b"were dropped" in row)
    assert b"WARNING fairwins_mcp.logs: " in note and int(note.split(b": ")[1].split()[0]) > 0


@PIPE_WAIT
def test_flush_waits_until_everything_queued_is_written() -> None:
    with pipe_handler() as (handler, fd):
        for n in range(50):
            handler.handle(line(logging.INFO, f"n{n}"))
        handler.flush()
        os.set_blocking(fd, False)
        data = os.read(fd, 65536)
    assert data.count(b"\n") == 50 and data.endswith(b"n49\n")


@PIPE_WAIT
def test_lines_from_many_threads_arrive_whole() -> None:
    with pipe_handler() as (handler, fd):
        start = threading.Barrier(4)

        def write(n: int) -> None:
            start.wait(timeout=WAIT)
            for i in range(100):  # 400 lines in all: under a pipe's 64 KiB
                handler.handle(line(logging.INFO, f"t{n}-{i}-" + "x" * 80))

        threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=WAIT)
        handler.flush()
        data = b""
        while data.count(b"\n") < 400:
            data += read_within(fd, WAIT)
    rows = data.decode().splitlines()
    assert len(rows) == 400 and all(row.endswith("-" + "x" * 80) for row in rows)


@pytest.mark.parametrize("formatter", [logs.TextFormatter(), logs.JsonFormatter()], ids=["text", "json"])
def test_the_short_log_record_formats_exactly_as_logging_would(
    monkeypatch: pytest.MonkeyPatch, formatter: logging.Formatter
) -> None:
    # As logs.configure leaves logging, and with no record factory of anybody else's.
    monkeypatch.setattr(logging, "logThreads", False)
    monkeypatch.setattr(logging, "logProcesses", False)
    monkeypatch.setattr(logging, "logMultiprocessing", False)
    monkeypatch.setattr(logging, "_srcfile", None)
    previous = logging.getLogRecordFactory()
    logging.setLogRecordFactory(logging.LogRecord)
    made: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, log_record: logging.LogRecord) -> None:
            made.append(log_record)

    keep = Keep()
    records.access.addHandler(keep)
    try:
        record = a_record()
        assert records._short_records()
        records.finish(record)
        records.access.log(logging.INFO, record, extra={"mcp_record": record})
    finally:
        records.access.removeHandler(keep)
        logging.setLogRecordFactory(previous)
    short, usual = made
    assert type(short) is not logging.LogRecord and type(usual) is logging.LogRecord
    moments = ("created", "msecs", "relativeCreated")
    assert {k: getattr(short, k) for k in vars(usual) if k not in moments} == {
        k: v for k, v in vars(usual).items() if k not in moments
    }
    short.created, short.msecs = usual.created, usual.msecs
    assert formatter.format(short) == formatter.format(usual)


@PIPE_WAIT
def test_written_in_place_no_writer_thread_runs_and_each_line_is_written_at_once() -> None:
    with pipe_handler() as (handler, fd):
        handler.handle(line(logging.INFO, "queued"))  # starts the writer thread
        before = threading.active_count()
        handler.write_in_place()  # what the --workers supervisor asks before it forks
        assert threading.active_count() == before - 1
        handler.handle(line(logging.INFO, "in place"))
        assert threading.active_count() == before - 1
        os.set_blocking(fd, False)
        data = os.read(fd, 65536)
    rows = data.splitlines()
    assert len(rows) == 2 and rows[0].endswith(b": queued") and rows[1].endswith(b": in place")


@PIPE_WAIT
def test_a_message_record_is_formatted_by_the_writer_thread_not_the_one_that_answered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    formatted_on: list[str] = []
    real = Record._render
    monkeypatch.setattr(
        Record, "_render", lambda self: formatted_on.append(threading.current_thread().name) or real(self)
    )
    with pipe_handler() as (handler, fd):
        log_record = logging.LogRecord("fairwins_mcp.access", logging.INFO, "", 0, a_record(), (), None)
        log_record.mcp_record = log_record.msg
        handler.handle(log_record)
        assert formatted_on == []  # queued as it is
        row = read_within(fd, logs.FLUSH_AFTER + WAIT)
    assert formatted_on == ["fairwins-mcp-log"]
    assert row.endswith(
        b"tools/call tool=get_wagers outcome=result ms="
        + row.split(b"ms=")[1].split(b" ")[0]
        + b" rev=2025-11-25 id=7\n"
    )


def test_closing_twice_never_closes_a_descriptor_reused_since() -> None:
    # logging.shutdown closes every handler again at exit: by then the number may name another file.
    read_fd, write_fd = os.pipe()
    handler = logs.StderrHandler(write_fd)
    handler.close()
    again_r, again_w = os.pipe()  # the lowest free numbers: the ones just closed
    try:
        assert write_fd in (again_r, again_w)
        handler.close()
        for fd in (again_r, again_w):
            os.fstat(fd)  # still open
    finally:
        for fd in (read_fd, again_r, again_w):
            os.close(fd)


def test_a_line_sent_ahead_is_written_before_a_long_backlog_of_message_records() -> None:
    backlog = 12 * logs.FORMAT_SLICE  # ~300 KiB of access lines: the pipe (64 KiB) fills long before the end
    with pipe_handler() as (handler, fd):
        for _ in range(backlog):
            log_record = logging.LogRecord("fairwins_mcp.access", logging.INFO, "", 0, a_record(), (), None)
            log_record.mcp_record = log_record.msg
            handler.handle(log_record)
        ahead = line(logging.INFO, "stopping: no new connections")
        ahead.__dict__.update(logs.AHEAD)
        handler.handle(ahead)
        data = bytearray()
        while data.count(b"\n") < backlog + 1:
            data += read_within(fd, WAIT)
    rows = bytes(data).splitlines()
    assert len(rows) == backlog + 1 and all(b"tools/call" in row for row in rows if b"stopping" not in row)
    at = next(n for n, row in enumerate(rows) if row.endswith(b"INFO fairwins_mcp.x: stopping: no new connections"))
    # Written at the first slice boundary after it was logged, not behind the whole backlog.
    assert at < backlog - logs.FORMAT_SLICE, f"the line sent ahead came {at}th of {backlog + 1}"


def test_written_in_place_a_stderr_gone_leaves_the_logging_thread_free() -> None:
    # The --workers supervisor writes in place: a closed stderr must not hang the loop that logs.
    read_fd, write_fd = os.pipe()
    handler = logs.StderrHandler(write_fd)
    handler.setFormatter(logs.TextFormatter())
    handler.write_in_place()
    os.close(read_fd)  # nobody will ever read: a write fails with EPIPE
    done = threading.Event()

    def log_twice() -> None:
        handler.handle(line(logging.WARNING, "worker 0 (pid 1) exited with code 1"))
        handler.handle(line(logging.WARNING, "and again"))
        done.set()

    threading.Thread(target=log_twice, daemon=True).start()
    finished = done.wait(WAIT)
    if finished:  # else the handler's lock is held for good: closing it would hang this test too
        handler.close()
    assert finished, "logging in place to a closed stderr hung the thread that logged"


def ahead(text: str) -> logging.LogRecord:
    record = line(logging.INFO, text)
    record.__dict__.update(logs.AHEAD)
    return record


@pytest.mark.skipif(sys.platform == "win32", reason="Windows has no poll(): a line sent ahead goes to the writer")
def test_a_line_sent_ahead_is_written_by_the_thread_that_logs_it_when_stderr_takes_it_at_once() -> None:
    with pipe_handler() as (handler, fd):
        before = threading.active_count()
        handler.handle(ahead("stopping: no new connections"))
        assert threading.active_count() == before  # no writer thread was needed
        ready, _, _ = select.select([fd], [], [], 0)  # already there: no waiting at all
        assert ready and os.read(fd, 65536).endswith(b"INFO fairwins_mcp.x: stopping: no new connections\n")


def test_a_line_sent_ahead_never_waits_on_a_full_stderr() -> None:
    with pipe_handler() as (handler, fd):
        os.set_blocking(handler.fd, False)
        filled = 0
        try:
            while True:  # fill the pipe to the brim, as a client that never reads stderr would
                filled += os.write(handler.fd, b"x" * 4096)
        except BlockingIOError:
            pass
        os.set_blocking(handler.fd, True)
        done = threading.Event()

        def log_it() -> None:
            handler.handle(ahead("stopping: no new connections"))
            done.set()

        threading.Thread(target=log_it, daemon=True).start()
        assert done.wait(WAIT), "a line sent ahead waited for a stderr nobody reads"
        data = bytearray()
        while not data.endswith(b"stopping: no new connections\n"):
            data += read_within(fd, WAIT)  # once read, the writer thread delivers it
    rest = bytes(data[filled:])
    assert bytes(data[:filled]) == b"x" * filled  # the line whole, after what filled the pipe
    assert rest.count(b"\n") == 1 and rest.endswith(b"INFO fairwins_mcp.x: stopping: no new connections\n")


_WRITER = """
import logging, sys
from mcp_server.ops import logs
handler = logs.StderrHandler(int(sys.argv[1]))
handler.setFormatter(logging.Formatter("%(message)s"))
log = logging.getLogger("fairwins_mcp.x")
log.addHandler(handler)
log.setLevel(logging.INFO)
for n in range(int(sys.argv[3])):
    log.info("writer %s line %d %s end", sys.argv[2], n, "x" * (n % 300))
handler.close()
"""


@PIPE_WAIT
def test_lines_from_several_processes_on_one_pipe_never_mix() -> None:
    # --workers: every process writes the one stderr. A write of more than PIPE_BUF bytes may be
    # cut by another process's when the pipe is full; lines must still arrive whole.
    writers, lines = 3, 4000
    read_fd, write_fd = os.pipe()
    if hasattr(fcntl, "F_SETPIPE_SZ"):  # Linux: a one-page pipe, full most of the time
        fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, 4096)
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(write_fd), str(n), str(lines)],
            pass_fds=(write_fd,),
            cwd=ROOT,
            env=server_env(),
        )
        for n in range(writers)
    ]
    os.close(write_fd)
    data = bytearray()
    try:
        while chunk := os.read(read_fd, 512):  # a slow reader: the pipe stays full, the writers wait
            data += chunk
    finally:
        os.close(read_fd)
        for child in children:
            assert child.wait(WAIT) == 0
    seen: dict[str, list[int]] = {str(n): [] for n in range(writers)}
    for text in data.decode().splitlines():
        match = re.fullmatch(r"writer (\d) line (\d+) (x*) end", text)
        assert match is not None and len(match.group(3)) == int(match.group(2)) % 300, f"a mixed line: {text[:200]!r}"
        seen[match.group(1)].append(int(match.group(2)))
    assert all(numbers == list(range(lines)) for numbers in seen.values())


def test_whole_lines_cut_only_after_a_line_end_and_lose_nothing() -> None:
    rng = random.Random(5)
    for _ in range(500):
        data = b"".join(b"y" * rng.choice([0, 3, 100, 600]) + b"\n" for _ in range(rng.randint(0, 30)))
        data += b"z" * rng.choice([0, 5])  # an unfinished last line, as it is
        most = rng.choice([8, 64, 512])
        pieces = list(logs.whole_lines(data, most))
        assert b"".join(pieces) == data
        for piece in pieces[:-1]:
            assert piece.endswith(b"\n")
            assert len(piece) <= most or piece.count(b"\n") == 1  # longer: one line alone
