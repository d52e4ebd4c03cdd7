"""How the API service waits for the model service: bounded, with resubmits.

Tagging has no side effects, so a call that did not get an answer can be sent again. Three ways a
call goes unanswered were seen under sustained load (docs/benchmarks.md, Export and serving):

- BentoML's batch dispatcher cancels a queued call by its own latency estimate (a 503);
- an internal connection is closed as it is reused (aiohttp's ServerDisconnectedError);
- a call gets no answer at all, without an error on either side (rare: 8 of 320 requests in one
  benchmark, one in a CI run). Without a deadline the request waited until the client gave up.

Each is retried a bounded number of times; then the caller answers 503 with Retry-After. Our own
loop rather than a retry library: the three cases have different budgets, and the deadline comes
from the admission bound (see `answer_deadline`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import TypeVar

import aiohttp
from bentoml.exceptions import BentoMLException

T = TypeVar("T")

logger = logging.getLogger("bentoml.toolkit")  # a child of bentoml's logger, so it lands in the service log

CANCELLED_RESUBMITS = 3
# Several pooled connections can go stale at once (the model service closes idle keep-alive
# connections that the client still holds), and each resubmit may draw another: at 64 clients three
# requests met three in a row, so two resubmits were not enough (docs/benchmarks.md, Issue 17).
DROPPED_RESUBMITS = 10
UNANSWERED_RESUBMITS = 1
RESUBMIT_DELAY_S = 0.05


class Unanswered(Exception):
    """The model service did not answer within the deadline, resubmits included."""


def answer_deadline(max_queue_seconds: float) -> float:
    """Seconds to wait for one model call. A call admitted under the bound waits for at most
    `max_queue_seconds` of work at the throughput measured at export; twice that plus 10 s leaves
    room for a machine slower than the one that measured it, and still answers (late, or 503)
    before a client's usual 120 s timeout."""
    return 2 * max_queue_seconds + 10


async def answer_with_resubmits(call: Callable[[], Awaitable[T]], deadline_s: float) -> T:
    """`await call()`, resubmitted when it is cancelled by the dispatcher, dropped by a closed
    connection or left without an answer past `deadline_s`; other errors pass through."""
    cancelled = dropped = unanswered = 0
    while True:
        try:
            return await asyncio.wait_for(call(), timeout=deadline_s)
        except asyncio.TimeoutError:
            unanswered += 1
            logger.warning("the model service did not answer within %.0f s (%d of %d resubmits)", deadline_s, unanswered, UNANSWERED_RESUBMITS)
            if unanswered > UNANSWERED_RESUBMITS:
                raise Unanswered(f"no answer within {deadline_s:.0f} s, {UNANSWERED_RESUBMITS} resubmit(s) included") from None
        except BentoMLException as exc:
            cancelled += 1
            if getattr(exc, "error_code", None) != HTTPStatus.SERVICE_UNAVAILABLE or cancelled > CANCELLED_RESUBMITS:
                raise
            await asyncio.sleep(RESUBMIT_DELAY_S)
        except aiohttp.ClientConnectionError:
            dropped += 1
            if dropped > DROPPED_RESUBMITS:
                raise
            await asyncio.sleep(RESUBMIT_DELAY_S)
