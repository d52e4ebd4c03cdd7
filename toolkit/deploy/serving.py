"""The BentoML extraction service over an exported artifact.

Two services, the BentoML way to batch across requests: `Extraction` (the public API:
validation, limits, auth, label filter) calls `ExtractionModel.tag`, a batchable API, so
BentoML's adaptive batcher merges documents from concurrent requests into one model call
(up to max batch size, within the latency budget). Inside a call, windows are sorted by
length before batching (length bucketing). The model call is `Tagger.predict` /
`SpanGenerator.predict`: the same windowing, decoding and offset code `toolkit eval` scores.

Settings come from environment variables (read when the module is imported, in every
worker): TOOLKIT_ARTIFACT (required), TOOLKIT_MAX_BATCH_SIZE (1 turns batching off),
TOOLKIT_MAX_LATENCY_MS, TOOLKIT_MAX_QUEUE_SECONDS, TOOLKIT_MAX_QUEUE_CHARS, TOOLKIT_MAX_BODY_BYTES,
TOOLKIT_MAX_DOC_CHARS, TOOLKIT_MAX_TEXTS,
TOOLKIT_API_KEY (when set, requests need header `X-API-Key: <key>` or
`Authorization: Bearer <key>`), TOOLKIT_MODEL_BATCH (windows per forward pass).
"""

from __future__ import annotations

import hmac
import json
import math
import os
from pathlib import Path
from typing import Any

import bentoml
from pydantic import BaseModel, Field
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse
from starlette.routing import Route

from toolkit.deploy.resubmit import answer_deadline, answer_with_resubmits
from toolkit.infer import load_predictor
from toolkit.rundir import MANIFEST as MANIFEST_FILE
from toolkit.rundir import read_manifest, verify_artifact, weights_file

# GET / is this page, served by RequestGuard ahead of BentoML's own index (which it would otherwise be).
PAGE = (Path(__file__).parent / "page.html").read_text(encoding="utf-8")
OPEN_PATHS = ("/healthz", "/livez", "/readyz", "/metrics", "/docs", "/docs.json")


class ServeSettings(BaseModel):
    artifact: Path
    max_batch_size: int = Field(default=32, ge=1)
    # BentoML's batch dispatcher cancels a queued call once its latency estimate passes this. Default:
    # twice the admission bound, so a call admitted under the bound is not cancelled.
    max_latency_ms: int | None = Field(default=None, ge=1)
    max_queue_seconds: float = Field(default=30.0, gt=0)
    max_queue_chars: int | None = Field(default=None, ge=1)
    max_body_bytes: int = Field(default=4 * 2**20, ge=1)
    max_doc_chars: int = Field(default=500_000, ge=1)
    max_texts: int = Field(default=64, ge=1)
    model_batch: int = Field(default=16, ge=1)
    api_key: str | None = None

    @classmethod
    def from_env(cls) -> ServeSettings:
        env = os.environ
        # A bento carries its artifact in ./artifact (serving/bentofile.yaml).
        artifact = env.get("TOOLKIT_ARTIFACT") or ("artifact" if (Path("artifact") / MANIFEST_FILE).is_file() else None)
        if not artifact:
            raise RuntimeError("TOOLKIT_ARTIFACT is not set: point it at a directory made by `toolkit export` (or use `toolkit serve DIR`)")
        values: dict[str, Any] = {"artifact": artifact, "api_key": env.get("TOOLKIT_API_KEY") or None}
        # Every other setting is TOOLKIT_<NAME>; pydantic turns the strings into numbers (and refuses bad ones).
        for name in cls.model_fields.keys() - values.keys():
            if env.get(f"TOOLKIT_{name.upper()}"):
                values[name] = env[f"TOOLKIT_{name.upper()}"]
        return cls(**values)

    @property
    def dispatcher_latency_ms(self) -> int:
        return self.max_latency_ms or int(2_000 * self.max_queue_seconds)


# Without a measured throughput (artifacts exported before it was recorded) the bound assumes this.
FALLBACK_CHARS_PER_SECOND = 20_000.0


