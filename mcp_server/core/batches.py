"""A 2025-03-26 batch, run within its bounds.

The bounds: a number of items, one deadline, the client leaving, the answers held. One batch costs
no more than one request may: its items run one after another (one request slot, one gateway call
at a time), all within one deadline; when the client leaves, the call in flight is cancelled and
nothing more runs; answers are encoded as they are made and at most `max_answer_bytes` of them are
held; and no payment is forwarded from a batch at all (one payment is spent once: it cannot ride on
several calls, and a batch could carry many).

Every entry counts against both bounds, a malformed one (`1`, `{}`) as much as a call: each is
answered, so each costs an answer. The shortest answer every entry may get (its own error, or a
refusal) is set aside before anything runs, so the answers held never pass `max_answer_bytes`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from mcp_server.core import steps
from mcp_server.core.context import PaymentAllowance, RequestContext
from mcp_server.core.steps import Steps
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
    """What one batch may cost: its items, its time, and the answers held."""

    max_items: int = 64
    deadline: float = 10.0  # seconds, for the whole batch: the time one call gets
    max_answer_bytes: int = 16 * MIB


DEFAULT_BATCH_LIMITS: Final = BatchLimits()


def _size(n: int) -> str:
    return f"{n // MIB} MiB" if n % MIB == 0 else f"{n} bytes"


@dataclass(frozen=True, slots=True)
class _Refusals:
    """The four ways an entry is refused its own answer, worded once a batch."""

    not_run_late: str
    cancelled_late: str
    not_run_full: str
    dropped: str

    @classmethod
    def of(cls, limits: BatchLimits) -> _Refusals:
        late = f"Request timed out: the batch's {limits.deadline:g} s deadline passed before this call"
        budget = _size(limits.max_answer_bytes)
        return cls(
            not_run_late=f"{late} ran; it was not run",
            cancelled_late=f"{late} finished; it was cancelled",
            not_run_full=f"Server error: the batch's answers reached this server's {budget} limit before this "
            "call ran; it was not run: send it on its own",
            dropped=f"Server error: this call ran, but its answer would take the batch's answers over this "
            f"server's {budget} limit, so it was dropped: send it on its own",
        )

    def floor(self, item: Message) -> int:
        """Bytes set aside for `item`: its longest refusal and a comma, or 0."""
        if not isinstance(item, (Request, Invalid)):
            return 0
        ways = [(REQUEST_TIMEOUT, self.not_run_late), (REQUEST_TIMEOUT, self.cancelled_late)]
        ways += [(SERVER_ERROR, self.not_run_full), (SERVER_ERROR, self.dropped)]
        sizes = [len(dumps(error_response(item.id, error_object(code, text)))) for code, text in ways]
        if isinstance(item, Invalid):
            sizes.append(len(dumps(error_response(item.id, item.error))))
        return max(sizes) + 1


def over_limits(items: Sequence[Message], limits: BatchLimits) -> str | None:
    """Why a batch is refused whole, before anything runs; None if in bounds."""
    if len(items) > limits.max_items:
        return (
            f"Invalid Request: a batch of {len(items)} messages is over this server's limit of {limits.max_items} "
            f"per batch; nothing in it was run: send at most {limits.max_items} at a time"
        )
    refusals = _Refusals.of(limits)
    if 2 + sum(refusals.floor(item) for item in items) > limits.max_answer_bytes:
        return (
            f"Invalid Request: the shortest answers to this batch's {len(items)} messages would be over this "
            f"server's {_size(limits.max_answer_bytes)} limit for a batch's answers; nothing in it was run: "
            "send fewer at a time, or shorter ids"
        )
    return None


def _error(item: Message, code: int, message: str) -> bytes | None:
    """The encoded error answering `item`; None for a notification or response."""
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
    """`run_steps` with an `answer` that waits on this thread."""
    return steps.run(run_steps(items, limits, cancellation, make_ctx, lambda item, ctx: steps.done(answer(item, ctx))))


def run_steps(
    items: Sequence[Message],
    limits: BatchLimits,
    cancellation: Cancellation,
    make_ctx: Callable[[], RequestContext],
    answer: Callable[[Message, RequestContext], Steps[JSONObject | None]],
) -> Steps[Encoded | None]:
    """Every item answered in order (None: nothing to send, or client gone).

    `items` are ones `over_limits` let through: the room every later answer may need is always held
    back.
    """
    allowance = PaymentAllowance(closed=NO_PAYMENT)
    deadline = time.monotonic() + limits.deadline
    running: list[RequestContext] = []  # the item in flight, which the deadline cancels

    def expire() -> None:
        for ctx in running:
            ctx.cancellation.cancel()

    alarm = yield steps.Alarm(deadline, expire)
    refusals = _Refusals.of(limits)
    floors = [refusals.floor(item) for item in items]
    parts: list[bytes] = []
    held = 2  # the brackets
    later = sum(floors)  # set aside for the answers still to come
    full = False

    def keep(data: bytes | None) -> None:  # None: an entry never answered
        nonlocal held
        if data is None:
            return
        parts.append(data)
        held += len(data) + 1

    try:
        for item, floor in zip(items, floors, strict=True):
            later -= floor
            if cancellation.is_set:
                return None  # the client left: nobody will read the answer
            late = time.monotonic() >= deadline
            if (late or full) and not isinstance(item, Invalid):
                code, text = (REQUEST_TIMEOUT, refusals.not_run_late) if late else (SERVER_ERROR, refusals.not_run_full)
                keep(_error(item, code, text))
                continue
            ctx = make_ctx()
            ctx.payment_allowance = allowance
            unlink = cancellation.on_cancel(ctx.cancellation.cancel)
            running.append(ctx)
            try:
                message = yield from answer(item, ctx)
            finally:
                unlink()
                running.clear()
            if cancellation.is_set:
                return None
            if ctx.cancellation.is_set:  # cut short by the deadline
                keep(_error(item, REQUEST_TIMEOUT, refusals.cancelled_late))
                continue
            if message is None:
                continue
            data = _encode(message)
            if held + len(data) + 1 + later > limits.max_answer_bytes:
                full = True
                data = dumps(error_response(message.get("id"), error_object(SERVER_ERROR, refusals.dropped)))
            keep(data)
    finally:
        alarm.cancel()
    if not parts:
        return None
    return Encoded(b"[" + b",".join(parts) + b"]")
