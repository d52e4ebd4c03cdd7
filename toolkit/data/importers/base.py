"""What every importer shares: a log of everything left out, and span construction that checks offsets."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from toolkit.data.schema import Span
from toolkit.errors import Problem


@dataclass
class ImportLog:
    """Counts and problems of one import or export. Nothing is left out without an entry here."""

    format: str
    problems: list[Problem] = field(default_factory=list)
    documents: int = 0
    spans: int = 0
    documents_dropped: int = 0
    spans_dropped: int = 0
    ignored: Counter = field(default_factory=Counter)

    def warn(self, kind: str, message: str, fix: str, **where) -> None:
        self.problems.append(Problem(kind, message, fix, severity="warning", **where))

    def drop_span(self, kind: str, message: str, fix: str, severity: str = "error", **where) -> None:
        self.spans_dropped += 1
        self.problems.append(Problem(kind, "span left out: " + message, fix, severity=severity, **where))

    def drop_document(
        self, kind: str, message: str, fix: str, severity: str = "error", spans: int = 0, **where
    ) -> None:
        self.documents_dropped += 1
        self.spans_dropped += spans
        self.problems.append(Problem(kind, "document left out: " + message, fix, severity=severity, **where))

    def ignore(self, what: str, count: int = 1) -> None:
        """Source content outside the span model (relations, attributes, ...): counted, reported once."""
        self.ignored[what] += count

    def summary(self) -> dict:
        return {
            "format": self.format,
            "documents": self.documents,
            "spans": self.spans,
            "documents_dropped": self.documents_dropped,
            "spans_dropped": self.spans_dropped,
            "ignored": dict(self.ignored),
            "problems": {
                "errors": sum(p.severity == "error" for p in self.problems),
                "warnings": sum(p.severity == "warning" for p in self.problems),
                "by_kind": dict(Counter(p.kind for p in self.problems).most_common()),
                "items": [p.to_dict() for p in self.problems],
            },
        }


def checked_span(
    text: str, start: int, end: int, label: str, log: ImportLog, expected: str | None = None, **where
) -> Span | None:
    """A span for `text[start:end]`, or None with a logged reason.

    Out-of-range, empty and blank spans are left out. Surrounding whitespace is
    trimmed (and reported) so every imported span passes `toolkit check`.
    `expected` is the source's own copy of the span text, compared when given.
    """
    if not label:
        log.drop_span("empty_label", f"{start}-{end} has no label.", "give every span a label.", **where)
        return None
    if start < 0 or end > len(text) or start >= end:
        log.drop_span(
            "offset_out_of_range",
            f"{start}-{end} {label!r} does not fit the text ({len(text)} characters).",
            "check that offsets are character (not byte or UTF-16) offsets into this document.",
            **where,
        )
        return None
    covered = text[start:end]
    # Formats with one annotation a line write newlines and tabs inside a mention as spaces.
    if (
        expected is not None
        and covered != expected
        and covered.replace("\n", " ").replace("\t", " ").replace("\r", " ") != expected
    ):
        if " ".join(covered.split()) == " ".join(expected.split()):
            log.warn(
                "mention_whitespace",
                f"source text {expected!r} differs from the document at {start}-{end} only in surrounding whitespace.",
                "nothing to do: the offsets were used.",
                **where,
            )
        else:
            log.drop_span(
                "text_mismatch",
                f"{start}-{end} {label!r}: the document has {covered[:60]!r} but the source says {expected[:60]!r}.",
                "fix the offsets or the mention text in the source file.",
                **where,
            )
            return None
    stripped = covered.strip()
    if not stripped:
        log.drop_span(
            "blank_span", f"{start}-{end} {label!r} covers only whitespace.", "remove it from the source.", **where
        )
        return None
    if stripped != covered:
        lead = len(covered) - len(covered.lstrip())
        new_start, new_end = start + lead, start + lead + len(stripped)
        log.warn(
            "trimmed_whitespace",
            f"span {start}-{end} {label!r} trimmed to {new_start}-{new_end} (surrounding whitespace).",
            "nothing to do; fix the source to silence this.",
            **where,
        )
        start, end = new_start, new_end
    return Span(start=start, end=end, label=label)
