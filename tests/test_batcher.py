"""The service's in-process batcher: FIFO, whole requests up to the batch bound, one model call per
batch, answers split back in order, clients that left skipped, a failing document isolated."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from toolkit.deploy.batcher import ModelBatcher


class FakeModel:
    """Answers each document with its upper-case form; records every call. `gate` holds the first call
    until the test releases it, so requests pile up behind it."""

    def __init__(self, fail_on: str | None = None, hold_first: bool = False):
        self.calls: list[list[str]] = []
        self.fail_on = fail_on
        self.gate = threading.Event()
        if not hold_first:
            self.gate.set()

    def __call__(self, docs: list[str]) -> list[str]:
        self.calls.append(list(docs))
        if len(self.calls) == 1:
            self.gate.wait(5)
        if self.fail_on in docs:
            raise ValueError(f"cannot read {self.fail_on!r}")
        return [d.upper() for d in docs]


async def behind_a_held_call(model: FakeModel, batcher: ModelBatcher, requests: list[list[str]], before_release=None):
    """Submit ["x"] (held in the model), then `requests`, which wait behind it; call `before_release`
    with their tasks, release the model, and return (the first answer, the others' answers or errors)."""
    first = asyncio.ensure_future(batcher.submit(["x"], "held"))
    await asyncio.sleep(0.05)  # the first is in the model; the others queue behind it
    waiting = [asyncio.ensure_future(batcher.submit(docs, f"r{i}")) for i, docs in enumerate(requests)]
    await asyncio.sleep(0.05)
    if before_release:
        before_release(waiting)
    model.gate.set()
    return await first, await asyncio.gather(*waiting, return_exceptions=True)


def test_waiting_requests_share_one_call_and_get_their_own_answers_in_order():
    model = FakeModel(hold_first=True)
    batcher = ModelBatcher(model, max_batch_docs=8)
    first, rest = asyncio.run(behind_a_held_call(model, batcher, [["b", "c"], ["d"], ["e", "f", "g"]]))
    assert first == ["X"] and rest == [["B", "C"], ["D"], ["E", "F", "G"]]
    assert model.calls == [["x"], ["b", "c", "d", "e", "f", "g"]] and batcher.batches == 2
    batcher.close()


def test_a_batch_holds_whole_requests_up_to_the_bound_in_arrival_order():
    model = FakeModel(hold_first=True)
    batcher = ModelBatcher(model, max_batch_docs=3)
    _, answers = asyncio.run(behind_a_held_call(model, batcher, [["a", "b"], ["c", "d"], ["e"], ["f", "g", "h", "i"]]))
    assert answers == [["A", "B"], ["C", "D"], ["E"], ["F", "G", "H", "I"]]
    # [a b] + [c d] would pass 3: c d waits for the next call; a request larger than the bound goes alone.
    assert model.calls[1:] == [["a", "b"], ["c", "d", "e"], ["f", "g", "h", "i"]]
    batcher.close()


def test_a_request_whose_client_left_before_its_turn_is_not_run():
    model = FakeModel(hold_first=True)
    batcher = ModelBatcher(model, max_batch_docs=8)
    _, (gone, kept) = asyncio.run(
        behind_a_held_call(model, batcher, [["gone"], ["kept"]], before_release=lambda tasks: tasks[0].cancel())
    )
    assert kept == ["KEPT"] and isinstance(gone, asyncio.CancelledError)
    assert ["gone"] not in model.calls and all("gone" not in call for call in model.calls)
    batcher.close()


def test_a_document_that_breaks_the_model_fails_only_its_own_request():
    model = FakeModel(fail_on="poison", hold_first=True)
    batcher = ModelBatcher(model, max_batch_docs=8)

    async def main():
        _, results = await behind_a_held_call(model, batcher, [["ok"], ["poison"], ["fine"]])
        # The batcher still answers after the failure.
        return results, await batcher.submit(["after"], "after")

    (good, bad, also), after = asyncio.run(main())
    assert good == ["OK"] and also == ["FINE"] and after == ["AFTER"]
    assert isinstance(bad, ValueError) and "poison" in str(bad)
    batcher.close()


def test_many_concurrent_requests_are_each_answered_once():
    model = FakeModel()
    batcher = ModelBatcher(model, max_batch_docs=16)

    async def main():
        async def client(k: int):
            out = []
            for i in range(20):
                out.append(await batcher.submit([f"doc-{k}-{i}"], f"{k}-{i}"))
            return out

        return await asyncio.gather(*(client(k) for k in range(40)))

    started = time.perf_counter()
    answers = asyncio.run(main())
    assert time.perf_counter() - started < 30
    assert answers == [[[f"DOC-{k}-{i}"] for i in range(20)] for k in range(40)]
    assert sum(len(c) for c in model.calls) == 800 and batcher.batches == len(model.calls) < 800
    batcher.close()


@pytest.mark.parametrize("bound", [1, 2])
def test_the_bound_is_never_passed_by_more_than_one_request(bound):
    model = FakeModel()
    batcher = ModelBatcher(model, max_batch_docs=bound)

    async def main():
        return await asyncio.gather(*(batcher.submit([str(i)], str(i)) for i in range(10)))

    assert asyncio.run(main()) == [[str(i)] for i in range(10)]
    assert all(len(call) <= bound for call in model.calls)
    batcher.close()


def test_a_fault_after_the_model_call_fails_the_batch_instead_of_leaving_it_waiting():
    batcher = ModelBatcher(lambda docs: None, max_batch_docs=4)  # an answer that cannot be split

    async def main():
        first = await asyncio.gather(batcher.submit(["a"], "a"), batcher.submit(["b"], "b"), return_exceptions=True)
        return first

    answers = asyncio.run(asyncio.wait_for(main(), timeout=10))
    assert all(isinstance(a, TypeError) for a in answers)
    batcher.close()
