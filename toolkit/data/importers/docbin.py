"""spaCy DocBin (`.spacy`), both ways: `doc.spans[key]` and `doc.ents`.

Export tokenizes with a blank spaCy pipeline and then splits tokens at every span
edge, so every span is representable (spaCy's `char_span` would otherwise return
None and lose it: warning W030). `doc.ents` cannot overlap: all spans go into
`doc.spans[spans_key]`, the largest non-overlapping subset into `doc.ents`, and the
spans missing from `doc.ents` are reported.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from toolkit.data.importers.base import ImportLog, checked_span
from toolkit.data.schema import SpanRecord, sort_spans
from toolkit.errors import ToolkitError
from toolkit.spans.overlaps import max_disjoint, split_offsets

DEFAULT_SPANS_KEY = "sc"


def read_docbin(
    paths: list[Path], log: ImportLog, spans_key: str | None = None, lang: str = "en"
) -> Iterator[SpanRecord]:
    """Spans from `doc.spans` (every key, or `spans_key`) and `doc.ents`, de-duplicated."""
    import spacy
    from spacy.tokens import DocBin

    vocab = spacy.blank(lang).vocab
    for path in paths:
        path = Path(path)
        if not path.is_file():
            raise ToolkitError(f"{path}: no such file", fix="pass .spacy files written by DocBin.to_disk")
        try:
            docs = DocBin().from_disk(path).get_docs(vocab)
        except Exception as exc:  # spaCy raises several types for a corrupt file
            raise ToolkitError(
                f"{path}: not a spaCy DocBin ({type(exc).__name__}: {exc})",
                fix="pass a .spacy file written by DocBin.to_disk",
            ) from None
        for n, doc in enumerate(docs):
            rid = str(doc.user_data.get("id", f"{path.stem}-{n}"))
            where = {"file": str(path), "record_id": rid}
            groups = [doc.spans[k] for k in doc.spans if spans_key in (None, k)]
            if spans_key is not None and spans_key not in doc.spans:
                log.warn("no_spans_key", f"doc {rid} has no doc.spans[{spans_key!r}].", "check --spans-key.", **where)
            spans = []
            for group in [*groups, doc.ents]:
                for sp in group:
                    span = checked_span(doc.text, sp.start_char, sp.end_char, sp.label_, log, **where)
                    if span is not None:
                        spans.append(span)
            yield SpanRecord(
                id=rid, text=doc.text, spans=sort_spans(list(dict.fromkeys(spans))), meta={"source": path.name}
            )


def write_docbin(
    records: list[SpanRecord], path: Path, log: ImportLog, spans_key: str = DEFAULT_SPANS_KEY, lang: str = "en"
) -> None:
    import spacy
    from spacy.tokens import Doc, DocBin

    nlp = spacy.blank(lang)
    db = DocBin(store_user_data=True)
    for rec in records:
        base = nlp.make_doc(rec.text)
        cuts = {s.start for s in rec.spans} | {s.end for s in rec.spans}
        pieces = split_offsets([(t.idx, t.idx + len(t.text)) for t in base], cuts)
        words = [rec.text[a:b] for a, b in pieces]
        spaces = []
        for k, (_, b) in enumerate(pieces):
            nxt = pieces[k + 1][0] if k + 1 < len(pieces) else len(rec.text)
            spaces.append(nxt > b and rec.text[b] == " " and nxt == b + 1)
        doc = Doc(nlp.vocab, words=words, spaces=spaces)
        if doc.text != rec.text:
            raise ToolkitError(
                f"record {rec.id!r}: spaCy could not rebuild the text exactly",
                fix="report this as a bug with the record",
            )
        made = [doc.char_span(s.start, s.end, label=s.label, alignment_mode="strict") for s in rec.spans]
        assert all(m is not None for m in made), "token split at span edges guarantees alignment"
        doc.spans[spans_key] = made
        kept = set(max_disjoint(rec.spans))
        doc.ents = [made[i] for i in sorted(kept)]
        for i, s in enumerate(rec.spans):
            if i not in kept:
                log.warn(
                    "not_in_ents",
                    f"span {s.start}-{s.end} {s.label!r} overlaps another: kept in doc.spans[{spans_key!r}] only, not "
                    f"in doc.ents.",
                    "read doc.spans, or use a spans-aware component (spancat).",
                    record_id=rec.id,
                    field=f"spans[{i}]",
                )
        doc.user_data["id"] = rec.id
        db.add(doc)
        log.documents += 1
        log.spans += len(rec.spans)
    db.to_disk(path)
