"""The BentoML extraction service over an exported artifact.

One BentoML service, `Extraction`, in one worker process: its API (validation, limits, auth, label
filter) hands documents to an in-process batcher (`toolkit.deploy.batcher`): one FIFO and one model
thread that runs whole waiting requests as one model call, while the event loop keeps accepting. No
internal HTTP hop, so nothing between the API and the model can drop or duplicate a call. Inside a
call, windows are sorted by length before batching (length bucketing). The model call is
`Tagger.predict` / `SpanGenerator.predict`: the same windowing, decoding and offset code `toolkit eval`
scores.

Settings come from environment variables (read when the module is imported): TOOLKIT_ARTIFACT
(required), TOOLKIT_MAX_BATCH_SIZE (documents per model call; 1 turns batching off),
TOOLKIT_MAX_QUEUE_SECONDS, TOOLKIT_MAX_QUEUE_CHARS, TOOLKIT_MAX_BODY_BYTES, TOOLKIT_MAX_DOC_CHARS,
TOOLKIT_MAX_TEXTS, TOOLKIT_API_KEY (when set, requests need header `X-API-Key: <key>` or
`Authorization: Bearer <key>`), TOOLKIT_MODEL_BATCH (windows per forward pass), TOOLKIT_MODEL_THREADS
(the model's intra-op threads; default: every core).

Every request gets an id (the client's `X-Request-ID` when it sends a short one, else a new one),
returned in the `X-Request-ID` header and written in the request's log line and its batch's.
"""

from __future__ import annotations

import asyncio
import contextvars
import hmac
import json
import logging
import math
import os
import re
import time
import uuid
from pathlib import Path
from typing import Any

import bentoml
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse
from starlette.routing import Route

from toolkit.deploy.batcher import MAX_BATCH_DOCS, ModelBatcher
from toolkit.infer import load_predictor
from toolkit.rundir import MANIFEST as MANIFEST_FILE
from toolkit.rundir import read_manifest, verify_artifact, weights_file

# GET / is this page, served by RequestGuard ahead of BentoML's own index (which it would otherwise be).
PAGE = (Path(__file__).parent / "page.html").read_text(encoding="utf-8")
OPEN_PATHS = ("/healthz", "/livez", "/readyz", "/metrics", "/docs", "/docs.json")


log = logging.getLogger("toolkit.serve")
REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")
# A client's own id is kept when it is short and plain (it goes into log lines and a header).
CLIENT_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


class ServeSettings(BaseModel):
    artifact: Path
    max_batch_size: int = Field(default=MAX_BATCH_DOCS, ge=1)
    max_queue_seconds: float = Field(default=30.0, gt=0)
    max_queue_chars: int | None = Field(default=None, ge=1)
    max_body_bytes: int = Field(default=4 * 2**20, ge=1)
    max_doc_chars: int = Field(default=500_000, ge=1)
    max_texts: int = Field(default=64, ge=1)
    model_batch: int = Field(default=16, ge=1)
    # The model's intra-op threads; None: the runtime's default (every core), which served more documents
    # a second under load than one thread (docs/benchmarks.md, "Issue 26"); on a machine where another
    # process keeps a core busy, fewer threads avoid OpenMP waiting on it.
    model_threads: int | None = Field(default=None, ge=1)
    api_key: str | None = None

    @classmethod
    def from_env(cls) -> ServeSettings:
        env = os.environ
        # A bento carries its artifact in ./artifact (serving/bentofile.yaml).
        artifact = env.get("TOOLKIT_ARTIFACT") or ("artifact" if (Path("artifact") / MANIFEST_FILE).is_file() else None)
        if not artifact:
            raise RuntimeError(
                "TOOLKIT_ARTIFACT is not set: point it at a directory made by `toolkit export` (or use `toolkit serve "
                "DIR`)"
            )
        values: dict[str, Any] = {"artifact": artifact, "api_key": env.get("TOOLKIT_API_KEY") or None}
        # Every other setting is TOOLKIT_<NAME>; pydantic turns the strings into numbers (and refuses bad ones).
        for name in cls.model_fields.keys() - values.keys():
            if env.get(f"TOOLKIT_{name.upper()}"):
                values[name] = env[f"TOOLKIT_{name.upper()}"]
        return cls(**values)


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


