"""The v1 span record: one labeled document, character offsets into its text.

The pydantic models here are the single source of truth; the JSON Schema files
in `data_schemas/` are generated from them (`toolkit schema --write`), and a test
fails when the two drift.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = "v1"
SCHEMA_ID = "https://github.com/clause-entity-toolkit/schemas/span_record.v1.schema.json"


class Span(BaseModel):
    """A labeled character span: `text[start:end]`, end exclusive (Python `str` indices)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    start: int = Field(ge=0, description="Offset of the first character, in Python str indices (code points).")
    end: int = Field(ge=1, description="Offset one past the last character (exclusive).")
    label: str = Field(min_length=1, description="The span's class, e.g. 'Governing Law' or 'Disease'.")
    # Predictions (`toolkit predict`) carry these; annotations usually do not. `toolkit check` compares `text`
    # with the document's characters at start:end, so a file whose offsets drifted fails loudly.
    text: str | None = Field(default=None, description="Optional copy of text[start:end]; checked when present.")
    score: float | None = Field(
        default=None, ge=0.0, le=1.0, description="Optional model confidence in [0, 1] (predictions)."
    )


class SpanRecord(BaseModel):
    """One document with its labeled spans. Spans may overlap or nest."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        title="SpanRecord",
        json_schema_extra={"$id": SCHEMA_ID, "$schema": "https://json-schema.org/draft/2020-12/schema"},
    )

    id: str = Field(min_length=1, description="Unique document id within a corpus.")
    text: str = Field(description="The document text. Offsets index into this string.")
    spans: list[Span] = Field(description="Labeled spans, ideally sorted by (start, end, label).")
    meta: dict[str, Any] | None = Field(default=None, description="Free-form metadata (source file, split, ...).")

    def span_text(self, span: Span) -> str:
        return self.text[span.start : span.end]

    def to_json_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "text": self.text,
            "spans": [s.model_dump(exclude_none=True) for s in self.spans],
        }
        if self.meta is not None:
            out["meta"] = self.meta
        return out


def sort_spans(spans: list[Span]) -> list[Span]:
    """Canonical order: (start, end, label)."""
    return sorted(spans, key=lambda s: (s.start, s.end, s.label))


def json_schemas() -> dict[str, dict]:
    """File name -> JSON Schema for every schema the toolkit publishes."""
    return {f"span_record.{SCHEMA_VERSION}.schema.json": SpanRecord.model_json_schema()}


def write_json_schemas(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, schema in json_schemas().items():
        path = directory / name
        path.write_text(json.dumps(schema, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(path)
    return written
