"""What the service checks before a request reaches the model: its id, the API key, the body-size
limit, the /extract body's fields, and JSON for every error. Pure ASGI and pydantic, no model: the
tests drive it in-process, and `toolkit.deploy.serving` puts it ahead of BentoML."""

from __future__ import annotations

import asyncio
import contextvars
import hmac
import json
import logging
import re
import time
import uuid
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.responses import HTMLResponse, JSONResponse

from toolkit.deploy.prometheus import count_rejection
from toolkit.deploy.settings import ServeSettings

# GET / is this page, served by RequestGuard ahead of BentoML's own index (which it would otherwise be).
PAGE = (Path(__file__).parent / "page.html").read_text(encoding="utf-8")
OPEN_PATHS = ("/healthz", "/livez", "/readyz", "/docs", "/docs.json")
GONE = object()  # what the guard returns when the client left before its body was read
# Prometheus' series name the labels and count requests and rejections: behind the key when one is set,
# unless TOOLKIT_OPEN_METRICS says a scraper that cannot send it must reach them.
METRICS_PATH = "/metrics"


log = logging.getLogger("toolkit.serve")
REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")
# A client's own id is kept when it is short and plain (it goes into log lines and a header).
CLIENT_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


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
    count_rejection(status)
    body: dict[str, Any] = {"error": message, "request_id": REQUEST_ID.get(), **extra}
    if fix:
        body["fix"] = fix
    return JSONResponse(body, status_code=status, headers=headers)


JSON_FIX = 'send {"text": "..."} (UTF-8 JSON, no lone \\ud800-style escapes) with Content-Type: application/json'


class ExtractRequest(BaseModel):
    """The body of POST /extract; the API method below declares the same fields."""

    model_config = ConfigDict(extra="forbid")
    text: str | None = None
    texts: list[str] | None = None
    labels: list[str] | None = None


def extract_body_problem(body: bytes) -> JSONResponse | None:
    """The 400 answer naming the field of an /extract body that is wrong and how to fix it, or None.

    The body is parsed the way BentoML parses it next (pydantic's JSON parser, `model_validate_json`,
    over the same fields), so the two accept the same bodies: a lone surrogate escape, which Python's
    `json` takes, is refused here as BentoML would, and nesting past the parser's recursion limit is a
    parse error, not a RecursionError."""
    try:
        ExtractRequest.model_validate_json(body)
        return None
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        if first["type"] == "json_invalid":
            return error(400, f"the body is not JSON ({first['msg']})", JSON_FIX)
        if first["type"] == "model_type":
            return error(400, f"the body is a JSON {type(first['input']).__name__}, not an object", JSON_FIX)
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
            body = json.dumps({"error": text, "status": start["status"], "request_id": REQUEST_ID.get()}).encode()
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
            if await self._guard(scope, receive, send_with_id, path, method, headers) is GONE:
                status["code"] = 499  # logged as what it is, not as a request left without an answer
            return None
        except Exception as exc:
            if "code" in status:
                raise  # the answer is under way: nothing better can be sent, and the server logs it
            # A failure of the guard itself (a bug, not the client's) still gets an answer with the request id.
            return await error(
                500,
                f"the service failed while checking this request: {type(exc).__name__}",
                "report it with the request id; other requests are unaffected",
            )(scope, receive, send_with_id)
        finally:
            if not path.startswith((*OPEN_PATHS, METRICS_PATH)):
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
        open_path = path.startswith(OPEN_PATHS) or (path.startswith(METRICS_PATH) and self.settings.open_metrics)
        if self.settings.api_key and not open_path:
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
        if method not in ("POST", "PUT", "PATCH"):
            return await self.app(scope, receive, send)
        # Every body is read here, at most the limit and within the time bound, then replayed: a body that never
        # arrives holds no worker past body_timeout_seconds, whichever path it was sent to.
        body, more = b"", True
        deadline = asyncio.get_running_loop().time() + self.settings.body_timeout_seconds
        while more:
            try:
                # In this task, not wait_for's: a body already whole is read before a close that follows it.
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                got, seconds = len(body), self.settings.body_timeout_seconds
                return await error(
                    408,
                    f"the request body did not arrive within {seconds:g} s ({got} of {declared or 'unknown'} bytes)",
                    "send the whole body at once; a slow link can raise TOOLKIT_BODY_TIMEOUT_SECONDS",
                    headers={"Connection": "close"},
                )(scope, receive, send)
            if message["type"] == "http.disconnect":
                log.info("request %s: client disconnected before its body was read", REQUEST_ID.get())
                count_rejection(499)
                return GONE
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
