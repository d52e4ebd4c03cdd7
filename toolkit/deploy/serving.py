"""The BentoML extraction service over an exported artifact.

One BentoML service, `Extraction`, in TOOLKIT_WORKERS worker processes (default 1), each with its own
model and batcher: its API (validation, limits, auth, label
filter) hands documents to an in-process batcher (`toolkit.deploy.batcher`): one FIFO and one model
thread that runs whole waiting requests as one model call, while the event loop keeps accepting. No
internal HTTP hop, so nothing between the API and the model can drop or duplicate a call. Inside a
call, windows are sorted by length before batching (length bucketing). The model call is the artifact's
predictor's `predict` (`Tagger`, `SegmentClassifier` or `SpanGenerator`, with TOOLKIT_MODEL_BATCH as its
batch_size): the same windowing, decoding and offset code `toolkit eval` scores.

Settings come from environment variables (read when the module is imported): TOOLKIT_ARTIFACT
(required), TOOLKIT_MAX_BATCH_SIZE (documents per model call; 1 turns batching off),
TOOLKIT_MAX_QUEUE_SECONDS, TOOLKIT_MAX_QUEUE_CHARS, TOOLKIT_MAX_BODY_BYTES, TOOLKIT_MAX_DOC_CHARS,
TOOLKIT_MAX_TEXTS, TOOLKIT_API_KEY (when set, requests need header `X-API-Key: <key>` or
`Authorization: Bearer <key>`; /metrics too, unless TOOLKIT_OPEN_METRICS=true), TOOLKIT_BODY_TIMEOUT_SECONDS
(a body not whole this long after its headers gets 408), TOOLKIT_MODEL_BATCH (windows per forward pass),
TOOLKIT_MODEL_THREADS (the model's intra-op threads; default: every core, or cores / workers), TOOLKIT_WORKERS.

Every request gets an id (the client's `X-Request-ID` when it sends a short one, else a new one),
returned in the `X-Request-ID` header and written in the request's log line and its batch's.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os

import bentoml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from toolkit.deploy.batcher import ModelBatcher
from toolkit.deploy.guard import REQUEST_ID, RequestGuard, check_request, error
from toolkit.deploy.prometheus import series
from toolkit.deploy.settings import ServeSettings
from toolkit.infer import load_predictor
from toolkit.rundir import read_manifest, verify_artifact, weights_file
from toolkit.spans.content import drop_contentless

log = logging.getLogger("toolkit.serve")


# Without a measured throughput (artifacts exported before it was recorded) the bound assumes this.
FALLBACK_CHARS_PER_SECOND = 20_000.0


class AdmissionQueue:
    """A bound on the characters waiting for, or inside, the model. Below it requests wait their
    turn; above it they are refused at once with 503 and a Retry-After that estimates the drain time.

    Our own (a counter on the worker's event loop): the batcher's FIFO has no bound of its own, and a
    bound in characters follows the model's cost better than a count of requests. The bound is `max_queue_seconds` of
    work at the model's
    throughput measured at export, so a closed loop of clients never trips it."""

    def __init__(self, capacity_chars: int, chars_per_second: float):
        self.capacity = capacity_chars
        self.rate = chars_per_second
        self.pending = 0

    def admit(self, chars: int) -> bool:
        # A document larger than the whole bound still gets in when nothing else waits.
        if self.pending and self.pending + chars > self.capacity:
            return False
        self.pending += chars
        return True

    def release(self, chars: int) -> None:
        self.pending -= chars

    def retry_after(self) -> int:
        return max(1, math.ceil(self.pending / self.rate))

    @classmethod
    def for_artifact(cls, settings: ServeSettings, manifest: dict) -> AdmissionQueue:
        rate = float(manifest.get("throughput", {}).get("chars_per_second") or FALLBACK_CHARS_PER_SECOND)
        return cls(settings.max_queue_chars or int(rate * settings.max_queue_seconds), rate)


SETTINGS = ServeSettings.from_env()
MANIFEST: dict = read_manifest(SETTINGS.artifact)
QUEUE = AdmissionQueue.for_artifact(SETTINGS, MANIFEST)


async def info(request: Request) -> JSONResponse:
    return JSONResponse(MANIFEST)


async def _client_gone(request: Request) -> None:
    """Returns when the client closes its connection (the body was read already, so the next message
    is the disconnect; uvicorn sends it when the connection closes)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


@bentoml.service(name="extraction", workers=SETTINGS.workers, traffic={"timeout": 600})
class Extraction:
    """POST /extract: spans with start, end, label, text and score; GET /info: the artifact's manifest."""

    def __init__(self) -> None:
        verify_artifact(SETTINGS.artifact)
        threads = SETTINGS.model_threads
        if threads is None and SETTINGS.workers > 1:  # workers share the cores rather than each taking all
            threads = max(1, (os.cpu_count() or 1) // SETTINGS.workers)
        if threads:
            from toolkit.hardware import set_inference_threads

            set_inference_threads(threads)  # PyTorch at once, ONNX Runtime's session below
        self.predictor = load_predictor(SETTINGS.artifact)
        self.predictor.warm_up()  # before /readyz answers: no request waits for a runtime's compilation
        self.batcher = ModelBatcher(self._predict, SETTINGS.max_batch_size)
        self.model_info = {
            "id": MANIFEST["model_id"],
            "version": MANIFEST["files"][weights_file(MANIFEST)]["sha256"][:12],
            "path": MANIFEST["path"],
            "precision": MANIFEST["precision"],
        }
        # BentoML configures logging before it loads the service; our logger is named in no config.
        log.disabled, log.level = False, logging.INFO

    def _predict(self, texts: list[str]) -> list[list[dict]]:
        series().batch_documents.observe(len(texts))
        predictions = self.predictor.predict(texts, batch_size=SETTINGS.model_batch)
        kept = [drop_contentless(doc, spans) for doc, spans in zip(texts, predictions)]  # as eval and predict do
        series().spans_without_content.inc(sum(n for _, n in kept))
        return [[s.to_dict(doc) for s in spans] for doc, (spans, _) in zip(texts, kept)]

    async def _tag(self, docs: list[str], request: Request) -> list[list[dict]] | None:
        """The model's answer, or None when the client went away first (its documents are then not run,
        or their batch's answer is dropped)."""
        answer = asyncio.ensure_future(self.batcher.submit(docs, REQUEST_ID.get()))
        gone = asyncio.ensure_future(_client_gone(request))
        done, _ = await asyncio.wait({answer, gone}, return_when=asyncio.FIRST_COMPLETED)
        if answer in done:
            gone.cancel()
            return answer.result()
        answer.cancel()
        log.info("request %s: client disconnected while it waited", REQUEST_ID.get())
        return None

    @bentoml.api(route="/extract")
    async def extract(
        self,
        text: str | None = None,
        texts: list[str] | None = None,
        labels: list[str] | None = None,
        *,
        ctx: bentoml.Context,
    ) -> dict:
        answer = await self._extract(text, texts, labels, ctx.request)
        if isinstance(answer, JSONResponse):
            # With a context parameter BentoML sets the status and headers from the context, not the response.
            ctx.response.status_code = answer.status_code
            ctx.response.metadata.update(
                {k: v for k, v in answer.headers.items() if k not in ("content-length", "content-type")}
            )
        return answer  # type: ignore[return-value]  # BentoML passes Response objects through

    async def _extract(
        self, text: str | None, texts: list[str] | None, labels: list[str] | None, request: Request
    ) -> dict | JSONResponse:
        docs, problem = check_request(text, texts, labels, SETTINGS, MANIFEST["labels"])
        if problem is not None:
            return problem
        chars = sum(len(d) for d in docs)
        admitted = QUEUE.admit(chars)
        series().queue_chars.set(QUEUE.pending)
        if not admitted:
            wait = QUEUE.retry_after()
            return error(
                503,
                f"the queue is full ({QUEUE.pending} characters waiting, bound {QUEUE.capacity})",
                f"retry after {wait} s",
                headers={"Retry-After": str(wait)},
                retry_after_seconds=wait,
            )
        try:
            results = await self._tag(docs, request)
        except Exception as exc:  # the model failed on this request's documents; the service keeps answering
            return error(
                500,
                f"the model failed on this request: {type(exc).__name__}: {exc}",
                "report it with the document; other requests are unaffected",
            )
        finally:
            QUEUE.release(chars)
            series().queue_chars.set(QUEUE.pending)
        if results is None:
            return error(499, "the client closed the connection")  # nobody reads it
        if labels:
            results = [[s for s in spans if s["label"] in labels] for spans in results]
        if text is not None:
            return {"model": self.model_info, "spans": results[0]}
        return {"model": self.model_info, "results": [{"spans": spans} for spans in results]}


Extraction.add_asgi_middleware(RequestGuard, settings=SETTINGS)
Extraction.mount_asgi_app(Starlette(routes=[Route("/info", info, methods=["GET"])]), path="/")