def error(
    status: int, message: str, fix: str | None = None, headers: dict[str, str] | None = None, **extra: Any
) -> JSONResponse:
    """Every error the service answers is JSON: {"error": ..., "fix": ...}; each is logged on one line."""
    log.log(
        logging.WARNING if status >= 500 else logging.INFO,
        "request %s rejected %d: %s",
        REQUEST_ID.get(),
        status,
        message,
    )
    body: dict[str, Any] = {"error": message, **extra}
    if fix:
        body["fix"] = fix
    return JSONResponse(body, status_code=status, headers=headers)


class ExtractRequest(BaseModel):
    """The body of POST /extract; the API method below declares the same fields."""

    model_config = ConfigDict(extra="forbid")
    text: str | None = None
    texts: list[str] | None = None
    labels: list[str] | None = None


def extract_body_problem(body: bytes) -> JSONResponse | None:
    """The 400 answer naming the field of an /extract body that is wrong and how to fix it, or None.
    BentoML parses the body again into the API's arguments (the same fields), so this one is never
    refused there with a traceback in the log."""
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return error(400, f"the body is not JSON ({exc})", 'send {"text": "..."} with Content-Type: application/json')
    if not isinstance(data, dict):
        return error(400, f"the body is a JSON {type(data).__name__}, not an object", 'send {"text": "..."}')
    try:
        ExtractRequest.model_validate(data)
        return None
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(x) for x in first["loc"]) or "body"
        fixes = {"extra_forbidden": "the fields are text, texts and labels"}
        return error(
            400,
            f"{where}: {first['msg']}" + (f" ({exc.error_count()} problems)" if exc.error_count() > 1 else ""),
            fixes.get(first["type"], "text is a string, texts and labels are lists of strings"),
        )


