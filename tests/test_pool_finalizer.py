"""A gateway pool finalized while another event loop runs on the blocking caller's thread.

A blocking caller (`fairwins-mcp check`, core.steps.run) keeps its own loop between calls, and the
pool of a transport that is collected is closed by a finalizer, which the collector may run
anywhere: here, inside another loop running on the same thread. Whatever it leaves must not end
that thread's next blocking call.
"""

from __future__ import annotations

import asyncio
import gc
from typing import Any

from mcp_server.upstream import aio
from tests.conftest import client_for
from tests.sandbox_gateway import TOKEN_MEMBER_A, SandboxGateway


def wagers(result: dict[str, Any]) -> object:
    assert result.get("isError") is not True, result
    return result["structuredContent"]


def test_a_pool_dropped_inside_another_loop_leaves_the_threads_next_call_whole() -> None:
    with SandboxGateway() as gateway:
        first = client_for(gateway.url)
        expected = wagers(first.call_tool("get_wagers", bearer=TOKEN_MEMBER_A))  # pools a connection
        assert aio._THREAD.loop is not None and not aio._THREAD.loop.is_running()

        async def collect_here() -> None:
            nonlocal first
            del first  # the last reference: the transport and its pool are collected inside this loop
            gc.collect()

        asyncio.run(collect_here())
        gc.collect()
        again = client_for(gateway.url)
        assert wagers(again.call_tool("get_wagers", bearer=TOKEN_MEMBER_A)) == expected
        assert wagers(again.call_tool("get_wagers", bearer=TOKEN_MEMBER_A)) == expected
    gc.collect()
