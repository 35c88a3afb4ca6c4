"""A 2025-03-26 batch run within its bounds: a number of items, one deadline, the client leaving, answers held.

One batch costs no more than one request may: its items run one after another (one request
slot, one gateway call at a time), all within one deadline; when the client leaves, the call in
flight is cancelled and nothing more runs; answers are encoded as they are made and at most
`max_answer_bytes` of them are held; and no payment is forwarded from a batch at all (one
payment is spent once: it cannot ride on several calls, and a batch could carry many).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from mcp_server.core.context import PaymentAllowance, RequestContext
from mcp_server.ops.watchdog import WATCHDOG
from mcp_server.wire.cancellation import Cancellation
from mcp_server.wire.jsonrpc import (
    INTERNAL_ERROR,
    REQUEST_TIMEOUT,
    SERVER_ERROR,
    Encoded,
    Invalid,
    JSONObject,
    Message,
    Request,
    dumps,
    error_object,
    error_response,
)

log = logging.getLogger("fairwins_mcp.protocol")

MIB: Final = 1024 * 1024
NO_PAYMENT: Final = "a payment cannot be carried on a batch; send the paid call on its own"


@dataclass(frozen=True, slots=True)
class BatchLimits:
    """What one batch may cost: its items, its time (the time one call gets), and the answers held for it."""

    max_items: int = 64
    deadline: float = 10.0  # seconds, for the whole batch
    max_answer_bytes: int = 16 * MIB


DEFAULT_BATCH_LIMITS: Final = BatchLimits()


def _error(item: Message, code: int, message: str) -> bytes | None:
    """The encoded error answering `item`, or None when it is a notification or a response (never answered)."""
    if isinstance(item, (Request, Invalid)):
        return dumps(error_response(item.id, error_object(code, message)))
    return None


def _encode(message: JSONObject) -> bytes:
    try:
        return dumps(message)
    except (ValueError, TypeError):
        # A value JSON cannot carry must not leave the request unanswered: it becomes -32603.
        log.exception("an answer in a batch could not be encoded as JSON")
        return dumps(error_response(message.get("id"), error_object(INTERNAL_ERROR, "Internal error")))


def run(
    items: Sequence[Message],
    limits: BatchLimits,
    cancellation: Cancellation,
    make_ctx: Callable[[], RequestContext],
    answer: Callable[[Message, RequestContext], JSONObject | None],
) -> Encoded | None:
    """Every item answered in order (None: nothing to send, or the client has gone)."""
    allowance = PaymentAllowance(closed=NO_PAYMENT)
    expired = threading.Event()
    lock = threading.Lock()
    running: list[RequestContext] = []

    def expire() -> None:
        expired.set()
        with lock:
            current = list(running)
        for ctx in current:
            ctx.cancellation.cancel()

    timer = WATCHDOG.schedule(time.monotonic() + limits.deadline, expire)
    parts: list[bytes] = []
    held = 2  # the brackets
    full = False
    late = f"Request timed out: the batch's {limits.deadline:g} s deadline passed before this call"
    budget = limits.max_answer_bytes // MIB
    try:
        for item in items:
            if cancellation.is_set:
                return None  # the client left: nobody will read the answer
            if (expired.is_set() or full) and not isinstance(item, Invalid):
                refusal = (
                    _error(item, REQUEST_TIMEOUT, f"{late} ran; it was not run")
                    if expired.is_set()
                    else _error(
                        item,
                        SERVER_ERROR,
                        f"Server error: the batch's answers reached this server's {budget} MiB limit before this "
                        "call ran; it was not run: send it on its own",
                    )
                )
                if refusal is not None:
                    parts.append(refusal)
                continue
            ctx = make_ctx()
            ctx.payment_allowance = allowance
            unlink = cancellation.on_cancel(ctx.cancellation.cancel)
            with lock:
                running.append(ctx)
            try:
                message = answer(item, ctx)
            finally:
                unlink()
                with lock:
                    running.clear()
            if cancellation.is_set:
                return None
            if ctx.cancellation.is_set:  # cut short by the deadline
                refusal = _error(item, REQUEST_TIMEOUT, f"{late} finished; it was cancelled")
                if refusal is not None:
                    parts.append(refusal)
                continue
            if message is None:
                continue
            data = _encode(message)
            if held + len(data) + 1 > limits.max_answer_bytes:
                full = True
                data = dumps(
                    error_response(
                        message.get("id"),
                        error_object(
                            SERVER_ERROR,
                            f"Server error: this call ran, but its answer would take the batch's answers over this "
                            f"server's {budget} MiB limit, so it was dropped: send it on its own",
                        ),
                    )
                )
            parts.append(data)
            held += len(data) + 1
    finally:
        timer.cancel()
    if not parts:
        return None
    return Encoded(b"[" + b",".join(parts) + b"]")
