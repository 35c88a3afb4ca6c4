"""The buffer a loop's protocol objects read every socket into, per thread.

A plain asyncio.Protocol is handed a new bytes object for every read, made at the transport's
256 KiB maximum and then shrunk to what arrived. That size is past glibc's mmap threshold, so
each read of each socket cost an mmap, a page fault, an mremap and a munmap (strace, 1,000
connections). A BufferedProtocol names the buffer the transport reads into instead: the bytes are
copied out of it, at their own size, before the loop reads anything else, so one buffer per
thread serves every connection on that thread's loop.
"""

from __future__ import annotations

import threading
from typing import Final

SIZE: Final = 64 * 1024  # one read's most: a large answer takes a few reads, as it takes a few segments

_local = threading.local()


def receive_buffer() -> memoryview:
    """This thread's buffer, valid until the loop reads again: copy out first."""
    view: memoryview | None = getattr(_local, "view", None)
    if view is None:
        view = _local.view = memoryview(bytearray(SIZE))
    return view
