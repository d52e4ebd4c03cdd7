"""Batching requests for one model inside the service's own process.

Requests wait in one FIFO; a single model thread takes what is waiting (whole requests, up to
`max_batch_docs` documents) and runs it as one `predict` call, while the event loop goes on accepting
requests. Our own rather than BentoML's batchable API: that one puts the model behind an internal HTTP
hop whose client rotates its connection pool under load (issue 26) and whose
dispatcher cancels queued calls by a latency estimate; here there is no hop, no cancellation, and every
request is answered once. The admission bound (serving.AdmissionQueue) keeps the FIFO finite.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

log = logging.getLogger("toolkit.serve")

# Most documents one model call takes (the service's and `toolkit serve`'s default; 1 turns batching off).
MAX_BATCH_DOCS = 32


@dataclass
class _Waiting:
    docs: list[str]
    future: asyncio.Future
    request_id: str
    queued_at: float = field(default_factory=time.perf_counter)


class ModelBatcher:
    """`await batcher.submit(docs, request_id)` -> `predict(docs)`'s answer for those documents.

    `predict` takes a list of documents and returns one answer per document, the same alone or in any
    batch (the toolkit's predictors are batch-invariant: tests/test_batch_invariance.py). A request whose
    client went away before its turn is skipped; one whose batch fails is retried alone, so a document
    that breaks the model fails only its own request."""

    def __init__(self, predict: Callable[[list[str]], Sequence], max_batch_docs: int = MAX_BATCH_DOCS):
        self.predict = predict
        self.max_batch_docs = max(1, max_batch_docs)
        self.waiting: deque[_Waiting] = deque()
        self.batches = 0  # model calls made; tests and the bench compare it with the requests
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="model")
        self._wakeup: asyncio.Event | None = None
        self._worker: asyncio.Task | None = None

    async def submit(self, docs: list[str], request_id: str = "-") -> list:
        loop = asyncio.get_running_loop()
        if self._worker is None or self._worker.done():
            self._wakeup = asyncio.Event()
            self._worker = loop.create_task(self._run(), name="model-batcher")
        item = _Waiting(list(docs), loop.create_future(), request_id)
        self.waiting.append(item)
        self._wakeup.set()
        return await item.future

    def _take(self) -> list[_Waiting]:
        """Whole requests from the front of the FIFO, up to the batch bound (one at least)."""
        batch: list[_Waiting] = []
        size = 0
        while self.waiting:
            item = self.waiting[0]
            if item.future.done():  # cancelled: the client disconnected while it waited
                self.waiting.popleft()
                log.info("request %s: client gone before its turn, not run", item.request_id)
                continue
            if batch and size + len(item.docs) > self.max_batch_docs:
                break
            batch.append(self.waiting.popleft())
            size += len(item.docs)
        return batch

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while batch := self._take():
                try:
                    await self._answer(loop, batch)
                except Exception as exc:  # noqa: BLE001 - a fault here must not leave a request waiting for ever
                    log.error("a batch could not be answered: %s: %s", type(exc).__name__, exc)
                    for item in batch:
                        if not item.future.done():
                            item.future.set_exception(exc)

    async def _answer(self, loop: asyncio.AbstractEventLoop, batch: list[_Waiting]) -> None:
        docs = [d for item in batch for d in item.docs]
        started = time.perf_counter()
        try:
            answers = await loop.run_in_executor(self._executor, self.predict, docs)
            self.batches += 1
        except Exception as exc:  # noqa: BLE001 - one bad document must not fail the other requests
            self.batches += 1
            if len(batch) > 1:
                for item in batch:
                    await self._answer(loop, [item])
                return
            log.warning("request %s: the model failed: %s: %s", batch[0].request_id, type(exc).__name__, exc)
            if not batch[0].future.done():
                batch[0].future.set_exception(exc)
            return
        seconds = time.perf_counter() - started
        log.info(
            "batch of %d request(s), %d document(s) in %.3f s: %s",
            len(batch),
            len(docs),
            seconds,
            " ".join(f"{item.request_id} (waited {started - item.queued_at:.3f} s)" for item in batch),
        )
        offset = 0
        for item in batch:
            if not item.future.done():
                item.future.set_result(list(answers[offset : offset + len(item.docs)]))
            offset += len(item.docs)

    def close(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
        self._executor.shutdown(wait=False, cancel_futures=True)