class AdmissionQueue:
    """A bound on the characters waiting for, or inside, the model. Below it requests wait their
    turn; above it they are refused at once with 503 and a Retry-After that estimates the drain time.

    Our own (a counter on the API worker's event loop) because BentoML's dispatcher sheds load by a
    latency estimate instead of queueing. The bound is `max_queue_seconds` of work at the model's
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


def error(status: int, message: str, fix: str | None = None, headers: dict[str, str] | None = None, **extra: Any) -> JSONResponse:
    """Every error the service answers is JSON: {"error": ..., "fix": ...}."""
    body: dict[str, Any] = {"error": message, **extra}
    if fix:
        body["fix"] = fix
    return JSONResponse(body, status_code=status, headers=headers)


def check_request(
    text: str | None, texts: list[str] | None, labels: list[str] | None, settings: ServeSettings, known_labels: list[str]
) -> tuple[list[str], JSONResponse | None]:
    """The documents of a request, or the 4xx answer that names what is wrong and how to fix it."""
    if (text is None) == (texts is None):
        return [], error(400, "give exactly one of 'text' (a string) or 'texts' (a list of strings)", 'send {"text": "..."} or {"texts": ["...", "..."]}')
    docs = [text] if text is not None else list(texts or [])
    if not docs:
        return [], error(400, "'texts' is empty", "send at least one document")
    if len(docs) > settings.max_texts:
        return [], error(413, f"{len(docs)} texts in one request; the limit is {settings.max_texts}", "split the request")
    for i, doc in enumerate(docs):
        field = "text" if text is not None else f"texts[{i}]"
        if not doc.strip():
            return [], error(400, f"{field} is empty or only whitespace", "send the document's text")
        if len(doc) > settings.max_doc_chars:
            return [], error(
                413, f"{field} has {len(doc)} characters; the limit is {settings.max_doc_chars}", "split the document, or raise TOOLKIT_MAX_DOC_CHARS"
            )
    unknown = sorted(set(labels or []) - set(known_labels))
    if unknown:
        return [], error(400, f"unknown labels {unknown}", f"use labels among {known_labels}")
    return docs, None


def json_errors(send):
    """Wrap an ASGI `send` so that every 4xx/5xx answer is JSON: a plain-text error body (from
    BentoML or Starlette: unknown path, method not allowed, an internal error) becomes {"error": text}."""
    state: dict[str, Any] = {}

    async def wrapped(message):
        if message["type"] == "http.response.start" and message["status"] >= 400:
            headers = {k.decode("latin-1").lower(): v for k, v in message.get("headers", [])}
            if not headers.get("content-type", b"").startswith(b"application/json"):
                state["start"], state["body"] = message, b""
                return None
        if "start" in state and message["type"] == "http.response.body":
            state["body"] += message.get("body", b"")
            if message.get("more_body"):
                return None
            start = state.pop("start")
            text = state.pop("body").decode("utf-8", errors="replace").strip() or "error"
            body = json.dumps({"error": text, "status": start["status"]}).encode()
            kept = [(k, v) for k, v in start.get("headers", []) if k.lower() not in (b"content-type", b"content-length")]
            await send({**start, "headers": [*kept, (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
            return await send({"type": "http.response.body", "body": body})
        return await send(message)

    return wrapped


class RequestGuard:
    """ASGI middleware: body-size limit and API-key check before BentoML parses anything."""

    def __init__(self, app, settings: ServeSettings):
        self.app = app
        self.settings = settings

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope.get("path", "")
        if path == "/" and scope.get("method") in ("GET", "HEAD"):
            # The page is open and holds no key: a person types the key into it, and its requests carry it.
            return await HTMLResponse(PAGE)(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if self.settings.api_key and not path.startswith(OPEN_PATHS):
            given = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ").strip()
            if not hmac.compare_digest(given.encode(), self.settings.api_key.encode()):
                return await error(401, "missing or wrong API key", "send the key in the X-API-Key header")(scope, receive, send)
        send = json_errors(send)
        if path == "/extract" and scope.get("method") != "POST":
            return await error(405, f"{scope.get('method')} /extract is not supported", "send POST /extract with a JSON body", headers={"Allow": "POST"})(
                scope, receive, send
            )
        limit = self.settings.max_body_bytes
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            return await error(413, f"request body of {declared} bytes; the limit is {limit}", "send fewer or shorter documents")(scope, receive, send)
        if declared is None and scope.get("method") in ("POST", "PUT", "PATCH"):
            # No declared length (chunked): read at most the limit, then replay the body.
            body, more = b"", True
            while more:
                message = await receive()
                body += message.get("body", b"")
                more = message.get("more_body", False)
                if len(body) > limit:
                    return await error(413, f"request body over {limit} bytes", "send fewer or shorter documents")(scope, receive, send)
            replayed = False

            async def replay():
                nonlocal replayed
                if replayed:
                    return await receive()
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}

            return await self.app(scope, replay, send)
        return await self.app(scope, receive, send)


SETTINGS = ServeSettings.from_env()
MANIFEST: dict = read_manifest(SETTINGS.artifact)
BATCHABLE = SETTINGS.max_batch_size > 1
QUEUE = AdmissionQueue.for_artifact(SETTINGS, MANIFEST)
ANSWER_DEADLINE_S = answer_deadline(SETTINGS.max_queue_seconds)


@bentoml.service(name="extraction_model", workers=1, traffic={"timeout": 600})
class ExtractionModel:
    """The artifact's model; `tag` is batched across requests when TOOLKIT_MAX_BATCH_SIZE > 1."""

    def __init__(self) -> None:
        verify_artifact(SETTINGS.artifact)
        self.predictor = load_predictor(SETTINGS.artifact)

    @bentoml.api(batchable=BATCHABLE, max_batch_size=max(SETTINGS.max_batch_size, 2), max_latency_ms=SETTINGS.dispatcher_latency_ms)
    def tag(self, texts: list[str]) -> list[list[dict]]:
        predictions = self.predictor.predict(texts, batch_size=SETTINGS.model_batch)
        return [
            [{"start": s.start, "end": s.end, "label": s.label, "text": doc[s.start : s.end], "score": round(float(s.score), 4)} for s in spans]
            for doc, spans in zip(texts, predictions)
        ]


