import json

import pytest
from conftest import REPO
from pydantic import ValidationError

from toolkit.data.schema import Span, SpanRecord, json_schemas


def test_json_schema_files_match_models():
    for name, schema in json_schemas().items():
        path = REPO / "data_schemas" / name
        assert path.is_file(), f"{path} missing: run `toolkit schema --write data_schemas`"
        assert json.loads(path.read_text(encoding="utf-8")) == schema, (
            f"{name} drifted: run `toolkit schema --write data_schemas`"
        )


def test_record_is_strict():
    with pytest.raises(ValidationError):
        SpanRecord.model_validate(
            {"id": "a", "text": "x", "spans": [{"start": "0", "end": 1, "label": "L"}]}, strict=True
        )
    with pytest.raises(ValidationError):
        SpanRecord.model_validate({"id": "a", "text": "x", "spans": [], "extra": 1})
    rec = SpanRecord.model_validate(
        {"id": "a", "text": "abc", "spans": [{"start": 0, "end": 2, "label": "L"}], "meta": {"k": 1}}
    )
    assert rec.span_text(rec.spans[0]) == "ab"
    assert rec.to_json_dict() == {
        "id": "a",
        "text": "abc",
        "spans": [{"start": 0, "end": 2, "label": "L"}],
        "meta": {"k": 1},
    }


def test_span_is_hashable_for_dedup():
    assert len({Span(start=0, end=1, label="A"), Span(start=0, end=1, label="A")}) == 1
