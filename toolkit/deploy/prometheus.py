"""The service's own Prometheus series, next to BentoML's on /metrics.

- toolkit_queue_chars: characters admitted and not yet answered (the admission bound's fill), summed
  over the workers.
- toolkit_batch_documents: documents per model call (how much the batcher merges).
- toolkit_rejections_total{reason}: answers other than 200, by reason.
- toolkit_spans_without_content_total: spans of only punctuation or whitespace left out of answers
  (`toolkit.spans.content`).

Made on first use, inside a worker: BentoML sets PROMETHEUS_MULTIPROC_DIR when a worker starts, after
the service module is imported, and a metric made before that is never written where /metrics reads.
"""

from __future__ import annotations

from functools import cache
from types import SimpleNamespace

# The reason each status an /extract answer can have is counted under.
REASONS = {
    400: "invalid_request",
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    408: "body_timeout",
    413: "too_large",
    499: "client_gone",
    500: "failed",
    503: "queue_full",
}


@cache
def series() -> SimpleNamespace:
    import prometheus_client as prom

    return SimpleNamespace(
        queue_chars=prom.Gauge(
            "toolkit_queue_chars", "Characters admitted and not yet answered", multiprocess_mode="livesum"
        ),
        batch_documents=prom.Histogram(
            "toolkit_batch_documents", "Documents per model call", buckets=(1, 2, 4, 8, 16, 32, 64, 128)
        ),
        rejections=prom.Counter("toolkit_rejections", "Answers other than 200, by reason", ["reason"]),
        spans_without_content=prom.Counter(
            "toolkit_spans_without_content", "Spans of only punctuation or whitespace left out of answers"
        ),
    )


def count_rejection(status: int) -> None:
    series().rejections.labels(reason=REASONS.get(status, str(status))).inc()