async def info(request: Request) -> JSONResponse:
    return JSONResponse(MANIFEST)


@bentoml.service(name="extraction", traffic={"timeout": 600})
class Extraction:
    """POST /extract: spans with start, end, label, text and score; GET /info: the artifact's manifest."""

    model = bentoml.depends(ExtractionModel)

    def __init__(self) -> None:
        self.model_info = {
            "id": MANIFEST["model_id"],
            "version": MANIFEST["files"][weights_file(MANIFEST)]["sha256"][:12],
            "path": MANIFEST["path"],
            "precision": MANIFEST["precision"],
        }

    async def _tag(self, docs: list[str]) -> list[list[dict]]:
        """The model service's answer: bounded and resubmitted where it was lost (toolkit.deploy.resubmit)."""
        return await answer_with_resubmits(lambda: self.model.to_async.tag(docs), ANSWER_DEADLINE_S)

    @bentoml.api(route="/extract")
    async def extract(self, text: str | None = None, texts: list[str] | None = None, labels: list[str] | None = None) -> dict:
        docs, problem = check_request(text, texts, labels, SETTINGS, MANIFEST["labels"])
        if problem is not None:
            return problem  # type: ignore[return-value]  # BentoML passes Response objects through
        chars = sum(len(d) for d in docs)
        if not QUEUE.admit(chars):
            wait = QUEUE.retry_after()
            return error(  # type: ignore[return-value]
                503,
                f"the queue is full ({QUEUE.pending} characters waiting, bound {QUEUE.capacity})",
                f"retry after {wait} s",
                headers={"Retry-After": str(wait)},
                retry_after_seconds=wait,
            )
        try:
            results = await self._tag(docs)
        except Exception as exc:  # the model service failed or kept cancelling; the API keeps answering
            wait = QUEUE.retry_after()
            return error(  # type: ignore[return-value]
                503, f"the model could not answer: {type(exc).__name__}", f"retry after {wait} s", headers={"Retry-After": str(wait)}, retry_after_seconds=wait
            )
        finally:
            QUEUE.release(chars)
        if labels:
            results = [[s for s in spans if s["label"] in labels] for spans in results]
        if text is not None:
            return {"model": self.model_info, "spans": results[0]}
        return {"model": self.model_info, "results": [{"spans": spans} for spans in results]}


Extraction.add_asgi_middleware(RequestGuard, settings=SETTINGS)
Extraction.mount_asgi_app(Starlette(routes=[Route("/info", info, methods=["GET"])]), path="/")
