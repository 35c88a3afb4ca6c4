"""Does closing a listening socket lose requests? Three ways to stop accepting, under a storm of new connections.

    python3 -m bench.accept_close --rounds 20 --clients 32

Each round: a listener (mcp_server.ops.listener.listen) served by an accept loop; --clients threads
each open a new connection, send a request at once and read the answer, over and over; after
--run seconds the server stops accepting in one of three ways:

  close     stop the accept loop and close the listener (what socketserver's shutdown does)
  drain     accept until the queue is empty, then close
  filter    drop new SYNs (mcp_server.ops.listener.refuse_new), accept what is queued until quiet, then close

Every connection ends as `ok` (answered), `refused` (connect failed: nothing was sent, so a
balancer retries it elsewhere) or `lost` (the request was sent and the connection was reset or
closed without an answer: what a balancer answers 502 for a POST). Prints the lost count per
way. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import select
import selectors
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence

from mcp_server.ops import listener as listening

REQUEST = b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"


def _accept_queued(
    sock: socket.socket, handle: Callable[[socket.socket, object], None], *, settle: float, limit: float
) -> int:
    """Accept and hand over queued connections until none came for `settle` s.

    At most `limit` s; returns the count. After `refuse_new`, only handshakes already under way can
    still complete: `settle` covers their last round trip. Other processes sharing the socket may
    win some connections: fine.
    """
    accepted = 0
    end = time.monotonic() + limit
    quiet_until = time.monotonic() + settle
    with selectors.DefaultSelector() as selector:
        try:
            selector.register(sock, selectors.EVENT_READ)
        except (OSError, ValueError):
            return 0  # the socket is closed already
        while True:
            now = time.monotonic()
            # One look at the queue even when there is no time to wait: what is queued is taken in.
            if accepted and (now >= quiet_until or now >= end):
                return accepted
            selector.select(max(0.0, min(quiet_until, end) - now))
            taken = _accept_all(sock, handle, end)
            accepted += taken
            if taken:
                quiet_until = time.monotonic() + settle
            elif time.monotonic() >= min(quiet_until, end):
                return accepted


def _accept_all(sock: socket.socket, handle: Callable[[socket.socket, object], None], end: float) -> int:
    """Accept until the queue is empty (or `end`), handing each to `handle`."""
    accepted = 0
    while time.monotonic() < end:
        try:
            conn, address = sock.accept()
        except OSError:
            break  # the queue is empty (EAGAIN), or the socket failed
        accepted += 1
        handle(conn, address)
    return accepted


def _serve_one(conn: socket.socket) -> None:
    try:
        conn.setblocking(True)
        conn.settimeout(5)
        data = b""
        while not data.endswith(b"{}"):
            chunk = conn.recv(4096)
            if not chunk:
                return
            data += chunk
        conn.sendall(ANSWER)
    except OSError:
        pass
    finally:
        conn.close()


def _handle(conn: socket.socket, address: object) -> None:
    threading.Thread(target=_serve_one, args=(conn,), daemon=True).start()


def _client(port: int, stop: threading.Event, tally: Counter[str], lock: threading.Lock) -> None:
    while not stop.is_set():
        sock = socket.socket()
        sock.settimeout(3)
        try:
            sock.connect(("127.0.0.1", port))
        except OSError:
            outcome = "refused"
        else:
            try:
                sock.sendall(REQUEST)
                answer = b""
                while chunk := sock.recv(4096):
                    answer += chunk
                outcome = "ok" if answer.endswith(b"ok") else "lost"
            except OSError:
                outcome = "lost"
        finally:
            sock.close()
        with lock:
            tally[outcome] += 1
        if outcome == "refused":
            return  # the server is gone: this client's part of the round is over


def one_round(way: str, clients: int, run: float, settle: float) -> Counter[str]:
    sock = listening.listen("127.0.0.1", 0)
    port = sock.getsockname()[1]
    accepting = threading.Event()
    accepting.set()

    def accept_loop() -> None:
        while accepting.is_set():
            if select.select([sock], [], [], 0.01)[0]:
                try:
                    conn, address = sock.accept()
                except BlockingIOError:
                    continue
                _handle(conn, address)

    acceptor = threading.Thread(target=accept_loop, daemon=True)
    acceptor.start()
    tally: Counter[str] = Counter()
    lock = threading.Lock()
    stop = threading.Event()
    threads = [threading.Thread(target=_client, args=(port, stop, tally, lock), daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    time.sleep(run)
    accepting.clear()
    acceptor.join()
    if way == "drain":
        _accept_queued(sock, _handle, settle=0.0, limit=1.0)
    elif way == "filter":
        if not listening.refuse_new(sock):
            raise SystemExit("this platform has no socket filter")
        _accept_queued(sock, _handle, settle=settle, limit=5.0)
    sock.close()
    for t in threads:
        t.join(10)
    stop.set()
    return tally


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m bench.accept_close", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--run", type=float, default=0.3, help="seconds of load before each stop")
    parser.add_argument("--settle", type=float, default=0.2, help="filter: quiet time before closing, seconds")
    parser.add_argument("--ways", nargs="+", default=["close", "drain", "filter"])
    args = parser.parse_args(argv)
    totals: dict[str, Counter[str]] = {way: Counter() for way in args.ways}
    rounds_losing: Counter[str] = Counter()
    for _ in range(args.rounds):
        for way in args.ways:
            tally = one_round(way, args.clients, args.run, args.settle)
            totals[way] += tally
            rounds_losing[way] += bool(tally["lost"])
    for way in args.ways:
        row = {"way": way, "rounds": args.rounds, "rounds_losing": rounds_losing[way], **dict(totals[way])}
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
