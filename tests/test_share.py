"""The large answers' share of the core (http/share.py): kept while small calls are served, never otherwise."""

from __future__ import annotations

import pytest

from mcp_server.transports.http.share import BURST, RECENT, SHARE, Share


def _run_large_answers(share: Share, cost: float, seconds: float, small_calls: bool) -> float:
    """Large answers one after another, each waiting its turn, for `seconds` of a simulated clock: CPU spent."""
    now, spent = 1000.0, 0.0
    while now < 1000.0 + seconds:
        if small_calls:
            share.small_answered(now)
        now += share.wait(now)
        if now >= 1000.0 + seconds:
            break
        spent += cost
        now += cost
        share.spent(cost, now)
    return spent


@pytest.mark.parametrize("cost", [0.005, 0.05, 0.3])
def test_while_small_calls_are_answered_large_answers_take_no_more_than_their_share(cost: float) -> None:
    seconds = 20.0
    spent = _run_large_answers(Share(), cost, seconds, small_calls=True)
    assert spent <= SHARE * seconds + BURST + cost
    assert spent >= SHARE * seconds * 0.9  # and not much less: the share is there to be used


def test_with_no_small_call_about_a_large_answer_never_waits_and_owes_nothing_after() -> None:
    share = Share()
    spent = _run_large_answers(share, 0.05, 5.0, small_calls=False)
    assert spent >= 5.0  # the whole core
    now = 2000.0
    share.small_answered(now)
    # Small calls come back: what large answers took of the idle core is not owed, one answer's at most.
    assert share.wait(now) <= 0.05 / SHARE


def test_the_share_applies_only_within_a_moment_of_a_small_call() -> None:
    share = Share()
    share.small_answered(10.0)
    share.spent(0.5, 10.0)
    assert share.wait(10.0) == pytest.approx((0.5 - BURST) / SHARE)
    assert share.wait(10.0 + RECENT + 0.01) == 0.0  # no small call since: nothing waits
    later = 10.0 + (0.5 - BURST) / SHARE
    share.small_answered(later)
    assert share.wait(later) == pytest.approx(0.0, abs=1e-9)  # the budget refilled meanwhile
