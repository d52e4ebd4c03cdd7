"""The API service's wait for the model service: bounded, and resubmitted where a call was lost."""

import asyncio
from http import HTTPStatus

import pytest

from toolkit.deploy.resubmit import CANCELLED_RESUBMITS, DROPPED_RESUBMITS, Unanswered, answer_deadline, answer_with_resubmits


def calls_that(*behaviours):
    """A model call whose n-th attempt hangs ("hang"), raises an exception, or answers a value."""
    attempts = []

    async def call():
        behaviour = behaviours[min(len(attempts), len(behaviours) - 1)]
        attempts.append(behaviour)
        if behaviour == "hang":
            await asyncio.sleep(3600)
        if isinstance(behaviour, BaseException):
            raise behaviour
        return behaviour

    return call, attempts


def test_a_call_left_without_an_answer_is_resubmitted_once():
    call, attempts = calls_that("hang", [["span"]])
    assert asyncio.run(answer_with_resubmits(call, deadline_s=0.1)) == [["span"]]
    assert attempts == ["hang", [["span"]]]


def test_a_call_that_never_answers_ends_in_unanswered(caplog):
    call, attempts = calls_that("hang")
    with caplog.at_level("WARNING", logger="bentoml.toolkit"), pytest.raises(Unanswered, match="no answer within"):
        asyncio.run(answer_with_resubmits(call, deadline_s=0.05))
    assert len(attempts) == 2 and "did not answer" in caplog.text


def test_dispatcher_cancellations_are_resubmitted_then_raised():
    from bentoml.exceptions import BentoMLException

    busy = BentoMLException("cancelled", error_code=HTTPStatus.SERVICE_UNAVAILABLE)
    call, attempts = calls_that(busy, busy, "ok")
    assert asyncio.run(answer_with_resubmits(call, deadline_s=5)) == "ok" and len(attempts) == 3
    call, attempts = calls_that(busy)
    with pytest.raises(BentoMLException):
        asyncio.run(answer_with_resubmits(call, deadline_s=5))
    assert len(attempts) == CANCELLED_RESUBMITS + 1


def test_dropped_connections_are_resubmitted_and_other_errors_pass_through():
    import aiohttp

    stale = aiohttp.ServerDisconnectedError()
    call, attempts = calls_that(stale, stale, stale, "ok")  # three stale pooled connections in a row (seen at 64 clients)
    assert asyncio.run(answer_with_resubmits(call, deadline_s=5)) == "ok" and len(attempts) == 4
    call, attempts = calls_that(stale)
    with pytest.raises(aiohttp.ServerDisconnectedError):
        asyncio.run(answer_with_resubmits(call, deadline_s=5))
    assert len(attempts) == DROPPED_RESUBMITS + 1
    call, attempts = calls_that(ValueError("bad input"))
    with pytest.raises(ValueError):
        asyncio.run(answer_with_resubmits(call, deadline_s=5))
    assert len(attempts) == 1


def test_the_deadline_leaves_room_past_the_admission_bound_and_before_a_client_timeout():
    assert 30 < answer_deadline(30) < 120
