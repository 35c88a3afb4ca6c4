"""Exceptions made values: what a caught failure keeps as a verdict.

A raised exception carries its traceback, and the traceback every frame it crossed, with their
locals: the gateway connection, the request's bytes, the client's connection and its buffers. An
exception that is caught and kept (a gateway failure handed to the retry policy as a value, a
cancelled call's reason) would keep all of that alive; and since the frame that keeps it is among
those its traceback holds, it is a cycle that reference counting never frees and the collector
(ops/heap.py's large young generation) frees late (BENCHMARKS.md). So a failure kept as a value
keeps its type, its message and its fields, and nothing of where it was raised.
"""

from __future__ import annotations

from typing import TypeVar

E = TypeVar("E", bound=BaseException)


def as_value(exc: E) -> E:
    """`exc` as a verdict, not a trace: no traceback, cause or context."""
    exc.__traceback__ = None
    exc.__context__ = None
    exc.__cause__ = None
    return exc