def check_request(
    text: str | None,
    texts: list[str] | None,
    labels: list[str] | None,
    settings: ServeSettings,
    known_labels: list[str],
) -> tuple[list[str], JSONResponse | None]:
    """The documents of a request, or the 4xx answer that names what is wrong and how to fix it."""
    if (text is None) == (texts is None):
        return [], error(
            400,
            "give exactly one of 'text' (a string) or 'texts' (a list of strings)",
            'send {"text": "..."} or {"texts": ["...", "..."]}',
        )
    docs = [text] if text is not None else list(texts or [])
    if not docs:
        return [], error(400, "'texts' is empty", "send at least one document")
    if len(docs) > settings.max_texts:
        return [], error(
            413, f"{len(docs)} texts in one request; the limit is {settings.max_texts}", "split the request"
        )
    for i, doc in enumerate(docs):
        field = "text" if text is not None else f"texts[{i}]"
        if not doc.strip():
            return [], error(400, f"{field} is empty or only whitespace", "send the document's text")
        if len(doc) > settings.max_doc_chars:
            return [], error(
                413,
                f"{field} has {len(doc)} characters; the limit is {settings.max_doc_chars}",
                "split the document, or raise TOOLKIT_MAX_DOC_CHARS",
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
            kept = [
                (k, v) for k, v in start.get("headers", []) if k.lower() not in (b"content-type", b"content-length")
            ]
            await send(
                {
                    **start,
                    "headers": [
                        *kept,
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            return await send({"type": "http.response.body", "body": body})
        return await send(message)

    return wrapped


class RequestGuard:
    """ASGI middleware ahead of BentoML: a request id, the API-key check, the body-size limit, and the
    /extract body's validation (so a malformed request is one 400 and one log line, not an error with a
    traceback in BentoML's log)."""

    def __init__(self, app, settings: ServeSettings):
        self.app = app
        self.settings = settings

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path, method = scope.get("path", ""), scope.get("method", "")
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        given = headers.get("x-request-id", "")
        request_id = given if CLIENT_ID.match(given) else uuid.uuid4().hex[:16]
        REQUEST_ID.set(request_id)
        started, status = time.perf_counter(), {}

        async def send_with_id(message):
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                message = {**message, "headers": [*message.get("headers", []), (b"x-request-id", request_id.encode())]}
            return await send(message)

        try:
            return await self._guard(scope, receive, send_with_id, path, method, headers)
        finally:
            if not path.startswith(OPEN_PATHS):
                code = status.get("code", 0)
                log.log(
                    logging.WARNING if code >= 500 or not code else logging.INFO,
                    "request %s %s %s -> %s in %.3f s",
                    request_id,
                    method,
                    path,
                    code or "no answer",
                    time.perf_counter() - started,
                )

    async def _guard(self, scope, receive, send, path: str, method: str, headers: dict[str, str]):
        if path == "/" and method in ("GET", "HEAD"):
            # The page is open and holds no key: a person types the key into it, and its requests carry it.
            return await HTMLResponse(PAGE)(scope, receive, send)
        if self.settings.api_key and not path.startswith(OPEN_PATHS):
            given = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ").strip()
            if not hmac.compare_digest(given.encode(), self.settings.api_key.encode()):
                return await error(401, "missing or wrong API key", "send the key in the X-API-Key header")(
                    scope, receive, send
                )
        send = json_errors(send)
        if path == "/extract" and method != "POST":
            return await error(
                405,
                f"{method} /extract is not supported",
                "send POST /extract with a JSON body",
                headers={"Allow": "POST"},
            )(scope, receive, send)
        limit = self.settings.max_body_bytes
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            return await error(
                413, f"request body of {declared} bytes; the limit is {limit}", "send fewer or shorter documents"
            )(scope, receive, send)
        if method not in ("POST", "PUT", "PATCH") or (path != "/extract" and declared is not None):
            return await self.app(scope, receive, send)
        # /extract's body (and any body of undeclared length) is read here, at most the limit, then replayed.
        body, more = b"", True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > limit:
                return await error(413, f"request body over {limit} bytes", "send fewer or shorter documents")(
                    scope, receive, send
                )
        if path == "/extract":
            problem = extract_body_problem(body)
            if problem is not None:
                return await problem(scope, receive, send)
        replayed = False

        async def replay():
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        return await self.app(scope, replay, send)


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


@bentoml.service(name="extraction", workers=1, traffic={"timeout": 600})
class Extraction:
    """POST /extract: spans with start, end, label, text and score; GET /info: the artifact's manifest."""

    def __init__(self) -> None:
        verify_artifact(SETTINGS.artifact)
        if SETTINGS.model_threads:
            from toolkit.hardware import set_inference_threads

            set_inference_threads(SETTINGS.model_threads)  # PyTorch at once, ONNX Runtime's session below
        self.predictor = load_predictor(SETTINGS.artifact)
        if hasattr(self.predictor, "warm_up"):
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
        predictions = self.predictor.predict(texts, batch_size=SETTINGS.model_batch)
        return [[s.to_dict(doc) for s in spans] for doc, spans in zip(texts, predictions)]

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
        if not QUEUE.admit(chars):
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
        if results is None:
            return error(499, "the client closed the connection")  # nobody reads it
        if labels:
            results = [[s for s in spans if s["label"] in labels] for spans in results]
        if text is not None:
            return {"model": self.model_info, "spans": results[0]}
        return {"model": self.model_info, "results": [{"spans": spans} for spans in results]}


Extraction.add_asgi_middleware(RequestGuard, settings=SETTINGS)
Extraction.mount_asgi_app(Starlette(routes=[Route("/info", info, methods=["GET"])]), path="/")
