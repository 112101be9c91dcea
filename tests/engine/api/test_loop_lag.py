"""The API loop's own lag (engine/api/aio_server.py `watch_lag`): a loop too busy to read
heartbeats tells the store how long, so the leases of the nodes it kept waiting are pardoned."""

from __future__ import annotations

import asyncio
import time

from ccattler.engine.api.aio_server import watch_lag


def test_a_blocked_loop_reports_its_lag_and_a_free_one_does_not():
    lags: list[float] = []

    async def scenario() -> None:
        task = asyncio.create_task(watch_lag(lags.append, tick=0.05, grace=0.3))
        await asyncio.sleep(0.3)
        assert lags == []  # an idle loop is on time
        time.sleep(0.8)  # the loop is busy: nothing else runs, heartbeats would wait
        await asyncio.sleep(0.2)
        task.cancel()

    asyncio.run(scenario())
    assert len(lags) == 1 and lags[0] > 0.3


def test_a_failing_callback_does_not_end_the_watch():
    calls: list[float] = []

    def closing(late: float) -> int:
        calls.append(late)
        raise RuntimeError("store closed")

    async def scenario() -> None:
        task = asyncio.create_task(watch_lag(closing, tick=0.05, grace=0.1))
        await asyncio.sleep(0.1)  # the watch is running
        for _ in range(2):
            time.sleep(0.3)
            await asyncio.sleep(0.15)
        assert not task.done()
        task.cancel()

    asyncio.run(scenario())
    assert len(calls) == 2
